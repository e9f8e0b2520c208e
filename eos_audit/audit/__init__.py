"""The audit run's own steps: from the inputs read to the tables written and the run recorded.

The readers (`eos_audit.sources`), the replay (`eos_audit.replay`), the evidence rules
(`eos_audit.evidence_rules`) and the tables (`eos_audit.sinks`) each do one part; the modules
here put them in the order of one run:

- `pipeline`: one run, end to end (`run_audit`): read, seed, audit in one pass, stage, write
  every table, record the run.
- `since_state`: seeding: which producer state a run starts from (`--producer-state`, a
  warehouse's `producer_state` of an earlier run, `--since-state`) and what of the log that state
  covers already.
- `replay_plan`: the replay's Spark side: every input as replay rows, one shuffle, one sort and
  the compiled kernel (`eos_audit.replay`) over each partition, through `mapInArrow`. Named for
  what it is, the plan around the replay, since the replay itself (what a leader decides, batch
  by batch) is `eos_audit.replay`'s and runs inside the tasks this plan starts.
- `output_records`: the staged records: what the replay emitted, one `kind` and one struct per
  row, decoded into and sliced back out as the rows of each table.
- `summaries`: the summary tables (`partition_summary`, `producer_sessions`), aggregated from the
  staged records.
- `accounting`: the `input_files` table: every file under the inputs with what the run made of
  it, from the listing, the replay's counts and the quarantine.
"""
