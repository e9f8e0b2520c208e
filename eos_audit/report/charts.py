"""One function per chart: its data structure in, a static SVG string out.

Every mark a reader can act on is a link to the finding's evidence row and carries a tooltip;
colours come from the page's CSS classes (severity, status, outcome), so the SVG stays small.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from eos_audit.findings import MARK_DUPLICATE, MARK_FENCED, MARK_GAP, MARK_LOST, SEVERITY_ORDER
from eos_audit.report.findings import FindingsMatrix, Offender
from eos_audit.report.groups import APPLIED, ConsumerGroup, GroupPartition
from eos_audit.report.history import History
from eos_audit.report.list_offsets import OffsetSeries
from eos_audit.report.partitions import PartitionTimeline
from eos_audit.report.producers import EpochPlot
from eos_audit.report.svg import (
    LABEL_GAP,
    TEXT_SIZES,
    Label,
    Scale,
    axis_room,
    axis_x,
    axis_y,
    el,
    esc,
    every_kth,
    fit_text,
    fmt_int,
    fmt_moment,
    fmt_time,
    link,
    nice_ticks,
    padded,
    placed,
    svg,
    text_width,
    time_axis_label,
    time_ticks,
    title,
)
from eos_audit.report.transactions import KINDS, TransactionActivity

WIDTH = 860
# The bar charts' label column: as wide as its longest label, within these bounds; a longer
# label (a topic name can have 249 characters) is shortened in the middle, whole in its tooltip.
LABEL_COLUMN = (200, 344)


def _bars(rows: list[tuple[str, str | None, list[tuple[int, str, str]]]], label: str) -> str:
    """Horizontal stacked bars: per row a label, a link and its (count, CSS class, tip) segments."""
    height = 22
    totals = [sum(n for n, _, _ in segments) for _, _, segments in rows]
    size = TEXT_SIZES["label"]
    # Labels end 8 px left of the bars and start at least 8 px from the chart's edge.
    texts = [fit_text(text, LABEL_COLUMN[1] - 16, size) for text, _, _ in rows]
    widest = max((text_width(t, size) for t in texts), default=0)
    left = min(max(LABEL_COLUMN[0], widest + 16), LABEL_COLUMN[1])
    # Room right of the longest bar for its total.
    value_room = max((text_width(fmt_int(t), TEXT_SIZES["value"]) for t in totals), default=0)
    right = WIDTH - max(50, value_room + 12)
    x = Scale(0, max(totals, default=1) or 1, left, right)
    parts = []
    for i, ((text, href, segments), total) in enumerate(zip(rows, totals, strict=True)):
        y = 6 + i * height
        whole = text if texts[i] != text else None
        parts.append(Label(texts[i], left - 8, y + 14, "label", "end", whole).svg())
        start = 0
        for n, css_class, tip in segments:
            if not n:
                continue
            width = max(x(start + n) - x(start), 1)
            attrs = {"x": x(start), "y": y + 3, "width": width, "height": 15, "class": css_class}
            parts.append(link(href, el("rect", attrs, title(tip))))
            start += n
        parts.append(
            el("text", {"x": x(start) + 6, "y": y + 14, "class": "value"}, esc(fmt_int(total)))
        )
    return svg(WIDTH, 12 + height * len(rows), label, *parts)


def findings_chart(matrix: FindingsMatrix) -> str:
    """Horizontal bars per finding type, split by severity; each links to the type's findings."""
    rows = [
        (
            t.finding_type,
            "t-" + t.finding_type,
            [
                (
                    t.counts.get(s, 0),
                    f"mark bar sev-{s}",
                    f"{t.finding_type}: {t.counts.get(s)} {s}",
                )
                for s in matrix.severities
            ],
        )
        for t in matrix.types
    ]
    return _bars(rows, "findings by type and severity")


def offenders_chart(offenders: list[Offender], what: str) -> str:
    """Horizontal bars: findings per producer or partition (split by severity when known)."""
    rows = []
    for o in offenders:
        tip = f"{o.label}: {o.findings} findings; {o.note}"
        segments = [(n, f"mark bar sev-{s}", tip) for s, n in o.counts.items()] or [
            (o.findings, "mark bar offender", tip)
        ]
        rows.append((o.label, o.href, segments))
    return _bars(rows, f"top {what} by findings")


