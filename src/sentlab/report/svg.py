"""The results page's charts: line charts drawn by Python as inline SVG (no script, no network), one line per
series, with tick labels as precise as their axis needs (:mod:`sentlab.report.html_page` embeds them)."""

from __future__ import annotations

import html
import math
from typing import Optional

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def e(x) -> str:
    return html.escape("" if x is None else str(x))


def _num(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi == lo:
        return [lo]
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _fmt_tick(v: float, span: float = 0.0) -> str:
    """A tick label with as many decimals as the axis's tick step needs (86.117 and 86.120 must not both read
    86.1)."""
    import math

    step = span / 4 if span > 0 else 0.0
    digits = 0 if step <= 0 else min(4, max(0, 1 - math.floor(math.log10(step))))
    if step <= 0:
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{v:.{digits}f}"


def svg_chart(series: dict[str, list[tuple[float, float]]], title: str, xlabel: str, ylabel: str,
              width: int = 400, height: int = 220) -> str:
    """A line chart of ``series`` (label -> points, drawn in their order) as an inline ``<svg>``: axes with five
    ticks each, a legend; a series with one point is a dot. No points at all: a box saying so."""
    pts = {k: [(x, y) for x, y in v if _num(x) is not None and _num(y) is not None] for k, v in series.items()}
    pts = {k: v for k, v in pts.items() if v}
    legend = 14 * ((len(pts) + 2) // 3) + 6 * bool(pts)   # three labels a row, under the x axis
    height += legend
    ml, mr, mt, mb = 64, 12, 24, 40 + legend   # room for a 4-decimal tick label
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
           f'aria-label="{e(title)}" class="chart" viewBox="0 0 {width} {height}">',
           f'<title>{e(title)}</title>',
           f'<text x="{width / 2}" y="15" text-anchor="middle" font-size="13" font-weight="600">{e(title)}</text>']
    if not pts:
        out += [f'<rect x="{ml}" y="{mt}" width="{width - ml - mr}" height="{height - mt - mb}" fill="#fafafa" '
                f'stroke="#ccc"/>', f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="12" '
                f'fill="#888">no points</text></svg>']
        return "".join(out)
    xs = [x for v in pts.values() for x, _ in v]
    ys = [y for v in pts.values() for _, y in v]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if y0 == y1:
        y0, y1 = y0 - 1, y1 + 1
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    pw, ph = width - ml - mr, height - mt - mb
    sx = lambda x: ml + (x - x0) / (x1 - x0) * pw  # noqa: E731
    sy = lambda y: mt + ph - (y - y0) / (y1 - y0) * ph  # noqa: E731
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="white" stroke="#999"/>')
    for t in _ticks(x0, x1):
        out.append(f'<line x1="{sx(t):.1f}" y1="{mt + ph}" x2="{sx(t):.1f}" y2="{mt + ph + 4}" stroke="#999"/>'
                   f'<text x="{sx(t):.1f}" y="{mt + ph + 15}" text-anchor="middle" font-size="10">'
                   f'{_fmt_tick(t, x1 - x0)}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{ml - 4}" y1="{sy(t):.1f}" x2="{ml + pw}" y2="{sy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{ml - 6}" y="{sy(t) + 3:.1f}" text-anchor="end" font-size="10">'
                   f'{_fmt_tick(t, y1 - y0)}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{mt + ph + 30}" text-anchor="middle" font-size="11">{e(xlabel)}</text>'
               f'<text x="12" y="{mt + ph / 2}" text-anchor="middle" font-size="11" '
               f'transform="rotate(-90 12 {mt + ph / 2})">{e(ylabel)}</text>')
    for i, (label, v) in enumerate(pts.items()):
        c = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in v)
        out.append(f'<g class="series" data-label="{e(label)}">'
                   + (f'<polyline fill="none" stroke="{c}" stroke-width="1.8" points="{coords}"/>' if len(v) > 1
                      else "")
                   + "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.2" fill="{c}"/>' for x, y in v)
                   + "</g>")
        lx, ly = ml + (i % 3) * (pw / 3), mt + ph + 46 + 14 * (i // 3)
        out.append(f'<rect x="{lx:.1f}" y="{ly - 4}" width="12" height="3" fill="{c}"/>'
                   f'<text x="{lx + 16:.1f}" y="{ly}" font-size="10">{e(label)}</text>')
    out.append("</svg>")
    return "".join(out)
