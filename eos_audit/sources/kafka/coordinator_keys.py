"""Which coordinator partition holds a group or a transactional id, and the two topics' names.

Kafka places a group's offsets and metadata in `__consumer_offsets-partitionFor(group.id)` and a
transactional id's state in `__transaction_state-partitionFor(transactional.id)`, both with
`Utils.abs(id.hashCode()) % partitions` (`GroupMetadataManager.scala` `partitionFor`,
`TransactionStateManager.scala` `partitionFor`; 50 partitions by default for both,
`offsets.topic.num.partitions` and `transaction.state.log.num.partitions`).
"""

from __future__ import annotations

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# offsets.topic.num.partitions and transaction.state.log.num.partitions, both 50 by default
# (GroupCoordinatorConfig.java, TransactionLogConfig.java).
DEFAULT_COORDINATOR_PARTITIONS = 50

_INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: `31 * h + c` over the UTF-16 code units, wrapping at int32.

    A character outside the Basic Multilingual Plane is two UTF-16 code units (a surrogate pair)
    in Java, so the text is hashed as UTF-16, not as Python code points.

    Args:
        text: the string, as Java would hold it.

    Returns:
        The signed int32 Java returns.
    """
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def partition_for(key: str, partitions: int = DEFAULT_COORDINATOR_PARTITIONS) -> int:
    """The coordinator partition Kafka gives a group id or transactional id.

    Args:
        key: the group.id (for `__consumer_offsets`) or transactional.id (for
            `__transaction_state`).
        partitions: the topic's partition count.

    Returns:
        The partition number, in [0, partitions).

    Raises:
        ValueError: when `partitions` is not positive.
    """
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return coordinator_hash(key) % partitions


def coordinator_hash(key: str) -> int:
    """`Utils.abs(key.hashCode())`: what Kafka takes modulo the partition count (`partition_for`).

    `Utils.abs` maps Integer.MIN_VALUE to 0 rather than leaving it negative (`Utils.java`), so
    `abs(h) % n` in Python is wrong for that one hash, and `abs(h % n)` is wrong for every
    negative hash (Python's `%` takes the divisor's sign).
    """
    h = java_string_hash(key)
    return 0 if h == _INT32_MIN else abs(h)