def partition_chart(tl: PartitionTimeline) -> str:
    """The log, offsets on x: findings on top, then producer epochs and unfinished transactions."""
    left, right, lane = 70, WIDTH - 20, 14
    txn_lanes = max((s.lane for s in tl.transactions), default=-1) + 1
    marks_y = 18
    epochs_y = 36
    txns_y = epochs_y + tl.lanes * lane + (8 if tl.transactions else 0)
    axis_at = txns_y + txn_lanes * lane + 8
    has_times = tl.first_ms is not None or tl.last_ms is not None
    x = Scale(*padded(*tl.domain), left, right)
    parts = []
    if tl.first_offset is not None and tl.last_offset is not None:
        parts.append(
            el(
                "rect",
                {
                    "x": x(tl.first_offset),
                    "y": epochs_y - 6,
                    "width": max(x(tl.last_offset) - x(tl.first_offset), 1),
                    "height": axis_at - epochs_y + 6,
                    "class": "log",
                },
                title(f"audited log: offsets {tl.first_offset}–{tl.last_offset}"),
            )
        )
    parts.append(
        el(
            "text",
            {"x": left - 6, "y": marks_y + 4, "class": "lane-label", "text-anchor": "end"},
            "findings",
        )
    )
    if tl.epochs:
        parts.append(
            el(
                "text",
                {"x": left - 6, "y": epochs_y + 9, "class": "lane-label", "text-anchor": "end"},
                "epochs",
            )
        )
    if tl.transactions:
        parts.append(
            el(
                "text",
                {"x": left - 6, "y": txns_y + 9, "class": "lane-label", "text-anchor": "end"},
                "txns",
            )
        )
    for s in tl.epochs:
        parts.append(
            el(
                "rect",
                {
                    "x": x(s.start),
                    "y": epochs_y + s.lane * lane,
                    "width": max(x(s.end) - x(s.start), 2),
                    "height": lane - 3,
                    "class": f"span epoch status-{s.kind}",
                },
                title(f"{s.label}: offsets {s.start}–{s.end}, {s.kind}"),
            )
        )
    for s in tl.transactions:
        parts.append(
            el(
                "rect",
                {
                    "x": x(s.start),
                    "y": txns_y + s.lane * lane,
                    "width": max(x(s.end) - x(s.start), 2),
                    "height": lane - 4,
                    "class": f"span txn kind-{s.kind}",
                },
                title(f"{s.label}: offsets {s.start}–{s.end}"),
            )
        )
    for m in tl.marks:
        cx = x(m.start)
        where = f"offsets {m.start}–{m.end}" if m.end != m.start else f"offset {m.start}"
        mark = el(
            "g",
            {"class": f"mark finding sev-{m.severity}"},
            el("line", {"x1": cx, "x2": cx, "y1": marks_y + 5, "y2": axis_at, "class": "drop"}),
            el("circle", {"cx": cx, "cy": marks_y, "r": 5}),
            title(
                f"{m.finding_type} ({m.severity}) at {where}"
                + (f", {fmt_moment(m.time_ms)}" if m.time_ms is not None else "")
            ),
        )
        parts.append(link(m.href, mark))
    parts.append(
        axis_x(x, axis_at, nice_ticks(*tl.domain, count=8), fmt_int, "offset", bounds=(0, WIDTH))
    )
    height = axis_at + 36
    if has_times and tl.first_offset is not None and tl.last_offset is not None:
        # The wall-clock time at both ends of the log, so an incident's window maps to offsets.
        # When the log is a small part of the strip the two would overlap: the last goes a row
        # lower.
        times: list[Label] = []
        for offset, ms, anchor in (
            (tl.first_offset, tl.first_ms, "start"),
            (tl.last_offset, tl.last_ms, "end"),
        ):
            if ms is None:
                continue
            text = fmt_moment(ms)
            label = placed(text, x(offset), axis_at + 48, "time-label", (2, WIDTH - 2), anchor)
            label = label or Label(text, 2, axis_at + 48, "time-label", "start")
            if times and times[-1].box.overlaps(label.box, LABEL_GAP):
                label = replace(label, y=label.y + 14)
            times.append(label)
        parts += [t.svg() for t in times]
        height = max(t.y for t in times) + 6 if times else height
    return svg(WIDTH, height, f"timeline of {tl.topic}-{tl.partition}", *parts)


