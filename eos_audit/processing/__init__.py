"""The processing audit: exactly-once consume-transform-produce, from the coordinators' logs.

`offset_metadata_manager` replays the group coordinator's offset store over one
`__consumer_offsets` partition (Kafka's materialization rule, with the history kept and the
processing rules checked); `coordinator_audit` runs it as Spark work and builds the
`consumer_offsets` and `transaction_log` tables and the findings.
"""
