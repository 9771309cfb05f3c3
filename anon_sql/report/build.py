"""Release reports (text, HTML, JSON): building one from a Release, rendering, and sweep parameters.

A report is a plain dict (JSON-ready): the release's summary, verdict, plan, checks, every metric with its family,
direction and formula, class-size distribution, original vs released distribution per QI, NCP per QI, query error by
dim × selectivity, leakage per QI and, on request, classification accuracy against the original baseline. The HTML
page (:mod:`anon_sql.report.html`) draws its charts as inline SVG: self-contained, no plotting library. The report
of a stored release and sweeps, which read a database or run releases, are in :mod:`anon_sql.publish.report`.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from ..common.columns import is_numeric
from ..errors import PolicyError
from ..policy.model import Policy
from .html import render_html
from ..policy.keys import PRIVACY
from ..common.sqlbuild import alias, col, ident, lit, record_count, render as render_sql
from ..common.wording import counted

FORMATS = ("text", "html", "json")


# -- building ----------------------------------------------------------------------------------------------------
def size_histogram(sizes: np.ndarray) -> list[dict[str, Any]]:
    """Classes per size bucket (1, 2, 3–4, 5–9, 10–19, ... powers-of-ten-ish, then the rest)."""
    edges = [1, 2, 3, 5, 10, 20, 50, 100, 1000, 10_000, math.inf]
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (sizes >= lo) & (sizes < hi)
        if m.any():
            label = str(lo) if hi == lo + 1 else (f"{lo}+" if math.isinf(hi) else f"{lo}–{int(hi) - 1}")
            rows.append({"size": label, "classes": int(m.sum()), "records": float(sizes[m].sum())})
    return rows


def frame_records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None or not len(frame):
        return []
    return json.loads(frame.to_json(orient="records", default_handler=str))


def verdict(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """``pass`` when every check passed, ``fail`` naming the failed ones, ``unknown`` when the checks could not run."""
    failed = [str(c.get("check")) for c in checks if c.get("passed") is False]
    unknown = [str(c.get("check")) for c in checks if c.get("passed") is None]
    status = "fail" if failed else ("unknown" if unknown or not checks else "pass")
    return {"status": status, "checks": len(checks), "failed": failed, "unknown": unknown}


def metric_rows(values: dict[str, float]) -> list[dict[str, Any]]:
    """One row per metric value: family, direction, formula from the registry (details keys follow their metric)."""
    from ..metrics.registry import lookup

    rows = []
    for k, v in values.items():
        m = lookup(k)
        rows.append({"metric": k, "value": float(v), "family": m.family if m else "info",
                     "direction": m.direction if m else "info", "formula": m.formula if m and m.name == k else ""})
    return rows


def from_release(rel) -> dict[str, Any]:
    """A report from a :class:`~anon_sql.runner.run.Release` alone (no database): summary, plan, checks, metrics."""
    sizes = rel.classes["__size"].to_numpy(dtype=float) if "__size" in rel.classes else np.zeros(0)
    checks = frame_records(rel.checks)
    return {
        "release": rel.name, "method": rel.policy.method, "source": rel.policy.source,
        "records_in": rel.records_in, "records_out": rel.records_out, "suppressed": rel.suppressed,
        "noise": rel.noise, "classes": int(len(rel.classes)), "plan": rel.plan,
        "quasi": rel.policy.quasi, "sensitive": rel.policy.sensitive, "materialized": rel.materialized,
        "verdict": verdict(checks), "checks": checks, "metrics": metric_rows(rel.metrics),
        "class_sizes": size_histogram(sizes),
    }


# -- original vs released distributions -------------------------------------------------------------------------
DIST_BINS = 12     # equal-width bins of a numeric quasi-identifier (the same bins for the original and the release)
DIST_TOP = 20      # categories shown before the rest is summed up as "(N other values)"


def _histogram(con, relation: exp.Expression, column: str, weight: exp.Expression, lo: float, hi: float,
               integer: bool = False) -> list[dict[str, Any]]:
    """Records per equal-width bin of ``[lo, hi]`` (integer columns: whole-number bins labelled ``17–22``; values
    outside clamp to the end bins; NULLs as "(null)")."""
    if integer:
        width = float(max(1, math.ceil((hi - lo + 1) / DIST_BINS)))
        bins = int(math.ceil((hi - lo + 1) / width))
    else:
        width, bins = (hi - lo) / DIST_BINS, DIST_BINS
    x = exp.Cast(this=col(column), to=exp.DataType.build("DOUBLE"))
    raw = exp.Floor(this=exp.Div(this=exp.Paren(this=exp.Sub(this=x, expression=lit(lo))), expression=lit(width)))
    b = exp.Coalesce(this=exp.Greatest(this=exp.Least(this=exp.Cast(this=raw, to=exp.DataType.build("INT")),
                                                      expressions=[lit(bins - 1)]), expressions=[lit(0)]),
                     expressions=[lit(-1)])
    q = exp.select(alias(b, "b"), alias(weight, "n")).from_(relation.copy()).group_by(b.copy())
    counts = {int(r[0]): float(r[1]) for r in con.execute(render_sql(q)).fetchall()}

    def label(i: int) -> str:
        if integer:
            return f"{int(lo + i * width)}–{int(min(hi, lo + (i + 1) * width - 1))}"
        return f"{lo + i * width:.4g}–{lo + (i + 1) * width:.4g}"
    rows = [{"value": label(i), "records": counts.get(i, 0.0)} for i in range(bins)]
    if counts.get(-1):
        rows.append({"value": "(null)", "records": counts[-1]})
    return rows


def _categories(con, relation: exp.Expression, column: str, weight: exp.Expression) -> list[dict[str, Any]]:
    """Records per value, in the column's own order (ENUM order for generalized levels) when there are at most
    DIST_TOP values, else the DIST_TOP most frequent and one "(N other values)" row."""
    grouped = exp.select(alias(col(column), "k"), alias(weight, "n")).from_(relation.copy()).group_by(col(column))
    k = col("k")
    q = (exp.select(alias(exp.Cast(this=k, to=exp.DataType.build("VARCHAR")), "v"), col("n"),
                    alias(exp.Window(this=exp.RowNumber(), order=exp.Order(
                        expressions=[exp.Ordered(this=k.copy(), nulls_first=False)])), "pos"),
                    alias(exp.Window(this=exp.Count(this=exp.Star())), "groups"),
                    alias(exp.Window(this=exp.Sum(this=col("n"))), "total"))
         .from_(grouped.subquery("g")).order_by(exp.Ordered(this=col("n"), desc=True), col("pos"))
         .limit(DIST_TOP))
    found = con.execute(render_sql(q)).fetchall()
    if not found:
        return []
    groups, total = int(found[0][3]), float(found[0][4])
    if groups <= DIST_TOP:
        found = sorted(found, key=lambda r: r[2])
    rows = [{"value": "(null)" if r[0] is None else str(r[0]), "records": float(r[1])} for r in found]
    if groups > DIST_TOP:
        rows.append({"value": f"({groups - DIST_TOP} other values)",
                     "records": total - sum(r["records"] for r in rows)})
    return rows


def distributions(data) -> dict[str, dict[str, Any]]:
    """Per quasi-identifier: records per value in the original source and in the release (numeric columns binned
    alike on both sides when the release keeps them numeric), plus the suppressed records. All in SQL."""
    con, src = data.con, data.source
    released = exp.Table(this=ident(data.name))
    weight = record_count(data.policy.count_column)
    rel_types = {r[0]: r[1] for r in con.execute(render_sql(exp.Describe(
        this=exp.select("*").from_(released.copy())))).fetchall()}
    out: dict[str, dict[str, Any]] = {}
    for q in data.quasi:
        lo = hi = None
        if is_numeric(src.types.get(q, "")):
            x = exp.Cast(this=col(q), to=exp.DataType.build("DOUBLE"))
            lo, hi = con.execute(render_sql(exp.select(exp.Min(this=x), exp.Max(this=x.copy()))
                                            .from_(src.relation.copy()))).fetchall()[0]
        binned = lo is not None and hi is not None and hi > lo
        integer = "INT" in str(src.types.get(q, "")).upper()
        original = (_histogram(con, src.relation, q, weight, lo, hi, integer) if binned
                    else _categories(con, src.relation, q, weight))
        both = binned and is_numeric(rel_types.get(q, ""))
        release_rows = (_histogram(con, released, q, weight, lo, hi, integer) if both
                        else _categories(con, released, q, weight))
        if data.suppressed:
            release_rows.append({"value": "(suppressed)", "records": float(data.suppressed)})
        out[q] = {"original": original, "released": release_rows, "binned": binned, "same_bins": both}
    return out


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
    v = r.get("verdict") or verdict(r["checks"])
    said = {"pass": f"PASS: {'all ' if v['checks'] != 1 else ''}{counted(v['checks'], 'check holds', 'checks hold')} on the released table",
            "fail": f"FAIL: {', '.join(v['failed'])} failed", "unknown": "UNKNOWN: the checks could not be run"}
    parts = [said[v["status"]], f"release {r['release']!r} ({r['method']}): {counted(r['records_in'], 'record')} in, {r['records_out']} released, "
             f"{r['suppressed']} suppressed, {r['noise']} noise, {counted(r['classes'], 'class')}",
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


def render_report(report: dict[str, Any], format: str = "text") -> str:
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