def epoch_chart(plot: EpochPlot) -> str:
    """Sequence against offset for one producer epoch, with its findings marked."""
    width, height, top, bottom = 430, 250, 22, 206
    y_ticks = nice_ticks(*plot.y_domain, count=4)
    left = max(64, axis_room(y_ticks, fmt_int))
    x = Scale(*padded(*plot.x_domain), left, width - 14)
    y = Scale(*padded(*plot.y_domain), bottom, top)
    parts = [
        axis_x(x, bottom, nice_ticks(*plot.x_domain, count=4), fmt_int, "offset",
               bounds=(left - 4, width)),
        axis_y(y, left, y_ticks, fmt_int, "sequence"),
    ]  # fmt: skip
    in_log = [p for p in plot.points]
    if len(in_log) > 1:
        path = " ".join(
            f"{x(p.offset):.1f},{y(p.sequence):.1f} {x(p.last_offset):.1f},{y(p.last_sequence):.1f}"
            for p in in_log
        )
        parts.append(el("polyline", {"points": path, "class": "seq-line"}))
    for p in plot.points:
        parts.append(
            el(
                "line",
                {
                    "x1": x(p.offset),
                    "x2": x(p.last_offset),
                    "y1": y(p.sequence),
                    "y2": y(p.last_sequence),
                    "class": f"batch role-{p.role}",
                },
                title(
                    f"{p.role} batch: offsets {p.offset}–{p.last_offset}, "
                    f"sequences {p.sequence}–{p.last_sequence}"
                    + (
                        f", {fmt_moment(plot.first_ms)}"
                        if p.role == "first" and plot.first_ms
                        else ""
                    )
                    + (f", {fmt_moment(plot.last_ms)}" if p.role == "last" and plot.last_ms else "")
                ),
            )
        )
        parts.append(
            el(
                "circle",
                {"cx": x(p.offset), "cy": y(p.sequence), "r": 2.5, "class": f"point role-{p.role}"},
            )
        )
    for m in plot.marks:
        cx, cy = x(m.offset), y(m.sequence)
        tip = title(
            f"{m.finding_type} ({m.severity}) at offset {m.offset}, sequence {m.sequence}"
            + (f", expected {m.expected_sequence}" if m.expected_sequence is not None else "")
            + (
                f", earlier batch at offset {m.previous_offset}"
                if m.previous_offset is not None
                else ""
            )
            + (f", {fmt_moment(m.time_ms)}" if m.time_ms is not None else "")
        )
        shapes = []
        if m.kind == MARK_GAP and m.expected_sequence is not None:
            shapes.append(
                el(
                    "line",
                    {
                        "x1": cx,
                        "x2": cx,
                        "y1": y(m.expected_sequence),
                        "y2": cy,
                        "class": "gap-bar",
                    },
                )
            )
            shapes.append(el("circle", {"cx": cx, "cy": cy, "r": 5}))
        elif m.kind == MARK_DUPLICATE and m.previous_offset is not None:
            px = x(m.previous_offset)
            shapes.append(
                el(
                    "path",
                    {
                        "d": f"M{px:.1f},{cy:.1f} Q{(px + cx) / 2:.1f},{cy - 40:.1f} "
                        f"{cx:.1f},{cy:.1f}",
                        "class": "dup-arc",
                    },
                )
            )
            shapes.append(el("rect", {"x": cx - 5, "y": cy - 5, "width": 10, "height": 10}))
        elif m.kind == MARK_FENCED:
            shapes.append(
                el(
                    "path",
                    {
                        "d": f"M{cx - 6:.1f},{cy - 6:.1f} L{cx + 6:.1f},{cy + 6:.1f} "
                        f"M{cx - 6:.1f},{cy + 6:.1f} L{cx + 6:.1f},{cy - 6:.1f}",
                        "class": "cross",
                    },
                )
            )
        elif m.kind == MARK_LOST:
            shapes.append(
                el(
                    "path",
                    {
                        "d": f"M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} "
                        f"L{cx:.1f},{cy + 7:.1f} L{cx - 7:.1f},{cy:.1f} Z",
                        "class": "hollow",
                    },
                )
            )
        else:
            shapes.append(el("circle", {"cx": cx, "cy": cy, "r": 5}))
        parts.append(
            link(m.href, el("g", {"class": f"mark {m.kind} sev-{m.severity}"}, *shapes, tip))
        )
    label = (
        f"sequence against offset, {plot.topic}-{plot.partition} producer "
        f"{plot.producer_id} epoch {plot.producer_epoch}"
    )
    return svg(width, height, label, *parts, css_class="chart small")


