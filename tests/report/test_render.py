"""The report's SVG and HTML, drawn from the data structures (no Spark, no browser)."""

import html
import re
from html.parser import HTMLParser
from itertools import pairwise

import pytest

from eos_audit.report.charts import (
    epoch_chart,
    findings_chart,
    history_chart,
    list_offsets_chart,
    offenders_chart,
    partition_chart,
    transactions_chart,
)
from eos_audit.report.findings import (
    build_finding_groups,
    build_findings_matrix,
    build_offenders,
)
from eos_audit.report.history import build_history, mark_seen_before
from eos_audit.report.list_offsets import build_list_offsets_view
from eos_audit.report.page import CSS, render_report
from eos_audit.report.partitions import build_partition_timelines
from eos_audit.report.producers import build_epoch_plots
from eos_audit.report.rules import rule_href, rule_sections
from eos_audit.report.svg import (
    TEXT_SIZES,
    Box,
    Scale,
    axis_x,
    el,
    fit_text,
    fmt_int,
    fmt_moment,
    nice_ticks,
    text_box,
    text_width,
    time_ticks,
)
from eos_audit.report.svg import svg as svg_chart
from eos_audit.report.transactions import TransactionActivity, build_transaction_activity
from tests.report import test_data as sample

T0 = sample.T0


def test_ticks_are_round_integers():
    assert nice_ticks(0, 20, 4) == [0, 5, 10, 15, 20]
    assert nice_ticks(0, 2, 4) == [0, 1, 2]  # offsets and sequences: never a step below 1
    assert nice_ticks(5000, 5021, 4) == [5000, 5010, 5020]
    assert nice_ticks(7, 7) == [7]
    assert time_ticks(T0, T0 + 15_000, 5) == [T0 + i * 5_000 for i in range(4)]
    assert fmt_int(12_345) == "12,345" and fmt_int(25_000_000_000) == "25G"


def test_scale_maps_linearly_and_a_single_value_to_the_middle():
    x = Scale(0, 10, 100, 200)
    assert (x(0), x(5), x(10)) == (100, 150, 200)
    assert Scale(3, 3, 0, 50)(3) == 25


def test_elements_escape_text_and_drop_missing_attributes():
    assert el("text", {"x": 1.0, "class": None, "title": 'a"<b'}, "&") == (
        '<text x="1" title="a&quot;&lt;b">&</text>'
    )


def _matrix():
    return build_findings_matrix(
        [
            {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 2},
            {"finding_type": "SEQUENCE_GAP", "severity": "INFO", "count": 1},
            {"finding_type": "DUPLICATE_BATCH", "severity": "CRITICAL", "count": 1},
        ]
    )


def test_findings_chart_has_a_bar_per_type_and_severity_linking_to_the_findings():
    svg = findings_chart(_matrix())
    assert svg.count('class="mark bar sev-CRITICAL"') == 2
    assert svg.count('class="mark bar sev-INFO"') == 1
    assert svg.count('href="#t-SEQUENCE_GAP"') == 2
    assert "<title>SEQUENCE_GAP: 1 INFO</title>" in svg


def test_partition_chart_marks_findings_and_draws_epochs_on_lanes():
    (ledger, _) = build_partition_timelines(sample._timeline_raw(), 2).timelines
    svg = partition_chart(ledger)
    assert svg.count('<a href="#f-x1">') == 1
    assert svg.count('class="span epoch status-') == 2
    assert 'class="span txn kind-HANGING"' in svg
    assert "FENCED_PRODUCER_EPOCH (CRITICAL) at offsets 13–14" in svg


