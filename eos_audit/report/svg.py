"""A few SVG primitives: scales, ticks, axes and escaped elements. No JavaScript, no network."""

from __future__ import annotations

import datetime as dt
import html
import math
import unicodedata
from dataclasses import dataclass
from itertools import pairwise

# Font sizes (px) of the charts' text classes, as page.CSS sets them (a test checks they agree).
TEXT_SIZES = {
    "tick": 10,
    "lane-label": 10,
    "span-label": 10,
    "time-label": 10,
    "axis-label": 11,
    "value": 11,
    "label": 12,
}
# No browser lays the report out when it is written, so labels are measured from their
# characters: each one's advance in em, rounded up, in DejaVu Sans Bold, the widest face the
# page's fonts (system-ui, Segoe UI, Roboto, sans-serif) come to on common systems. A label is
# never wider on screen than measured, bold (this run's tick) or not.
_EM_BY_CHARS = {
    0.35: "'ijl ",
    0.42: "/\\|IJ,.:;f-",
    0.53: '!()[]tr_`"*',
    0.70: "?zcsLxvykaeSEFo$0123456789",
    0.74: "Thnu{}bdgpqYZPC",
    0.88: "BRXAVKUGDHN#+<=>^~OQ&",
    1.00: "wM@",
    1.11: "%mW",
}
_EM = {c: em for em, chars in _EM_BY_CHARS.items() for c in chars}
# Beyond ASCII (the en dash of a date range; Kafka names are ASCII): an em, wide scripts 1.3.
_EM_OTHER, _EM_WIDE = 1.0, 1.3
# A line's box above and below its baseline: the em box of the tallest common UI fonts (Segoe UI
# and Noto Sans reach 1.08 em and 0.29 em).
ASCENT, DESCENT = 1.1, 0.3
# Room kept between two labels side by side.
LABEL_GAP = 4


def esc(value: object) -> str:
    """Text escaped for HTML and SVG content and attributes."""
    return html.escape(str(value), quote=True)


def el(tag: str, attrs: dict[str, object] | None = None, *children: str) -> str:
    """One element; attributes with value None are left out, children are already markup."""
    parts = [tag]
    for key, value in (attrs or {}).items():
        if value is None:
            continue
        if isinstance(value, float):
            value = f"{value:.2f}".rstrip("0").rstrip(".")
        parts.append(f'{key.rstrip("_").replace("_", "-")}="{esc(value)}"')
    inner = "".join(children)
    return f"<{' '.join(parts)}>{inner}</{tag}>"


def title(text: str) -> str:
    """A tooltip for the enclosing SVG element."""
    return el("title", None, esc(text))


def link(href: str | None, *children: str) -> str:
    """Children wrapped in a link to an anchor of the report (or left as they are)."""
    if not href:
        return "".join(children)
    return el("a", {"href": "#" + href}, *children)


def text_size(css_class: str) -> float:
    """The font size of a chart text of that class (its first class in TEXT_SIZES)."""
    return next((TEXT_SIZES[c] for c in css_class.split() if c in TEXT_SIZES), 14)


def _em(char: str) -> float:
    if char in _EM:
        return _EM[char]
    return _EM_WIDE if unicodedata.east_asian_width(char) in ("W", "F") else _EM_OTHER


def text_width(text: str, size: float) -> float:
    """The width in px of `text` at `size` px, never less than a browser draws it."""
    return size * sum(_em(c) for c in text)


def fit_text(text: str, width: float, size: float) -> str:
    """`text`, or its start and end around "…" when it is wider than `width` px.

    The end is kept as well as the start: a partition's label ends with its number.
    """
    if text_width(text, size) <= width:
        return text
    for keep in range(len(text) - 1, 0, -1):
        short = f"{text[: (keep + 1) // 2]}…{text[len(text) - keep // 2 :]}"
        if text_width(short, size) <= width:
            return short
    return "…"


