"""Release reports (text, HTML, JSON) and parameter sweeps.

A report is a plain dict (JSON-ready): the release's summary, plan, checks, every metric with its direction and
formula, class-size distribution, NCP per QI, query error by dim × selectivity, leakage per QI and, on request,
classification accuracy against the original baseline. HTML embeds matplotlib charts when matplotlib is installed
(``pip install anon-sql[report]``), tables only otherwise.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from typing import Any, Sequence

import duckdb
import numpy as np
import pandas as pd

from .errors import AnonSQLError, PolicyError, PrivacyRequirementError
from .policy import Policy, coerce_policy
from .schema import PRIVACY

FORMATS = ("text", "html", "json")


# -- building ----------------------------------------------------------------------------------------------------
def _size_histogram(sizes: np.ndarray) -> list[dict[str, Any]]:
    """Classes per size bucket (1, 2, 3–4, 5–9, 10–19, ... powers-of-ten-ish, then the rest)."""
    edges = [1, 2, 3, 5, 10, 20, 50, 100, 1000, 10_000, math.inf]
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (sizes >= lo) & (sizes < hi)
        if m.any():
            label = str(lo) if hi == lo + 1 else (f"{lo}+" if math.isinf(hi) else f"{lo}–{int(hi) - 1}")
            rows.append({"size": label, "classes": int(m.sum()), "records": float(sizes[m].sum())})
    return rows


def _records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None or not len(frame):
        return []
    return json.loads(frame.to_json(orient="records", default_handler=str))


def from_release(rel) -> dict[str, Any]:
    """A report from a :class:`~anon_sql.release.Release` alone (no database): summary, plan, checks, metrics."""
    from .metrics import direction

    sizes = rel.classes["__size"].to_numpy(dtype=float) if "__size" in rel.classes else np.zeros(0)
    return {
        "release": rel.name, "method": rel.policy.method, "source": rel.policy.source,
        "records_in": rel.records_in, "records_out": rel.records_out, "suppressed": rel.suppressed,
        "noise": rel.noise, "classes": int(len(rel.classes)), "plan": rel.plan,
        "quasi": rel.policy.quasi, "sensitive": rel.policy.sensitive, "materialized": rel.materialized,
        "checks": _records(rel.checks),
        "metrics": [{"metric": k, "value": float(v), "direction": direction(k)} for k, v in rel.metrics.items()],
        "class_sizes": _size_histogram(sizes),
    }


def build(con, release_name: str, names: Sequence[str] | str | None = None, params: dict[str, Any] | None = None,
          classify: str | None = None, classify_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full report of a materialized release: catalog row, checks, metrics (all by default), details tables and,
    with ``classify = "<target column>"``, classification accuracy (see metrics.classification.classify)."""
    from . import api
    from .metrics import ReleaseData, evaluate
    from .metrics.registry import lookup
    from .metrics.query import query_error_table
    from .metrics.risk import leakage_table

    data = ReleaseData.from_catalog(con, release_name, params)
    values = evaluate(data, names)
    try:
        checks = api.check(con, release_name)
    except (AnonSQLError, duckdb.Error) as err:   # e.g. an exported copy without its views: metrics still shown
        checks = pd.DataFrame([{"check": "checks view", "passed": None, "error": str(err)}])
    metrics = []
    for k, v in values.items():
        m = lookup(k)
        metrics.append({"metric": k, "value": v, "direction": m.direction if m else "info",
                        "formula": m.formula if m and m.name == k else ""})
    report: dict[str, Any] = {
        "release": release_name, "method": data.policy.method, "source": data.source_label,
        "records_in": data.records_in, "records_out": int(data.class_sizes.sum()), "suppressed": data.suppressed,
        "noise": data.noise, "classes": int(len(data.class_sizes)), "plan": data.plan, "quasi": data.quasi,
        "sensitive": data.policy.sensitive, "materialized": True,
        "checks": _records(checks), "metrics": metrics, "class_sizes": _size_histogram(data.class_sizes),
        "ncp_by_qi": {q: values[f"ncp__{q}"] for q in data.quasi if f"ncp__{q}" in values},
    }
    if "query_error" in values:
        report["query_error_table"] = _records(query_error_table(data))
    if "leakage_post" in values or "leakage_pre" in values:
        report["leakage"] = _records(leakage_table(data))
    if classify:
        from .metrics.classification import classify as run_classify

        report["classification"] = _records(run_classify(con, data, classify, **(classify_options or {})))
        report["classification_target"] = classify
    return report


