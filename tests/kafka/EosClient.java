import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own Java producer, driven line by line from standard input by the suite
 * (tests/kafka/clients.py): each command answers one line, "ok ..." or "error CLASS MESSAGE".
 *
 *   producer NAME [key=value ...]    a producer (idempotent by default) with these settings
 *   init NAME                        initTransactions()
 *   begin NAME | commit NAME | abort NAME
 *   send NAME TOPIC PARTITION COUNT  COUNT records in one batch (sent, then flushed): "ok OFFSET"
 *   close NAME
 *   halt                             Runtime.halt: the process dies as under SIGKILL
 */
public final class EosClient {
    private static final Map<String, KafkaProducer<byte[], byte[]>> PRODUCERS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            try {
                System.out.println("ok" + run(bootstrap, words));
            } catch (Exception e) {
                Throwable cause = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
                System.out.println("error " + cause.getClass().getSimpleName() + " "
                    + String.valueOf(cause.getMessage()).replace('\n', ' '));
            }
            System.out.flush();
        }
        for (KafkaProducer<byte[], byte[]> producer : PRODUCERS.values()) {
            producer.close();
        }
    }

    private static String run(String bootstrap, String[] words) throws Exception {
        switch (words[0]) {
            case "producer": {
                Properties props = new Properties();
                props.put("bootstrap.servers", bootstrap);
                props.put("key.serializer", ByteArraySerializer.class.getName());
                props.put("value.serializer", ByteArraySerializer.class.getName());
                props.put("enable.idempotence", "true");
                props.put("acks", "all");
                props.put("linger.ms", "0");
                for (int i = 2; i < words.length; i++) {
                    String[] kv = words[i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                PRODUCERS.put(words[1], new KafkaProducer<>(props));
                return "";
            }
            case "init": PRODUCERS.get(words[1]).initTransactions(); return "";
            case "begin": PRODUCERS.get(words[1]).beginTransaction(); return "";
            case "commit": PRODUCERS.get(words[1]).commitTransaction(); return "";
            case "abort": PRODUCERS.get(words[1]).abortTransaction(); return "";
            case "send": {
                KafkaProducer<byte[], byte[]> producer = PRODUCERS.get(words[1]);
                int partition = Integer.parseInt(words[3]);
                int count = Integer.parseInt(words[4]);
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    byte[] value = ("v" + i).getBytes();
                    byte[] key = ("k" + (i % 7)).getBytes();
                    sent.add(producer.send(new ProducerRecord<>(words[2], partition, key, value)));
                }
                producer.flush();
                return " " + sent.get(0).get().offset();
            }
            case "close": PRODUCERS.remove(words[1]).close(); return "";
            case "halt": Runtime.getRuntime().halt(0); return "";
            default: throw new IllegalArgumentException("unknown command " + words[0]);
        }
    }
}
