import java.io.*;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocol;
import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocolCollection;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.OffsetAndMetadata;
import org.apache.kafka.coordinator.group.classic.ClassicGroup;
import org.apache.kafka.coordinator.group.classic.ClassicGroupMember;
import org.apache.kafka.coordinator.group.classic.ClassicGroupState;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;

// __consumer_offsets records as Kafka's group coordinator writes them: its record helpers (what the broker calls)
// and GroupCoordinatorRecordSerde, plus the embedded consumer protocol from kafka-clients' ConsumerProtocol.
// One command a line, tab-separated; strings and bytes in hex ("-" for null); one answer line each (hex, or
// "error ..."). The protocol is tests/offsets/test_offsets_codec_kafka_oracle.py's.
public class RecordOracle {
    static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    static String str(String hex) { return hex.equals("-") ? null : new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8); }
    static byte[] bytes(String hex) { return hex.equals("-") ? null : HexFormat.of().parseHex(hex); }
    static String hex(byte[] b) { return b == null ? "-" : HexFormat.of().formatHex(b); }
    static String hex(ByteBuffer b) { byte[] a = new byte[b.remaining()]; b.duplicate().get(a); return hex(a); }
    static String record(CoordinatorRecord r) { return hex(SERDE.serializeKey(r)) + "\t" + hex(SERDE.serializeValue(r)); }

    // topic:partition pairs, topics in hex: "746f:0,746f:1" ("" for none)
    static List<TopicPartition> partitions(String text) {
        List<TopicPartition> out = new ArrayList<>();
        if (text.isEmpty() || text.equals("-")) return out;
        for (String tp : text.split(",")) { String[] x = tp.split(":"); out.add(new TopicPartition(str(x[0]), Integer.parseInt(x[1]))); }
        return out;
    }

    static OffsetAndMetadata offset(String[] f, int i) {
        int epoch = Integer.parseInt(f[i + 4]);
        long expire = Long.parseLong(f[i + 7]);
        return new OffsetAndMetadata(Long.parseLong(f[i + 3]), epoch < 0 ? OptionalInt.empty() : OptionalInt.of(epoch),
            str(f[i + 5]), Long.parseLong(f[i + 6]), expire < 0 ? OptionalLong.empty() : OptionalLong.of(expire),
            f.length > i + 8 && !f[i + 8].equals("-") ? Uuid.fromString(f[i + 8]) : Uuid.ZERO_UUID);
    }

    static String answer(String[] f, BufferedReader in) throws IOException {
        switch (f[0]) {
            case "offset":   // group topic partition offset epoch metadata commit expire topicId
                return record(GroupCoordinatorRecordHelpers.newOffsetCommitRecord(str(f[1]), str(f[2]), Integer.parseInt(f[3]), offset(f, 1)));
            case "offset-value": {   // version, then as "offset": the generated value class at that version
                OffsetAndMetadata o = offset(f, 2);
                OffsetCommitValue v = new OffsetCommitValue().setOffset(o.committedOffset).setLeaderEpoch(o.leaderEpoch.orElse(-1))
                    .setMetadata(o.metadata).setCommitTimestamp(o.commitTimestampMs).setExpireTimestamp(o.expireTimestampMs.orElse(-1)).setTopicId(o.topicId);
                return hex(MessageUtil.toVersionPrefixedBytes(Short.parseShort(f[1]), v));
            }
            case "offset-tombstone":
                return record(GroupCoordinatorRecordHelpers.newOffsetCommitTombstoneRecord(str(f[1]), str(f[2]), Integer.parseInt(f[3])));
            case "group": {   // group protocolType generation protocol leader timestamp, then "member" lines, then "end"
                ClassicGroup group = new ClassicGroup(new LogContext(), str(f[1]), ClassicGroupState.STABLE, Time.SYSTEM,
                    Integer.parseInt(f[3]), Optional.ofNullable(str(f[2])), Optional.ofNullable(str(f[4])),
                    Optional.ofNullable(str(f[5])), Optional.of(Long.parseLong(f[6])));
                Map<String, byte[]> assignments = new HashMap<>();
                for (String line; !(line = in.readLine()).equals("end"); ) {
                    // member id instanceId clientId clientHost rebalanceTimeout sessionTimeout subscription assignment
                    String[] m = line.split("\t", -1);
                    JoinGroupRequestProtocolCollection protocols = new JoinGroupRequestProtocolCollection();
                    protocols.add(new JoinGroupRequestProtocol().setName(str(f[4])).setMetadata(bytes(m[7])));
                    group.add(new ClassicGroupMember(str(m[1]), Optional.ofNullable(str(m[2])), str(m[3]), str(m[4]),
                        Integer.parseInt(m[5]), Integer.parseInt(m[6]), str(f[2]), protocols));
                    assignments.put(str(m[1]), bytes(m[8]));
                }
                StringJoiner order = new StringJoiner(",");
                for (ClassicGroupMember m : group.allMembers()) order.add(hex(m.memberId().getBytes(StandardCharsets.UTF_8)));
                return record(GroupCoordinatorRecordHelpers.newGroupMetadataRecord(group, assignments)) + "\t" + order;
            }
            case "group-created":   // group timestamp: the record of a classic group that has just been created
                return record(GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord(new ClassicGroup(new LogContext(),
                    str(f[1]), ClassicGroupState.EMPTY, Time.SYSTEM, 0, Optional.empty(), Optional.empty(), Optional.empty(),
                    Optional.of(Long.parseLong(f[2])))));
            case "group-tombstone":
                return record(GroupCoordinatorRecordHelpers.newGroupMetadataTombstoneRecord(str(f[1])));
            case "subscription": {   // version topics(hex,comma) userData owned generation rack
                List<String> topics = new ArrayList<>();
                if (!f[2].isEmpty()) for (String t : f[2].split(",")) topics.add(str(t));
                byte[] userData = bytes(f[3]);
                Subscription s = new Subscription(topics, userData == null ? null : ByteBuffer.wrap(userData), partitions(f[4]),
                    Integer.parseInt(f[5]), Optional.ofNullable(str(f[6])));
                return hex(ConsumerProtocol.serializeSubscription(s, Short.parseShort(f[1])));
            }
            case "assignment": {   // version partitions userData
                byte[] userData = bytes(f[3]);
                Assignment a = new Assignment(partitions(f[2]), userData == null ? null : ByteBuffer.wrap(userData));
                return hex(ConsumerProtocol.serializeAssignment(a, Short.parseShort(f[1])));
            }
            case "consumer-group-epoch":   // group epoch metadataHash
                return record(GroupCoordinatorRecordHelpers.newConsumerGroupEpochRecord(str(f[1]), Integer.parseInt(f[2]), Long.parseLong(f[3])));
            case "consumer-group-target-member": {   // group member topicId:p;p;p,topicId:p (in this order)
                Map<Uuid, Set<Integer>> target = new LinkedHashMap<>();
                if (!f[3].equals("-")) for (String t : f[3].split(",")) {
                    String[] x = t.split(":");
                    Set<Integer> ps = new LinkedHashSet<>();
                    for (String p : x[1].split(";")) ps.add(Integer.parseInt(p));
                    target.put(Uuid.fromString(x[0]), ps);
                }
                return record(GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentRecord(str(f[1]), str(f[2]), target));
            }
            case "consumer-group-target-metadata":   // group assignmentEpoch timestamp
                return record(GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentMetadataRecord(str(f[1]), Integer.parseInt(f[2]), Long.parseLong(f[3])));
            case "consumer-group-epoch-tombstone":
                return record(GroupCoordinatorRecordHelpers.newConsumerGroupEpochTombstoneRecord(str(f[1])));
            case "consumer-group-target-member-tombstone":
                return record(GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentTombstoneRecord(str(f[1]), str(f[2])));
            default:
                return "error unknown command " + f[0];
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", -1);
            String a;
            try { a = answer(f, in); }
            catch (Exception e) { a = "error " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '); }
            out.println(a);
        }
        out.flush();
    }
}
