"""Tables in eos-audit's documented contracts (Parquet, Delta, JSON lines, CSV).

`contract_reader` reads a table by its contract (schemas.py), `record_batches` and
`producer_state` are the record-batch and producer-state contracts, and `canonical` range-checks
every source's batches into the one canonical shape the engine replays.
"""
