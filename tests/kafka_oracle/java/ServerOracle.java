import java.io.*;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.assignor.*;
import org.apache.kafka.coordinator.group.modern.MemberAssignmentImpl;

// Reads server-side assignment cases from stdin; prints Kafka's UniformAssignor / RangeAssignor answers.
public class ServerOracle {
    record Sub(Optional<String> rack, Optional<String> inst, Set<Uuid> topics) implements MemberSubscription {
        public Optional<String> rackId() { return rack; }
        public Optional<String> instanceId() { return inst; }
        public Set<Uuid> subscribedTopicIds() { return topics; }
    }
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        Map<Uuid, Integer> topics = null; LinkedHashMap<String, Sub> subs = null; Map<String, Map<Uuid, Set<Integer>>> owned = null;
        PrintStream out = System.out;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "gcase": topics = new HashMap<>(); subs = new LinkedHashMap<>(); owned = new HashMap<>(); break;
                case "gtopic": topics.put(Uuid.fromString(f[1]), Integer.parseInt(f[2])); break;
                case "gmember": {
                    Set<Uuid> ts = new HashSet<>();
                    if (!f[4].equals("-")) for (String t : f[4].split(",")) ts.add(Uuid.fromString(t));
                    subs.put(f[1], new Sub(f[2].equals("-") ? Optional.empty() : Optional.of(f[2]),
                        f[3].equals("-") ? Optional.empty() : Optional.of(f[3]), ts));
                    Map<Uuid, Set<Integer>> a = new LinkedHashMap<>();
                    if (!f[5].equals("-")) for (String tp : f[5].split(",")) {
                        String[] x = tp.split(":");
                        Set<Integer> ps = new LinkedHashSet<>();
                        for (String p : x[1].split(";")) ps.add(Integer.parseInt(p));
                        a.put(Uuid.fromString(x[0]), ps);
                    }
                    owned.put(f[1], a);
                    break;
                }
                case "gassign": {
                    final Map<Uuid, Integer> tps = topics; final Map<String, Sub> ss = subs; final Map<String, Map<Uuid, Set<Integer>>> ow = owned;
                    Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
                    for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : ow.entrySet())
                        for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet())
                            for (int p : t.getValue()) inverted.computeIfAbsent(t.getKey(), k -> new HashMap<>()).put(p, e.getKey());
                    SubscriptionType type = f[2].equals("Homogeneous") ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
                    GroupSpec spec = new GroupSpec() {
                        public Collection<String> memberIds() { return ss.keySet(); }
                        public SubscriptionType subscriptionType() { return type; }
                        public boolean isPartitionAssigned(Uuid t, int p) { Map<Integer, String> m = inverted.get(t); return m != null && m.containsKey(p); }
                        public boolean isPartitionAssignable(Uuid t, int p) { return true; }   // GroupSpecImpl, when no partition is withheld
                        public MemberSubscription memberSubscription(String id) { return ss.get(id); }
                        public MemberAssignment memberAssignment(String id) { return new MemberAssignmentImpl(Collections.unmodifiableMap(ow.getOrDefault(id, Collections.emptyMap()))); }
                    };
                    SubscribedTopicDescriber desc = new SubscribedTopicDescriber() {
                        public int numPartitions(Uuid t) { return tps.getOrDefault(t, -1); }
                        public Set<String> racksForPartition(Uuid t, int p) { return Collections.emptySet(); }
                    };
                    ConsumerGroupPartitionAssignor a = f[1].equals("range") ? new RangeAssignor() : new UniformAssignor();
                    try {
                        GroupAssignment ga = a.assign(spec, desc);
                        for (String m : ss.keySet()) {
                            StringBuilder sb = new StringBuilder(m).append(' ');
                            MemberAssignment ma = ga.members().get(m);
                            boolean first = true;
                            if (ma != null) for (Map.Entry<Uuid, Set<Integer>> t : ma.partitions().entrySet()) {
                                if (t.getValue().isEmpty()) continue;
                                if (!first) sb.append(','); first = false;
                                sb.append(t.getKey()).append(':');
                                List<Integer> ps = new ArrayList<>(t.getValue()); Collections.sort(ps);
                                for (int i = 0; i < ps.size(); i++) { if (i > 0) sb.append(';'); sb.append(ps.get(i)); }
                            }
                            if (first) sb.append('-');
                            out.println(sb);
                        }
                    } catch (Exception e) { out.println("error " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' ')); }
                    out.println("end"); out.flush();
                    break;
                }
            }
        }
    }
}
