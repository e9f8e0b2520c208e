"""ListOffsets observations: the readers (every format) and the §5 rules.

All reader outputs are unioned and collected in one job (`read_all`); every rule scenario is on
its own topic and the three rule runs (no log end, log end, log end + export time) are collected in
one job (`ruled`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig
from eos_audit.errors import ConfigError, InputNotFoundError, InputSchemaError
from eos_audit.evidence_rules.list_offsets import list_offsets_error_counts, list_offsets_findings
from eos_audit.schemas import FINDINGS, LIST_OFFSETS_ERRORS
from eos_audit.sources.evidence.list_offsets import LIST_OFFSETS, SOURCE_ERROR, read_list_offsets

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "list_offsets"
UTC = dt.UTC
T0 = dt.datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
SNAPSHOT_MTIME = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
OBS_SCHEMA = T.StructType(
    [T.StructField(f.name, f.dataType, True) for f in LIST_OFFSETS]
    + [T.StructField(SOURCE_ERROR, T.StringType(), True)]
)


def at(minute: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minute)


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inputs(spark, tmp_path_factory) -> dict[str, list[str]]:
    d = tmp_path_factory.mktemp("list_offsets_inputs")
    text = d / "text"
    text.mkdir()
    for name in ("get_offsets_loop.txt", "get_offsets_crlf.txt"):
        shutil.copy(FIXTURES / name, text / name)
    snapshot = d / "get_offsets_snapshot.out"
    shutil.copy(FIXTURES / "get_offsets_snapshot.out", snapshot)
    os.utime(snapshot, (SNAPSHOT_MTIME.timestamp(), SNAPSHOT_MTIME.timestamp()))

    # Parquet (written with pyarrow: no Spark job) with narrow integer types, a timestamp without
    # a zone (Spark reads it as TIMESTAMP_NTZ; the reader takes it as UTC) and no spec column.
    naive = at(0).replace(tzinfo=None)
    pq.write_table(
        pa.table(
            {
                "observed_at": pa.array([naive] * 3, pa.timestamp("us")),
                "topic": ["pq"] * 3,
                "partition": pa.array([1, 2, 3], pa.int8()),
                "offset": pa.array([10, None, None], pa.int32()),
                "leader_epoch": pa.array([3, None, -1], pa.int16()),
                "isolation": ["read_committed", "READ_UNCOMMITTED", "read_uncommitted"],
                # the third row has neither an offset nor an error
                "error": [None, "offset_not_available", None],
            }
        ),
        d / "narrow.parquet",
    )
    # Parquet missing a required column, and one with an unusable type.
    pq.write_table(
        pa.table({"observed_at": [naive], "topic": ["pq"], "partition": [1]}),
        d / "no_offset.parquet",
    )
    pq.write_table(
        pa.table({"observed_at": [naive], "topic": ["pq"], "partition": [1.5], "offset": [3]}),
        d / "bad.parquet",
    )

    lines = [
        {
            "observed_at": "2026-11-21T03:00:00Z",
            "topic": "js",
            "partition": 0,
            "offset": 5,
            "spec": "earliest",
            "leader_epoch": 7,
        },
        {
            "observed_at": 1_795_230_000_000,
            "topic": "js",
            "partition": "1",
            "offset": "6",
            "spec": "-1",
            "isolation": "read_committed",
            "source": "watcher-a",
        },
        {
            "observed_at": "2026-11-21 03:00:00",
            "topic": "js",
            "partition": 2,
            "error": "LEADER_NOT_AVAILABLE",
            "spec": "latest",
            "isolation": "read_uncommitted",
        },
        {
            "observed_at": "later",
            "topic": "bad topic!",
            "partition": 99999999999,
            "offset": -4,
            "spec": "sometime",
            "isolation": "dirty",
        },
    ]
    with open(d / "obs.jsonl", "w") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)
        f.write("{not json\n")
    with open(d / "no_time.jsonl", "w") as f:
        f.write(json.dumps({"topic": "js", "partition": 0, "offset": 1}) + "\n")

    # CSV: columns in another order, empty cells are nulls, one bad integer.
    (d / "obs.csv").write_text(
        "topic,offset,partition,observed_at,spec,isolation,error\n"
        "cs,17,0,2026-11-21T03:00:00+01:00,max-timestamp,read_uncommitted,\n"
        "cs,,1,2026-11-21T03:00:00Z,latest,read_uncommitted,OFFSET_NOT_AVAILABLE\n"
        "cs,x7,2,2026-11-21T03:00:00Z,latest,read_uncommitted,\n"
        "cs,8,3,2026-11-21T03:00:00Z,latest,,\n"
    )
    (d / "no_topic.csv").write_text("observed_at,partition,offset\n2026-11-21T03:00:00Z,0,1\n")
    return {
        "text": [str(text)],
        "snapshot": [str(snapshot)],
        "parquet": [str(d / "narrow.parquet")],
        "json": [str(d / "obs.jsonl")],
        "csv": [str(d / "obs.csv")],
        "no_offset": [str(d / "no_offset.parquet")],
        "bad_type": [str(d / "bad.parquet")],
        "no_time": [str(d / "no_time.jsonl")],
        "no_topic": [str(d / "no_topic.csv")],
    }


@pytest.fixture(scope="module")
def read_all(spark, inputs) -> dict[str, list[dict]]:
    frames = {
        "text": read_list_offsets(spark, inputs["text"]),  # auto: a directory of .txt files
        "snapshot": read_list_offsets(spark, inputs["snapshot"], spec="-2"),
        "parquet": read_list_offsets(spark, inputs["parquet"], fmt="parquet"),
        "json": read_list_offsets(spark, inputs["json"]),
        "csv": read_list_offsets(spark, inputs["csv"], fmt="csv"),
    }
    for name, df in frames.items():
        assert [(f.name, f.dataType) for f in df.schema.fields] == [
            (f.name, f.dataType) for f in LIST_OFFSETS.fields
        ] + [(SOURCE_ERROR, T.StringType())], name
    union = None
    for name, df in frames.items():
        tagged = df.withColumn("_fmt", F.lit(name))
        union = tagged if union is None else union.unionByName(tagged)
    out: dict[str, list[dict]] = {name: [] for name in frames}
    for row in union.collect():
        d = row.asDict()
        out[d.pop("_fmt")].append(d)
    return out


def by_source(rows: list[dict]) -> dict[str, dict]:
    return {re.sub(r"^.*/", "", r["source"]): r for r in rows}


def obs(r: dict) -> tuple:
    return (
        utc(r["observed_at"]),
        r["topic"],
        r["partition"],
        r["spec"],
        r["isolation"],
        r["offset"],
        r["leader_epoch"],
        r["error"],
    )


def utc(d: dt.datetime | None) -> dt.datetime | None:
    """Collected timestamps are naive local times: the instant, in UTC."""
    return None if d is None else d.astimezone(UTC)


def test_get_offsets_text_loop(read_all):
    rows = by_source([r for r in read_all["text"] if "loop" in r["source"]])
    good = {s: obs(r) for s, r in rows.items() if r[SOURCE_ERROR] is None}
    ru = "read_uncommitted"
    assert good == {
        "get_offsets_loop.txt:line 3": (at(0), "orders", 0, "latest", ru, 100, None, None),
        "get_offsets_loop.txt:line 4": (at(0), "orders", 1, "latest", ru, 250, None, None),
        "get_offsets_loop.txt:line 5": (
            at(0),
            "payments.v2_eu-west",
            0,
            "latest",
            ru,
            42,
            None,
            None,
        ),
        "get_offsets_loop.txt:line 8": (at(1), "orders", 0, "latest", ru, 120, None, None),
        "get_offsets_loop.txt:line 9": (
            at(1),
            "orders",
            1,
            "latest",
            ru,
            None,
            None,
            "OFFSET_NOT_AVAILABLE",
        ),
        "get_offsets_loop.txt:line 10": (
            at(1),
            "payments.v2_eu-west",
            0,
            "latest",
            ru,
            42,
            None,
            None,
        ),
        "get_offsets_loop.txt:line 14": (at(2), "orders", 0, "latest", ru, 130, None, None),
        "get_offsets_loop.txt:line 15": (at(2), "orders", 1, "latest", ru, 260, None, None),
        "get_offsets_loop.txt:line 16": (
            at(2),
            "payments.v2_eu-west",
            0,
            "latest",
            ru,
            45,
            None,
            None,
        ),
    }
    bad = {s: r[SOURCE_ERROR] for s, r in rows.items() if r[SOURCE_ERROR] is not None}
    assert set(bad) == {
        "get_offsets_loop.txt:line 1",  # before the first header
        "get_offsets_loop.txt:line 11",  # the WARN line
        "get_offsets_loop.txt:line 18",  # under "# observed_at: yesterday"
    }
    assert "precedes the file's first timestamp header" in bad["get_offsets_loop.txt:line 1"]
    assert bad["get_offsets_loop.txt:line 11"].startswith("unrecognised line")
    assert (
        "yesterday of the header at line 17 is not a timestamp"
        in bad["get_offsets_loop.txt:line 18"]
    )


def test_get_offsets_text_crlf_and_snapshot(read_all):
    crlf = by_source([r for r in read_all["text"] if "crlf" in r["source"]])
    assert {s: (r["offset"], utc(r["observed_at"]), r[SOURCE_ERROR]) for s, r in crlf.items()} == {
        "get_offsets_crlf.txt:line 2": (140, at(60), None),
        "get_offsets_crlf.txt:line 3": (261, at(60), None),
    }
    snap = by_source(read_all["snapshot"])
    mtime = SNAPSHOT_MTIME
    assert {s: obs(r) + (r[SOURCE_ERROR],) for s, r in snap.items()} == {
        "get_offsets_snapshot.out:line 1": (
            mtime,
            "orders",
            0,
            "earliest",
            "read_uncommitted",
            90,
            None,
            None,
            None,
        ),
        "get_offsets_snapshot.out:line 2": (
            mtime,
            "orders",
            1,
            "earliest",
            "read_uncommitted",
            None,
            None,
            "UNKNOWN_OFFSET",
            None,
        ),
    }


def test_parquet_any_integer_width(read_all):
    rows = sorted(read_all["parquet"], key=lambda r: r["partition"])
    assert [obs(r) + (r[SOURCE_ERROR],) for r in rows] == [
        (at(0), "pq", 1, "latest", "read_committed", 10, 3, None, None),
        (at(0), "pq", 2, "latest", "read_uncommitted", None, None, "OFFSET_NOT_AVAILABLE", None),
        (at(0), "pq", 3, "latest", "read_uncommitted", None, None, None, "no offset and no error"),
    ]
    assert [re.sub(r"^.*/", "", r["source"]) for r in rows] == [
        "narrow.parquet:row 0",
        "narrow.parquet:row 1",
        "narrow.parquet:row 2",
    ]


def test_json_lines(read_all):
    rows = read_all["json"]
    good = sorted(
        (obs(r) + (r["source"],) for r in rows if r[SOURCE_ERROR] is None), key=lambda x: x[2]
    )
    file_source = next(r["source"] for r in rows if r["partition"] == 0)
    assert file_source.endswith("obs.jsonl")
    assert good == [
        # JSON writers omit nulls: a missing spec or isolation takes the reader's argument
        (at(0), "js", 0, "earliest", "read_uncommitted", 5, 7, None, file_source),
        (at(0), "js", 1, "latest", "read_committed", 6, None, None, "watcher-a"),
        (
            at(0),
            "js",
            2,
            "latest",
            "read_uncommitted",
            None,
            None,
            "LEADER_NOT_AVAILABLE",
            file_source,
        ),
    ]
    bad = sorted(r[SOURCE_ERROR] for r in rows if r[SOURCE_ERROR] is not None)
    assert bad[0] == "malformed JSON line"
    for reason in (
        "observed_at later is not a timestamp",
        "topic bad topic! is not a legal Kafka topic name",
        "partition 99999999999 out of range",
        "spec sometime is not latest",
        "isolation dirty is not read_uncommitted",
        "negative offset -4",
    ):
        assert reason in bad[1], bad[1]


def test_csv(read_all):
    rows = {r["partition"]: r for r in read_all["csv"]}
    assert obs(rows[0]) == (at(-60), "cs", 0, "max_timestamp", "read_uncommitted", 17, None, None)
    assert rows[0][SOURCE_ERROR] is None and rows[0]["source"].endswith("obs.csv")
    assert (rows[1]["offset"], rows[1]["error"], rows[1][SOURCE_ERROR]) == (
        None,
        "OFFSET_NOT_AVAILABLE",
        None,
    )
    assert rows[2][SOURCE_ERROR] == "offset x7 is not an integer"
    assert rows[3][SOURCE_ERROR] == "null isolation (required for spec latest)"


def test_bad_inputs_raise_naming_them(spark, inputs, tmp_path):
    with pytest.raises(InputSchemaError, match=r"missing required column\(s\) \['offset'\]"):
        read_list_offsets(spark, inputs["no_offset"])
    with pytest.raises(InputSchemaError, match=r"'partition' has type double"):
        read_list_offsets(spark, inputs["bad_type"])
    with pytest.raises(InputSchemaError, match=r"\['observed_at'\]"):
        read_list_offsets(spark, inputs["no_time"])
    with pytest.raises(InputSchemaError, match=r"\['topic'\]"):
        read_list_offsets(spark, inputs["no_topic"])
    missing = str(tmp_path / "nowhere.txt")
    with pytest.raises(InputNotFoundError, match="nowhere.txt"):
        read_list_offsets(spark, [missing])
    with pytest.raises(ConfigError, match="spec"):
        read_list_offsets(spark, inputs["text"], spec="-4")
    with pytest.raises(ConfigError, match="isolation"):
        read_list_offsets(spark, inputs["text"], isolation="dirty")


# ------------------------------------------------------------------------------------------------
# Rules
# ------------------------------------------------------------------------------------------------
def o(
    topic,
    minute,
    offset,
    epoch=None,
    *,
    spec="latest",
    iso="read_uncommitted",
    error=None,
    partition=0,
    bad=None,
) -> tuple:
    return (at(minute), topic, partition, spec, iso, offset, epoch, error, f"{topic}@{minute}", bad)


SCENARIOS = [
    # KIP-207: HW of the new leader lags, OFFSET_NOT_AVAILABLE meanwhile, then recovers.
    o("kip207", 0, 100, 5),
    o("kip207", 1, None, None, error="OFFSET_NOT_AVAILABLE"),
    o("kip207", 2, 90, 6),
    o("kip207", 3, 95, 6),
    o("kip207", 4, 105, 6),
    o("kip207", 5, None, None, error="OFFSET_NOT_AVAILABLE"),
    o("kip207", 5, None, None, error="LEADER_NOT_AVAILABLE", partition=1),
    # new leader, never back at 100: truncation (one finding, not one per observation below)
    o("truncated", 0, 100, 5),
    o("truncated", 1, 80, 6),
    o("truncated", 2, 85, 6),
    o("truncated", 3, 90, 6),
    # back above, but the leader epoch did not change / is unknown
    o("same-epoch", 0, 100, 5),
    o("same-epoch", 1, 90, 5),
    o("same-epoch", 2, 110, 5),
    o("null-epoch", 0, 100),
    o("null-epoch", 1, 90),
    o("null-epoch", 2, 110),
    # KIP-360: log start offset across a failover (isolation does not split earliest)
    o("earliest", 0, 50, 5, spec="earliest"),
    o("earliest", 1, 40, 6, spec="earliest", iso=None),
    o("earliest", 2, 60, 6, spec="earliest"),
    # two drops while below the maximum: two findings
    o("two-drops", 0, 100, 5),
    o("two-drops", 1, 80, 6),
    o("two-drops", 2, 95, 6),
    o("two-drops", 3, 70, 6),
    # healthy: rising, repeated, isolation levels are separate keys (LSO <= HW)
    o("healthy", 0, 1, 1),
    o("healthy", 1, 2, 1),
    o("healthy", 1, 2, 1),
    o("healthy", 2, 3, 2),
    o("healthy", 0, 50, 1, iso="read_committed", partition=1),
    o("healthy", 1, 60, 1, partition=1),
    o("healthy", 2, 55, 1, iso="read_committed", partition=1),
    # a quarantined row never counts
    o("quarantined", 0, 10, 1),
    o("quarantined", 1, 0, 1, bad="negative offset"),
    o("quarantined", 2, 11, 1),
    o("max-ts", 0, 10, 1, spec="max_timestamp"),
    o("max-ts", 1, 5, 1, spec="max_timestamp"),
    # acknowledged data missing from the export (log end 100)
    o("acked", 0, 90, 1),
    o("acked", 1, 100, 1),
    o("acked", 2, 120, 1),
    o("acked", 3, 130, 1),
    o("acked", 4, 150, 1),
    o("acked", 3, 500, 1, spec="earliest"),
    o("acked", 2, 900, 1, partition=7),  # partition not in the export: not judged
    # above the log end only after the export was taken
    o("acked-late", 0, 90, 1),
    o("acked-late", 4, 120, 1),
]
LOG_ENDS = [("acked", 0, 100), ("kip207", 0, 1_000), ("acked-late", 0, 100)]


@pytest.fixture(scope="module")
def observations(spark):
    return spark.createDataFrame(SCENARIOS, OBS_SCHEMA)


@pytest.fixture(scope="module")
def ruled(spark, observations) -> dict[str, list[Row]]:
    config = AuditConfig()
    log_end = spark.createDataFrame(LOG_ENDS, "topic string, partition int, log_end_offset long")
    runs = {
        "log_end": list_offsets_findings(observations, config, "r1", log_end_df=log_end),
        "export_time": list_offsets_findings(
            observations,
            config,
            "r1",
            log_end_df=log_end,
            export_time=at(3) + dt.timedelta(milliseconds=1),
        ),
    }
    for df in runs.values():
        assert [(f.name, f.dataType) for f in df.schema.fields] == [
            (f.name, f.dataType) for f in FINDINGS.fields
        ]
    union = None
    for name, df in runs.items():
        tagged = df.withColumn("_run", F.lit(name))
        union = tagged if union is None else union.unionByName(tagged)
    out: dict[str, list[Row]] = {name: [] for name in runs}
    for row in union.collect():
        out[row["_run"]].append(row)
    return out


def summary(rows, finding_type="LIST_OFFSETS_REGRESSION"):
    return sorted(
        (r["topic"], r["base_offset"], r["severity"], r["cause"], r["previous_offset"])
        for r in rows
        if r["finding_type"] == finding_type
    )


def test_regression_causes(ruled):
    assert summary(ruled["log_end"]) == [
        ("earliest", 40, "WARNING", "EARLIEST_ACROSS_FAILOVER", 50),
        ("kip207", 90, "WARNING", "LEADER_CHANGE_TRANSIENT", 100),
        ("max-ts", 5, "CRITICAL", "TRUNCATION", 10),
        ("null-epoch", 90, "CRITICAL", "TRUNCATION", 100),
        ("same-epoch", 90, "CRITICAL", "TRUNCATION", 100),
        ("truncated", 80, "CRITICAL", "TRUNCATION", 100),
        ("two-drops", 70, "CRITICAL", "TRUNCATION", 100),
        ("two-drops", 80, "CRITICAL", "TRUNCATION", 100),
    ]


def test_regression_evidence(ruled):
    (kip,) = [r for r in ruled["log_end"] if r["topic"] == "kip207"]
    assert kip["evidence"] == {
        "observed_offset": "90",
        "earlier_max_offset": "100",
        "recovered_at": "2026-11-21 03:04:00",
        "leader_epoch": "6",
        "earlier_max_leader_epoch": "5",
        "earlier_max_observed_at": "2026-11-21 03:00:00",
        "observed_at": "2026-11-21 03:02:00",
        "kip_207_broker": "true",
    }
    assert kip["detail"] == (
        "ListOffsets latest read_uncommitted of kip207-0 went back from 100 (leader epoch 5, "
        "2026-11-21 03:00:00) to 90 (leader epoch 6, 2026-11-21 03:02:00); back at 100 or above "
        "from 2026-11-21 03:04:00"
    )
    key = f"LIST_OFFSETS_REGRESSION|kip207|0|latest|read_uncommitted|{int(at(2).timestamp())}000000"
    assert kip["finding_id"] == hashlib.sha256(key.encode()).hexdigest()[:32]
    assert (
        kip["run_id"],
        kip["spec_ref"],
        kip["last_offset"],
        kip["producer_id"],
        kip["source"],
        kip["batch_timestamp"],
    ) == (
        "r1",
        "docs/rules.md#list-offsets-regression",
        90,
        None,
        "kip207@2",
        int(at(2).timestamp() * 1000),
    )
    (trunc,) = [r for r in ruled["log_end"] if r["topic"] == "truncated"]
    assert "recovered_at" not in trunc["evidence"]
    assert trunc["detail"].endswith("never back at the earlier offset in the observations")


ACKED = "ACKED_DATA_MISSING_FROM_LOG"


def test_acked_data_missing_from_log(ruled):
    assert summary(ruled["log_end"]) == summary(ruled["export_time"])
    (all_obs,) = [
        r for r in ruled["log_end"] if r["finding_type"] == ACKED and r["topic"] == "acked"
    ]
    assert (
        all_obs["topic"],
        all_obs["partition"],
        all_obs["base_offset"],
        all_obs["severity"],
    ) == ("acked", 0, 120, "CRITICAL")
    assert all_obs["evidence"]["max_observed_offset"] == "150"
    assert all_obs["evidence"]["observations_above_log_end"] == "3"
    assert all_obs["evidence"]["exported_log_end_offset"] == "100"
    assert "offsets 100-149 were acknowledged" in all_obs["detail"]
    (before,) = [r for r in ruled["export_time"] if r["finding_type"] == ACKED]
    assert before["base_offset"] == 120
    assert before["evidence"]["max_observed_offset"] == "130"
    assert before["evidence"]["observations_above_log_end"] == "2"
    assert before["evidence"]["export_time"].startswith("2026-11-21 03:03:00.001")
    assert all_obs["finding_id"] == before["finding_id"]
    late = [r["topic"] for r in ruled["log_end"] if r["finding_type"] == ACKED]
    assert sorted(late) == ["acked", "acked-late"]
    assert [r["topic"] for r in ruled["export_time"] if r["finding_type"] == ACKED] == ["acked"]


def test_errors_are_counted_not_flagged(spark, observations):
    expected = spark.createDataFrame(
        [
            ("r", "kip207", 0, "latest", "OFFSET_NOT_AVAILABLE", 2, at(1), at(5)),
            ("r", "kip207", 1, "latest", "LEADER_NOT_AVAILABLE", 1, at(5), at(5)),
        ],
        LIST_OFFSETS_ERRORS,
    )
    assert_df_equality(
        list_offsets_error_counts(observations, "r"),
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_one_shuffle(spark, observations):
    df = list_offsets_findings(observations, AuditConfig(), "r")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert len(re.findall(r"\bExchange (hashpartitioning|rangepartitioning)", plan)) == 1, plan


def test_severities_from_config_else_module_defaults():
    from eos_audit.evidence_rules.list_offsets import CAUSE_TRANSIENT, _micros, severity_of
    from eos_audit.findings import severity_for

    def _benign(level: str) -> str:
        return severity_for(level, CAUSE_TRANSIENT)

    assert severity_of("LIST_OFFSETS_REGRESSION", AuditConfig()) == "CRITICAL"
    lowered = AuditConfig(severity={"LIST_OFFSETS_REGRESSION": "ERROR"})
    assert severity_of("LIST_OFFSETS_REGRESSION", lowered) == "ERROR"
    assert severity_of("ACKED_DATA_MISSING_FROM_LOG", lowered) == "CRITICAL"
    assert (_benign("CRITICAL"), _benign("WARNING"), _benign("INFO")) == ("WARNING",) * 2 + (
        "INFO",
    )
    assert _micros("2026-11-21T03:00:00Z") == _micros(at(0)) == int(at(0).timestamp()) * 10**6
    assert _micros(at(0).replace(tzinfo=None)) == _micros(at(0))
