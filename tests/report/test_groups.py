"""The consumer groups section, from a real run's tables: an export with `__consumer_offsets`.

As tests/processing/test_coordinator_audit.py, the coordinator's segments are Kafka's bytes; one
run audits them, and the report is read from its warehouse. Group zeta-copier commits three
input partitions, one of them transactionally with an aborted, a rewinding (CRITICAL), a skipped
(another producer's, older than a plain commit applied before its marker) and a pending commit
and then plainly (a mixed commit); group alpha commits one partition plainly, without findings.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.report.charts import group_chart
from eos_audit.report.data import ReportData, collect_report_data, left_out
from eos_audit.report.groups import build_consumer_groups, query_consumer_groups
from eos_audit.report.limits import ReportLimits
from eos_audit.report.page import render_report
from eos_audit.report.tables import TableLocation, run_tables
from eos_audit.sources.kafka.coordinator_keys import partition_for
from tests.fixtures.segment_builder import (
    BASE_TS,
    control_batch,
    data_batch,
    record_batch,
    write_partition_dir,
)
from tests.processing.test_coordinator_audit import marker, plain, txn
from tests.report import test_data as sample
from tests.report.test_render import _assert_labels_fit, _Page
from tests.run_once import once_per_run
from tests.sources.test_coordinator_records import (
    group_metadata_value,
    i16,
    member,
    offset_commit_key,
    offset_commit_value,
    string,
)

pytestmark = pytest.mark.slow

ZETA, ALPHA, INPUT = "zeta-copier", "alpha", "orders"
OTHER_PID = 7  # a second transactional producer of zeta-copier


def _commit(group: str, partition: int, value: int, second: float) -> tuple[bytes, bytes]:
    # The commit's own time (the coordinator's clock), not its batch's: the charts' x.
    ts = BASE_TS + int(second * 1000)
    return offset_commit_key(group, INPUT, partition), offset_commit_value(3, value, "", ts)


def _other(offset: int, record: tuple[bytes, bytes] | None = None) -> bytes:
    """The second producer's transactional commit, or its COMMIT marker."""
    if record is None:
        return control_batch(offset, producer_id=OTHER_PID, producer_epoch=0, commit=True,
                             timestamp=BASE_TS + offset)  # fmt: skip
    return record_batch(offset, [record], producer_id=OTHER_PID, producer_epoch=0, base_sequence=0,
                        is_transactional=True, timestamp=BASE_TS + offset)  # fmt: skip


# zeta-copier: orders-0 committed 10, 20 in transactions, 30 aborted, 15 committed (a
# TRANSACTIONAL rewind at record 7), then 18 plainly (mixed), 25 by another producer's
# transaction, skipped (22 was committed plainly before its marker), 40 pending at the end;
# orders-1 and orders-2 plainly.
ZETA_LOG = [
    plain(0, (i16(2) + string(ZETA), group_metadata_value(3, [member(3, "m-1")]))),
    txn(1, 0, _commit(ZETA, 0, 10, 1)), marker(2, 0, True),
    txn(3, 0, _commit(ZETA, 0, 20, 2)), marker(4, 0, True),
    txn(5, 0, _commit(ZETA, 0, 30, 3)), marker(6, 0, False),
    txn(7, 0, _commit(ZETA, 0, 15, 4)), marker(8, 0, True),
    plain(9, _commit(ZETA, 0, 18, 5)),
    _other(10, _commit(ZETA, 0, 25, 5.3)), plain(11, _commit(ZETA, 0, 22, 5.6)), _other(12),
    plain(13, _commit(ZETA, 1, 5, 1.5)),
    plain(14, _commit(ZETA, 1, 8, 5.5)),
    plain(15, _commit(ZETA, 2, 3, 2.5)),
    txn(16, 0, _commit(ZETA, 0, 40, 6)),
]  # fmt: skip
ALPHA_LOG = [plain(0, _commit(ALPHA, 0, 100, 1)), plain(1, _commit(ALPHA, 0, 200, 2))]


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """The run's warehouse, its id, and the report's data with the default limits, built once for
    the suite's run (the module's tests may run on both workers)."""
    assert partition_for(ZETA) != partition_for(ALPHA)  # one log each

    def build(root: Path) -> tuple[Path, str, ReportData]:
        export = root / "export"
        write_partition_dir(export, 1, "__consumer_offsets", partition_for(ZETA), *ZETA_LOG)
        write_partition_dir(export, 1, "__consumer_offsets", partition_for(ALPHA), *ALPHA_LOG)
        write_partition_dir(export, 1, INPUT, 0, *[data_batch(i) for i in range(3)])
        warehouse = root / "warehouse"
        inputs = AuditInputs(batches=(str(export),))
        result = run_audit(spark, inputs, AuditConfig(), str(warehouse))
        data = collect_report_data(spark, TableLocation(str(warehouse)), result.run_id)
        return warehouse, result.run_id, data

    return once_per_run(tmp_path_factory, "report-groups", build)


