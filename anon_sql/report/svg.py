"""Inline SVG bar charts for the HTML report: self-contained (no plotting library, no external file), every text escaped.

Horizontal bars read well with long category labels (generalized intervals, taxonomy nodes) and need no axis
rotation; each bar carries its value, so the chart is readable without gridlines.
"""
from __future__ import annotations

import html
import math
from typing import Sequence

BLUE, ORANGE, GREY, RED = "#4477aa", "#ee7733", "#bbbbbb", "#cc3311"
_ROW, _GAP, _TOP, _LABEL_CHARS = 18, 4, 26, 24


def fmt_number(v: float | int | None) -> str:
    """1234 → '1,234'; 0.01234 → '0.0123'; None / NaN → '–'."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v):,}"
    return f"{v:.3g}"


def _short(label: str) -> str:
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"


def bar_chart(title: str, rows: Sequence[tuple[str, float]], *, color: str = BLUE, width: int = 460,
              colors: Sequence[str | None] | None = None, marks: Sequence[float | None] | None = None,
              mark_label: str = "", css_class: str = "chart") -> str:
    """One horizontal bar per (label, value); ``colors`` overrides a bar's colour, ``marks`` draws a reference tick
    per bar (e.g. the original data's accuracy)."""
    e = html.escape
    label_w = 8 + 7 * min(_LABEL_CHARS, max((len(r[0]) for r in rows), default=4))
    value_w = 64
    bar_w = max(60, width - label_w - value_w)
    values = [float(v) if v is not None and math.isfinite(float(v)) else 0.0 for _, v in rows]
    top = max([*values, *[m for m in (marks or []) if m is not None], 0.0]) or 1.0
    height = _TOP + len(rows) * (_ROW + _GAP) + 6
    out = [f"<svg class='{e(css_class)}' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' role='img' aria-label='{e(title)}'>",
           f"<title>{e(title)}</title>",
           f"<text x='0' y='15' font-size='13' font-weight='600' fill='#222'>{e(title)}</text>"]
    for i, ((label, raw), v) in enumerate(zip(rows, values)):
        y = _TOP + i * (_ROW + _GAP)
        w = bar_w * v / top
        fill = (colors[i] if colors and colors[i] else color)
        out.append(f"<text x='{label_w - 6}' y='{y + 13}' font-size='11' text-anchor='end' fill='#333'>"
                   f"<title>{e(str(label))}</title>{e(_short(str(label)))}</text>")
        out.append(f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{_ROW}' fill='{fill}' rx='2'/>")
        out.append(f"<text x='{label_w + w + 4:.1f}' y='{y + 13}' font-size='11' fill='#333'>"
                   f"{e(fmt_number(raw))}</text>")
        if marks and i < len(marks) and marks[i] is not None:
            mx = label_w + bar_w * float(marks[i]) / top
            out.append(f"<line x1='{mx:.1f}' x2='{mx:.1f}' y1='{y - 2}' y2='{y + _ROW + 2}' stroke='{RED}' "
                       f"stroke-width='3'><title>{e(mark_label)} {e(fmt_number(marks[i]))}</title></line>")
    out.append("</svg>")
    return "".join(out)