def transactions_chart(activity: TransactionActivity) -> str:
    """Transactions started per interval by outcome, then the unfinished ones as bars in time."""
    right, bars_top, bars_bottom, row = WIDTH - 20, 22, 136, 14
    start, end = activity.start_ms, activity.end_ms
    if start is None or end is None:
        return ""
    spans_top = bars_bottom + 48
    height = spans_top + row * len(activity.spans) + (36 if activity.spans else 0)
    tallest = max((sum(b.counts.values()) for b in activity.buckets), default=1) or 1
    y_ticks = nice_ticks(0, tallest, 3)
    left = max(70, axis_room(y_ticks, fmt_int))
    x = Scale(*padded(start, end + activity.bucket_ms, 0.0), left, right)
    y = Scale(0, tallest, bars_bottom, bars_top)
    parts = [
        axis_y(y, left, y_ticks, fmt_int, "started"),
        axis_x(
            x,
            bars_bottom,
            time_ticks(start, end, 6),
            lambda t: fmt_time(t, end - start),
            time_axis_label(start, end),
            bounds=(left - 4, WIDTH),
        ),
    ]
    for b in activity.buckets:
        base = 0
        bx, bw = x(b.start_ms), max(x(b.start_ms + activity.bucket_ms) - x(b.start_ms) - 1, 1)
        for kind in KINDS:
            n = b.counts.get(kind, 0)
            if not n:
                continue
            parts.append(
                el(
                    "rect",
                    {
                        "x": bx,
                        "y": y(base + n),
                        "width": bw,
                        "height": max(y(base) - y(base + n), 1),
                        "class": f"mark bar kind-{kind}",
                    },
                    title(f"{fmt_time(b.start_ms)}: {n} {kind.lower()}"),
                )
            )
            base += n
    for i, s in enumerate(activity.spans):
        sy = spans_top + i * row
        parts.append(
            el(
                "rect",
                {
                    "x": x(s.start_ms),
                    "y": sy,
                    "width": max(x(s.end_ms) - x(s.start_ms), 2),
                    "height": row - 3,
                    "class": f"mark span kind-{s.kind}",
                },
                title(
                    f"{s.label}: {s.kind.lower()}, offsets {s.first_offset}–"
                    f"{s.marker_offset if s.marker_offset is not None else 'open'}, "
                    f"{s.duration_ms} ms"
                ),
            )
        )
        text = f"{s.label} ({s.kind.lower()})"
        parts.append(_span_label(text, x(s.start_ms), x(s.end_ms), sy + 9))
    if activity.spans:
        parts.append(
            el(
                "text",
                {"x": left, "y": spans_top - 8, "class": "axis-label"},
                "transactions that did not commit",
            )
        )
    return svg(WIDTH, height, "transactions over time", *parts)


