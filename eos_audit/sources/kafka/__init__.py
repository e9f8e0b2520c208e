"""Kafka's own files: `.log` segments, `kafka-dump-log.sh` text, producer snapshots and checkpoints.

`export` reads a broker export tree (`<export>/<broker>/<topic>-<partition>/`) through the
others: `partition_dirs` finds and ranks the replicas, `segments` (with its compiled
`segment_walk`) and `dump_log` give record batches, `state_files` the producer snapshots and the
checkpoint files.
"""
