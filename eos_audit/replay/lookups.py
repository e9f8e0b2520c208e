"""Lookups by key, in plain arrays: the producer's entry slot, the acknowledgements of a batch.

Open-addressing tables of int64 rows (key..., value), a value of -1 marking a free place. A
table's capacity is a power of two at least twice what it indexes, so it is never more than half
full and a probe always ends. A numba typed dict cost three hash lookups, about 100 ns, per row,
and being reference-counted it kept the whole kernel under numba's runtime (every array argument
counted on every call; see kernel_cache.compile_in_place).
"""

from __future__ import annotations

from eos_audit.replay.producer_entry import (
    new_entry,
)


def slot_position(slots, producer_id):
    """Where the producer's (producer id, entry slot) row is in `slots`, or its free place."""
    mask = len(slots) - 1
    k = (producer_id ^ (producer_id >> 16)) & mask
    while slots[k, 1] != -1 and slots[k, 0] != producer_id:
        k = (k + 1) & mask
    return k


def find_slot(slots, producer_id):
    """The producer's entry slot in this partition, -1 when it has none."""
    return slots[slot_position(slots, producer_id), 1]


def index_slot(slots, producer_id, slot):
    """Record that the producer's entry is `slot`."""
    k = slot_position(slots, producer_id)
    slots[k, 0] = producer_id
    slots[k, 1] = slot


def reindex_slots(slots, entries, producers):
    """Fill an empty, larger `slots` with the first `producers` entries (the entries grew)."""
    for slot in range(producers):
        index_slot(slots, entries[slot].producer_id, slot)


def ack_position(ack_index, producer_id, producer_epoch, base_sequence):
    """Where a batch identity's row is in `ack_index`, or its free place.

    A row is (producer id, epoch, base sequence, the newest acknowledgement of that batch).
    """
    mask = len(ack_index) - 1
    k = (producer_id ^ (producer_id >> 16) ^ (base_sequence << 8) ^ (producer_epoch << 24)) & mask
    while ack_index[k, 3] != -1 and not (
        ack_index[k, 0] == producer_id
        and ack_index[k, 1] == producer_epoch
        and ack_index[k, 2] == base_sequence
    ):
        k = (k + 1) & mask
    return k


def index_ack(ack_index, acks, k):
    """Make acknowledgement k the newest of its batch identity; it links to the one before."""
    a = acks[k]
    position = ack_position(ack_index, a.producer_id, a.producer_epoch, a.base_sequence)
    a.next_same_batch = ack_index[position, 3]  # -1: the first of its batch
    ack_index[position, 0] = a.producer_id
    ack_index[position, 1] = a.producer_epoch
    ack_index[position, 2] = a.base_sequence
    ack_index[position, 3] = k


def reindex_acks(ack_index, acks, count):
    """Fill an empty, larger `ack_index` with the first `count` acknowledgements (acks grew)."""
    for k in range(count):
        index_ack(ack_index, acks, k)


def slot_of(slots, entries, part, producer_id):
    """The producer's entry slot; -1 when a new producer needs a slot and none is free."""
    slot = find_slot(slots, producer_id)
    if slot >= 0:
        return slot
    if part.producers >= len(entries):
        return -1
    slot = part.producers
    index_slot(slots, producer_id, slot)
    part.producers += 1
    new_entry(entries[slot], producer_id)
    return slot
