"""The HTML release report: one self-contained page (inline CSS and SVG, no script, no external file).

Top to bottom it answers what a reader asks first: did the release pass (verdict), how risky and how useful is it
(summary cards), what happened to the data (class sizes, original vs released distribution per quasi-identifier),
then the evidence in detail (checks, every metric with its formula, the plan). Every value is escaped.
"""
from __future__ import annotations

import html
import json
from typing import Any

from .svg import BLUE, GREY, ORANGE, bar_chart, fmt_number

# the summary cards: (metric, caption) per family, shown when the report has the metric
RISK_CARDS = (("k", "smallest class (k achieved)"), ("prosecutor_risk_max", "highest re-identification risk"),
              ("prosecutor_risk_avg", "average re-identification risk"), ("records_at_risk", "records at risk"),
              ("sample_uniques", "sample uniques"), ("l_distinct", "distinct l achieved"),
              ("t_closeness", "t-closeness (worst class)"))
UTILITY_CARDS = (("ncp", "information loss (NCP)"), ("precision", "precision (Sweeney)"), ("dcp", "discernibility"),
                 ("cavg", "C_AVG (class size / k)"), ("kl_divergence", "KL divergence"),
                 ("query_error", "query error (relative)"))
_DIRECTION = {"lower": "lower is better", "higher": "higher is better"}

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:72em;margin:0 auto;padding:1.5em 2em 3em}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin:.2em 0 1em}
.verdict{border-radius:8px;padding:.9em 1.2em;font-size:1.25em;font-weight:600;margin:.8em 0 1.2em;color:#fff}
.verdict.pass{background:#228833}.verdict.fail{background:#cc3311}.verdict.unknown{background:#777}
.verdict small{display:block;font-size:.7em;font-weight:400;opacity:.95;margin-top:.2em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(12em,1fr));gap:.6em}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:.6em .8em}
.card .v{font-size:1.45em;font-weight:600}.card .c{color:#444;font-size:.85em}.card .d{color:#888;font-size:.75em}
.family{margin:.4em 0 .2em;font-weight:600;color:#444}
.charts{display:flex;flex-wrap:wrap;gap:1em}.charts figure{margin:0;background:#fff;border:1px solid #e2e4e8;
border-radius:6px;padding:.6em}
.qi{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:.6em .8em;margin:.6em 0}
.qi h3{margin:.1em 0 .4em;font-size:1em}.qi .pair{display:flex;flex-wrap:wrap;gap:1em}
table{border-collapse:collapse;margin:.5em 0;background:#fff}td,th{border:1px solid #ddd;padding:.2em .6em;
text-align:left;font-size:.9em}th{background:#eef0f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #e2e4e8;padding:.6em;overflow:auto;font-size:.85em}
details{margin:.4em 0}summary{cursor:pointer;font-weight:600}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _cell(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return f"<td>{'' if v is None else _e(v)}</td>"
    if isinstance(v, (int, float)):
        return f"<td class='num'>{_e(fmt_number(v) if isinstance(v, float) else v)}</td>"
    return f"<td>{_e(v)}</td>"


def html_table(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts as an HTML table (columns in first-seen order)."""
    if not rows:
        return "<p><em>none</em></p>"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict(r: dict[str, Any]) -> str:
    v = r.get("verdict") or {"status": "unknown", "checks": 0, "failed": [], "unknown": []}
    if v["status"] == "pass":
        head, detail = "PASS", f"all {v['checks']} privacy checks hold, recomputed in SQL over the released table"
    elif v["status"] == "fail":
        head, detail = "FAIL", f"failed: {', '.join(v['failed'])}"
    else:
        head, detail = "NOT VERIFIED", "the checks could not be run on this database (see Checks below)"
    return f"<div class='verdict {v['status']}' id='verdict'>{head}<small>{_e(detail)}</small></div>"


def _cards(r: dict[str, Any]) -> str:
    metrics = {m["metric"]: m for m in r.get("metrics", [])}
    counts = [("records in", r.get("records_in")), ("released", r.get("records_out")),
              ("suppressed", r.get("suppressed")), ("noise records", r.get("noise")),
              ("equivalence classes", r.get("classes"))]
    parts = ["<div class='family'>Records</div><div class='cards' id='records'>"]
    parts += [f"<div class='card'><div class='v'>{_e(fmt_number(v))}</div><div class='c'>{_e(c)}</div></div>"
              for c, v in counts if v is not None]
    parts.append("</div>")
    for title, cards, ident in (("Risk", RISK_CARDS, "risk"), ("Utility", UTILITY_CARDS, "utility")):
        shown = [(metrics[m], caption) for m, caption in cards if m in metrics]
        if not shown:
            continue
        parts.append(f"<div class='family'>{title}</div><div class='cards' id='{ident}'>")
        for m, caption in shown:
            parts.append(f"<div class='card' data-metric='{_e(m['metric'])}'><div class='v'>"
                         f"{_e(fmt_number(m['value']))}</div><div class='c'>{_e(caption)}</div>"
                         f"<div class='d'>{_e(m['metric'])} · {_e(_DIRECTION.get(m['direction'], ''))}</div></div>")
        parts.append("</div>")
    return "".join(parts)


def _class_charts(r: dict[str, Any]) -> list[str]:
    sizes = r.get("class_sizes") or []
    if not sizes:
        return []
    classes = bar_chart("Equivalence classes by size", [(c["size"], c["classes"]) for c in sizes])
    risky = [(f"{c['size']} (risk ≤ {_risk(c['size'])})", c["records"]) for c in sizes]
    records = bar_chart("Records by class size (re-identification risk = 1/size)", risky, color=ORANGE)
    return [classes, records]


def _risk(size_label: str) -> str:
    lo = int(size_label.replace("+", "").split("–")[0])
    return fmt_number(1.0 / lo)


def _distribution(q: str, d: dict[str, Any]) -> str:
    original = [(x["value"], x["records"]) for x in d["original"]]
    released = [(x["value"], x["records"]) for x in d["released"]]
    colors = [GREY if x["value"] == "(suppressed)" else None for x in d["released"]]
    note = "same bins on both sides" if d.get("same_bins") else (
        "original binned, released as generalized values" if d.get("binned") else "records per value")
    return (f"<div class='qi' data-qi='{_e(q)}'><h3>{_e(q)} <small style='color:#777;font-weight:400'>"
            f"({_e(note)})</small></h3><div class='pair'>"
            f"{bar_chart('original', original, color=BLUE, css_class='chart original')}"
            f"{bar_chart('released', released, color=ORANGE, colors=colors, css_class='chart released')}"
            "</div></div>")


def _more_charts(r: dict[str, Any]) -> list[str]:
    out = []
    if r.get("ncp_by_qi"):
        out.append(bar_chart("Information loss (NCP) per quasi-identifier", list(r["ncp_by_qi"].items())))
    if r.get("classification"):
        rows = r["classification"]
        out.append(bar_chart("Classification accuracy on the release (red: original data)",
                             [(f"{x['model']} ({x['protocol']})", x["accuracy_release"]) for x in rows],
                             marks=[x.get("accuracy_original") for x in rows], mark_label="original accuracy"))
    return out


def render_html(report: dict[str, Any]) -> str:
    """A self-contained HTML page for a report dict (see :func:`anon_sql.publish.report.build_report`)."""
    r = report
    quasi, sensitive = ", ".join(map(str, r.get("quasi", []))), ", ".join(map(str, r.get("sensitive", [])))
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>anon_sql report: {_e(r['release'])}</title><style>{CSS}</style></head><body><main>",
             f"<h1>Release {_e(r['release'])}</h1>",
             f"<p class='sub'>method <b>{_e(r['method'])}</b> · source {_e(r['source'])} · quasi-identifiers "
             f"{_e(quasi) or '–'} · sensitive {_e(sensitive) or '–'}</p>",
             _verdict(r), _cards(r)]
    charts = _class_charts(r) + _more_charts(r)
    if charts:
        parts.append("<h2>Classes and risk</h2><div class='charts'>"
                     + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>")
    if r.get("distributions"):
        parts.append("<h2 id='distributions'>Original vs released, per quasi-identifier</h2>")
        if r.get("audience"):
            parts.append(f"<p class='sub' id='audience'>For {_e(r['audience'])}.</p>")
        parts += [_distribution(q, d) for q, d in r["distributions"].items()]
    parts += ["<h2>Checks</h2>", html_table(r["checks"]), "<h2>Metrics</h2>", html_table(r["metrics"])]
    for key, title in (("query_error_table", "Query error by dim × selectivity"),
                       ("leakage", "Entropy leakage per quasi-identifier (seed 000)"),
                       ("classification", "Classification accuracy (release vs original baseline)"),
                       ("class_sizes", "Class sizes")):
        if r.get(key):
            parts += [f"<h2>{_e(title)}</h2>", html_table(r[key])]
    parts.append(f"<details><summary>Plan</summary><pre>{_e(json.dumps(r['plan'], indent=1, default=str))}"
                 "</pre></details>")
    parts.append("</main></body></html>")
    return "\n".join(parts)