def test_offender_bars_split_by_severity_when_known():
    offenders = build_offenders(
        {
            "producers": [{"producer_id": 7, "findings": 2, "partitions": 1, "violated_epochs": 1,
                           "types": ["SEQUENCE_GAP"]}],
            "partitions": [{"topic": "t", "partition": 0, "findings": 3, "findings_critical": 1,
                            "findings_error": 0, "findings_warning": 0, "findings_info": 2}],
        },
        frozenset({"p-t-0"}),
    )  # fmt: skip
    partitions = offenders_chart(offenders.partitions, "partitions")
    assert partitions.count('<a href="#p-t-0">') == 2
    assert "sev-CRITICAL" in partitions and "sev-INFO" in partitions
    assert 'class="mark bar offender"' in offenders_chart(offenders.producers, "producers")


def _plots():
    raw = {
        "epochs": [sample._epoch()],
        "total": 1,
        "findings": [
            sample._epoch_finding("gap", "SEQUENCE_GAP", expected_sequence=9, previous_offset=6),
            sample._epoch_finding("lost", "ACKED_WRITE_LOST", base_sequence=9, last_sequence=11),
            sample._epoch_finding(
                "dup",
                "DUPLICATE_BATCH",
                base_offset=15,
                last_offset=15,
                base_sequence=17,
                last_sequence=17,
                previous_offset=13,
            ),
            sample._epoch_finding(
                "fence",
                "FENCED_PRODUCER_EPOCH",
                base_offset=18,
                last_offset=18,
                base_sequence=20,
                last_sequence=20,
            ),
        ],  # fmt: skip
        "counts": {("payments", 1, 1002, 0): 4},
    }
    return build_epoch_plots(raw)


def test_epoch_chart_draws_each_kind_of_violation():
    svg = epoch_chart(_plots().plots[0])
    for cls in ("gap-bar", "dup-arc", "hollow", "cross", "seq-line"):
        assert f'class="{cls}"' in svg, cls
    for href in ("f-gap", "f-lost", "f-dup", "f-fence"):
        assert f'<a href="#{href}">' in svg


def _activity():
    return build_transaction_activity(
        {
            "totals": [{"kind": "COMMIT", "count": 2}, {"kind": "OPEN", "count": 1}],
            "range": {"start": T0, "end": T0 + 5_000},
            "bucket_ms": 1_000,
            "buckets": [
                {"b": 0, "kind": "COMMIT", "count": 2},
                {"b": 4, "kind": "OPEN", "count": 1},
            ],
            "spans": [
                {"topic": "t", "partition": 0, "producer_id": 9, "start_epoch": 1, "kind": "OPEN",
                 "first_offset": 4, "marker_offset": None, "first_timestamp": T0 + 4_000,
                 "end_ms": T0 + 5_000, "duration_ms": 1_000},
            ],
        }
    )  # fmt: skip


def test_transactions_chart_stacks_outcomes_and_draws_unfinished_ones():
    svg = transactions_chart(_activity())
    assert svg.count('class="mark bar kind-COMMIT"') == 1
    assert svg.count('class="mark bar kind-OPEN"') == 1
    assert svg.count('class="mark span kind-OPEN"') == 1
    assert transactions_chart(TransactionActivity({"COMMIT": 0})) == ""


def _offsets_view():
    raw = {
        "chosen": [("payments", 0)],
        "marks": [
            {"finding_id": "r", "finding_type": "LIST_OFFSETS_REGRESSION", "severity": "WARNING",
             "cause": "LEADER_CHANGE_TRANSIENT", "topic": "payments", "partition": 0,
             "base_offset": 25, "previous_offset": 30, "batch_timestamp": T0 + 180_000,
             "evidence": {"earlier_max_observed_at": "2026-11-21 00:01:00",
                          "recovered_at": "2026-11-21 00:04:00"}},
        ],
        "marks_total": 1,
        "errors": [{"topic": "payments", "partition": 0, "spec": "latest",
                    "error": "OFFSET_NOT_AVAILABLE", "observations": 1,
                    "first_ms": T0 + 120_000, "last_ms": T0 + 120_000}],
        "errors_total": 1,
        "points": [{"topic": "payments", "partition": 0, "spec": "latest",
                    "isolation": "read_uncommitted", "time_ms": T0 + 60_000 * i, "low": o,
                    "high": o, "n": 1} for i, o in ((1, 30), (3, 25), (4, 36))],
        "partitions_observed": 1,
        "note": "observations read again from x",
    }  # fmt: skip
    return build_list_offsets_view(raw)