# -- rendering ---------------------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else str(v)


def _text_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "  (none)"
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.6g}")


def render_text(report: dict[str, Any]) -> str:
    """Plain text: summary, plan, checks, metrics and the detail tables."""
    r = report
    parts = [f"release {r['release']!r} ({r['method']}): {r['records_in']} records in, {r['records_out']} released, "
             f"{r['suppressed']} suppressed, {r['noise']} noise, {r['classes']} classes",
             f"plan: {json.dumps(r['plan'], default=str)}", "", "checks:", _text_table(r["checks"]), "", "metrics:"]
    parts += [f"  {m['metric']}: {_fmt(m['value'])} ({m['direction']})" for m in r["metrics"]]
    for key, title in (("class_sizes", "class sizes"), ("query_error_table", "query error by dim × selectivity"),
                       ("leakage", "entropy leakage per quasi-identifier"),
                       ("classification", "classification accuracy (release vs original)")):
        if r.get(key):
            parts += ["", title + ":", _text_table(r[key])]
    return "\n".join(parts)


def render_json(report: dict[str, Any]) -> str:
    """JSON text (NaN / infinity become null)."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(report), indent=2, default=str, allow_nan=False)


def _html_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _charts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, base64 PNG) per chart; empty when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    specs = []
    if report.get("class_sizes"):
        cs = report["class_sizes"]
        specs.append(("Classes by size", [c["size"] for c in cs], [c["classes"] for c in cs], "classes"))
    if report.get("ncp_by_qi"):
        specs.append(("NCP per quasi-identifier", list(report["ncp_by_qi"]), list(report["ncp_by_qi"].values()),
                      "NCP"))
    if report.get("classification"):
        rows = [r for r in report["classification"]]
        labels = [f"{r['model']} ({r['protocol']})" for r in rows]
        specs.append(("Accuracy: release (orig. baseline as line)", labels, [r["accuracy_release"] for r in rows],
                      "accuracy", [r["accuracy_original"] for r in rows]))
    out = []
    for spec in specs:
        title, labels, values, ylabel = spec[:4]
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        ax.bar(range(len(values)), values, color="#4477aa")
        if len(spec) > 4:
            ax.scatter(range(len(values)), spec[4], color="#cc3311", marker="_", s=400, zorder=3, label="original")
            ax.legend(loc="lower right")
        ax.set_xticks(range(len(values)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90)
        plt.close(fig)
        out.append((title, base64.b64encode(buf.getvalue()).decode("ascii")))
    return out


def render_html(report: dict[str, Any], charts: bool = True) -> str:
    """A self-contained HTML page (every value escaped)."""
    r = report
    e = html.escape
    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
           "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#f3f3f3}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>anon_sql report: {e(str(r['release']))}"
             f"</title><style>{css}</style></head><body>",
             f"<h1>Release {e(str(r['release']))}</h1>",
             f"<p>method <b>{e(str(r['method']))}</b>, source {e(str(r['source']))}: {r['records_in']} records in, "
             f"{r['records_out']} released, {r['suppressed']} suppressed, {r['noise']} noise, {r['classes']} "
             "equivalence classes.</p>",
             f"<p>quasi-identifiers: {e(', '.join(map(str, r.get('quasi', []))))}; sensitive: "
             f"{e(', '.join(map(str, r.get('sensitive', []))))}</p>",
             f"<h2>Plan</h2><pre>{e(json.dumps(r['plan'], indent=1, default=str))}</pre>",
             "<h2>Checks</h2>", _html_table(r["checks"]), "<h2>Metrics</h2>", _html_table(r["metrics"])]
    for key, title in (("class_sizes", "Class sizes"), ("query_error_table", "Query error by dim × selectivity"),
                       ("leakage", "Entropy leakage per quasi-identifier (seed 000)"),
                       ("classification", "Classification accuracy (release vs original baseline)")):
        if r.get(key):
            parts += [f"<h2>{e(title)}</h2>", _html_table(r[key])]
    images = _charts(r) if charts else []
    if images:
        parts.append("<h2>Charts</h2>")
        parts += [f"<figure><img alt='{e(t)}' src='data:image/png;base64,{b}'><figcaption>{e(t)}</figcaption>"
                  "</figure>" for t, b in images]
    elif charts:
        parts.append("<p><em>Charts need matplotlib: pip install anon-sql[report]</em></p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render(report: dict[str, Any], format: str = "text") -> str:
    """Render a report dict as ``text``, ``html`` or ``json``."""
    if format not in FORMATS:
        raise PolicyError(f"report format {format!r} is not one of {', '.join(FORMATS)}")
    return {"text": render_text, "html": render_html, "json": render_json}[format](report)


# -- sweeps ------------------------------------------------------------------------------------------------------
def set_param(policy: Policy, param: str, value: Any) -> Policy:
    """A copy of the policy with one parameter changed: ``k``, ``max_suppression``, ``l_diversity.l``,
    ``privacy.t_closeness``, ``method``, ``method_params.window``, ... (bare names: top level, privacy, then
    method_params)."""
    d = policy.to_dict()
    parts = param.split(".")
    if parts[0] in ("privacy", "method_params", "metrics"):
        target, parts = d.setdefault(parts[0], {}), parts[1:]
    elif parts[0] in Policy.__dataclass_fields__:     # name, method, seed, attributes.age.taxonomy, ...
        target = d
    elif parts[0] in PRIVACY.keys:
        target = d.setdefault("privacy", {})
    else:
        target = d.setdefault("method_params", {})
    if not parts:
        raise PolicyError(f"sweep parameter {param!r} names a table, not a value (e.g. privacy.k)")
    for p in parts[:-1]:
        nxt = target.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            target[p] = nxt
        target = nxt
    target[parts[-1]] = value
    return Policy.from_dict(d)


def parse_values(text: str) -> list[Any]:
    """``"2,5,10"`` → [2, 5, 10]; numbers, true/false, else strings."""
    out: list[Any] = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        for cast in (int, float):
            try:
                out.append(cast(raw))
                break
            except ValueError:
                continue
        else:
            out.append({"true": True, "false": False}.get(raw.lower(), raw))
    if not out:
        raise PolicyError(f"no values in {text!r}; write them comma-separated, e.g. k=2,5,10")
    return out


def sweep(con, policy: Policy | dict | str, param: str, values: Sequence[Any],
          names: Sequence[str] | str | None = None, progress=None) -> pd.DataFrame:
    """Dry-run the release once per value of ``param`` and tabulate its metrics (the policy's ``[metrics]
    compute``, else ``names``, else the default set); a value whose requirements fail gets status ``failed``."""
    from .metrics import DEFAULT
    from .release import release

    base = coerce_policy(policy)
    chosen = names or base.metrics.get("compute") or list(DEFAULT)
    rows = []
    for v in values:
        pol = set_param(base, param, v)
        pol = pol.replace(metrics={**pol.metrics, "compute": chosen})
        if progress:
            progress(f"{param} = {v}")
        row: dict[str, Any] = {param: v}
        try:
            rel = release(con, pol, dry_run=True)
            row.update(status="ok", records_out=rel.records_out, suppressed=rel.suppressed,
                       classes=len(rel.classes), seconds=round(rel.info.get("seconds", float("nan")), 3))
            row.update({(f"{k}_achieved" if k in row else k): v for k, v in rel.metrics.items()})
        except PrivacyRequirementError as err:
            row.update(status="failed", message=str(err))
        rows.append(row)
    return pd.DataFrame(rows)