@pytest.fixture(scope="module")
def page(audited):
    html = render_report(audited[2])
    parser = _Page()
    parser.feed(html)
    return html, parser


def _section(html: str) -> str:
    return html.split('<section id="consumer-groups">', 1)[1].split("</section>", 1)[0]


def test_groups_with_findings_come_first_with_their_partitions_and_counts(audited):
    groups = audited[2].consumer_groups
    assert groups.total_groups == 2 and groups.omitted == 0
    zeta, alpha = groups.groups
    assert (zeta.group_id, alpha.group_id) == (ZETA, ALPHA)  # findings first, then by name
    assert (zeta.coordinator_partition, zeta.commits, zeta.total_partitions) == (
        partition_for(ZETA), 11, 3
    )  # fmt: skip
    assert zeta.counts == {
        ("PLAIN", "APPLIED"): 5,
        ("TRANSACTIONAL", "APPLIED"): 3,
        ("TRANSACTIONAL", "SKIPPED"): 1,
        ("TRANSACTIONAL", "ABORTED"): 1,
        ("TRANSACTIONAL", "PENDING"): 1,
    }
    assert zeta.findings_by_type == {"MIXED_OFFSET_COMMITS": 1, "OFFSET_REWIND": 1}
    assert zeta.findings_by_severity["CRITICAL"] == 1
    # The partition with findings first; the last committed offset at the export's end.
    assert [(p.topic, p.partition, p.last_offset) for p in zeta.partitions] == [
        (INPUT, 0, 22), (INPUT, 1, 8), (INPUT, 2, 3)
    ]  # fmt: skip
    assert zeta.partitions[0].last_ms == BASE_TS + 5_600
    assert alpha.findings_by_type == {} and alpha.partitions[0].last_offset == 200
    assert zeta.x_is_time and zeta.x_domain == (BASE_TS + 1_000, BASE_TS + 6_000)


def test_the_partitions_series_has_every_commit_and_the_findings_at_their_commits(audited):
    orders0 = audited[2].consumer_groups.groups[0].partitions[0]
    # A few commits: each has an interval of its own.
    assert [(p.kind, p.outcome, p.x - BASE_TS, p.offset) for p in orders0.points] == [
        ("TRANSACTIONAL", "APPLIED", 1_000, 10),
        ("TRANSACTIONAL", "APPLIED", 2_000, 20),
        ("TRANSACTIONAL", "ABORTED", 3_000, 30),
        ("TRANSACTIONAL", "APPLIED", 4_000, 15),
        ("PLAIN", "APPLIED", 5_000, 18),
        ("TRANSACTIONAL", "SKIPPED", 5_300, 25),
        ("PLAIN", "APPLIED", 5_600, 22),
        ("TRANSACTIONAL", "PENDING", 6_000, 40),
    ]
    marks = {m.finding_type: m for m in orders0.marks}
    rewind = marks["OFFSET_REWIND"]
    # At the commit's time (not its batch's), from the offset it replaced down to its own.
    assert (rewind.x, rewind.offset, rewind.previous_offset) == (BASE_TS + 4_000, 15, 20)
    assert (rewind.cause, rewind.record_offset) == ("TRANSACTIONAL", 7)
    assert (marks["MIXED_OFFSET_COMMITS"].x, marks["MIXED_OFFSET_COMMITS"].offset) == (
        BASE_TS + 5_000, 18
    )  # fmt: skip
    assert orders0.omitted_marks == 0


