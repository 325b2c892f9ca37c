import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.timeline.SnapshotRegistry;
import org.apache.kafka.timeline.TimelineHashMap;

// What Kafka's and Java's classes answer where our code computes the same by hand: String.hashCode and the
// __consumer_offsets partition of a group (Utils.abs(groupId.hashCode()) % partitions, as the group coordinator
// computes it), Uuid parsing, hashCode and order, TopicPartition.hashCode, HashSet iteration orders, and the
// producer's Utils.murmur2 and Utils.toPositive.
// One command a line, tab-separated, text in hex (UTF-8); one answer line each. The protocol is
// tests/core/test_java_hashes_kafka_oracle.py's.
public class HashOracle {
    static String str(String hex) { return new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8); }
    static String hex(String s) { return HexFormat.of().formatHex(s.getBytes(StandardCharsets.UTF_8)); }

    static <T> String order(Iterable<T> items, java.util.function.Function<T, String> show) {
        StringJoiner j = new StringJoiner(",");
        for (T t : items) j.add(show.apply(t));
        return j.toString();
    }

    // LogContext moved to common.utils.internals in Kafka 4.4: found by name, for the broker version the oracle runs.
    static SnapshotRegistry snapshotRegistry() {
        try {
            Class<?> logContext;
            try {
                logContext = Class.forName("org.apache.kafka.common.utils.internals.LogContext");
            } catch (ClassNotFoundException e) {
                logContext = Class.forName("org.apache.kafka.common.utils.LogContext");
            }
            return SnapshotRegistry.class.getConstructor(logContext).newInstance(logContext.getConstructor().newInstance());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static String answer(String[] f) {
        switch (f[0]) {
            case "group": {   // group, then partition counts: hashCode, then Utils.abs(hashCode) % n for each n
                int h = str(f[1]).hashCode();
                StringJoiner j = new StringJoiner("\t").add(Integer.toString(h));
                for (int i = 2; i < f.length; i++) j.add(Integer.toString(Utils.abs(h) % Integer.parseInt(f[i])));
                return j.toString();
            }
            case "uuid": {   // text: "invalid", or hashCode, most and least significant bits
                try {
                    Uuid u = Uuid.fromString(f[1]);
                    return u.hashCode() + "\t" + u.getMostSignificantBits() + "\t" + u.getLeastSignificantBits();
                } catch (IllegalArgumentException e) { return "invalid"; }
            }
            case "uuids": {   // ids (comma): sorted, new HashSet<>(list), a default HashSet added to in order
                List<Uuid> ids = new ArrayList<>();
                for (String t : f[1].split(",")) ids.add(Uuid.fromString(t));
                List<Uuid> sorted = new ArrayList<>(ids); Collections.sort(sorted);
                Set<Uuid> added = new HashSet<>(); added.addAll(ids);
                return order(sorted, Uuid::toString) + "\t" + order(new HashSet<>(ids), Uuid::toString) + "\t" + order(added, Uuid::toString);
            }
            case "partitions": {   // topic:partition (topic in hex, comma): hashCodes, then as for uuids
                List<TopicPartition> tps = new ArrayList<>();
                for (String t : f[1].split(",")) { String[] x = t.split(":"); tps.add(new TopicPartition(str(x[0]), Integer.parseInt(x[1]))); }
                Set<TopicPartition> added = new HashSet<>(); added.addAll(tps);
                java.util.function.Function<TopicPartition, String> show = tp -> hex(tp.topic()) + ":" + tp.partition();
                return order(tps, tp -> Integer.toString(tp.hashCode())) + "\t" + order(new HashSet<>(tps), show) + "\t" + order(added, show);
            }
            case "murmur2": {   // bytes (hex): Utils.murmur2, then Utils.toPositive of it
                int h = Utils.murmur2(HexFormat.of().parseHex(f[1]));
                return h + "\t" + Utils.toPositive(h);
            }
            case "timeline": {   // keys (hex, comma) put in order into a TimelineHashMap, then those removed: its order
                TimelineHashMap<String, Boolean> map = new TimelineHashMap<>(snapshotRegistry(), 0);
                for (String k : f[1].split(",")) map.put(str(k), true);
                if (f.length > 2 && !f[2].isEmpty()) for (String k : f[2].split(",")) map.remove(str(k));
                return order(map.keySet(), HashOracle::hex);
            }
            case "table": {   // puts (+hex) and removals (-hex), comma: a TimelineHashMap's order after them
                TimelineHashMap<String, Boolean> map = new TimelineHashMap<>(snapshotRegistry(), 0);
                for (String op : f[1].split(",")) {
                    if (op.startsWith("+")) map.put(str(op.substring(1)), true);
                    else map.remove(str(op.substring(1)));
                }
                return order(map.keySet(), HashOracle::hex);
            }
            default:
                return "error unknown command " + f[0];
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        for (String line; (line = in.readLine()) != null; ) {
            String a;
            try { a = answer(line.split("\t", -1)); }
            catch (Exception e) { a = "error " + e.getClass().getSimpleName() + ": " + e.getMessage(); }
            out.println(a);
        }
        out.flush();
    }
}
