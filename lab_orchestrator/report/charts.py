"""The SVG charts of the test report (`document`): the delivered pps per SRX over an event, and the
cumulative distribution of the per-flow convergence. Pure; inline SVG, no script."""

from __future__ import annotations

import html
from typing import Any

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 10 ** -len(str(int(1 / raw)))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    first = (lo // step) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            out.append(round(v, 10))
        v += step
    return out


def _axes(x: Any, y: Any, xs: list[float], ys: list[float], box: tuple[int, int, int, int], xlabel: str,
          ylabel: str) -> list[str]:
    left, top, right, bottom = box
    parts = [f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" class="plot"/>']
    for v in xs:
        parts.append(f'<line x1="{x(v):.1f}" y1="{top}" x2="{x(v):.1f}" y2="{bottom}" class="grid"/>'
                     f'<text x="{x(v):.1f}" y="{bottom + 14}" class="tick" text-anchor="middle">{v:g}</text>')
    for v in ys:
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{right}" y2="{y(v):.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:g}</text>')
    parts.append(f'<text x="{(left + right) / 2}" y="{bottom + 30}" class="label" text-anchor="middle">'
                 f'{html.escape(xlabel)}</text>')
    parts.append(f'<text x="12" y="{(top + bottom) / 2}" class="label" text-anchor="middle" '
                 f'transform="rotate(-90 12 {(top + bottom) / 2})">{html.escape(ylabel)}</text>')
    return parts


def timeline_svg(result: dict[str, Any], width: int = 720, height: int = 260) -> str:
    """Delivered pps per SRX (the MX's per-SRX counters) against seconds from the event, with the
    event, restore and settled marks."""
    timeline = result.get("timeline") or []
    marks = result.get("marks") or {}
    left, top, right, bottom = 64, 14, width - 110, height - 40
    if not timeline:
        return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="60">'
                f'<text x="10" y="30">no samples</text></svg>')
    t0 = marks.get("event", timeline[0][0])
    names = sorted({k for _, rates in timeline for k in rates})
    ts = [t - t0 for t, _ in timeline]
    peak = max((v for _, rates in timeline for v in rates.values()), default=1.0) or 1.0
    x = _scale(min(ts), max(ts), left, right)
    y = _scale(0, peak * 1.08, bottom, top)
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="pps per SRX around the event">']
    parts += _axes(x, y, _ticks(min(ts), max(ts), 8), _ticks(0, peak * 1.08, 4), (left, top, right, bottom),
                   "seconds from the event", "pps via SRX")
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x(t):.1f},{y(rates.get(name, 0)):.1f}" for t, (_, rates) in zip(ts, timeline,
                                                                                           strict=True))
        parts.append(f'<polyline class="series" data-srx="{html.escape(name)}" points="{points}" '
                     f'stroke="{colour}"/>')
        parts.append(f'<line x1="{right + 10}" y1="{top + 10 + 16 * i}" x2="{right + 26}" y2="{top + 10 + 16 * i}" '
                     f'stroke="{colour}" stroke-width="2"/><text x="{right + 30}" y="{top + 14 + 16 * i}" '
                     f'class="tick">{html.escape(name)}</text>')
    legend = len(names)
    for mark, colour in (("event", "#d62728"), ("restore", "#2ca02c"), ("settled", "#7f7f7f")):
        if mark in marks:
            mx = x(marks[mark] - t0)
            parts.append(f'<line class="mark mark-{mark}" x1="{mx:.1f}" y1="{top}" x2="{mx:.1f}" y2="{bottom}" '
                         f'stroke="{colour}"/>')
            parts.append(f'<line x1="{right + 10}" y1="{top + 10 + 16 * legend}" x2="{right + 26}" '
                         f'y2="{top + 10 + 16 * legend}" stroke="{colour}" stroke-dasharray="4 3"/>'
                         f'<text x="{right + 30}" y="{top + 14 + 16 * legend}" class="tick">{mark}</text>')
            legend += 1
    parts.append("</svg>")
    return "".join(parts)


def convergence_values(result: dict[str, Any]) -> list[float]:
    """Per-flow convergence (ms) of every flow that lost packets, sorted."""
    return sorted(float(r["convergence_ms"]) for r in result.get("per_flow", []) if r.get("lost"))


def cdf_svg(result: dict[str, Any], width: int = 420, height: int = 240) -> str:
    """Cumulative distribution of the per-flow convergence of the flows that lost packets."""
    values = convergence_values(result)
    left, top, right, bottom = 56, 14, width - 14, height - 40
    if not values:
        return (f'<svg class="cdf" xmlns="http://www.w3.org/2000/svg" width="{width}" height="60">'
                f'<text x="10" y="30">no flow lost a packet</text></svg>')
    hi = max(values) or 1.0
    x = _scale(0, hi * 1.05, left, right)
    y = _scale(0, 1, bottom, top)
    parts = [f'<svg class="cdf" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="per-flow convergence distribution">']
    parts += _axes(x, y, _ticks(0, hi * 1.05, 5), [0, 0.25, 0.5, 0.75, 1.0], (left, top, right, bottom),
                   "per-flow convergence (ms)", "fraction of flows")
    n = len(values)
    points = [f"{x(0):.1f},{y(0):.1f}"]
    for i, v in enumerate(values):
        points.append(f"{x(v):.1f},{y(i / n):.1f}")
        points.append(f"{x(v):.1f},{y((i + 1) / n):.1f}")
    parts.append(f'<polyline class="series" points="{" ".join(points)}" stroke="{COLOURS[0]}"/>')
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- movers
