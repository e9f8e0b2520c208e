"""The report as one HTML page: inline CSS and SVG, no script, nothing fetched when it opens."""

from __future__ import annotations

import datetime as dt

from eos_audit.findings import SEVERITY_ORDER
from eos_audit.report.charts import (
    epoch_chart,
    findings_chart,
    group_chart,
    history_chart,
    list_offsets_chart,
    offenders_chart,
    partition_chart,
    transactions_chart,
)
from eos_audit.report.data import ReportData, left_out, relink
from eos_audit.report.findings import FindingGroup, FindingItem
from eos_audit.report.groups import KINDS, OUTCOMES, ConsumerGroup
from eos_audit.report.rules import rule_href, rule_id, rule_sections
from eos_audit.report.svg import el, esc, fmt_int, fmt_moment, fmt_range, fmt_time
from eos_audit.sinks.run_status import SUCCEEDED

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2329;
background:#f6f7f9}
main{max-width:960px;margin:0 auto;padding:16px 24px 48px}
header{background:#1d2329;color:#fff;padding:18px 24px}
header h1{margin:0;font-size:20px;font-weight:600}
header p{margin:4px 0 0;color:#c9d1d9}
nav{font-size:13px;margin:10px 0 0}nav a{color:#9ecbff;margin-right:12px}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:14px 18px;margin:16px 0}
h2{font-size:17px;margin:0 0 8px}h3{font-size:14px;margin:14px 0 4px}
table{border-collapse:collapse;width:100%;font-size:13px}
table.evidence{table-layout:fixed}table.evidence td{overflow-wrap:break-word}
table.evidence td:nth-child(1){overflow-wrap:normal}
table.evidence th:nth-child(1){width:112px}table.evidence th:nth-child(2){width:24%}
table.evidence th:nth-child(3){width:15%}table.evidence th:nth-child(5){width:20%}
table.evidence td:nth-child(5){overflow-wrap:anywhere}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eceff2;vertical-align:top}
th{color:#57606a;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;
color:#fff;background:#b26a00}
.badge.SUCCEEDED{background:#eceff2;color:#1d2329;border:1px solid #c7d0d9}
.badge.FAILED{background:#c62828}
.verdict{display:inline-block;margin:8px 0 0;padding:4px 12px;border-radius:5px;font-size:17px;
font-weight:700;color:#fff;background:#2e7d32}
.verdict.CRITICAL{background:#c62828}.verdict.ERROR{background:#e65100}
.verdict.WARNING{background:#f9a825;color:#1d2329}.verdict.INFO{background:#1565c0}
.verdict.incomplete{background:#6a737d}
header .status{margin-left:10px;font-size:13px;color:#c9d1d9}
header .status b{color:#fff}
.new{color:#c62828;font-weight:600}.seen{color:#57606a}
svg .current-run{fill:#fff4c2}svg .tick.current{font-weight:700;fill:#1d2329}
svg .time-label{font-size:10px;fill:#1d2329}
svg .bar.batches,i.batches{fill:#90a4ae;background:#90a4ae}
svg .bar.batches.status-FAILED{fill:#ef9a9a}
svg .clean-run{fill:#2e7d32}
.sev{font-weight:600}.sev.CRITICAL{color:#c62828}.sev.ERROR{color:#e65100}
.sev.WARNING{color:#a07800}.sev.INFO{color:#1565c0}
.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}
.note{color:#57606a;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:8px}
.grid figure{margin:0;border:1px solid #eceff2;border-radius:4px;padding:4px}
figure figcaption{font-size:12px;color:#57606a;margin:2px 4px}
details{margin:6px 0}summary{cursor:pointer;color:#1d2329;font-weight:600}
table.facts td:first-child{color:#57606a;width:150px}
code{font-size:12px;background:#f0f2f4;padding:0 3px;border-radius:3px}
tr:target{background:#fff4c2}
.legend span{margin-right:14px;font-size:12px;white-space:nowrap}
pre.rule{white-space:pre-wrap;font-size:12px;background:#f6f6f6;padding:8px;max-width:100ch}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
svg.chart{display:block;max-width:100%;height:auto}
svg .axis{stroke:#8c959f;stroke-width:1}
svg .tick,svg .lane-label,svg .span-label{font-size:10px;fill:#57606a}
svg .span-label.inside{fill:#fff}
svg .axis-label{font-size:11px;fill:#57606a}
svg .label{font-size:12px;fill:#1d2329}svg .value{font-size:11px;fill:#57606a}
svg .log{fill:#f0f4f8;stroke:#c7d0d9}
.sev-CRITICAL,i.sev-CRITICAL{fill:#c62828;stroke:#c62828;background:#c62828}
.sev-ERROR,i.sev-ERROR{fill:#ef6c00;stroke:#ef6c00;background:#ef6c00}
.sev-WARNING,i.sev-WARNING{fill:#f9a825;stroke:#f9a825;background:#f9a825}
.sev-INFO,i.sev-INFO{fill:#1e88e5;stroke:#1e88e5;background:#1e88e5}
svg .offender{fill:#6a737d}
svg .drop{stroke-width:1;stroke-dasharray:2 2;opacity:.7}
svg .epoch.status-clean,i.status-clean{fill:#a5d6a7;background:#a5d6a7}
svg .epoch.status-benign,i.status-benign{fill:#ffe082;background:#ffe082}
svg .epoch.status-violated,i.status-violated{fill:#ef9a9a;background:#ef9a9a}
.kind-COMMIT{fill:#90a4ae;background:#90a4ae}.kind-ABORT{fill:#8e24aa;background:#8e24aa}
.kind-UNKNOWN{fill:#6d4c41;background:#6d4c41}.kind-OPEN{fill:#fb8c00;background:#fb8c00}.kind-HANGING{fill:#d32f2f;background:#d32f2f}
svg .seq-line{fill:none;stroke:#8c959f;stroke-width:1;stroke-dasharray:3 3}
svg .batch{stroke:#1d2329;stroke-width:2}svg .point{fill:#1d2329}
svg .gap-bar{stroke-width:4;opacity:.45}
svg .dup-arc{fill:none;stroke-width:1.5;stroke-dasharray:4 2}
svg .cross{fill:none;stroke-width:3}svg .hollow{fill:#fff;stroke-width:2}
svg .obs-band{fill:#90caf9;opacity:.35}svg .obs-line{fill:none;stroke:#1565c0;stroke-width:1.5}
svg .obs{fill:#1565c0}
svg .regress{stroke-width:1.5;stroke-dasharray:4 3}
svg .recovered{stroke:#2e7d32;stroke-dasharray:2 3}i.recovered{background:#2e7d32}
svg .log-end{stroke-dasharray:6 3}
.error-window{fill:#9e9e9e;opacity:.45;background:#c8c8c8}
svg .commit-step{fill:none;stroke:#455a64;stroke-width:1.5}
svg .commit-range{stroke:#455a64;stroke-width:1}
.commit-PLAIN,i.commit-PLAIN{fill:#455a64;background:#455a64}
.commit-TRANSACTIONAL,i.commit-TRANSACTIONAL{fill:#2e7d32;background:#2e7d32}
svg .commit-ABORTED{fill:#fff;stroke:#8e24aa;stroke-width:2}i.commit-ABORTED{background:#8e24aa}
svg .commit-PENDING{fill:#fff;stroke:#fb8c00;stroke-width:2}i.commit-PENDING{background:#fb8c00}
svg .commit-SKIPPED{fill:#fff;stroke:#00838f;stroke-width:2}i.commit-SKIPPED{background:#00838f}
"""


def _table(
    headers: list[str] | None, rows: list[list[str]], numeric: set[int] | None = None
) -> str:
    numeric = numeric or set()
    head = el(
        "tr",
        None,
        *[
            el("th", {"class": "n" if i in numeric else None}, esc(h))
            for i, h in enumerate(headers or [])
        ],
    )
    body = [
        el(
            "tr",
            None,
            *[el("td", {"class": "n" if i in numeric else None}, c) for i, c in enumerate(r)],
        )
        for r in rows
    ]
    if headers is None:
        return el("table", {"class": "facts"}, el("tbody", None, *body))
    return el("table", None, el("thead", None, head), el("tbody", None, *body))


def _sev(severity: str) -> str:
    return el("span", {"class": f"sev {severity}"}, esc(severity))


def _legend(items: list[tuple[str, str]]) -> str:
    return el(
        "p",
        {"class": "legend"},
        *[el("span", None, el("i", {"class": cls}), esc(text)) for cls, text in items],
    )


def _when(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _details(summary: str, body: str, is_open: bool = False) -> str:
    return el("details", {"open": "open" if is_open else None}, el("summary", None, summary), body)


def _input_value(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _run_section(data: ReportData) -> str:
    o = data.overview
    duration = (
        f" ({(o.finished_at - o.started_at).total_seconds():.0f} s)"
        if o.started_at and o.finished_at
        else ""
    )
    c = o.coverage
    share = f"{c.share:.1%}" if c.share is not None else "— (nothing audited)"
    failed = [ch for ch in o.checks if not ch.ok]
    facts = [
        [
            "status",
            el("span", {"class": f"badge status {esc(o.status)}"}, esc(o.status))
            + (f" {esc(o.error)}" if o.error else ""),
        ],
        ["started, finished", esc(f"{_when(o.started_at)}, {_when(o.finished_at)}{duration}")],
        ["writer, versions", esc(f"{o.writer}; {o.versions}")],
        [
            "batches",
            esc(
                f"read {fmt_int(o.batches_read)} = audited {fmt_int(o.batches_audited)} "
                f"+ quarantined {fmt_int(o.batches_quarantined)}"
                + (
                    f" + skipped {fmt_int(o.batches_skipped)} (audited by the seeding run)"
                    if o.batches_skipped
                    else ""
                )
            ),
        ],
        [
            "findings",
            " ".join(f"{_sev(s)} {fmt_int(n)}" for s, n in o.findings_by_severity.items()),
        ],
        [
            "counts",
            el(
                "span",
                {"class": "bad"},
                esc(f"✗ {len(failed)} of {len(o.checks)} do not reconcile"),
            )
            if failed
            else el("span", {"class": "ok"}, esc(f"✓ all {len(o.checks)} checks reconcile")),
        ],
        [
            "coverage",
            esc(
                f"{share} of {fmt_int(c.batches)} audited batches carry a producer id, over "
                f"{fmt_int(c.partitions)} partitions ({c.partitions_below_full} below 100%)"
            ),
        ],
    ]
    checks = [
        [
            el("span", {"class": "ok" if ch.ok else "bad"}, "✓" if ch.ok else "✗"),
            esc(ch.statement),
            esc(fmt_int(ch.expected)),
            esc(fmt_int(ch.actual)),
        ]
        for ch in o.checks
    ]
    lowest = [[esc(f"{t}-{p}"), esc(fmt_int(b)), esc(f"{cov:.1%}")] for t, p, b, cov in c.lowest]
    inputs = [[esc(k), el("code", None, esc(_input_value(v)))] for k, v in sorted(o.inputs.items())]
    config = [[el("code", None, esc(k)), el("code", None, esc(v))] for k, v in o.configuration]
    return el(
        "section",
        {"id": "run"},
        el("h2", None, "The run"),
        _table(None, facts),
        _details(
            "Counts that must reconcile",
            _table(["", "check", "recorded", "in the tables"], checks, {2, 3}),
            is_open=bool(failed),
        ),
        _details(
            "Partitions with the lowest coverage (a clean result there proves little)",
            _table(["partition", "batches", "coverage"], lowest, {1, 2}),
        )
        if lowest
        else "",
        _details("Inputs", _table(["input", "value"], inputs)),
        _details("Configuration", _table(["key", "value"], config)),
    )


def _findings_section(data: ReportData) -> str:
    m = data.matrix
    if not m.types:
        return el(
            "section",
            {"id": "findings"},
            el("h2", None, "Findings"),
            el("p", None, "No findings in this run."),
        )
    rows = [
        [
            el("a", {"href": f"#t-{esc(t.finding_type)}"}, esc(t.finding_type)),
            esc(t.meaning),
            *[esc(fmt_int(t.counts.get(s, 0))) if t.counts.get(s) else "" for s in m.severities],
            esc(fmt_int(t.total)),
        ]
        for t in m.types
    ]
    h = data.history
    compared = h is not None and bool(h.compared)
    when = [
        [
            el("a", {"href": f"#t-{esc(t.finding_type)}"}, esc(t.finding_type)),
            esc(fmt_int(t.total)),
            esc(fmt_moment(t.first_ms)),
            esc(fmt_moment(t.last_ms)),
            *(
                [
                    esc(fmt_int(h.new_by_type.get(t.finding_type, 0))),
                    esc(fmt_int(h.seen_by_type.get(t.finding_type, 0))),
                ]
                if compared
                else []
            ),
        ]
        for t in m.types
    ]
    when_headers = ["type", "findings", "first batch time", "last batch time"]
    if compared:
        when_headers += ["new", "seen before"]
    return el(
        "section",
        {"id": "findings"},
        el("h2", None, f"Findings by type and severity ({fmt_int(m.total)})"),
        _legend([(f"sev-{s}", s) for s in m.severities]),
        findings_chart(m),
        el("h3", None, "Since when: the batch times of each type's findings"),
        _table(when_headers, when, {1, 4, 5}),
        _details(
            "The same as a table, with what each type means",
            _table(["type", "meaning", *m.severities, "total"], rows, {2, 3, 4, 5, 6}),
        ),
    )


def _offenders_section(data: ReportData) -> str:
    o = data.offenders
    parts = [el("h2", None, "Top offenders")]
    if not o.producers and not o.partitions:
        parts.append(el("p", None, "No producer or partition has findings."))
    if o.producers:
        parts += [
            el("h3", None, "Producers (over all their epochs and partitions)"),
            offenders_chart(o.producers, "producers"),
            _table(
                ["producer", "findings", "where, what"],
                [[esc(p.label), esc(fmt_int(p.findings)), esc(p.note)] for p in o.producers],
                {1},
            ),
        ]
    if o.partitions:
        parts += [el("h3", None, "Partitions"), offenders_chart(o.partitions, "partitions")]
    return el("section", {"id": "offenders"}, *parts)


def _partitions_section(data: ReportData) -> str:
    t = data.timelines
    parts = [
        el("h2", None, "Partitions: the log, offsets left to right"),
        _legend(
            [
                ("sev-CRITICAL", "finding (colour: severity)"),
                ("status-violated", "epoch violated"),
                ("status-benign", "epoch benign"),
                ("status-clean", "epoch clean"),
                ("kind-ABORT", "aborted"),
                ("kind-OPEN", "open"),
                ("kind-HANGING", "hanging"),
            ]
        ),
    ]
    if not t.timelines:
        parts.append(el("p", None, "No partition was audited."))
    for tl in t.timelines:
        cov = f"{tl.coverage:.0%}" if tl.coverage is not None else "—"
        cut = [
            f"{n} {what} not drawn"
            for n, what in (
                (tl.omitted_epochs, "epoch(s)"),
                (tl.omitted_transactions, "transaction(s)"),
                (tl.omitted_marks, "finding(s)"),
            )
            if n
        ]
        parts.append(
            el(
                "figure",
                {"id": tl.anchor},
                el(
                    "figcaption",
                    None,
                    esc(
                        f"{tl.topic}-{tl.partition}: offsets {tl.first_offset}–{tl.last_offset}"
                        + (
                            f" ({fmt_range(tl.first_ms, tl.last_ms)})"
                            if tl.first_ms is not None
                            else ""
                        )
                        + f", {fmt_int(tl.batches)} batches, coverage {cov}, "
                        f"{fmt_int(tl.findings)} findings" + (f" ({'; '.join(cut)})" if cut else "")
                    ),
                ),
                partition_chart(tl),
            )
        )
    return el("section", {"id": "partitions"}, *parts)


def _epochs_section(data: ReportData) -> str:
    e = data.epochs
    parts = [
        el("h2", None, "Producer epochs: sequence against offset"),
        el(
            "p",
            {"class": "note"},
            "Known batches (first and last of the epoch, and those the "
            "findings name) joined by a dashed line: the batches between them are not stored. "
            "Gap: the missing sequences as a bar. Duplicate: an arc from the batch written first. "
            "Fenced: a cross. Acknowledged but lost: a hollow diamond.",
        ),
    ]
    if not e.plots:
        parts.append(el("p", None, "Every producer epoch is clean."))
    figures = []
    for p in e.plots:
        cut = f"; {p.omitted_marks} finding(s) not drawn" if p.omitted_marks else ""
        off = f"; {p.unplaced} without a position in the log" if p.unplaced else ""
        figures.append(
            el(
                "figure",
                {"id": p.anchor},
                el(
                    "figcaption",
                    None,
                    esc(
                        f"{p.topic}-{p.partition} producer {p.producer_id} epoch "
                        f"{p.producer_epoch}: {p.status}, {p.findings} finding(s)"
                        + (f", {fmt_range(p.first_ms, p.last_ms)}" if p.first_ms else "")
                        + f"{cut}{off}"
                    ),
                ),
                epoch_chart(p),
            )
        )
    parts.append(el("div", {"class": "grid"}, *figures))
    return el("section", {"id": "epochs"}, *parts)


def _transactions_section(data: ReportData) -> str:
    a = data.transactions
    parts = [
        el("h2", None, f"Transactions ({fmt_int(a.total)})"),
        el("p", None, esc(", ".join(f"{k.lower()} {fmt_int(n)}" for k, n in a.totals.items()))),
    ]
    if a.total:
        parts += [_legend([(f"kind-{k}", k.lower()) for k in a.totals]), transactions_chart(a)]
    else:
        parts.append(el("p", None, "No transactional batches in this run."))
    return el("section", {"id": "transactions"}, *parts)


def _list_offsets_section(data: ReportData) -> str:
    v = data.list_offsets
    parts = [el("h2", None, "ListOffsets observations")]
    if not v.has_content:
        parts.append(el("p", None, esc(f"Nothing to draw: {v.observations_note}.")))
        return el("section", {"id": "list-offsets"}, *parts)
    parts.append(
        el(
            "p",
            {"class": "note"},
            esc(
                f"{v.regressions_total} regression or missing-data finding(s), "
                f"{v.errors_total} kind(s) of failed answer; {v.observations_note}."
            ),
        )
    )
    parts.append(
        _legend(
            [
                ("sev-CRITICAL", "regression, colour: severity (dashed: from the earlier answer)"),
                ("recovered", "back at the earlier offset"),
                ("error-window", "failed answers (retriable)"),
            ]
        )
    )
    for s in v.series:
        start, end = s.time_domain
        caption = f"{s.topic}-{s.partition}, {fmt_time(start)} to {fmt_time(end)} UTC: " + (
            ", ".join(f"{line.spec} {line.isolation or ''}".strip() for line in s.lines)
            or "observations not available, the findings' evidence only"
        )
        parts.append(
            el(
                "figure",
                None,
                el("figcaption", None, esc(caption)),
                list_offsets_chart(s),
            )
        )
    return el("section", {"id": "list-offsets"}, *parts)


def _count(n: int, noun: str) -> str:
    """A count and its noun: 1 commit, 2 commits."""
    return f"{fmt_int(n)} {noun}{'' if n == 1 else 's'}"


def _commit_counts(counts: dict[tuple[str, str], int]) -> str:
    """Commits by kind, then outcome: "plain: applied 4; transactional: applied 3, aborted 1"."""
    by_kind = []
    for kind in [*KINDS, *sorted({k for k, _ in counts} - set(KINDS))]:
        outcomes = [*OUTCOMES, *sorted({o for k, o in counts if k == kind} - set(OUTCOMES))]
        said = [
            f"{o.lower()} {fmt_int(counts[kind, o])}" for o in outcomes if counts.get((kind, o))
        ]
        if said:
            by_kind.append(f"{kind.lower()}: {', '.join(said)}")
    return esc("; ".join(by_kind)) or "—"


def _findings_by_type(by_type: dict[str, int]) -> str:
    return ", ".join(
        el("a", {"href": f"#t-{esc(t)}"}, esc(t)) + f" {esc(fmt_int(n))}"
        for t, n in by_type.items()
    )


def _group_table(g: ConsumerGroup) -> str:
    """Per input partition drawn, then the whole group: commits, last offset, findings."""
    rows = []
    for p in g.partitions:
        last = "—"
        if p.last_deleted:
            last = "deleted"
        elif p.last_offset is not None:
            last = fmt_int(p.last_offset)
        if p.last_ms is not None:
            last += f" ({fmt_moment(p.last_ms)})"
        rows.append(
            [
                el("a", {"href": f"#{p.anchor}"}, esc(f"{p.topic}-{p.partition}")),
                esc(fmt_int(p.commits)),
                _commit_counts(p.counts),
                esc(last),
                _findings_by_type(p.findings_by_type),
            ]
        )
    shown = f"the group: {_count(g.total_partitions, 'partition')}" + (
        f" ({g.omitted_partitions:,} not above)" if g.omitted_partitions else ""
    )
    rows.append(
        [
            el("b", None, esc(shown)),
            esc(fmt_int(g.commits)),
            _commit_counts(g.counts),
            "",
            _findings_by_type(g.findings_by_type),
        ]
    )
    headers = ["partition", "commits", "by kind and outcome", "last committed offset", "findings"]
    return _table(headers, rows, {1})


def _groups_section(data: ReportData) -> str:
    c = data.consumer_groups
    parts = [el("h2", None, f"Consumer groups ({fmt_int(c.total_groups)})")]
    if not c.total_groups:
        parts.append(el("p", None, "No consumer group offsets in this run."))
        return el("section", {"id": "consumer-groups"}, *parts)
    shown = f"the {len(c.groups)} with the most severe findings" if c.omitted else "every group"
    parts += [
        el(
            "p",
            {"class": "note"},
            esc(
                f"The committed offsets the group coordinator replayed from __consumer_offsets, "
                f"{shown}: per input partition, the committed offset over time (a step per "
                "interval, its last commit; a whisker over the offsets committed within it)."
            ),
        ),
        _legend(
            [
                ("commit-PLAIN", "plain commit (applied)"),
                ("commit-TRANSACTIONAL", "transactional commit (applied)"),
                ("commit-SKIPPED", "skipped: committed, a later record applied first"),
                ("commit-ABORTED", "aborted"),
                ("commit-PENDING", "pending at the export's end"),
                (
                    "sev-CRITICAL",
                    "finding, colour: severity (dashed: down from the offset it replaced)",
                ),
            ]
        ),
    ]
    for g in c.groups:
        findings = " ".join(
            f"{_sev(s)} {fmt_int(n)}" for s, n in g.findings_by_severity.items() if n
        )
        figures = []
        for p in g.partitions:
            cut = f"; {p.omitted_marks} finding(s) not drawn" if p.omitted_marks else ""
            figures.append(
                el(
                    "figure",
                    {"id": p.anchor},
                    el(
                        "figcaption",
                        None,
                        esc(
                            f"{p.topic}-{p.partition}: {_count(p.commits, 'commit')}, "
                            f"{_count(p.findings, 'finding')}{cut}"
                        ),
                    ),
                    group_chart(g, p)
                    if p.points or any(m.x is not None for m in p.marks)
                    else el("p", {"class": "note"}, "Nothing to draw: no offset was committed."),
                )
            )
        parts.append(
            el(
                "div",
                {"id": g.anchor},
                el("h3", None, esc(f"{g.group_id}"), " ", el("span", {"class": "note"}, esc(
                    f"(__consumer_offsets-{g.coordinator_partition}, "
                    f"{_count(g.total_partitions, 'input partition')}, "
                    f"{_count(g.commits, 'commit')})"
                ))),
                el("p", None, findings or "No findings."),
                _group_table(g),
                el("div", {"class": "grid"}, *figures),
            )
        )  # fmt: skip
    return el("section", {"id": "consumer-groups"}, *parts)


def _evidence_row(f: FindingItem, rules: dict[str, str]) -> str:
    """One finding: its batch, the earlier batch it conflicts with, and everything it proves."""
    earlier = esc(f.earlier) if f.earlier else ""
    if f.earlier and f.earlier_href:
        earlier = el("a", {"href": "#" + f.earlier_href}, earlier)
    expected = (
        f"<br>expected sequence {f.expected_sequence}" if f.expected_sequence is not None else ""
    )
    evidence = "".join(f"<br>{esc(k)} = {esc(v)}" for k, v in f.evidence.items())
    kafka_error = f"<br><code>{_label(f.kafka_error)}</code>" if f.kafka_error else ""
    source = f"<br>{esc(f.source)}" if f.source else ""
    seen = ""
    if f.seen_before is not None:
        seen = "<br>" + (
            el("span", {"class": "seen"}, "seen before")
            if f.seen_before
            else el("span", {"class": "new"}, "new in this run")
        )
    href = rule_href(f.spec_ref, rules)
    rule = el("code", None, esc(f.spec_ref))
    if href:
        rule = el("a", {"href": href}, rule)
    time = f"<br>batch time {esc(fmt_moment(f.batch_ms))}" if f.batch_ms is not None else ""
    cells = [
        _sev(f.severity) + (f"<br>{_label(f.cause)}" if f.cause else "") + seen,
        esc(f.batch) + time + "<br>" + esc(f.producer) + expected,
        earlier,
        esc(f.detail) + evidence + kafka_error,
        rule + source,
    ]
    return el("tr", {"id": f.anchor}, *[el("td", None, c) for c in cells])


def _label(text: str) -> str:
    """An UPPER_SNAKE label that wraps only after its underscores (LEADER_/CHANGE_/TRANSIENT)."""
    return "_<wbr>".join(esc(part) for part in text.split("_"))


def _verdict(data: ReportData) -> str:
    """The worst severity found and its count, coloured by it; the run's state next to it."""
    o = data.overview
    worst = next((s for s in SEVERITY_ORDER if o.findings_by_severity.get(s)), None)
    if worst is None and o.status != SUCCEEDED:
        # Nothing found in a run that did not audit all it was given is no clean bill.
        text, css = "No findings in what was audited", "verdict incomplete"
    elif worst is None:
        text, css = "No findings", "verdict clean"
    else:
        n = o.findings_by_severity[worst]
        noun = {"CRITICAL": "violation", "ERROR": "violation", "WARNING": "warning"}.get(
            worst, "finding"
        )
        text = f"{worst}: {fmt_int(n)} {noun}{'s' if n != 1 else ''}"
        others = [f"{fmt_int(o.findings_by_severity[s])} {s}" for s in SEVERITY_ORDER
                  if s != worst and o.findings_by_severity.get(s)]  # fmt: skip
        if others:
            text += f" (and {', '.join(others)})"
        css = f"verdict {worst}"
    return el(
        "p",
        None,
        el("span", {"id": "verdict", "class": css}, esc(text)),
        el("span", {"class": "status"}, "run status ", el("b", None, esc(o.status))),
    )


def _history_section(data: ReportData) -> str:
    h = data.history
    parts = [el("h2", None, "History: the runs of this warehouse")]
    if h is None or not h.runs:
        parts.append(el("p", None, "This run is not recorded in audit_runs."))
        return el("section", {"id": "history"}, *parts)
    shown = f"the latest {len(h.runs)} of {fmt_int(h.total_runs)}" if h.omitted else "all"
    if h.compared:
        compared = (
            f"Of this run's findings, {fmt_int(h.new_total)} are new and {fmt_int(h.seen_total)} "
            f"were reported before (same finding id) by the {len(h.compared)} earlier finished "
            "run(s) shown."
        )
    else:
        compared = "No earlier finished run to compare this run's findings with."
    parts += [
        el(
            "p",
            {"class": "note"},
            esc(f"Runs up to this one ({shown}), oldest left; this run outlined. {compared}"),
        ),
        _legend([(f"sev-{s}", s) for s in SEVERITY_ORDER] + [("batches", "batches audited")]),
        history_chart(h),
    ]
    rows = [
        [
            esc(r.run_id) + (" (this run)" if r.is_current else ""),
            esc(r.status),
            esc(fmt_moment(r.started_ms)),
            esc(f"{r.duration_s:,.0f} s"),
            esc(fmt_int(r.batches_audited)),
            *[esc(fmt_int(r.findings.get(s, 0))) for s in SEVERITY_ORDER],
        ]
        for r in reversed(h.runs)
    ]
    parts.append(
        _details(
            "The same as a table, newest first",
            _table(
                ["run", "status", "started", "duration", "batches audited", *SEVERITY_ORDER],
                rows,
                {3, 4, 5, 6, 7, 8},
            ),
        )
    )
    return el("section", {"id": "history"}, *parts)


def _rules_section(rules: dict[str, str]) -> str:
    """The rules the findings cite, as docs/rules.md states them (Markdown shown as text)."""
    parts = [
        el(
            "div",
            {"id": rule_id(spec_ref), "class": "rule"},
            el("h3", None, el("code", None, esc(spec_ref))),
            el("pre", {"class": "rule"}, esc(text)),
        )
        for spec_ref, text in rules.items()
    ]
    return el(
        "section",
        {"id": "rules"},
        el("h2", None, "The rules these findings cite"),
        *parts or [el("p", None, "No rule is cited: no finding is shown.")],
    )


def _group(group: FindingGroup, rules: dict[str, str]) -> str:
    shown = (
        f"the first {len(group.items)} of {fmt_int(group.total)}"
        if group.omitted
        else f"all {fmt_int(group.total)}"
    )
    headers = ["severity", "batch (evidence)", "earlier batch", "detail", "rule, source"]
    return el(
        "div",
        {"id": f"t-{group.finding_type}"},
        el("h3", None, esc(f"{group.finding_type}: {shown}")),
        el("p", {"class": "note"}, esc(group.meaning)),
        el(
            "table",
            {"class": "evidence"},
            el("thead", None, el("tr", None, *[el("th", None, h) for h in headers])),
            el("tbody", None, *[_evidence_row(f, rules) for f in group.items]),
        ),
    )


def render_report(data: ReportData) -> str:
    """The whole report as one HTML document.

    Args:
        data: what `collect_report_data` gathered.

    Returns:
        HTML with inline CSS and SVG: it opens anywhere, offline.
    """
    data = relink(data)
    cut = left_out(data)
    # The text of every rule the findings shown cite: the report is read where the rules
    # document is not (attached to a ticket, on another machine).
    rules = rule_sections(f.spec_ref for g in data.groups for f in g.items)
    sections = [
        _run_section(data),
        _findings_section(data),
        _history_section(data),
        _partitions_section(data),
        _epochs_section(data),
        _transactions_section(data),
        _groups_section(data),
        _list_offsets_section(data),
        _offenders_section(data),
        el(
            "section",
            {"id": "evidence"},
            el("h2", None, "Findings and their evidence"),
            *[_group(g, rules) for g in data.groups] or [el("p", None, "No findings.")],
        ),
        _rules_section(rules),
        el(
            "section",
            {"id": "left-out"},
            el("h2", None, "Left out of this report"),
            el("ul", None, *[el("li", None, esc(line)) for line in cut])
            if cut
            else el("p", None, "Nothing: every finding, partition and epoch is shown."),
        ),
    ]
    nav = el(
        "nav",
        None,
        *[
            el("a", {"href": f"#{a}"}, t)
            for a, t in (
                ("run", "run"),
                ("findings", "findings"),
                ("history", "history"),
                ("partitions", "partitions"),
                ("epochs", "producer epochs"),
                ("transactions", "transactions"),
                ("consumer-groups", "consumer groups"),
                ("list-offsets", "ListOffsets"),
                ("offenders", "top offenders"),
                ("evidence", "evidence"),
                ("rules", "rules"),
                ("left-out", "left out"),
            )
        ],
    )
    o = data.overview
    header = el(
        "header",
        None,
        el("h1", None, esc(f"eos-audit run {o.run_id}")),
        _verdict(data),
        el(
            "p",
            None,
            esc(
                f"{fmt_int(o.findings_total)} findings; report made "
                f"{fmt_time(data.generated_ms)} UTC"
            ),
        ),
        nav,
    )
    return (
        "<!DOCTYPE html>\n"
        + el(
            "html",
            {"lang": "en"},
            el(
                "head",
                None,
                '<meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                el("title", None, esc(f"eos-audit run {o.run_id}")),
                el("style", None, CSS),
            ),
            el("body", None, header, el("main", None, *sections)),
        )
        + "\n"
    )
