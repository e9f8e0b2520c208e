"""Synthetic Kafka exports with a ground truth of every injected fault (`eos-audit generate`).

`plan` holds the parameters and the fault kinds (what the audit must report for each),
`spark_export` computes the export with Spark (batches, acknowledgements, ListOffsets observations,
ground truth) from `spark.range` and column expressions, and `files` writes small exports as
broker partition directories and `kafka-dump-log.sh` text too.
"""
