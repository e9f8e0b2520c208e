"""Client acknowledgements: the readers (every format and row-level reason) and the §7 client rule.

All reader outputs are unioned and collected in one job (`read_all`); every rule scenario is on
its own topic and the rule runs (default severities, a lowered severity, the realistic JSON log)
are collected in one job (`ruled`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig
from eos_audit.errors import ConfigError, InputNotFoundError, InputSchemaError
from eos_audit.evidence_rules.acks import client_error_findings
from eos_audit.schemas import ACKS, FINDINGS
from eos_audit.sources.evidence.acks import SOURCE_ERROR, normalize_error_name, read_acks

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "acks"
JSON_LOG = FIXTURES / "orders-service.acks.jsonl"
REASONS_CSV = FIXTURES / "reasons.csv"
UTC = dt.UTC
T0 = dt.datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
ACK_SCHEMA = T.StructType(
    [T.StructField(f.name, f.dataType, True) for f in ACKS]
    + [T.StructField(SOURCE_ERROR, T.StringType(), True)]
)
UPI, OOS = "UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def utc(d: dt.datetime | None) -> dt.datetime | None:
    """Collected timestamps are naive local times: the instant, in UTC."""
    return None if d is None else d.astimezone(UTC)


def schema_of(schema: T.StructType) -> list[tuple[str, T.DataType]]:
    """Column names and types (Spark derives nullability; the sinks pin the contract's)."""
    return [(f.name, f.dataType) for f in schema.fields]


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> dict[str, list[str]]:
    d = tmp_path_factory.mktemp("acks_inputs")
    naive = [at(s).replace(tzinfo=None) for s in range(3)]
    # Parquet (pyarrow: no Spark job) with narrow integer types, a timestamp without a zone (read
    # as TIMESTAMP_NTZ, taken as UTC), and no log_start_offset or source column.
    pq.write_table(
        pa.table(
            {
                "event_time": pa.array(naive, pa.timestamp("us")),
                "topic": ["pq"] * 3,
                "partition": pa.array([0, 0, 1], pa.int8()),
                "producer_id": pa.array([7, 7, -1], pa.int64()),
                "producer_epoch": pa.array([0, 0, -1], pa.int16()),
                "base_sequence": pa.array([0, 2, -1], pa.int32()),
                "record_count": pa.array([2, 1, 0], pa.int8()),  # the third has no records
                "offset": pa.array([10, None, 5], pa.int32()),
                "error": ["", "out_of_order_sequence_number", None],
            }
        ),
        d / "acks.parquet",
    )
    required = {
        "event_time": pa.array(naive[:1], pa.timestamp("us")),
        "topic": ["pq"],
        "partition": [0],
        "producer_id": [7],
        "producer_epoch": [0],
        "base_sequence": [0],
    }
    pq.write_table(
        pa.table({k: v for k, v in required.items() if k != "base_sequence"}),
        d / "no_sequence.parquet",
    )
    pq.write_table(pa.table({**required, "partition": [0.5]}), d / "double_partition.parquet")
    pq.write_table(pa.table({**required, "event_time": [True]}), d / "bool_time.parquet")
    # JSON whose first line lacks producer_id; CSV whose header lacks two required columns.
    first = {"event_time": "2026-11-21T03:00:00Z", "topic": "js", "partition": 0}
    (d / "no_producer.jsonl").write_text(
        json.dumps({**first, "producer_epoch": 0, "base_sequence": 0, "offset": 1}) + "\n"
    )
    (d / "no_epoch.csv").write_text(
        "event_time,topic,partition,producer_id,offset\n2026-11-21T03:00:00Z,cs,0,7,1\n"
    )
    (d / "acks.txt").write_text(json.dumps(first) + "\n")
    return {
        name: [str(d / file)]
        for name, file in {
            "parquet": "acks.parquet",
            "no_sequence": "no_sequence.parquet",
            "double_partition": "double_partition.parquet",
            "bool_time": "bool_time.parquet",
            "no_producer": "no_producer.jsonl",
            "no_epoch": "no_epoch.csv",
            "unknown_suffix": "acks.txt",
            "missing": "nowhere.jsonl",
        }.items()
    }


@pytest.fixture(scope="session")
def read_all(spark, inputs) -> dict[str, list[dict]]:
    frames = {
        "json": read_acks(spark, [str(JSON_LOG)]),  # auto: .jsonl
        "csv": read_acks(spark, [str(REASONS_CSV)], fmt="csv"),
        "parquet": read_acks(spark, inputs["parquet"]),
    }
    for name, df in frames.items():
        assert schema_of(df.schema) == schema_of(ACKS) + [(SOURCE_ERROR, T.StringType())], name
    union = None
    for name, df in frames.items():
        tagged = df.withColumn("_fmt", F.lit(name))
        union = tagged if union is None else union.unionByName(tagged)
    out: dict[str, list[dict]] = {name: [] for name in frames}
    for row in union.collect():
        d = row.asDict()
        out[d.pop("_fmt")].append(d)
    return out


def ack_values(r: dict) -> tuple:
    return (
        utc(r["event_time"]),
        r["topic"],
        r["partition"],
        r["producer_id"],
        r["producer_epoch"],
        r["base_sequence"],
        r["record_count"],
        r["offset"],
        r["error"],
        r["log_start_offset"],
    )


def test_json_lines_as_an_application_logs_them(read_all):
    rows = read_all["json"]
    assert len(rows) == 12  # every line, good or bad
    assert all(r["source"].endswith("/orders-service.acks.jsonl") for r in rows)
    good = sorted(
        (ack_values(r) for r in rows if r[SOURCE_ERROR] is None), key=lambda v: (v[0], v[1])
    )
    late = dt.datetime(2026, 11, 29, 3, 10, 0, 412_000, tzinfo=UTC)
    assert good == [
        (at(0.118), "orders", 3, 4001, 0, 0, 5, 1200, None, 0),
        (at(0.342), "orders", 3, 4001, 0, 5, 5, 1205, None, 0),
        # the callback's offset -1 of a failed send is no offset
        (at(1.007), "orders", 3, 4001, 0, 10, 5, None, "NOT_LEADER_OR_FOLLOWER", -1),
        (at(1.530), "orders", 3, 4001, 0, 10, 5, 1210, None, 0),
        (at(2.5), "orders", 4, 4001, 0, 0, 1, 880, None, 0),  # epoch milliseconds
        (at(3.25), "orders", 4, 4001, 0, 1, 1, None, OOS, 0),
        (at(3.598), "audit-trail", 0, -1, -1, -1, 1, 77, None, 0),  # no idempotence: legal
        # +01:00 time; the ExecutionException of send().get() unwrapped
        (at(4), "orders", 5, 4001, 0, 0, 5, None, "REQUEST_TIMED_OUT", None),
        (late, "orders", 3, 4001, 0, 15, 5, None, UPI, 1300),
    ]
    bad = sorted(r[SOURCE_ERROR] for r in rows if r[SOURCE_ERROR] is not None)
    # the line cut by log rotation and the stack-trace line; a non-integer partition
    assert bad == [
        "malformed JSON line",
        "malformed JSON line",
        "partition three is not an integer",
    ]


# source (the case) -> _source_error of reasons.csv; None: a valid ack.
EXPECTED_REASONS = {
    "ok-ack": None,
    "ok-error": None,
    "ok-no-producer-id": None,
    "ok-zoneless": None,
    "null-time": "null event_time",
    "bad-time": "event_time yesterday is not a timestamp",
    "null-topic": "null topic",
    "bad-topic": "topic bad topic! is not a legal Kafka topic name",
    "null-partition": "null partition",
    "bad-partition": "partition x is not an integer",
    "negative-partition": "partition -1 out of range",
    "null-producer-id": "null producer_id",
    "producer-id-below": "producer_id -2 below -1",
    "null-epoch": "null producer_epoch",
    "epoch-int16": "producer_epoch 32768 outside int16",
    "epoch-below": "producer_epoch -2 below -1",
    "epoch-missing": "producer_id 7 without a producer_epoch",
    "null-sequence": "null base_sequence",
    "sequence-range": "base_sequence 2147483648 out of range",
    "sequence-missing": "producer_id 7 without a base_sequence",
    "record-count-zero": "record_count 0 below 1",
    "record-count-int32": "record_count 2147483648 above int32",
    "bad-record-count": "record_count five is not an integer",
    "neither": "no offset and no error",
    "acks-zero": "offset -1 and no error (an acks=0 send is never acknowledged)",
    "both": "both offset 10 and error NOT_LEADER_OR_FOLLOWER",
    "negative-offset": "negative offset -5",
    "bad-offset": "offset 1e3 is not an integer",
    "log-start-below": "log_start_offset -2 below -1",
    "bad-log-start": "log_start_offset abc is not an integer",
    "sequence-error-without-producer-id": (
        "OUT_OF_ORDER_SEQUENCE_NUMBER for producer_id -1: a leader checks sequences of "
        "idempotent producers only"
    ),
    "several": "null topic; partition -3 out of range",
}


def test_csv_every_row_level_reason(read_all):
    rows = {r["source"]: r for r in read_all["csv"]}
    assert {s: r[SOURCE_ERROR] for s, r in rows.items()} == EXPECTED_REASONS
    assert {s: ack_values(r) for s, r in rows.items() if s.startswith("ok-")} == {
        "ok-ack": (at(0), "t", 0, 7, 0, 0, 1, 10, None, 0),
        "ok-error": (at(1), "t", 0, 7, 0, 1, 1, None, UPI, 12),
        # producer_id -1 carries no sequence; NONE is no error; epoch milliseconds
        "ok-no-producer-id": (at(2), "t", 0, -1, -1, -1, None, 5, None, None),
        # no zone: UTC; log_start_offset -1 (not sent) is kept
        "ok-zoneless": (at(3), "t", 0, 7, 0, 2, 1, 11, None, -1),
    }


def test_parquet_any_integer_width(read_all):
    rows = sorted(read_all["parquet"], key=lambda r: r["source"])
    assert [ack_values(r) + (r[SOURCE_ERROR],) for r in rows] == [
        (at(0), "pq", 0, 7, 0, 0, 2, 10, None, None, None),
        (at(1), "pq", 0, 7, 0, 2, 1, None, OOS, None, None),
        (at(2), "pq", 1, -1, -1, -1, 0, 5, None, None, "record_count 0 below 1"),
    ]
    assert [re.sub(r"^.*/", "", r["source"]) for r in rows] == [
        "acks.parquet:row 0",
        "acks.parquet:row 1",
        "acks.parquet:row 2",
    ]


def test_error_names_as_applications_log_them(spark):
    cases = [
        ("UNKNOWN_PRODUCER_ID", UPI),
        (" unknown_producer_id ", UPI),
        ("UnknownProducerIdException", UPI),
        (
            "org.apache.kafka.common.errors.UnknownProducerIdException: This exception is raised "
            "by the broker if it could not locate the producer metadata",
            UPI,
        ),
        ("OutOfOrderSequenceException", OOS),
        ("org.apache.kafka.common.errors.OutOfOrderSequenceException", OOS),
        (
            "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
            "OutOfOrderSequenceException: The broker received an out of order sequence number.",
            OOS,
        ),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", OOS),
        (
            "org.apache.kafka.common.errors.NotLeaderOrFollowerException: For requests intended "
            "only for the leader",
            "NOT_LEADER_OR_FOLLOWER",
        ),
        (
            "org.apache.kafka.common.errors.TimeoutException: Expiring 5 record(s)",
            "REQUEST_TIMED_OUT",
        ),
        ("DuplicateSequenceException", "DUPLICATE_SEQUENCE_NUMBER"),
        ("org.apache.kafka.common.errors.ProducerFencedException", "PRODUCER_FENCED"),
        ("NONE", None),
        (" none ", None),
        ("", None),
        (None, None),
    ]
    schema = "text string, name string"
    df = spark.createDataFrame([(text, None) for text, _ in cases], schema)
    actual = df.select("text", normalize_error_name(F.col("text")).alias("name"))
    expected = spark.createDataFrame(cases, schema)
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_bad_inputs_raise_naming_them(spark, inputs):
    with pytest.raises(InputSchemaError, match=re.escape("column(s) ['base_sequence']")):
        read_acks(spark, inputs["no_sequence"])
    with pytest.raises(
        InputSchemaError, match=re.escape("'partition' has type double, expected an integer")
    ):
        read_acks(spark, inputs["double_partition"])
    with pytest.raises(InputSchemaError, match=re.escape("'event_time' has type boolean")):
        read_acks(spark, inputs["bool_time"])
    with pytest.raises(InputSchemaError, match=re.escape("column(s) ['producer_id']")):
        read_acks(spark, inputs["no_producer"])
    with pytest.raises(
        InputSchemaError, match=re.escape("column(s) ['producer_epoch', 'base_sequence']")
    ):
        read_acks(spark, inputs["no_epoch"])
    with pytest.raises(InputNotFoundError, match=re.escape("nowhere.jsonl")):
        read_acks(spark, inputs["missing"])
    with pytest.raises(InputNotFoundError, match=re.escape("no acks input paths given")):
        read_acks(spark, [])
    with pytest.raises(InputNotFoundError, match=re.escape("cannot tell the format of acks")):
        read_acks(spark, inputs["unknown_suffix"])
    with pytest.raises(ConfigError, match=re.escape("unknown acks format 'xml'")):
        read_acks(spark, inputs["parquet"], fmt="xml")


# ------------------------------------------------------------------------------------------------
# The client rule
# ------------------------------------------------------------------------------------------------
def ack(
    topic,
    second,
    *,
    seq=0,
    offset=None,
    error=None,
    log_start=None,
    pid=7,
    epoch=0,
    partition=0,
    count=1,
    bad=None,
) -> tuple:
    return (
        at(second), topic, partition, pid, epoch, seq, count, offset, error, log_start,
        f"{topic}@{second}", bad,
    )  # fmt: skip


SCENARIOS = [
    # the log start is above everything the producer had acknowledged (last offset 109)
    ack("benign", 0, seq=0, offset=100, count=5),
    ack("benign", 1, seq=5, offset=105, count=5),
    ack("benign", 10, seq=10, count=5, error=UPI, log_start=200),
    # an acknowledged batch (last offset 104) is at or above the log start
    ack("unexplained", 0, seq=0, offset=100, count=5),
    ack("unexplained", 5, seq=5, error=OOS, log_start=50),
    # equal is not above
    ack("at-log-start", 0, offset=100),
    ack("at-log-start", 5, seq=1, error=UPI, log_start=100),
    # the client compares the last offset of the batch (base + count - 1), not the base offset
    ack("inside-batch", 0, offset=100, count=5),
    ack("inside-batch", 5, seq=5, error=UPI, log_start=102),
    # a null record_count counts 1: last acknowledged offset 100, not "none"
    ack("null-count", 0, offset=100, count=None),
    ack("null-count", 5, seq=1, error=UPI, log_start=100),
    # no earlier acknowledgement: -1, so any log start >= 0 is benign
    ack("first-write", 5, seq=3, error=UPI, log_start=0),
    # no log start offset in the response: cannot be proved benign
    ack("no-log-start", 0, offset=10),
    ack("no-log-start", 5, seq=1, error=UPI),
    ack("minus-one-log-start", 5, seq=1, error=OOS, log_start=-1),
    # acknowledgements after the error, or in its very microsecond, are not earlier
    ack("later-ack", 5, seq=1, error=UPI, log_start=50),
    ack("later-ack", 6, seq=1, offset=100),
    ack("same-time", 5, seq=1, offset=100),
    ack("same-time", 5, seq=2, error=UPI, log_start=50),
    # other producers, partitions and topics are not this producer's acknowledgements
    ack("others", 0, offset=100, pid=8),
    ack("others", 0, offset=100, partition=1),
    ack("others-b", 0, offset=100),
    ack("others", 5, seq=1, error=UPI, log_start=50),
    # the key is the producer id, not the epoch (an idempotent producer bumps its own epoch)
    ack("epoch-bump", 0, offset=100),
    ack("epoch-bump", 5, seq=0, epoch=1, error=UPI, log_start=50),
    # other errors give no finding and are no acknowledgement
    ack("other-errors", 0, offset=10),
    ack("other-errors", 1, seq=1, error="NOT_LEADER_OR_FOLLOWER", log_start=-1),
    ack("other-errors", 2, seq=1, error="REQUEST_TIMED_OUT"),
    # quarantined rows never count, and a quarantined error gives no finding
    ack("quarantined", 0, offset=500, bad="partition -1 out of range"),
    ack("quarantined", 5, seq=1, error=UPI, log_start=100),
    ack("quarantined", 6, seq=2, error=OOS, log_start=0, bad="malformed JSON line"),
    # a producer without a producer id has no state to lose
    ack("no-producer-id", 5, pid=-1, epoch=-1, seq=-1, error=UPI, log_start=0),
    # the last sequence wraps like Kafka's
    ack("wrap", 5, seq=2_147_483_647, count=3, error=OOS, log_start=0),
]


@pytest.fixture(scope="module")
def scenarios(spark):
    return spark.createDataFrame(SCENARIOS, ACK_SCHEMA)


@pytest.fixture(scope="module")
def ruled(spark, scenarios) -> dict[tuple[str, str], list[dict]]:
    """(run, topic) -> findings, from one job over every run."""
    lowered = AuditConfig(severity={"CLIENT_SEQUENCE_ERROR": "ERROR"})
    runs = {
        "default": client_error_findings(scenarios, AuditConfig(), "r1"),
        "lowered": client_error_findings(scenarios, lowered, "r1"),
        "log": client_error_findings(read_acks(spark, [str(JSON_LOG)]), AuditConfig(), "r1"),
    }
    for name, df in runs.items():
        assert schema_of(df.schema) == schema_of(FINDINGS), name
    union = None
    for name, df in runs.items():
        tagged = df.withColumn("_run", F.lit(name))
        union = tagged if union is None else union.unionByName(tagged)
    out: dict[tuple[str, str], list[dict]] = {}
    for row in union.collect():
        d = row.asDict()
        out.setdefault((d.pop("_run"), d["topic"]), []).append(d)
    return out


def verdict(ruled, topic: str, run: str = "default") -> tuple:
    (f,) = ruled[(run, topic)]
    return f["cause"], f["severity"], f["kafka_error"], f["previous_offset"]


def test_benign_when_log_start_is_above_the_last_ack(ruled):
    assert verdict(ruled, "benign") == ("LOG_START", "INFO", UPI, 109)


def test_unexplained_when_an_ack_is_at_or_above_log_start(ruled):
    assert verdict(ruled, "unexplained") == ("UNEXPLAINED", "CRITICAL", OOS, 104)
    assert verdict(ruled, "at-log-start") == ("UNEXPLAINED", "CRITICAL", UPI, 100)
    assert verdict(ruled, "inside-batch") == ("UNEXPLAINED", "CRITICAL", UPI, 104)
    assert verdict(ruled, "null-count") == ("UNEXPLAINED", "CRITICAL", UPI, 100)
    assert verdict(ruled, "epoch-bump") == ("UNEXPLAINED", "CRITICAL", UPI, 100)
    (f,) = ruled[("default", "unexplained")]
    assert f["detail"].endswith(
        "the response's log start offset 50 is not above the producer's last acknowledged "
        "offset 104: acknowledged data is gone from the log"
    )


def test_no_earlier_ack_counts_minus_one(ruled):
    # Exactly the client's rule: lastAckedOffset -1 < any log start >= 0. This is the first-write
    # hole KIP-360 describes (seed item 3): a first write lost on the broker is not caught.
    assert verdict(ruled, "first-write") == ("LOG_START", "INFO", UPI, None)
    (f,) = ruled[("default", "first-write")]
    assert f["evidence"]["last_acked_offset"] == "-1"
    assert "last acknowledged offset -1 (none acknowledged before)" in f["detail"]


def test_no_log_start_offset_is_unexplained(ruled):
    assert verdict(ruled, "no-log-start") == ("UNEXPLAINED", "CRITICAL", UPI, 10)
    assert verdict(ruled, "minus-one-log-start") == ("UNEXPLAINED", "CRITICAL", OOS, None)
    for topic in ("no-log-start", "minus-one-log-start"):
        (f,) = ruled[("default", topic)]
        assert "the response carried no log start offset" in f["detail"], f["detail"]
    assert "log_start_offset" not in ruled[("default", "no-log-start")][0]["evidence"]


def test_only_earlier_acks_of_the_same_producer_and_partition_count(ruled):
    assert verdict(ruled, "later-ack") == ("LOG_START", "INFO", UPI, None)
    assert verdict(ruled, "same-time") == ("LOG_START", "INFO", UPI, None)
    assert verdict(ruled, "others") == ("LOG_START", "INFO", UPI, None)
    assert ("default", "others-b") not in ruled


def test_other_errors_quarantined_rows_and_no_producer_id_give_no_finding(ruled):
    found = {topic: len(fs) for (run, topic), fs in ruled.items() if run == "default"}
    # one finding per sequence error; none for other-errors, others-b, no-producer-id
    assert found == dict.fromkeys(
        [
            "benign", "unexplained", "at-log-start", "inside-batch", "null-count", "first-write",
            "no-log-start", "minus-one-log-start", "later-ack", "same-time", "others",
            "epoch-bump", "quarantined", "wrap",
        ],
        1,
    )  # fmt: skip
    # the quarantined ack at offset 500 does not count, the quarantined error is not judged
    assert verdict(ruled, "quarantined") == ("LOG_START", "INFO", UPI, None)


def test_last_sequence_wraps(ruled):
    (f,) = ruled[("default", "wrap")]
    assert (f["base_sequence"], f["last_sequence"]) == (2_147_483_647, 1)


def test_severity_from_config_benign_still_info(ruled):
    assert verdict(ruled, "unexplained", "lowered") == ("UNEXPLAINED", "ERROR", OOS, 104)
    assert verdict(ruled, "benign", "lowered") == ("LOG_START", "INFO", UPI, 109)


def test_realistic_log(ruled):
    found = sorted(
        (f["partition"], f["cause"], f["severity"], f["kafka_error"], f["previous_offset"])
        for f in ruled[("log", "orders")]
    )
    assert found == [
        # eight days later, the log starts at 1300, above the last acknowledged offset 1214
        (3, "LOG_START", "INFO", UPI, 1214),
        (4, "UNEXPLAINED", "CRITICAL", OOS, 880),
    ]


def test_full_finding(spark, scenarios):
    actual = client_error_findings(scenarios, AuditConfig(), "r1").where(F.col("topic") == "benign")
    event_micros = int(at(10).timestamp()) * 10**6
    key = f"CLIENT_SEQUENCE_ERROR|benign|0|7|0|10|{event_micros}"
    expected = spark.createDataFrame(
        [
            (
                hashlib.sha256(key.encode()).hexdigest()[:32],
                "r1",
                "CLIENT_SEQUENCE_ERROR",
                "INFO",
                "LOG_START",
                UPI,
                "benign",
                0,
                7,
                0,
                -1,  # the failed send has no offset
                -1,
                10,
                14,
                None,
                109,
                "UNKNOWN_PRODUCER_ID for benign-0, producer 7 epoch 0 sequence 10 at "
                "2026-11-21T03:00:10.000000Z: the response's log start offset 200 is above the "
                "producer's last acknowledged offset 109, so retention or DeleteRecords removed "
                "its state",
                "docs/rules.md#client-sequence-error",
                {
                    "last_acked_offset": "109",
                    "log_start_offset": "200",
                    "base_sequence": "10",
                    "event_time": "2026-11-21T03:00:10.000000Z",
                },
                event_micros // 1000,
                at(10),
                "benign@10",
            )
        ],
        FINDINGS,
    )
    # Deliberate: Spark derives nullability from the expressions and the column descriptions are
    # contract metadata; the sinks pin both.
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_metadata=True)


def test_one_shuffle(scenarios):
    df = client_error_findings(scenarios, AuditConfig(), "r")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert len(re.findall(r"\bExchange (hashpartitioning|rangepartitioning)", plan)) == 1, plan


def test_missing_column_raises(spark):
    df = spark.createDataFrame([], "event_time timestamp, topic string, partition int")
    with pytest.raises(InputSchemaError, match=re.escape("['producer_id', 'producer_epoch'")):
        client_error_findings(df, AuditConfig(), "r")