def test_list_offsets_chart_draws_observations_regressions_and_failed_answers():
    svg = list_offsets_chart(_offsets_view().series[0])
    assert svg.count('class="mark obs"') == 3
    assert 'class="obs-band"' in svg and 'class="error-window"' in svg
    assert '<a href="#f-r"><g class="mark regression sev-WARNING">' in svg
    assert 'class="regress"' in svg and 'class="recovered"' in svg


class _Page(HTMLParser):
    """Collects ids, links and tags, and checks that elements close in order."""

    VOID = {"meta", "br", "wbr", "link", "img", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.ids, self.hrefs, self.tags, self.errors = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


@pytest.fixture(scope="module")
def page():
    matrix = build_findings_matrix(
        [
            {"finding_type": "FENCED_PRODUCER_EPOCH", "severity": "CRITICAL", "count": 1},
            {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 2},
            {"finding_type": "DUPLICATE_BATCH", "severity": "CRITICAL", "count": 1},
            {"finding_type": "ACKED_WRITE_LOST", "severity": "CRITICAL", "count": 1},
            {"finding_type": "LIST_OFFSETS_REGRESSION", "severity": "WARNING", "count": 1},
        ]
    )
    timelines = build_partition_timelines(sample._timeline_raw(), 2)
    anchors = frozenset(t.anchor for t in timelines.timelines)
    groups = build_finding_groups(
        [
            sample._finding("x1", "FENCED_PRODUCER_EPOCH", 13, topic="ledger"),
            sample._finding(
                "gap",
                "SEQUENCE_GAP",
                9,
                previous_offset=6,
                expected_sequence=9,
                topic="ledger",
                detail="<script>alert(1)</script>",
                cause="LEADER_CHANGE_TRANSIENT",
                kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
            ),
        ],  # fmt: skip
        matrix,
        anchors,
    )
    history = build_history(sample._history_raw(), "night-3")
    groups = mark_seen_before(groups, history, {"x1": 2})
    offenders = build_offenders(
        {"producers": [], "partitions": [
            {"topic": "ledger", "partition": 0, "findings": 3, "findings_critical": 3,
             "findings_error": 0, "findings_warning": 0, "findings_info": 0}]},
        anchors,
    )  # fmt: skip
    data = sample._data(
        matrix=matrix,
        groups=groups,
        offenders=offenders,
        timelines=timelines,
        epochs=_plots(),
        transactions=_activity(),
        list_offsets=_offsets_view(),
        history=history,
    )
    html = render_report(data)
    parser = _Page()
    parser.feed(html)
    return html, parser


def test_the_page_is_well_formed_and_every_link_lands(page):
    html, parsed = page
    assert html.startswith("<!DOCTYPE html>")
    assert parsed.errors == [] and parsed.stack == []
    assert len(parsed.ids) == len(set(parsed.ids)), "duplicate ids"
    internal = {h[1:] for h in parsed.hrefs if h.startswith("#")}
    assert internal - set(parsed.ids) == set()
    # A mark whose finding is not listed links to its type's list.
    assert 'href="#t-ACKED_WRITE_LOST"' in html and 'href="#f-gap"' in html
    for section in ("run", "verdict", "findings", "history", "offenders", "partitions", "epochs",
                    "transactions", "consumer-groups", "list-offsets", "evidence",
                    "left-out"):  # fmt: skip
        assert section in parsed.ids


def test_the_page_needs_no_network_and_runs_no_script(page):
    html, parsed = page
    assert "script" not in parsed.tags
    assert re.findall(r"https?://[^\s\"'<>]+", html) == ["http://www.w3.org/2000/svg"] * html.count(
        "<svg"
    )
    # Text from the data is escaped, never markup.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_page_says_what_it_left_out(page):
    html, _ = page
    left_out = html.split('id="left-out"', 1)[1]
    assert "ledger-0: 3 findings not drawn on its timeline" in left_out
    assert "partitions: 0" not in left_out


def test_evidence_rows_link_the_earlier_batch(page):
    html, _ = page
    row = re.search(r'<tr id="f-gap">.*?</tr>', html, flags=re.S).group(0)
    assert '<a href="#p-ledger-0">offset 6: the earlier batch</a>' in row
    assert "expected sequence 9" in row


def test_the_verdict_is_the_worst_severity_and_the_status_is_the_run_state(page):
    html, _ = page
    header = html.split("</header>", 1)[0]
    # sample._overview_raw: 2 CRITICAL and 1 INFO in a SUCCEEDED run
    assert '<span id="verdict" class="verdict CRITICAL">CRITICAL: 2 violations (and 1 INFO)' in (
        header
    )
    assert "run status <b>SUCCEEDED</b>" in header
    clean = render_report(
        sample._data(overview=sample.build_overview(
            sample._overview_raw(findings_critical=0, findings_info=0), "night-1"))
    )  # fmt: skip
    assert '<span id="verdict" class="verdict clean">No findings</span>' in clean
    # Nothing found in a run that did not audit everything it was given is not green.
    incomplete = render_report(
        sample._data(overview=sample.build_overview(
            sample._overview_raw(findings_critical=0, findings_info=0, status="NOTHING_AUDITED"),
            "night-1"))
    )  # fmt: skip
    assert 'class="verdict incomplete">No findings in what was audited</span>' in incomplete
    assert "run status <b>NOTHING_AUDITED</b>" in incomplete


def test_the_history_chart_has_a_column_per_run(page):
    html, _ = page
    history = html.split('id="history"', 1)[1].split("</section>", 1)[0]
    svg = history_chart(build_history(sample._history_raw(), "night-3"))
    assert svg in history
    # night-1: 2 CRITICAL; night-2 (FAILED): no findings; night-3: 5 CRITICAL + 1 INFO.
    assert svg.count('class="mark bar sev-CRITICAL"') == 2
    assert svg.count('class="mark bar sev-INFO"') == 1
    assert svg.count('class="mark clean-run"') == 1
    assert svg.count('class="mark bar batches') == 3
    assert svg.count('class="current-run"') == 1
    assert "3 are new and 3 were reported before" in history
    assert "9 earlier runs not shown" in html.split('id="left-out"', 1)[1]


def test_times_are_shown_where_findings_are_placed(page):
    html, _ = page
    # The partition strip says the time at both ends of the log, each mark its batch's time.
    timeline = partition_chart(build_partition_timelines(sample._timeline_raw(), 2).timelines[0])
    assert '"time-label" text-anchor="start">2026-11-21 00:00:00 UTC<' in timeline
    assert '"time-label" text-anchor="end">2026-11-21 00:00:18 UTC<' in timeline
    assert "FENCED_PRODUCER_EPOCH (CRITICAL) at offsets 13–14, 2026-11-21 00:00:13 UTC" in timeline
    assert "(2026-11-21 00:00:00–00:00:18 UTC)" in html  # its caption
    # Evidence rows carry the batch time, the findings table each type's first and last.
    row = re.search(r'<tr id="f-gap">.*?</tr>', html, flags=re.S).group(0)
    assert "batch time 2026-11-21 00:00:09 UTC" in row
    # A time axis says its date when its ticks show only hours.
    assert "time (UTC), 2026-11-21" in transactions_chart(_activity())


def test_evidence_rows_say_new_or_seen_link_the_rule_and_wrap_labels_at_words(page):
    html, _ = page
    gap = re.search(r'<tr id="f-gap">.*?</tr>', html, flags=re.S).group(0)
    fenced = re.search(r'<tr id="f-x1">.*?</tr>', html, flags=re.S).group(0)
    assert '<span class="new">new in this run</span>' in gap
    assert '<span class="seen">seen before</span>' in fenced
    assert "LEADER_<wbr>CHANGE_<wbr>TRANSIENT" in gap
    assert "<code>OUT_<wbr>OF_<wbr>ORDER_<wbr>SEQUENCE_<wbr>NUMBER</code>" in gap
    # The rule's link leads inside the report, which carries its text (it is read elsewhere).
    assert '<a href="#rule-sequence-gap"><code>docs/rules.md#sequence-gap</code></a>' in gap


def test_the_report_carries_the_text_of_the_rules_it_cites(page):
    html, _ = page
    rules = html.split('<section id="rules">', 1)[1].split("</section>", 1)[0]
    (cited,) = re.findall(r'<div id="(rule-[a-z0-9-]+)" class="rule">', rules)
    assert cited == "rule-sequence-gap"
    assert "## Sequence gap" in rules and "ProducerAppendInfo.checkSequence" in rules
    assert "file:" not in html  # nothing points at the reporting machine's files


def test_rule_references_lead_to_the_rules_the_report_carries():
    carried = rule_sections(["docs/rules.md#sequence-gap", "docs/rules.md#no-such-rule", None])
    assert list(carried) == ["docs/rules.md#sequence-gap"]
    assert rule_href("docs/rules.md#sequence-gap", carried) == "#rule-sequence-gap"
    assert rule_href("docs/rules.md#no-such-rule", carried) is None  # shown as text
    url = "https://example.org/rules.html#x"
    assert rule_href(url, carried) == url
    assert rule_href(None, carried) is None


# Labels are measured when the report is written: every chart's text stays inside its SVG and
# clear of every other text, by the widths the charts are laid out with (svg.text_width, an
# upper bound of what a browser draws; tests/integration/test_report_browser.py measures there).


def _texts(svg: str) -> tuple[float, float, list[tuple[str, Box]]]:
    """A chart's size and, for each of its `<text>` elements, what it says and the box it takes."""
    width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    texts = []
    for attrs, inner in re.findall(r"<text ([^>]*)>(.*?)</text>", svg, flags=re.S):
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        text = html.unescape(re.sub(r"<title>.*?</title>", "", inner))
        anchor = a.get("text-anchor", "start")
        texts.append((text, text_box(text, float(a["x"]), float(a["y"]), a["class"], anchor)))
    return width, height, texts


def _assert_labels_fit(svg: str) -> list[str]:
    """Every text inside the chart and overlapping no other; returns the texts."""
    width, height, texts = _texts(svg)
    for text, box in texts:
        assert box.inside(width, height), (text, box, width, height)
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1 :]:
            assert not box_a.overlaps(box_b), (a, box_a, b, box_b)
    return [text for text, _ in texts]


