import java.util.ArrayList;
import java.util.List;

/**
 * Kafka's DumpLogSegments (kafka-dump-log.sh) run several times in one JVM, with other options
 * each time (tests/kafka/cluster.py dump_logs): a tool's JVM costs about a CPU-second to start.
 *
 *   DumpLogSegmentsRuns ARGUMENTS... [--then ARGUMENTS...]...
 *
 * Each run's output follows a line "#run N" (N from 0), with what DumpLogSegments prints for
 * the same arguments in a JVM of its own.
 */
public final class DumpLogSegmentsRuns {
    public static final String SEPARATOR = "--then";

    public static void main(String[] args) throws Exception {
        List<List<String>> runs = new ArrayList<>();
        runs.add(new ArrayList<>());
        for (String arg : args) {
            if (arg.equals(SEPARATOR)) {
                runs.add(new ArrayList<>());
            } else {
                runs.get(runs.size() - 1).add(arg);
            }
        }
        for (int i = 0; i < runs.size(); i++) {
            System.out.println("#run " + i);
            System.out.flush();
            kafka.tools.DumpLogSegments.main(runs.get(i).toArray(new String[0]));
            System.out.flush();
        }
    }
}
