"""Small SVG charts for docs/benchmarks.md: line charts of a run and bar charts of CPU per
job, as text, so the bench needs no plotting library."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f"]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    span = high - low or abs(high) or 1.0
    step = 10 ** math.floor(math.log10(span / count))
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return ticks


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.1f}"


def _frame(title: str, x_label: str, y_label: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" '
        f'text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="15" y="{(TOP + HEIGHT - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 15 {(TOP + HEIGHT - BOTTOM) / 2})">{escape(y_label)}</text>',
    ]


def lines(
    series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str, y_label: str
) -> str:
    """A line chart of each named series of (x, y) points; the y axis starts at 0."""
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    x_ticks = _ticks(min(xs), max(xs))
    y_ticks = _ticks(0.0, max(ys) * 1.05)
    x0, x1, y1 = x_ticks[0], x_ticks[-1], y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / ((x1 - x0) or 1) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y / (y1 or 1) * plot_h

    out = _frame(title, x_label, y_label)
    for tick in y_ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{py(tick):.1f}" x2="{WIDTH - RIGHT}" y2="{py(tick):.1f}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{_number(tick)}</text>'
        )
    for tick in x_ticks:
        out.append(
            f'<text x="{px(tick):.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{_number(tick)}</text>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>'
    )
    for index, (name, points) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>')
        out.append(
            f'<text x="{LEFT + 10}" y="{TOP + 16 + 16 * index}" '
            f'fill="{colour}">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def bars(groups: dict[str, dict[str, float]], *, title: str, y_label: str) -> str:
    """Stacked bars, one per group (say, before and after), of named parts (say, CPU per
    job by process), with each part's value written in its segment."""
    total = max(sum(parts.values()) for parts in groups.values())
    y_ticks = _ticks(0.0, total * 1.05)
    y1 = y_ticks[-1]
    plot_h = HEIGHT - TOP - BOTTOM
    names = list(dict.fromkeys(name for parts in groups.values() for name in parts))

    def py(y: float) -> float:
        return TOP + plot_h - y / (y1 or 1) * plot_h

    out = _frame(title, "", y_label)
    for tick in y_ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{py(tick):.1f}" x2="{WIDTH - 220}" y2="{py(tick):.1f}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{_number(tick)}</text>'
        )
    width = (WIDTH - 220 - LEFT) / len(groups)
    for index, (group, parts) in enumerate(groups.items()):
        x = LEFT + index * width + width * 0.2
        base = 0.0
        for name in names:
            value = parts.get(name, 0.0)
            if not value:
                continue
            colour = COLOURS[names.index(name) % len(COLOURS)]
            top, bottom = py(base + value), py(base)
            out.append(
                f'<rect x="{x:.1f}" y="{top:.1f}" width="{width * 0.6:.1f}" '
                f'height="{bottom - top:.1f}" fill="{colour}"/>'
            )
            if bottom - top > 13:
                out.append(
                    f'<text x="{x + width * 0.3:.1f}" y="{(top + bottom) / 2 + 4:.1f}" '
                    f'text-anchor="middle" fill="white">{_number(value)}</text>'
                )
            base += value
        out.append(
            f'<text x="{x + width * 0.3:.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(group)}</text>'
        )
        out.append(
            f'<text x="{x + width * 0.3:.1f}" y="{py(base) - 6:.1f}" '
            f'text-anchor="middle">{_number(base)}</text>'
        )
    for index, name in enumerate(names):
        colour = COLOURS[index % len(COLOURS)]
        y = TOP + 10 + 18 * index
        out.append(f'<rect x="{WIDTH - 200}" y="{y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{WIDTH - 182}" y="{y + 10}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