def _charts(html_page: str) -> list[str]:
    return re.findall(r"<svg .*?</svg>", html_page, flags=re.S)


def test_chart_text_sizes_are_the_pages():
    rules = dict(
        (selector.strip(), body)
        for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", CSS)
        for selector in selectors.split(",")
    )
    for css_class, size in TEXT_SIZES.items():
        assert f"font-size:{size}px" in rules[f"svg .{css_class}"], css_class


def test_text_is_measured_by_its_characters_and_shortened_in_the_middle():
    assert text_width("WWW", 10) > text_width("iii", 10) * 2
    assert text_width("NEW_EPOCH_NONZERO_SEQUENCE", 12) == 2 * text_width(
        "NEW_EPOCH_NONZERO_SEQUENCE", 6
    )
    short = fit_text(f"{sample.LONG_TOPIC}-127", 200, 12)
    assert "…" in short and short.startswith("payments.") and short.endswith("-127")
    assert text_width(short, 12) <= 200
    assert fit_text("SEQUENCE_GAP", 200, 12) == "SEQUENCE_GAP"


def test_the_label_column_grows_to_the_longest_finding_type():
    svg = findings_chart(build_findings_matrix(sample._long_labels_rows()))
    texts = _assert_labels_fit(svg)
    assert "NEW_EPOCH_NONZERO_SEQUENCE" in texts and "ACKED_DATA_MISSING_FROM_LOG" in texts
    assert "1,234,567" in texts  # the longest bar's total, right of it
    # The bars start right of the longest label.
    _, _, boxes = _texts(svg)
    label_right = max(b.x1 for t, b in boxes if t.endswith("_LOG"))
    bar_left = min(float(x) for x in re.findall(r'<rect x="([\d.]+)"', svg))
    assert label_right < bar_left