def _span_label(text: str, x0: float, x1: float, y: float) -> str:
    """A bar's label: beside it, or on it, whole where there is room, else shortened to fit.

    Beside the bar on a side with room for all of it (the left one for a bar in the right half),
    else on the bar (a transaction open across the range), else where there is most room,
    shortened in the middle (whole in its tooltip).
    """
    size = TEXT_SIZES["span-label"]
    room = {"end": x0 - 6, "start": WIDTH - 2 - (x1 + 4), "inside": x1 - x0 - 8}
    prefer = ["end", "start"] if x0 > WIDTH / 2 else ["start", "end"]
    side = next((a for a in [*prefer, "inside"] if text_width(text, size) <= room[a]), None)
    side = side or max(room, key=room.get)
    short = fit_text(text, max(room[side], 0), size)
    tip = text if short != text else None
    if side == "inside":
        return Label(short, x0 + 4, y, "span-label inside", "start", tip).svg()
    return Label(short, x0 - 4 if side == "end" else x1 + 4, y, "span-label", side, tip).svg()


def list_offsets_chart(series: OffsetSeries) -> str:
    """Offsets answered against time: bands of observations, regressions and failed answers."""
    right, top, bottom = WIDTH - 20, 22, 190
    t0, t1 = series.time_domain
    o0, o1 = series.offset_domain
    y_ticks = nice_ticks(o0, o1, 4)
    left = max(80, axis_room(y_ticks, fmt_int))
    x = Scale(*padded(t0, t1), left, right)
    y = Scale(*padded(o0, o1), bottom, top)
    parts = [
        axis_x(
            x,
            bottom,
            time_ticks(t0, t1, 6),
            lambda t: fmt_time(t, t1 - t0),
            time_axis_label(t0, t1),
            bounds=(left - 4, WIDTH),
        ),  # fmt: skip
        axis_y(y, left, y_ticks, fmt_int, "offset"),
    ]
    for e in series.errors:
        parts.append(
            el(
                "rect",
                {
                    "x": x(e.first_ms) - 2,
                    "y": top,
                    "width": max(x(e.last_ms) - x(e.first_ms), 0) + 4,
                    "height": bottom - top,
                    "class": "error-window",
                },
                title(
                    f"{e.observations} {e.spec} answer(s) failed with {e.error} "
                    f"({fmt_time(e.first_ms)}–{fmt_time(e.last_ms)})"
                ),
            )
        )
    for line in series.lines:
        name = f"{line.spec} {line.isolation or ''}".strip()
        if len(line.points) > 1:
            band = [f"{x(p.time_ms):.1f},{y(p.high):.1f}" for p in line.points] + [
                f"{x(p.time_ms):.1f},{y(p.low):.1f}" for p in reversed(line.points)
            ]
            parts.append(el("polygon", {"points": " ".join(band), "class": "obs-band"}))
            parts.append(
                el(
                    "polyline",
                    {
                        "points": " ".join(
                            f"{x(p.time_ms):.1f},{y(p.high):.1f}" for p in line.points
                        ),
                        "class": f"obs-line spec-{line.spec}",
                    },
                )
            )
        for p in line.points:
            parts.append(
                el(
                    "circle",
                    {"cx": x(p.time_ms), "cy": y(p.high), "r": 2.5, "class": "mark obs"},
                    title(
                        f"{name}: {p.low}–{p.high} ({p.observations} observation(s)) "
                        f"from {fmt_time(p.time_ms)}"
                    ),
                )
            )
    for m in series.marks:
        cx, cy = x(m.time_ms), y(m.offset)
        shapes = []
        if m.earlier_time_ms is not None and m.earlier_offset is not None:
            shapes.append(
                el(
                    "line",
                    {
                        "x1": x(m.earlier_time_ms),
                        "y1": y(m.earlier_offset),
                        "x2": cx,
                        "y2": cy,
                        "class": "regress",
                    },
                )
            )
        if m.recovered_ms is not None:
            shapes.append(
                el(
                    "line",
                    {
                        "x1": x(m.recovered_ms),
                        "x2": x(m.recovered_ms),
                        "y1": top,
                        "y2": bottom,
                        "class": "recovered",
                    },
                )
            )
        if m.log_end_offset is not None:
            shapes.append(
                el(
                    "line",
                    {
                        "x1": left,
                        "x2": right,
                        "y1": y(m.log_end_offset),
                        "y2": y(m.log_end_offset),
                        "class": "log-end",
                    },
                )
            )
        shapes.append(
            el(
                "path",
                {
                    "d": f"M{cx:.1f},{cy + 7:.1f} L{cx + 7:.1f},{cy - 5:.1f} "
                    f"L{cx - 7:.1f},{cy - 5:.1f} Z"
                },
            )
        )
        tip = (
            f"{m.finding_type} ({m.severity}{', ' + m.cause if m.cause else ''}): offset "
            f"{m.offset} at {fmt_time(m.time_ms)}"
            + (f" after {m.earlier_offset}" if m.earlier_offset is not None else "")
        )
        parts.append(
            link(
                m.href, el("g", {"class": f"mark regression sev-{m.severity}"}, *shapes, title(tip))
            )
        )
    return svg(WIDTH, 230, f"ListOffsets of {series.topic}-{series.partition}", *parts)


