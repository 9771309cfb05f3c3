"""Render an :class:`~anon_sql.assessment.measures.Assessment` as text, JSON or a self-contained HTML page."""
from __future__ import annotations

import html
import json
import math
from typing import Any

import pandas as pd

from ..errors import PolicyError

FORMATS = ("text", "json", "html")

SECTIONS: list[tuple[str, list[str]]] = [
    ("classes", ["records", "classes", "k", "sample_uniques", "records_at_risk", "records_at_risk_count"]),
    ("prosecutor risk", ["prosecutor_risk_lowest", "prosecutor_risk_avg_records", "prosecutor_risk_avg_classes",
                         "prosecutor_risk_highest"]),
    ("journalist and marketer risk", ["journalist_risk_lowest", "journalist_risk_avg_records",
                                      "journalist_risk_avg_classes", "journalist_risk_highest", "marketer_risk",
                                      "k_map", "delta_presence_min", "delta_presence_max"]),
    ("population uniqueness", ["population_size", "sampling_fraction", "population_uniques_pitman",
                               "population_uniques_zayatz", "population_uniques_snb", "population_uniques_snb_nb",
                               "population_uniques_dankar",
                               "population_uniques_dankar_model"]),
    ("sensitive attributes", ["l_distinct", "l_entropy", "recursive_c", "t_equal", "t_ordered", "t_hierarchical",
                              "alpha", "beta_basic", "beta_enhanced", "beta_enhanced_pycanon", "delta_disclosure",
                              "delta_disclosure_log2"]),
    ("quasi-identifiers together", ["distinction", "separation"]),
]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else ("inf" if math.isinf(v) else f"{v:.6g}")
    if isinstance(v, dict):
        return ", ".join(f"l={k}: c>{_fmt(x)}" for k, x in v.items())
    return str(v)


def _clean(v: Any) -> Any:
    """JSON: NaN and infinity become null; dict keys text."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def _grouped(a) -> list[tuple[str, list[tuple[str, Any]]]]:
    seen: set[str] = set()
    out = []
    for title, keys in SECTIONS:
        rows = [(k, a.measures[k]) for k in keys if k in a.measures]
        seen.update(keys)
        if rows:
            out.append((title, rows))
    rest = [(k, v) for k, v in a.measures.items() if k not in seen]
    if rest:
        out.append(("per attribute", rest))
    return out


def _label(key: str, unit: str | None) -> str:
    """A measure's name in the text report; with a privacy unit, ``records`` says it counts people (round 4, A01)."""
    return f"people ({unit})" if unit and key == "records" else key


def render_assessment_text(a) -> str:
    unit = getattr(a, "privacy_unit", None)
    parts = [f"assessment of {a.source}: quasi-identifiers {', '.join(a.quasi)}"
             + (f"; sensitive {', '.join(a.sensitive)}" if a.sensitive else "")
             + (f"; counted in people (privacy_unit {unit!r}): every records figure below counts people" if unit
                else "")]
    for title, rows in _grouped(a):
        parts += ["", title + ":"] + [f"  {_label(k, unit)}: {_fmt(v)}" for k, v in rows]
    sizes = a.class_sizes.head(10)
    parts += ["", "class sizes (smallest 10):", sizes.to_string(index=False)]
    if len(a.attributes):
        parts += ["", "distinction and separation per QI combination:",
                  a.attributes.to_string(index=False, float_format=lambda x: f"{x:.4g}")]
    if getattr(a, "contributions", None) is not None:
        parts += ["", "SUDA contribution per attribute (% of the total score):",
                  a.contributions.to_string(index=False, float_format=lambda x: f"{x:.4g}")]
    if a.notes:
        parts += ["", "notes:"] + [f"  - {n}" for n in a.notes]
    return "\n".join(parts)


def render_assessment_json(a) -> str:
    return json.dumps(_clean(a.to_dict()), indent=2, allow_nan=False, default=str)


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_assessment_html(a) -> str:
    e = html.escape
    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
           "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#f3f3f3}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>anon_sql assessment: {e(a.source)}</title>"
             f"<style>{css}</style></head><body><h1>Assessment of {e(a.source)}</h1>",
             f"<p>quasi-identifiers: {e(', '.join(a.quasi))}; sensitive: {e(', '.join(a.sensitive)) or 'none'}</p>"]
    for title, rows in _grouped(a):
        parts += [f"<h2>{e(title)}</h2>", _html_table(pd.DataFrame(rows, columns=["measure", "value"]))]
    parts += ["<h2>Class sizes</h2>", _html_table(a.class_sizes)]
    if len(a.attributes):
        parts += ["<h2>Distinction and separation per QI combination</h2>", _html_table(a.attributes)]
    if getattr(a, "contributions", None) is not None:
        parts += ["<h2>SUDA contribution per attribute (% of the total score)</h2>", _html_table(a.contributions)]
    if a.notes:
        parts += ["<h2>Notes</h2><ul>"] + [f"<li>{e(n)}</li>" for n in a.notes] + ["</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def render_assessment(a, format: str = "text") -> str:
    """``text``, ``json`` or ``html``."""
    if format not in FORMATS:
        raise PolicyError(f"report format {format!r} is not one of {', '.join(FORMATS)}")
    return {"text": render_assessment_text, "json": render_assessment_json, "html": render_assessment_html}[format](a)