def test_the_section_draws_the_group_and_links_the_rewind_to_its_finding(page):
    html, parsed = page
    assert parsed.errors == [] and len(parsed.ids) == len(set(parsed.ids))
    assert {h[1:] for h in parsed.hrefs if h.startswith("#")} - set(parsed.ids) == set()
    section = _section(html)
    assert '<div id="g-zeta-copier">' in section and '<div id="g-alpha">' in section
    assert section.index("g-zeta-copier") < section.index("g-alpha")
    chart = re.search(r'<figure id="g-zeta-copier-orders-0">.*?</figure>', section, re.S).group(0)
    assert chart.count('class="commit-step"') == 1
    assert chart.count('class="mark commit commit-TRANSACTIONAL"') == 3
    assert chart.count('class="mark commit commit-PLAIN"') == 2
    assert chart.count('class="mark commit commit-SKIPPED"') == 1
    assert "transactional commit skipped: offset 25 at" in chart
    assert chart.count('class="mark commit commit-ABORTED"') == 1
    assert chart.count('class="mark commit commit-PENDING"') == 1
    (href,) = re.findall(r'<a href="#(f-[^"]+)"><g class="mark finding sev-CRITICAL">', chart)
    assert f'<tr id="{href}">' in html  # the rewind's evidence row
    assert "OFFSET_REWIND (CRITICAL, TRANSACTIONAL): offset 15 after 20, record 7" in chart
    assert 'class="regress"' in chart
    # The group's table: per partition and for the whole group.
    assert "transactional: applied 3, skipped 1, aborted 1, pending 1" in section
    assert "22 (2023-11-14 22:13:25 UTC)" in section
    assert '<a href="#t-OFFSET_REWIND">OFFSET_REWIND</a> 1' in section
    for svg in re.findall(r"<svg .*?</svg>", section, flags=re.S):
        _assert_labels_fit(svg)
    assert "group zeta-copier" not in html.split('id="left-out"', 1)[1]


def test_what_the_section_leaves_out_is_counted(spark, audited):
    warehouse, run_id, data = audited
    limits = ReportLimits(consumer_groups=1, group_partitions=2, marks_per_chart=1)
    tables = run_tables(spark, TableLocation(str(warehouse)), run_id)
    groups = build_consumer_groups(query_consumer_groups(tables, limits))
    (zeta,) = groups.groups
    assert [p.partition for p in zeta.partitions] == [0, 1]
    assert len(zeta.partitions[0].marks) == 1 and zeta.partitions[0].omitted_marks == 1
    lines = left_out(sample._data(consumer_groups=groups))
    assert lines == [
        "consumer groups: 1 of 2 not drawn (the 1 with the most severe findings are)",
        "group zeta-copier: 1 of 3 input partitions not drawn (the 2 with the most severe "
        "findings are)",
        "group zeta-copier orders-0: 1 findings not drawn on its chart",
    ]
    (mark,) = zeta.partitions[0].marks
    assert mark.finding_type == "OFFSET_REWIND"  # the most severe is the one drawn