@dataclass(frozen=True)
class Box:
    """A rectangle in a chart's pixels: left, top, right, bottom."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box, gap: float = 0.0) -> bool:
        """Whether the two share any area, or are less than `gap` px apart side by side."""
        return (
            self.x0 < other.x1 + gap
            and other.x0 < self.x1 + gap
            and self.y0 < other.y1
            and other.y0 < self.y1
        )

    def inside(self, width: float, height: float) -> bool:
        """Whether the box lies within a chart of that size."""
        return self.x0 >= 0 and self.y0 >= 0 and self.x1 <= width and self.y1 <= height


def text_box(text: str, x: float, y: float, css_class: str, anchor: str = "start") -> Box:
    """The box a `<text>` element at (x, y) takes at most, measured as `text_width` does."""
    size = text_size(css_class)
    width = text_width(text, size)
    x0 = x - {"start": 0.0, "middle": width / 2, "end": width}[anchor]
    return Box(x0, y - ASCENT * size, x0 + width, y + DESCENT * size)


@dataclass(frozen=True)
class Label:
    """A line of text in a chart, with the box it takes."""

    text: str
    x: float
    y: float
    css_class: str
    anchor: str = "start"
    tip: str | None = None  # the whole text, when `text` is shortened

    @property
    def box(self) -> Box:
        """The box it takes at most."""
        return text_box(self.text, self.x, self.y, self.css_class, self.anchor)

    def svg(self) -> str:
        """The `<text>` element."""
        return el(
            "text",
            {"x": self.x, "y": self.y, "class": self.css_class, "text-anchor": self.anchor},
            esc(self.text),
            title(self.tip) if self.tip else "",
        )


def placed(
    text: str,
    x: float,
    y: float,
    css_class: str,
    bounds: tuple[float, float],
    anchor: str = "middle",
) -> Label | None:
    """A label at x, moved inward where it would cross `bounds` but never off x (else None)."""
    label = Label(text, x, y, css_class, anchor)
    lo, hi = bounds
    box = label.box
    width = box.x1 - box.x0
    if box.x0 < lo and lo <= x <= lo + width:
        label = Label(text, lo, y, css_class, "start")
    elif box.x1 > hi and hi - width <= x <= hi:
        label = Label(text, hi, y, css_class, "end")
    box = label.box
    return label if lo <= box.x0 and box.x1 <= hi else None


def every_kth(labels: list[Label], keep: int = 0, gap: float = LABEL_GAP) -> list[Label]:
    """Every k-th of a row of labels, for the smallest k that leaves no two of them overlapping.

    The row runs left to right or top to bottom; the k-th are counted from the `keep`-th.
    """
    for k in range(1, len(labels) + 1):
        chosen = [label for i, label in enumerate(labels) if (i - keep) % k == 0]
        if not any(a.box.overlaps(b.box, gap) for a, b in pairwise(chosen)):
            return chosen
    return labels[keep : keep + 1]


@dataclass(frozen=True)
class Scale:
    """A linear map from data values to pixels; a one-value domain maps to the middle."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        """The pixel position of `value`."""
        if self.hi == self.lo:
            return (self.start + self.end) / 2
        return self.start + (value - self.lo) * (self.end - self.start) / (self.hi - self.lo)


def padded(lo: float, hi: float, share: float = 0.04) -> tuple[float, float]:
    """A domain widened on both sides so marks at its ends stay inside the plot."""
    if hi == lo:
        return lo - 1, hi + 1
    pad = (hi - lo) * share
    return lo - pad, hi + pad


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round values between lo and hi, about `count` of them (1, 2 or 5 times a power of ten).

    Offsets, sequences and counts are integers, so a step is never below 1.
    """
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = max(next(m * power for m in (1, 2, 5, 10) if m * power >= raw), 1)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def time_ticks(lo_ms: float, hi_ms: float, count: int = 5) -> list[float]:
    """Tick times at round intervals (seconds to days)."""
    steps = [
        1_000 * s
        for s in (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 10800, 21600, 43200, 86400, 604800)
    ]
    if hi_ms <= lo_ms:
        return [lo_ms]
    raw = (hi_ms - lo_ms) / max(count, 1)
    step = next((s for s in steps if s >= raw), steps[-1] * math.ceil(raw / steps[-1]))
    first = math.ceil(lo_ms / step) * step
    return [first + i * step for i in range(int((hi_ms - first) // step) + 1)]


def fmt_int(value: float) -> str:
    """An integer with thousands separators; large ones shortened (1.2M)."""
    value = round(value)
    if abs(value) >= 10_000_000:
        for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
            if abs(value) >= size:
                return f"{value / size:.3g}{unit}"
    return f"{value:,}"


def fmt_time(ms: float, span_ms: float = 0) -> str:
    """A UTC time, as precise as the span drawn needs."""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    if span_ms and span_ms < 120_000:
        return moment.strftime("%H:%M:%S")
    if span_ms and span_ms < 2 * 86_400_000:
        return moment.strftime("%H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")


def fmt_moment(ms: float | None) -> str:
    """A UTC time to the second, with its date ("2026-11-21 03:00:05 UTC"); "—" when unknown."""
    if ms is None:
        return "—"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_range(first_ms: float | None, last_ms: float | None) -> str:
    """A time range in UTC, the date said once when both ends fall on the same day."""
    if first_ms is None or last_ms is None:
        return fmt_moment(first_ms if last_ms is None else last_ms)
    first = dt.datetime.fromtimestamp(first_ms / 1000, tz=dt.UTC)
    last = dt.datetime.fromtimestamp(last_ms / 1000, tz=dt.UTC)
    if first.date() == last.date():
        return f"{first:%Y-%m-%d %H:%M:%S}–{last:%H:%M:%S} UTC"
    return f"{first:%Y-%m-%d %H:%M:%S} – {last:%Y-%m-%d %H:%M:%S} UTC"


def time_axis_label(lo_ms: float, hi_ms: float) -> str:
    """The label of a time axis; its date when the ticks show only hours (a span under 2 days)."""
    if hi_ms - lo_ms >= 2 * 86_400_000:
        return "time (UTC)"
    first = dt.datetime.fromtimestamp(lo_ms / 1000, tz=dt.UTC).date()
    last = dt.datetime.fromtimestamp(hi_ms / 1000, tz=dt.UTC).date()
    return f"time (UTC), {first}" + (f" – {last}" if last != first else "")


def axis_x(
    scale: Scale,
    y: float,
    ticks: list[float],
    fmt,
    label: str = "",
    *,
    bounds: tuple[float, float],
) -> str:
    """A horizontal axis at pixel row `y` with tick labels below it.

    Tick labels stay within `bounds` (the chart's edges, or right of a vertical axis' labels): one
    that would cross them is moved inward, never off its tick. When neighbours would overlap, only
    every k-th is drawn (the smallest k that leaves room); every tick keeps its mark.
    """
    parts = [el("line", {"x1": scale.start, "x2": scale.end, "y1": y, "y2": y, "class": "axis"})]
    labels = []
    for t in ticks:
        x = scale(t)
        parts.append(el("line", {"x1": x, "x2": x, "y1": y, "y2": y + 4, "class": "axis"}))
        tick = placed(fmt(t), x, y + 15, "tick", bounds)
        if tick is not None:
            labels.append(tick)
    parts += [tick.svg() for tick in every_kth(labels)]
    if label:
        # On a row of its own, below the tick labels' boxes.
        parts.append(Label(label, scale.end, y + 31, "axis-label", "end").svg())
    return el("g", {"class": "x-axis"}, *parts)


def axis_room(ticks: list[float], fmt) -> float:
    """The px left of a vertical axis that its tick labels take (see axis_y)."""
    return 8 + max((text_width(fmt(t), TEXT_SIZES["tick"]) for t in ticks), default=0)


def axis_y(scale: Scale, x: float, ticks: list[float], fmt, label: str = "") -> str:
    """A vertical axis at pixel column `x` with tick labels to its left and its label on top.

    The tick labels end 6 px left of the axis (`axis_room` says how far they reach); when they
    would overlap, only every k-th is drawn, from the lowest.
    """
    parts = [el("line", {"x1": x, "x2": x, "y1": scale.start, "y2": scale.end, "class": "axis"})]
    labels = []
    for t in ticks:
        y = scale(t)
        parts.append(el("line", {"x1": x - 4, "x2": x, "y1": y, "y2": y, "class": "axis"}))
        labels.append(Label(fmt(t), x - 6, y + 4, "tick", "end"))
    parts += [tick.svg() for tick in every_kth(labels, gap=0)]
    if label:
        top = min(scale.start, scale.end)
        parts.append(Label(label, x - 6, top - 8, "axis-label", "start").svg())
    return el("g", {"class": "y-axis"}, *parts)


def svg(width: int, height: int, label: str, *children: str, css_class: str = "chart") -> str:
    """A standalone SVG chart with an accessible label."""
    return el(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width} {height}",
            "width": width,
            "height": height,
            "role": "img",
            "aria-label": label,
            "class": css_class,
        },
        title(label),
        *children,
    )