def test_a_label_longer_than_the_column_is_shortened_and_whole_in_its_tooltip():
    data = sample._long_labels_data()
    svg = offenders_chart(data.offenders.partitions, "partitions")
    (label,) = [t for t in _assert_labels_fit(svg) if "…" in t]
    assert label.endswith("-127")
    assert f"<title>{sample.LONG_TOPIC}-127</title></text>" in svg
    # The hanging transaction spans the range: its label is shortened beside it, not cut off.
    svg = transactions_chart(data.transactions)
    (label,) = [t for t in _assert_labels_fit(svg) if "(hanging)" in t or "…" in t]
    assert "…" in label and f"{sample.LONG_TOPIC}-127 producer" in svg


def _run_labels(svg: str) -> list[tuple[str, Box]]:
    _, _, texts = _texts(svg)
    return [(t, b) for t, b in texts if re.fullmatch(r"\d\d-\d\d \d\d:\d\d(:\d\d)?", t)]


def test_two_runs_minutes_apart_keep_their_own_labels_and_columns():
    svg = history_chart(build_history(sample._history_raw_minutes_apart(), "night-3-rerun"))
    _assert_labels_fit(svg)
    labels = _run_labels(svg)
    assert [t for t, _ in labels] == ["11-21 03:00", "11-22 03:00", "11-23 03:00", "11-23 03:04"]
    assert 'class="tick current" text-anchor="middle">11-23 03:04<' in svg
    # Each run's batches bar stands apart from its neighbours'.
    bars = [
        (float(x), float(x) + float(w))
        for x, w in re.findall(
            r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="[\d.]+" '
            r'class="mark bar batches',
            svg,
        )
    ]
    assert len(bars) == 4
    assert all(b[0] - a[1] >= 1 and b[1] - b[0] >= 2 for a, b in pairwise(bars))


