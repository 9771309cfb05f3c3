"""Utility of a perturbation (issue 26 part 6): IL1s (sdcMicro ``dUtility``) and how well means, variances,
covariances and correlations are kept — computed in SQL over the original and the perturbed table."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from .sqlparts import ident, render, table_or_subquery


def il1s(original: np.ndarray, perturbed: np.ndarray) -> float:
    """IL1s = 1/(n p) Σ_j Σ_i |x_ij − x'_ij| / (√2 S_j), S_j the sample sd of original column j (columns with S_j = 0
    or rows with a NULL / NaN on either side are left out). The numpy reference of ``utility_sql``'s IL1s."""
    X = np.asarray(original, dtype=float)
    Y = np.asarray(perturbed, dtype=float)
    if X.ndim == 1:
        X, Y = X[:, None], Y[:, None]
    total, cols = 0.0, 0
    for j in range(X.shape[1]):  # a loop over columns
        ok = ~(np.isnan(X[:, j]) | np.isnan(Y[:, j]))
        s = np.std(X[ok, j], ddof=1) if ok.sum() > 1 else 0.0
        if s > 0:
            total += np.abs(X[ok, j] - Y[ok, j]).sum() / (math.sqrt(2) * s) / ok.sum()
            cols += 1
    return total / cols if cols else 0.0


def _relative(before: float | None, after: float | None) -> float | None:
    if before is None or after is None:
        return None
    if before == 0:
        return abs(after - before)
    return abs(after - before) / abs(before)


def utility_sql(original: str | exp.Table, perturbed: str | exp.Table, columns: Sequence[str],
                row_id: str | None = None) -> exp.Select:
    """One row of statistics: for each column c its mean and sample variance before and after (``mean_o_<i>``,
    ``mean_p_<i>``, ``var_o_<i>``, ``var_p_<i>``), for each pair i < j the covariance and correlation before and
    after (``cov_o_<i>_<j>``, ... ``corr_p_<i>_<j>``), and with ``row_id`` (a column both tables share, e.g. from
    perturb(row_id=...)) the IL1s terms ``il1_<i>`` = Σ|x − x'| / (√2 S) / n. Moments need no row alignment."""
    if not columns:
        raise PolicyError("utility: name at least one numeric column")
    o_cols = [exp.column(c, table="o", quoted=True) for c in columns]
    p_cols = [exp.column(c, table="p", quoted=True) for c in columns]

    def moments(alias: str, cols: list[exp.Expression]) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for i, c in enumerate(cols):
            out.append(exp.func("AVG", c.copy()).as_(f"mean_{alias}_{i}"))
            out.append(exp.func("VAR_SAMP", c.copy()).as_(f"var_{alias}_{i}"))
        for i in range(len(cols)):
            for j in range(i + 1, len(cols)):
                out.append(exp.func("COVAR_SAMP", cols[i].copy(), cols[j].copy()).as_(f"cov_{alias}_{i}_{j}"))
                out.append(exp.func("CORR", cols[i].copy(), cols[j].copy()).as_(f"corr_{alias}_{i}_{j}"))
        return out

    o_stats = exp.select(*moments("o", o_cols)).from_(exp.alias_(table_or_subquery(original), "o", table=True))
    p_stats = exp.select(*moments("p", p_cols)).from_(exp.alias_(table_or_subquery(perturbed), "p", table=True))
    q = exp.select(exp.Star()).from_(o_stats.subquery("os")).join(p_stats.subquery("ps"), join_type="cross")
    if row_id is not None:
        terms = []
        for i, (o, p) in enumerate(zip(o_cols, p_cols)):
            diff = exp.func("ABS", exp.Sub(this=o.copy(), expression=p.copy()))
            scale = exp.Mul(this=exp.Mul(this=exp.func("SQRT", exp.Literal.number(2)),
                                         expression=exp.func("STDDEV_SAMP", o.copy())),
                            expression=exp.func("COUNT", diff.copy()))
            terms.append(exp.Div(this=exp.func("SUM", diff), expression=exp.func("NULLIF", scale, exp.Literal.number(0))).as_(f"il1_{i}"))
        il = exp.select(*terms).from_(exp.alias_(table_or_subquery(original), "o", table=True)).join(
            exp.alias_(table_or_subquery(perturbed), "p", table=True), using=[ident(row_id)])
        q = q.join(il.subquery("il"), join_type="cross")
    return q


def perturbation_utility(con, original: str | exp.Table, perturbed: str | exp.Table, columns: Sequence[str],
                         row_id: str | None = None) -> dict[str, Any]:
    """Run utility_sql on a DuckDB connection and shape it (:func:`shaped_utility`)."""
    result = con.execute(render(utility_sql(original, perturbed, columns, row_id)))
    names = [d[0] for d in result.description]
    return shaped_utility(dict(zip(names, result.fetchall()[0])), columns, with_il1s=row_id is not None)


def fetched_row(frame: Any) -> dict[str, Any]:
    """The one row of :func:`utility_sql` fetched by an engine as a DataFrame: floats, and None where pandas put NaN
    for SQL NULL (an undefined variance or correlation), as DuckDB's fetch gives them."""
    row = frame.iloc[0].to_dict()
    return {k: None if v is None or v != v else float(v) for k, v in row.items()}


def shaped_utility(v: dict[str, Any], columns: Sequence[str], with_il1s: bool) -> dict[str, Any]:
    """The one row of :func:`utility_sql` (computed by any engine) as: per column mean / variance before, after and
    relative change; per pair the covariance and correlation before and after (correlation as an absolute
    difference); the mean relative changes (``means``, ``variances``, ``covariances``, ``correlations``: 0 =
    perfectly kept) and IL1s when the query had a row id."""
    per_column = {}
    for i, c in enumerate(columns):
        per_column[c] = {
            "mean": v[f"mean_o_{i}"], "mean_perturbed": v[f"mean_p_{i}"],
            "mean_change": _relative(v[f"mean_o_{i}"], v[f"mean_p_{i}"]),
            "variance": v[f"var_o_{i}"], "variance_perturbed": v[f"var_p_{i}"],
            "variance_change": _relative(v[f"var_o_{i}"], v[f"var_p_{i}"]),
        }
    pairs = {}
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            co, cp = v[f"corr_o_{i}_{j}"], v[f"corr_p_{i}_{j}"]
            pairs[(columns[i], columns[j])] = {
                "covariance": v[f"cov_o_{i}_{j}"], "covariance_perturbed": v[f"cov_p_{i}_{j}"],
                "covariance_change": _relative(v[f"cov_o_{i}_{j}"], v[f"cov_p_{i}_{j}"]),
                "correlation": co, "correlation_perturbed": cp,
                "correlation_change": None if co is None or cp is None else abs(cp - co),
            }

    def mean_of(values: list[float | None]) -> float | None:
        vals = [x for x in values if x is not None and not math.isnan(x)]
        return float(np.mean(vals)) if vals else None

    out: dict[str, Any] = {
        "columns": per_column, "pairs": pairs,
        "means": mean_of([c["mean_change"] for c in per_column.values()]),
        "variances": mean_of([c["variance_change"] for c in per_column.values()]),
        "covariances": mean_of([p["covariance_change"] for p in pairs.values()]),
        "correlations": mean_of([p["correlation_change"] for p in pairs.values()]),
    }
    if with_il1s:
        terms = [v[f"il1_{i}"] for i in range(len(columns))]
        terms = [t for t in terms if t is not None and not math.isnan(t)]
        out["il1s"] = float(np.mean(terms)) if terms else 0.0
    return out