def _run_labels(history: History) -> list[str]:
    """Each run's start (UTC), to the minute; to the second when two neighbours would read alike.

    Two runs side by side that start in the same minute (a rerun) get seconds, all runs alike.
    """
    minutes = [fmt_moment(r.started_ms)[5:16] for r in history.runs]
    if any(a == b for a, b in pairwise(minutes)):
        return [fmt_moment(r.started_ms)[5:19] for r in history.runs]
    return minutes


def _run_label_rows(
    history: History, centres: list[float], y: float, bounds: tuple[float, float]
) -> list[Label]:
    """The runs' labels under their columns, none overlapping another.

    All on one row when they fit, else all on two staggered rows, else every k-th on one row,
    counted from this run's, which is always labelled.
    """
    runs, texts = history.runs, _run_labels(history)
    current = next((i for i, r in enumerate(runs) if r.is_current), len(runs) - 1)

    def row(shift: list[int]) -> list[Label]:
        labels = []
        for i, (r, text, cx) in enumerate(zip(runs, texts, centres, strict=True)):
            css = "tick current" if r.is_current else "tick"
            labels.append(
                placed(text, cx, y + 14 * shift[i], css, bounds)
                or Label(text, cx, y + 14 * shift[i], css, "middle")
            )
        return labels

    def clear(labels: list[Label], step: int) -> bool:
        return not any(
            labels[i].box.overlaps(labels[i + step].box, LABEL_GAP)
            for i in range(len(labels) - step)
        )

    one = row([0] * len(runs))
    if clear(one, 1):
        return one
    two = row([(i - current) % 2 for i in range(len(runs))])
    if clear(two, 2):
        return two
    return every_kth(one, keep=current)


