"""The wire layout: what Spark packs (`wire.wire_rows`) the runner unpacks to the same values.

Every value a replay row carries, nulls and the extremes of each type included, must reach the
kernel unchanged: the packing in Spark, the NumPy packing the kernel tests use, and the unpacking
in the runner are three pieces of code that must agree on one layout.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.replay.runner import ReplaySettings, _Replayer
from eos_audit.replay.state import NULL, REPLAY_ROW
from eos_audit.replay.wire import (
    BIT_FIELDS,
    REPLAY_ORDER,
    BitField,
    RowKind,
    check_layout,
    detail_of,
    pack,
    texts_of,
)
from eos_audit.replay.wire_columns import REPLAY_SCHEMA, WIRE_SCHEMA, sort_key, wire_rows

ARROW = to_arrow_schema(REPLAY_SCHEMA)
INT32 = st.one_of(st.none(), st.sampled_from([-(2**31), -1, 0, 1, 2**31 - 1]),
                  st.integers(-(2**31), 2**31 - 1))  # fmt: skip
INT64 = st.one_of(st.none(), st.sampled_from([-(2**63) + 1, -1, 0, 2**63 - 1]),
                  st.integers(-(2**63) + 1, 2**63 - 1))  # fmt: skip
FLAG = st.one_of(st.none(), st.booleans())
ROW = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["t", "orders", "__consumer_offsets"]),
        "partition": st.integers(0, 2**31 - 1),
        "kind": st.sampled_from([int(k) for k in RowKind]),
        "base_offset": INT64,
        "last_offset": INT64,
        "producer_id": INT64,
        "producer_epoch": st.one_of(st.none(), st.integers(-1, 32767)),
        "base_sequence": INT32,
        "last_sequence": INT32,
        "record_count": INT32,
        "is_transactional": FLAG,
        "is_control": FLAG,
        "control_type": st.one_of(st.none(), st.integers(0, 4)),
        "coordinator_epoch": INT32,
        "leader_epoch": INT32,
        "magic": st.one_of(st.none(), st.integers(0, 2)),
        "timestamp": INT64,
        "crc_valid": FLAG,
        "value": INT64,
        "source": st.one_of(st.none(), st.sampled_from(["", "a.log:0", "broker-2/t-0"])),
        "source_file": st.one_of(st.none(), st.sampled_from([0, 2**32 - 1]),
                                 st.integers(0, 2**32 - 1)),  # fmt: skip
        "replica": st.one_of(st.none(), st.sampled_from(["", "broker-1"])),
        "quarantine_reason": st.none(),
        "raw": st.none(),
    }
)
# Quarantine texts as readers write them, and worse: separators, digits, other scripts, empty.
TEXT = st.text(alphabet=st.sampled_from(["a", ":", "7", " ", "\x1f", "é", "中", "🙂", "{", '"']),
               max_size=12)  # fmt: skip
QUARANTINED = ROW.flatmap(
    lambda row: st.fixed_dictionaries(
        {"quarantine_reason": TEXT, "raw": st.one_of(st.none(), TEXT)}
    ).map(lambda texts: {**row, "kind": int(RowKind.AUDITED), **texts})
)
SETTINGS = ReplaySettings(0, 0, None, 0, None, None)
# The kernel's columns that come from the row itself (the others are derived in the runner).
FROM_ROW = [n for n in REPLAY_ROW.names if n not in ("position", "tp_start", "is_compacted",
                                                  "is_coordinator_topic",
                                                  "follows_quarantined",
                                                  "below_snapshot")]  # fmt: skip
EXTREMES = {
    **dict.fromkeys(ARROW.names),
    "topic": "t", "partition": 2**31 - 1, "kind": int(RowKind.REPLICA),
    "producer_epoch": 32767, "base_sequence": -(2**31), "last_sequence": 2**31 - 1,
    "coordinator_epoch": -1, "leader_epoch": 2**31 - 1, "record_count": 0,
    "control_type": 4, "magic": 2, "crc_valid": False, "is_control": True,
    "is_transactional": True, "value": 2**63 - 1, "base_offset": -(2**63) + 1,
    "source_file": 2**32 - 1, "replica": "broker-1", "source": "",
}  # fmt: skip


def expected(row: dict) -> dict:
    """What the kernel should see: nulls as NULL, flags as booleans, the CRC as -1/0/1."""
    out = {}
    for name in FROM_ROW:
        value = row[name]
        if name in ("is_transactional", "is_control"):
            out[name] = bool(value)
        elif name == "crc_valid":
            out[name] = -1 if value is None else int(value)
        else:
            out[name] = NULL if value is None else value
    return out


def unpacked(batch: pa.RecordBatch) -> list[dict]:
    rows = _Replayer(SETTINGS).rows_of(batch)
    return [{n: rows[n][i].item() for n in FROM_ROW} for i in range(batch.num_rows)]


OPTIONAL_TEXT = st.one_of(st.none(), TEXT)


@given(st.tuples(OPTIONAL_TEXT, OPTIONAL_TEXT, OPTIONAL_TEXT), st.lists(OPTIONAL_TEXT, max_size=8))
def test_detail_keeps_every_text_and_sorts_rows_as_their_source_does(others, sources):
    details = [detail_of(*others, source) for source in sources]
    assert [texts_of(d) for d in details] == [(*others, source) for source in sources]

    # Spark compares strings as UTF-8 bytes, nulls first; the log order (and the oracle) compares
    # sources as Python strings, nulls first.
    def spark_order(detail: str | None) -> tuple:
        return (detail is not None, detail.encode() if detail is not None else b"")

    def log_order(source: str | None) -> tuple:
        return (source is not None, source or "")

    by_detail = [texts_of(d)[3] for d in sorted(details, key=spark_order)]
    assert by_detail == sorted(sources, key=log_order)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ROW, min_size=1, max_size=20))
def test_numpy_packing_round_trips(rows):
    batch = pack(pa.RecordBatch.from_pylist(rows + [EXTREMES], schema=ARROW))
    assert unpacked(batch) == [expected(r) for r in rows + [EXTREMES]]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(ROW, min_size=1, max_size=30))
def test_spark_packing_agrees_with_numpy_packing(spark, rows):
    rows = rows + [EXTREMES]
    from_spark = wire_rows(spark.createDataFrame(rows, REPLAY_SCHEMA)).toArrow()
    from_spark = from_spark.combine_chunks().to_batches()[0]
    assert unpacked(from_spark) == [expected(r) for r in rows]
    from_numpy = pack(pa.RecordBatch.from_pylist(rows, schema=ARROW))
    assert from_spark.select(from_numpy.schema.names).equals(from_numpy)


def test_the_sort_reads_every_key_back_from_the_wire(spark):
    rows = [
        EXTREMES,
        {**dict.fromkeys(ARROW.names), "topic": "t", "partition": 0, "kind": 2},
        {**EXTREMES, "crc_valid": True, "is_control": False, "producer_epoch": -1,
         "base_sequence": 7, "last_sequence": None, "coordinator_epoch": 2**31 - 1},
    ]  # fmt: skip
    wired = wire_rows(spark.createDataFrame(rows, REPLAY_SCHEMA))
    names = REPLAY_ORDER
    got = wired.select(*[sort_key(n).alias(n) for n in names]).collect()
    crc = {None: 0, False: 1, True: 2}
    for row, read in zip(rows, got, strict=True):
        for name in names:
            if name in ("is_control", "is_transactional"):
                assert bool(read[name]) == bool(row[name]), name
            elif name == "crc_valid":
                assert read[name] == crc[row[name]], name
            elif name == "order_kind":  # the preamble's kinds, then the log as one
                assert read[name] == min(row["kind"], RowKind.LEADER_EPOCH_ENTRY), name
            elif name == "detail":  # a row that is not quarantined: its replica and source
                assert read[name] == detail_of(None, None, row["replica"], row["source"]), name
                assert texts_of(read[name])[2:] == (row["replica"], row["source"]), name
            else:
                assert read[name] == row[name], name


def quarantined_out(batch: pa.RecordBatch) -> list[tuple]:
    out = pa.Table.from_batches(list(_Replayer(SETTINGS).run(iter([batch]))))
    out = out.filter(pa.compute.equal(out["kind"], "quarantine"))
    return [
        (r["source"], r["quarantine"]["reason"], r["quarantine"]["raw"], r["topic"])
        for r in out.to_pylist()
    ]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(QUARANTINED, min_size=1, max_size=10), st.lists(ROW, max_size=5))
def test_a_quarantined_row_reaches_quarantine_with_its_texts_unchanged(spark, rejected, replayed):
    rows = rejected + [{**r, "kind": int(RowKind.LEADER_EPOCH_ENTRY)} for r in replayed]
    wanted = [(r["source"], r["quarantine_reason"], r["raw"], r["topic"]) for r in rejected]
    from_spark = wire_rows(spark.createDataFrame(rows, REPLAY_SCHEMA)).toArrow()
    from_spark = from_spark.combine_chunks().to_batches()[0]
    from_numpy = pack(pa.RecordBatch.from_pylist(rows, schema=ARROW))
    assert from_spark.select(from_numpy.schema.names).equals(from_numpy)
    assert quarantined_out(from_spark) == wanted


def test_an_emitted_row_gets_its_replica_and_its_source_written_from_its_file_reference(spark):
    rows = [
        {**EXTREMES, "source": None, "source_file": 7, "value": 41, "replica": None},
        {**EXTREMES, "source": "own.log:3", "source_file": 7, "value": 42},
        {**EXTREMES, "source": None, "source_file": 8, "value": 43},
        {**EXTREMES, "source": None, "source_file": None, "replica": None},
    ]
    wired = wire_rows(spark.createDataFrame(rows, REPLAY_SCHEMA)).toArrow()
    batch = wired.combine_chunks().to_batches()[0]
    replayer = _Replayer(ReplaySettings(0, 0, None, 0, None, None, source_files={7: "f:/a b:row "}))
    replicas, sources = replayer.texts_at(batch, pa.array(range(4)).to_numpy())
    assert replicas == [None, "broker-1", "broker-1", None]
    assert sources == ["f:/a b:row 41", "own.log:3", "<file with CRC-32 0x00000008>:row 43", None]


def test_the_wire_fields_fit_in_their_int64_words_and_share_no_bit():
    used: dict[str, int] = {}
    for name, field in BIT_FIELDS.items():
        assert WIRE_SCHEMA[field.word].dataType.typeName() == "long", name
        bits = ((1 << field.width) - 1) << field.shift
        assert 0 < bits < 1 << 64, name
        assert not used.get(field.word, 0) & bits, f"{name} overlaps another field"
        used[field.word] = used.get(field.word, 0) | bits
    check_layout(BIT_FIELDS)  # what the codec asserts when it is imported


@pytest.mark.parametrize(
    ("added", "complaint"),
    [
        (BitField("header", 8, 2), "overlaps"),  # across the CRC's bits 7-8
        (BitField("epochs", 31, 2, signed=True), "overlaps"),  # the two halves' boundary
        (BitField("header", 60, 5, signed=True), "do not fit"),
        (BitField("sequences", 64, 1), "do not fit"),
        (BitField("header", 53, 0), "do not fit"),
    ],
)
def test_a_layout_with_overlapping_or_oversized_fields_is_refused(added, complaint):
    with pytest.raises(ValueError, match=complaint):
        check_layout({**BIT_FIELDS, "added": added})


def test_a_field_at_the_top_bit_must_be_signed():
    # An arithmetic shift reads the top bit back as a sign: an unsigned field there would not
    # come back as it was packed.
    unsigned_kind = {**BIT_FIELDS, "kind": BitField("header", 56, 8)}
    with pytest.raises(ValueError, match="must be signed"):
        check_layout(unsigned_kind)
