"""A few SVG primitives: scales, ticks, axes and escaped elements. No JavaScript, no network."""

from __future__ import annotations

import datetime as dt
import html
import math
from dataclasses import dataclass


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


def axis_x(scale: Scale, y: float, ticks: list[float], fmt, label: str = "") -> str:
    """A horizontal axis at pixel row `y` with tick labels below it."""
    parts = [el("line", {"x1": scale.start, "x2": scale.end, "y1": y, "y2": y, "class": "axis"})]
    for t in ticks:
        x = scale(t)
        parts.append(el("line", {"x1": x, "x2": x, "y1": y, "y2": y + 4, "class": "axis"}))
        parts.append(
            el("text", {"x": x, "y": y + 15, "class": "tick", "text-anchor": "middle"}, esc(fmt(t)))
        )
    if label:
        parts.append(
            el(
                "text",
                {"x": scale.end, "y": y + 28, "class": "axis-label", "text-anchor": "end"},
                esc(label),
            )
        )
    return el("g", {"class": "x-axis"}, *parts)


def axis_y(scale: Scale, x: float, ticks: list[float], fmt, label: str = "") -> str:
    """A vertical axis at pixel column `x` with tick labels to its left and light grid lines."""
    parts = [el("line", {"x1": x, "x2": x, "y1": scale.start, "y2": scale.end, "class": "axis"})]
    for t in ticks:
        y = scale(t)
        parts.append(el("line", {"x1": x - 4, "x2": x, "y1": y, "y2": y, "class": "axis"}))
        parts.append(
            el("text", {"x": x - 6, "y": y + 4, "class": "tick", "text-anchor": "end"}, esc(fmt(t)))
        )
    if label:
        parts.append(
            el(
                "text",
                {
                    "x": x - 6,
                    "y": min(scale.start, scale.end) - 8,
                    "class": "axis-label",
                    "text-anchor": "start",
                },
                esc(label),
            )
        )
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
