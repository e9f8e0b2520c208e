"""Evidence beside the log, from clients: acknowledgements and ListOffsets answers.

`acks` reads the writes clients were told succeeded, `list_offsets` the offsets brokers answered.
"""