def _runs(n: int, every_ms: int) -> dict:
    runs = [
        {**sample._history_run(f"run-{i}", 0, critical=i % 3), "started_ms": T0 + i * every_ms}
        for i in range(n)
    ]
    return {"runs": runs[::-1], "total": n, "compared": [], "by_type": []}


def test_runs_of_one_minute_are_labelled_to_the_second():
    svg = history_chart(build_history(_runs(3, 20_000), "run-2"))
    _assert_labels_fit(svg)
    assert [t for t, _ in _run_labels(svg)] == [
        "11-21 00:00:00", "11-21 00:00:20", "11-21 00:00:40"
    ]  # fmt: skip


@pytest.mark.parametrize("n", [2, 10, 15, 30, 400])
def test_run_labels_never_overlap_and_this_run_is_always_labelled(n):
    current = f"run-{n - 3 if n > 3 else n - 1}"  # a report of an older run shows later ones too
    svg = history_chart(build_history(_runs(n, 3_600_000), current))
    texts = _assert_labels_fit(svg)
    labels = _run_labels(svg)
    current_ms = T0 + int(current.split("-")[1]) * 3_600_000
    assert fmt_moment(current_ms)[5:16] in texts
    rows = {b.y0 for _, b in labels}
    if n <= 10:
        assert len(labels) == n and len(rows) == 1  # one row: they fit
    elif n == 15:
        assert len(labels) == n and len(rows) == 2  # staggered on two rows, none left out
    else:
        assert len(labels) < n and len(rows) == 1  # every k-th
    width = float(re.search(r'viewBox="0 0 ([\d.]+)', svg).group(1))
    assert width == (860 if n < 250 else pytest.approx(70 + 3 * n + 20, abs=1))


