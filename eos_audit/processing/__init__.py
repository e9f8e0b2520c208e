"""The processing audit: exactly-once consume-transform-produce, from the coordinators' logs.

`offset_metadata_manager` replays the group coordinator's offset store over one
`__consumer_offsets` partition (Kafka's materialization rule, with the history kept and the
processing rules checked); `coordinator_audit` runs it as Spark work and builds the
`consumer_offsets` and `transaction_log` tables and the replay's findings. The rules that join
the replay and the transaction log with the audit's transactions of every exported partition
each have a module named after what Kafka does there: `transaction_markers` (WriteTxnMarkers:
torn transactions), `producer_fencing` (zombie commits), `downstream_reads` (the last stable
offset: reads past it, aborted reads), `committed_ranges` (offsets out of range),
`hanging_offsets` (find-hanging) and `one_to_one` (sendOffsetsToTransaction: the declared
one-to-one groups' input processed twice or never). `exported_logs` says what the export holds
of each partition, and what the checks that need every record cannot decide for lack of it.
`offset_kernel` and `offset_runner` are the replay compiled over Arrow columns. `checks` lists
the checks by name, as the pipeline's processing stage runs them.
"""