def history_chart(history: History) -> str:
    """Per run, oldest left: findings stacked by severity above, batches audited below.

    Each bar links nowhere (earlier runs have their own reports) but says its numbers; this run's
    column is outlined so the night being read stands out among the others. A column per run,
    whenever the runs started: two runs minutes apart stand side by side, each with its bars and
    its label.
    """
    top, findings_bottom = 22, 128
    batches_top, batches_bottom = 166, 222
    runs = history.runs
    if not runs:
        return ""
    tallest = max((r.findings_total for r in runs), default=0) or 1
    most = max((r.batches_audited for r in runs), default=0) or 1
    findings_ticks, batches_ticks = nice_ticks(0, tallest, 3), nice_ticks(0, most, 2)
    left = max(70, axis_room(findings_ticks, fmt_int), axis_room(batches_ticks, fmt_int))
    # A column per run: wide enough for its label when there is room (a few runs stay narrow
    # bars, not slabs), never below a 2 px bar and a 1 px gap (the chart widens instead).
    label_width = max(text_width(t, TEXT_SIZES["tick"]) for t in _run_labels(history))
    slot = min((WIDTH - 20 - left) / len(runs), max(60, label_width + LABEL_GAP + 1))
    slot = max(slot, 3)
    width = max(WIDTH, round(left + slot * len(runs) + 20))
    right = width - 20
    bar = max(min(slot * 0.6, 36), 2)
    y = Scale(0, tallest, findings_bottom, top)
    yb = Scale(0, most, batches_bottom, batches_top)
    # This run's column first, under everything else.
    current = [i for i, r in enumerate(runs) if r.is_current]
    parts = [
        el(
            "rect",
            {"x": left + slot * i + 1, "y": top - 6, "width": slot - 2,
             "height": batches_bottom - top + 6, "class": "current-run"},
        )
        for i in current
    ]  # fmt: skip
    parts += [
        axis_y(y, left, findings_ticks, fmt_int, "findings"),
        axis_y(yb, left, batches_ticks, fmt_int, "batches audited"),
        el("line", {"x1": left, "x2": right, "y1": findings_bottom, "y2": findings_bottom,
                    "class": "axis"}),
        el("line", {"x1": left, "x2": right, "y1": batches_bottom, "y2": batches_bottom,
                    "class": "axis"}),
    ]  # fmt: skip
    centres = [left + slot * (i + 0.5) for i in range(len(runs))]
    for r, cx in zip(runs, centres, strict=True):
        x0 = cx - bar / 2
        when = fmt_moment(r.started_ms)
        base = 0
        for s in SEVERITY_ORDER:
            n = r.findings.get(s, 0)
            if not n:
                continue
            parts.append(
                el(
                    "rect",
                    {"x": x0, "y": y(base + n), "width": bar,
                     "height": max(y(base) - y(base + n), 1), "class": f"mark bar sev-{s}"},
                    title(f"run {r.run_id} ({when}, {r.status}): {fmt_int(n)} {s}"),
                )
            )  # fmt: skip
            base += n
        if not r.findings_total:
            parts.append(
                el(
                    "circle",
                    {"cx": cx, "cy": findings_bottom - 4, "r": min(3, slot / 2),
                     "class": "mark clean-run"},
                    title(f"run {r.run_id} ({when}, {r.status}): no findings"),
                )
            )  # fmt: skip
        parts.append(
            el(
                "rect",
                {"x": x0, "y": yb(r.batches_audited), "width": bar,
                 "height": max(batches_bottom - yb(r.batches_audited), 1),
                 "class": f"mark bar batches status-{r.status}"},
                title(
                    f"run {r.run_id} ({when}, {r.status}): {fmt_int(r.batches_audited)} batches "
                    f"audited in {r.duration_s:,.0f} s"
                ),
            )
        )  # fmt: skip
    # Right of the batches axis' tick labels, within the chart.
    labels = _run_label_rows(history, centres, batches_bottom + 15, (left - 4, width - 2))
    parts += [label.svg() for label in labels]
    # Below the lowest row of run labels.
    axis_label_y = max(label.y for label in labels) + 16
    parts.append(Label("run start (UTC)", right, axis_label_y, "axis-label", "end").svg())
    return svg(width, axis_label_y + 12, "findings and batches audited per run", *parts)


def _step_path(points: list[tuple[float, float]]) -> str:
    """A step line: each value holds until the next one replaces it."""
    path = []
    for (x0, y0), (x1, _) in pairwise(points):
        path += [f"{x0:.1f},{y0:.1f}", f"{x1:.1f},{y0:.1f}"]
    if points:
        path.append(f"{points[-1][0]:.1f},{points[-1][1]:.1f}")
    return " ".join(path)


