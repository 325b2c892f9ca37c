import java.io.*;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.*;
import org.apache.kafka.common.*;

// Reads client-side assignment cases from stdin; prints the answers of Kafka's RangeAssignor, RoundRobinAssignor
// or CooperativeStickyAssignor (one line a member, then "end"). The protocol is tests/kafka_oracle/oracle.py's.
public class ClientOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        Map<String, Integer> topics = null; Map<String, String[]> racks = null; Map<String, Subscription> subs = null;
        List<String> order = null;
        PrintStream out = System.out;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case": topics = new LinkedHashMap<>(); racks = new HashMap<>(); subs = new HashMap<>(); order = new ArrayList<>(); break;
                case "topic": topics.put(f[1], Integer.parseInt(f[2])); break;
                case "racks": racks.put(f[1] + ":" + f[2], f[3].equals("-") ? new String[0] : f[3].split(",")); break;
                case "member": {
                    Optional<Integer> gen = f[2].equals("-") ? Optional.empty() : Optional.of(Integer.parseInt(f[2]));
                    Optional<String> rack = f[3].equals("-") ? Optional.empty() : Optional.of(f[3]);
                    List<String> ts = Arrays.asList(f[4].split(","));
                    List<TopicPartition> owned = new ArrayList<>();
                    if (!f[5].equals("-")) for (String tp : f[5].split(",")) { int i = tp.lastIndexOf(':'); owned.add(new TopicPartition(tp.substring(0, i), Integer.parseInt(tp.substring(i + 1)))); }
                    Subscription sub = new Subscription(ts, null, owned, gen.orElse(-1), rack);
                    if (f.length > 6 && !f[6].equals("-")) sub.setGroupInstanceId(Optional.of(f[6]));
                    subs.put(f[1], sub);
                    order.add(f[1]);
                    break;
                }
                case "assign": {
                    List<PartitionInfo> parts = new ArrayList<>(); Set<Node> nodes = new HashSet<>(); int nodeId = 0;
                    for (Map.Entry<String, Integer> t : topics.entrySet()) for (int p = 0; p < t.getValue(); p++) {
                        String[] r = racks.getOrDefault(t.getKey() + ":" + p, new String[0]);
                        Node[] reps;
                        if (r.length == 0) { reps = new Node[]{new Node(nodeId++, "h", 1)}; }
                        else { reps = new Node[r.length]; for (int i = 0; i < r.length; i++) reps[i] = new Node(nodeId++, "h", 1, r[i]); }
                        nodes.addAll(Arrays.asList(reps));
                        parts.add(new PartitionInfo(t.getKey(), p, reps[0], reps, reps));
                    }
                    Cluster cluster = new Cluster("c", nodes, parts, Collections.emptySet(), Collections.emptySet());
                    String name = f.length > 1 ? f[1] : "cooperative-sticky";
                    ConsumerPartitionAssignor a = name.equals("range") ? new RangeAssignor()
                        : name.equals("roundrobin") ? new RoundRobinAssignor() : new CooperativeStickyAssignor();
                    try {
                        GroupAssignment ga = a.assign(cluster, new GroupSubscription(subs));
                        for (String m : order) {
                            StringBuilder sb = new StringBuilder(m).append(' ');
                            List<TopicPartition> tps = ga.groupAssignment().get(m).partitions();
                            for (int i = 0; i < tps.size(); i++) { if (i > 0) sb.append(','); sb.append(tps.get(i).topic()).append(':').append(tps.get(i).partition()); }
                            if (tps.isEmpty()) sb.append('-');
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
