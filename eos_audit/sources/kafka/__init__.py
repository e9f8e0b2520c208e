"""Kafka's own files: `.log` segments, `kafka-dump-log.sh` text, producer snapshots and checkpoints.

`export` reads a broker export tree (`<export>/<broker>/<topic>-<partition>/`) through the
others: `partition_dirs` finds and ranks the replicas, `segments` (with its compiled
`segment_walk`) and `dump_log` give record batches, `state_files` the producer snapshots and the
checkpoint files.

The coordinator topics' records (`__consumer_offsets`, `__transaction_state`) are decoded by
`coordinator_records` from bytes (`wire` reads Kafka's primitives, `batch_records` walks a batch's
records) and by `coordinator_text` from `kafka-dump-log.sh` decoder output, into one shape;
`coordinator_keys` says which partition holds a group or a transactional id. Their Spark readers,
`coordinator_segments` and `coordinator_dump_log`, give rows of that shape (`coordinator_rows`).
"""