def test_a_warehouse_older_than_the_table_still_renders(spark, audited, tmp_path):
    warehouse, run_id, _ = audited
    older = tmp_path / "warehouse"
    shutil.copytree(warehouse, older, ignore=shutil.ignore_patterns("consumer_offsets"))
    assert not (older / "consumer_offsets").exists() and (older / "findings").exists()
    data = collect_report_data(spark, TableLocation(str(older)), run_id)
    assert data.consumer_groups.groups == [] and data.consumer_groups.total_groups == 0
    html = render_report(data)
    assert "No consumer group offsets in this run." in _section(html)
    # The findings about groups are still listed with their evidence.
    assert 'id="t-OFFSET_REWIND"' in html


def _untimed_raw() -> dict:
    return {
        "groups": [{"group_id": "g", "commits": 2, "partitions": 1, "coordinator_partition": 7,
                    "findings_critical": 0, "findings_error": 1, "findings_warning": 0,
                    "findings_info": 0}],
        "total": 1,
        "partitions": [{"group_id": "g", "topic": "t", "partition": 0, "commits": 2,
                        "last": {"at": 12, "outcome": "APPLIED", "offset": 5, "ms": None},
                        "drawn": 2, "untimed": 1, "first_ms": sample.T0, "last_ms": sample.T0,
                        "first_record": 10, "last_record": 12}],
        "counts": [{"what": "findings", "group_id": "g", "topic": "t", "partition": 0,
                    "kind": "ERROR", "key": "OFFSET_REWIND", "count": 1}],
        "points": [
            {"group_id": "g", "topic": "t", "partition": 0, "kind": "PLAIN",
             "outcome": "APPLIED", "last": {"at": r, "committed_offset": o, "x": r},
             "low": o, "high": o, "n": 1}
            for r, o in ((10, 9), (12, 5))
        ],
        "marks": [{"group_id": "g", "topic": "t", "partition": 0, "finding_id": "rw",
                   "finding_type": "OFFSET_REWIND", "severity": "ERROR", "cause": "LATE_COMMIT",
                   "finding_topic": "__consumer_offsets", "coordinator_partition": 7,
                   "record_offset": 12, "batch_ms": sample.T0, "committed_offset": 5,
                   "previous_committed_offset": 9}],
        "mark_commits": [{"coordinator_partition": 7, "record_offset": 12, "commit_ms": None}],
    }  # fmt: skip


def test_without_commit_times_the_x_axis_is_the_record_offset():
    (group,) = build_consumer_groups(_untimed_raw()).groups
    assert not group.x_is_time and group.x_domain == (10, 12)
    (part,) = group.partitions
    assert [m.x for m in part.marks] == [12]  # its record's offset
    svg = group_chart(group, part)
    _assert_labels_fit(svg)
    assert "record offset in __consumer_offsets-7" in svg
    assert "LATE_COMMIT): offset 5 after 9, record 12" in svg


def test_a_partition_with_nothing_committed_has_no_chart():
    raw = _untimed_raw()
    raw["partitions"].append(
        {**raw["partitions"][0], "partition": 1, "commits": 1, "drawn": 0, "untimed": 0,
         "last": {"at": 13, "outcome": "DELETED", "offset": None, "ms": None},
         "first_ms": None, "last_ms": None, "first_record": None, "last_record": None}
    )  # fmt: skip
    raw["groups"][0]["partitions"] = 3  # one more than drawn
    groups = build_consumer_groups(raw)
    html = render_report(sample._data(consumer_groups=groups))
    parser = _Page()
    parser.feed(html)
    assert parser.errors == [] and len(parser.ids) == len(set(parser.ids))
    figure = re.search(r'<figure id="g-g-t-1">.*?</figure>', html, re.S).group(0)
    assert "<svg" not in figure and "Nothing to draw: no offset was committed." in figure
    row = re.search(r'<a href="#g-g-t-1">t-1</a>.*?</tr>', html, re.S).group(0)
    assert "<td>deleted</td>" in row
    assert "the group: 3 partitions (1 not above)" in html
    assert "group g: 1 of 3 input partitions not drawn" in html.split('id="left-out"', 1)[1]
