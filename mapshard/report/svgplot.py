"""A small SVG plotting kit for the report: bars, lines, steps, points, log or linear axes.

Why not matplotlib here: a small run's report spent ~1.6 s drawing five plots with it
against a 0.02-0.4 s solve (#17). These plots need axes, ticks, bars, polylines and markers
only; writing the SVG text directly costs milliseconds and is byte-identical across runs.
Coordinates are pixels in a viewBox, so the page scales the figure to its width.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from mapshard.fmt import sig

FONT = "font-family:DejaVu Sans,Arial,sans-serif"
GRID = "#e3e3e3"
INK = "#222222"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def si_tick(value: float) -> str:
    """Compact decimal tick label: 1k, 10M, 0.1."""
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                          (1e3, "k")):  # fmt: skip
        if abs(value) >= scale:
            return f"{sig(value / scale)}{prefix}"
    return sig(value)


@dataclass(frozen=True)
class Scale:
    """Data interval [lo, hi] onto pixels [p0, p1] (p1 < p0 for a y axis), linear or log."""

    lo: float
    hi: float
    p0: float
    p1: float
    log: bool = False

    def __call__(self, v: float) -> float:
        if self.log:
            v, lo, hi = math.log10(max(v, 1e-300)), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        span = (hi - lo) or 1.0
        return self.p0 + (v - lo) / span * (self.p1 - self.p0)

    def ticks(self) -> list[float]:
        """Decades (1-2-5 within three decades) on a log axis; 1-2-5 steps on a linear one."""
        if self.log:
            narrow = self.hi / self.lo < 1e3
            subs = (1.0, 2.0, 5.0) if narrow else (1.0,)
            out = []
            for d in range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1):
                out += [s * 10.0**d for s in subs if self.lo <= s * 10.0**d <= self.hi * 1.0001]
            return out
        raw = (self.hi - self.lo) / 6 or 1.0
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        first = math.ceil(self.lo / step - 1e-9)
        return [k * step for k in range(first, int(self.hi / step + 1e-9) + 1)]


def log_range(values: Sequence[float], pad: float = 1.3) -> tuple[float, float]:
    """A log axis range around the positive values, padded by a factor."""
    pos = [v for v in values if v > 0 and math.isfinite(v)] or [1.0]
    lo, hi = min(pos) / pad, max(pos) * pad
    return (lo, hi) if hi > lo else (lo / 10, hi * 10)


@dataclass
class Canvas:
    """An SVG under construction; `svg()` gives its text."""

    width: float
    height: float
    parts: list[str] = field(default_factory=list)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str = "") -> None:
        title = f"<title>{_e(tip)}</title>" if tip else ""
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
            f'fill="{fill}">{title}</rect>'
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK,
             width: float = 1.0, dash: str = "") -> None:  # fmt: skip
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{stroke}" stroke-width="{width:g}"{d}/>'
        )

    def polyline(self, pts: Sequence[tuple[float, float]], stroke: str, width: float = 1.5,
                 dash: str = "") -> None:  # fmt: skip
        d = f' stroke-dasharray="{dash}"' if dash else ""
        xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.parts.append(
            f'<polyline points="{xy}" fill="none" stroke="{stroke}" stroke-width="{width:g}"{d}/>'
        )

    def circle(self, x: float, y: float, r: float, fill: str, tip: str = "",
               opacity: float = 0.8) -> None:  # fmt: skip
        title = f"<title>{_e(tip)}</title>" if tip else ""
        self.parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" '
            f'fill-opacity="{opacity:g}" stroke="white" stroke-width="0.6">{title}</circle>'
        )

    def ring(self, x: float, y: float, r: float, stroke: str, width: float = 1.5) -> None:
        """An unfilled circle: a mark drawn around a point."""
        self.parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="none" '
            f'stroke="{stroke}" stroke-width="{width:g}"/>'
        )

    def star(self, x: float, y: float, r: float, fill: str) -> None:
        pts = []
        for i in range(10):
            rad = r if i % 2 == 0 else r * 0.45
            a = math.pi / 2 + i * math.pi / 5
            pts.append(f"{x + rad * math.cos(a):.1f},{y - rad * math.sin(a):.1f}")
        self.parts.append(
            f'<polygon points="{" ".join(pts)}" fill="{fill}" stroke="black" stroke-width="0.6"/>'
        )

    def text(self, x: float, y: float, s: str, size: float = 11, anchor: str = "start",
             color: str = INK, bold: bool = False, rotate: bool = False) -> None:  # fmt: skip
        weight = ' font-weight="bold"' if bold else ""
        turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
            f'fill="{color}"{weight}{turn}>{_e(s)}</text>'
        )

    def svg(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}pt" '
            f'height="{self.height:.0f}pt" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
            f'style="{FONT}">' + "".join(self.parts) + "</svg>\n"
        )


def axes(c: Canvas, xs: Scale, ys: Scale, xlabel: str = "", ylabel: str = "",
         title: str = "", xticks: bool = True, yticks: bool = True) -> None:  # fmt: skip
    """Grid, tick labels, the two axis lines, labels and title around the plot box."""
    left, right = min(xs.p0, xs.p1), max(xs.p0, xs.p1)
    top, bottom = min(ys.p0, ys.p1), max(ys.p0, ys.p1)
    if xticks:
        for v in xs.ticks():
            x = xs(v)
            c.line(x, top, x, bottom, GRID)
            c.text(x, bottom + 14, si_tick(v), 10, "middle")
    if yticks:
        for v in ys.ticks():
            y = ys(v)
            c.line(left, y, right, y, GRID)
            c.text(left - 5, y + 3.5, si_tick(v), 10, "end")
    c.line(left, bottom, right, bottom)
    c.line(left, top, left, bottom)
    if xlabel:
        c.text((left + right) / 2, bottom + 30, xlabel, 11, "middle")
    if ylabel:
        c.text(left - 46, (top + bottom) / 2, ylabel, 11, "middle", rotate=True)
    if title:
        c.text((left + right) / 2, top - 10, title, 12, "middle")


def legend(c: Canvas, items: Sequence[tuple[str, str]], y: float, x0: float = 0.0) -> None:
    """One row of (label, colour) swatches centred on the canvas (or from x0)."""
    widths = [26 + 6.6 * len(label) for label, _ in items]
    x = x0 or max(4.0, (c.width - sum(widths)) / 2)
    for (label, color), w in zip(items, widths):
        c.rect(x, y - 8, 12, 9, color)
        c.text(x + 16, y, label, 10)
        x += w
