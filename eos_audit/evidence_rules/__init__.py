"""The rules that judge the clients' evidence beside the log, each over its own input.

The log's own rules (offsets, epochs, producer sequences, transactions) are the replay's
(`eos_audit.replay`); these judge what clients saw, read by `eos_audit.sources.evidence`:

- `acks`: the producers' acknowledgements and failed sends (CLIENT_SEQUENCE_ERROR; the
  acknowledged writes themselves are checked against the log by the replay).
- `list_offsets`: ListOffsets answers (LIST_OFFSETS_REGRESSION, ACKED_DATA_MISSING_FROM_LOG) and
  the table of the answers that were errors.
"""