def group_chart(group: ConsumerGroup, part: GroupPartition) -> str:
    """A group's committed offset of one input partition against commit time (or record offset).

    The APPLIED commits are a step line with a point per interval (a circle: plain, a square:
    transactional) and a whisker over the offsets committed within it; SKIPPED, ABORTED and
    PENDING transactional commits are hollow marks of their own; findings are marked at the
    commit they are about (a triangle pointing at it), a rewind with a dashed line down from the
    offset it replaced.
    """
    width, height, top, bottom = 430, 250, 22, 196
    o0, o1 = part.offset_domain
    y_ticks = nice_ticks(o0, o1, 4)
    left = max(64, axis_room(y_ticks, fmt_int))
    x0, x1 = group.x_range
    x = Scale(*padded(x0, x1), left, width - 14)
    y = Scale(*padded(o0, o1), bottom, top)
    if group.x_is_time:
        x_axis = axis_x(
            x, bottom, time_ticks(x0, x1, 5), lambda t: fmt_time(t, x1 - x0),
            time_axis_label(x0, x1), bounds=(left - 4, width),
        )  # fmt: skip
    else:
        where = f"__consumer_offsets-{group.coordinator_partition}"
        x_axis = axis_x(
            x, bottom, nice_ticks(x0, x1, 4), fmt_int, f"record offset in {where}",
            bounds=(left - 4, width),
        )  # fmt: skip
    parts = [x_axis, axis_y(y, left, y_ticks, fmt_int, "committed offset")]

    def at(value: int) -> str:
        return fmt_moment(value) if group.x_is_time else f"record {value}"

    applied = [(x(p.x), y(p.offset)) for p in part.applied]
    if applied:
        # The last committed offset holds to the end of what the group's charts show.
        if not part.last_deleted and applied[-1][0] < x(x1):
            applied.append((x(x1), applied[-1][1]))
        if len(applied) > 1:
            parts.append(el("polyline", {"points": _step_path(applied), "class": "commit-step"}))
    for p in part.points:
        cx, cy = x(p.x), y(p.offset)
        many = f"{p.commits} {p.kind.lower()} commits {p.outcome.lower()}, offsets {p.low}–{p.high}"
        tip = title(
            (many if p.commits > 1 else f"{p.kind.lower()} commit {p.outcome.lower()}")
            + f": offset {p.offset} at {at(p.x)}"
        )
        shapes = []
        if p.low < p.high:
            shapes.append(
                el("line", {"x1": cx, "x2": cx, "y1": y(p.low), "y2": y(p.high),
                            "class": "commit-range"})
            )  # fmt: skip
        hollow = p.outcome != APPLIED  # the other outcomes drawn (groups.DRAWN)
        if hollow:
            shapes.append(el("circle", {"cx": cx, "cy": cy, "r": 4.5}))
        elif p.kind == "TRANSACTIONAL":
            shapes.append(el("rect", {"x": cx - 3.5, "y": cy - 3.5, "width": 7, "height": 7}))
        else:
            shapes.append(el("circle", {"cx": cx, "cy": cy, "r": 3.5}))
        css = f"mark commit commit-{p.outcome if hollow else p.kind}"
        parts.append(el("g", {"class": css}, *shapes, tip))
    for m in part.marks:
        if m.x is None:
            continue
        cx = x(m.x)
        cy = y(m.offset) if m.offset is not None else top
        shapes = []
        if m.previous_offset is not None and m.offset is not None:
            shapes.append(
                el("line", {"x1": cx, "x2": cx, "y1": y(m.previous_offset), "y2": cy,
                            "class": "regress"})
            )  # fmt: skip
        # Beside the commit, pointing at it, so that its own point stays in sight: above it, or
        # below where the plot ends (the axis' label is there).
        side = -1 if cy - 16 >= top else 1
        shapes.append(
            el("path", {"d": f"M{cx:.1f},{cy + 5 * side:.1f} L{cx + 6:.1f},{cy + 16 * side:.1f} "
                             f"L{cx - 6:.1f},{cy + 16 * side:.1f} Z"})
        )  # fmt: skip
        tip = (
            f"{m.finding_type} ({m.severity}{', ' + m.cause if m.cause else ''}): "
            + (f"offset {m.offset}" if m.offset is not None else "a commit")
            + (f" after {m.previous_offset}" if m.previous_offset is not None else "")
            + f", record {m.record_offset}"
            + (f", {fmt_moment(m.time_ms)}" if m.time_ms is not None else "")
        )
        parts.append(
            link(m.href, el("g", {"class": f"mark finding sev-{m.severity}"}, *shapes, title(tip)))
        )
    label = f"committed offsets of group {group.group_id} on {part.topic}-{part.partition}"
    return svg(width, height, label, *parts, css_class="chart small")