def test_axis_tick_labels_are_thinned_and_kept_inside_their_bounds():
    x = Scale(0, 100, 30, 330)
    ticks = list(range(0, 101, 10))
    axis = axis_x(x, 10, ticks, lambda t: f"{t * 100_000:,}", "offset", bounds=(0, 340))
    _assert_labels_fit(svg_chart(340, 50, "axis", axis))
    shown = re.findall(r'class="tick" text-anchor="\w+">([\d,]+)<', axis)
    assert 1 < len(shown) < len(ticks) and shown[0] == "0"
    assert axis.count('class="axis"') == 1 + len(ticks)  # every tick keeps its mark
    # At the edges a label moves inward, never off its tick.
    edge = axis_x(Scale(0, 1, 4, 336), 10, [0, 1], lambda t: f"{t:,} 000 000", bounds=(0, 340))
    assert 'x="0" y="25" class="tick" text-anchor="start"' in edge
    assert 'x="340" y="25" class="tick" text-anchor="end"' in edge


def test_every_chart_keeps_its_labels_inside_and_apart(page):
    html_page, _ = page
    long_labels = render_report(sample._long_labels_data())
    charts = _charts(html_page) + _charts(long_labels)
    assert len(charts) > 10
    for svg in charts:
        _assert_labels_fit(svg)
    assert "NEW_EPOCH_NONZERO_SEQUENCE</text>" in long_labels


@pytest.mark.parametrize(
    "span_ms", [1_000, 90_000, 3_600_000, 86_400_000, 3 * 86_400_000, 40 * 86_400_000]
)
def test_time_axes_keep_their_labels_apart_at_any_span(span_ms):
    activity = build_transaction_activity(
        {
            "totals": [{"kind": "COMMIT", "count": 9_999_999}],
            "range": {"start": T0, "end": T0 + span_ms},
            "bucket_ms": max(span_ms // 60, 1),
            "buckets": [{"b": b, "kind": "COMMIT", "count": 9_999_999 - b} for b in range(60)],
            "spans": [],
        }
    )
    _assert_labels_fit(transactions_chart(activity))


def test_the_times_at_both_ends_of_a_short_log_do_not_overlap():
    raw = sample._timeline_raw()
    # A finding far beyond the log's end: the log is a sliver at the left of the strip.
    raw["marks"] = [{**raw["marks"][0], "base_offset": 900, "last_offset": 900}]
    svg = partition_chart(build_partition_timelines(raw, 2).timelines[0])
    texts = _assert_labels_fit(svg)
    assert "2026-11-21 00:00:00 UTC" in texts and "2026-11-21 00:00:18 UTC" in texts


def test_an_epoch_in_the_millions_keeps_its_axis_labels_apart():
    raw = {
        "epochs": [sample._epoch(first_offset=9_990_000, last_offset=9_999_999,
                                 first_sequence=0, last_sequence=2_147_483_000)],
        "total": 1,
        "findings": [sample._epoch_finding("gap", "SEQUENCE_GAP", base_offset=9_990_010,
                                           last_offset=9_990_011, expected_sequence=9)],
        "counts": {("payments", 1, 1002, 0): 1},
    }  # fmt: skip
    texts = _assert_labels_fit(epoch_chart(build_epoch_plots(raw).plots[0]))
    assert "9,990,000" in texts and "2G" in texts
