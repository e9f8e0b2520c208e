import java.io.File;
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

/**
 * Segment files written again with another codec by Kafka's own record writer
 * (`MemoryRecordsBuilder`, as a partition leader or a coordinator builds a batch): each data batch
 * keeps its offsets, producer id, epoch, sequence, transactional flag, leader epoch and records;
 * control batches are copied as they are (Kafka never compresses them).
 *
 *   RecompressedSegments CODEC IN OUT [IN OUT]...
 *
 * CODEC is Kafka's name of a compression type (gzip, snappy, lz4, zstd).
 */
public final class RecompressedSegments {
    public static void main(String[] args) throws Exception {
        Compression compression = Compression.of(CompressionType.forName(args[0])).build();
        for (int i = 1; i + 1 < args.length; i += 2) {
            rewrite(new File(args[i]), new File(args[i + 1]), compression);
        }
    }

    private static void rewrite(File in, File out, Compression compression) throws Exception {
        try (FileRecords records = FileRecords.open(in, false);
             FileChannel channel = new FileOutputStream(out).getChannel()) {
            for (FileChannelRecordBatch batch : records.batches()) {
                channel.write(batch.isControlBatch() || batch.countOrNull() == Integer.valueOf(0)
                    ? copied(batch) : compressed(batch, compression));
            }
        }
    }

    private static ByteBuffer copied(FileChannelRecordBatch batch) {
        ByteBuffer buffer = ByteBuffer.allocate(batch.sizeInBytes());
        batch.writeTo(buffer);
        buffer.flip();
        return buffer;
    }

    private static ByteBuffer compressed(FileChannelRecordBatch batch, Compression compression) {
        long logAppendTime = batch.timestampType() == TimestampType.LOG_APPEND_TIME
            ? batch.maxTimestamp() : RecordBatch.NO_TIMESTAMP;
        int room = 2 * batch.sizeInBytes() + 1024;
        MemoryRecordsBuilder builder = MemoryRecords.builder(
            ByteBuffer.allocate(room), RecordBatch.MAGIC_VALUE_V2, compression,
            batch.timestampType(), batch.baseOffset(), logAppendTime, batch.producerId(),
            batch.producerEpoch(), batch.baseSequence(), batch.isTransactional(),
            batch.partitionLeaderEpoch());
        for (Record record : batch) {
            builder.appendWithOffset(
                record.offset(), record.timestamp(), record.key(), record.value(), record.headers());
        }
        return builder.build().buffer();
    }
}
