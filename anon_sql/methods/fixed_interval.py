"""``method = "fixed_interval"``: fixed-interval anonymization of numeric quasi-identifiers (seed 001, Algorithm 1).

Each numeric QI is cut into ``intervals`` intervals (``strategy = "width"``: IW = (max − min)/N, the paper's;
``"frequency"``: equal-count intervals, a value never split); an interval with fewer than k records is merged with
its smaller adjacent neighbour until all hold k. Each value is released as its interval's (weighted) mean, rounded to
the column's precision, plus θ when the interval is constant. Categorical QIs are released unchanged (in the
paper's scheme they are slicing's job), so they are listed out of ``released_quasi`` and are insensitive in the release.
The plan is an :class:`AssignmentPlan` whose classes are the interval combinations: the compiler, the SQL k check
and the catalog then treat the released intervals as equivalence classes with no special case.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PolicyError
from ..schema import choice, integer, key, number
from . import register
from .base import ROW_ID, AssignmentPlan, Method, MethodContext
from .local_values import format_numbers, load_source

STRATEGIES = ("width", "frequency")
_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "INT")


def precision(type_name: str) -> int | None:
    """Decimal places of a column type: 0 for integers, s for DECIMAL(p, s), None (no rounding) for floats."""
    t = type_name.upper().strip()
    if t.split("(")[0] in _INTEGER:
        return 0
    m = re.match(r"(?:DECIMAL|NUMERIC)\((\d+),\s*(\d+)\)", t)
    return int(m.group(2)) if m else None


def raw_intervals(x: np.ndarray, w: np.ndarray, n: int, strategy: str) -> np.ndarray:
    """Interval index per value (non-NaN ``x``) before merging: equal width (Algorithm 1) or equal frequency."""
    lo, hi = float(x.min()), float(x.max())
    if hi == lo:
        return np.zeros(len(x), dtype=np.int64)
    if strategy == "width":
        iw = (hi - lo) / n
        return np.minimum(n - 1, np.floor((x - lo) / iw)).astype(np.int64)
    # frequency: a value's interval is given by the weight of the smaller values (ties stay together)
    uniq, inv = np.unique(x, return_inverse=True)
    per_value = np.bincount(inv, weights=w, minlength=len(uniq))
    before = np.cumsum(per_value) - per_value
    idx = np.minimum(n - 1, np.floor(before / (per_value.sum() / n) + 1e-9)).astype(np.int64)
    return idx[inv]


def merge_small(sizes: np.ndarray, k: float) -> tuple[np.ndarray, int]:
    """Map of ordered non-empty intervals to merged groups: the smallest interval under k joins its smaller adjacent
    neighbour (ties: the left one) until every group holds k records. Returns (group per interval, merges)."""
    groups = [[i] for i in range(len(sizes))]
    tot = [float(s) for s in sizes]
    merges = 0
    while len(tot) > 1 and min(tot) < k:
        i = int(np.argmin(tot))
        left = tot[i - 1] if i > 0 else np.inf
        right = tot[i + 1] if i + 1 < len(tot) else np.inf
        j = i - 1 if left <= right else i + 1
        a, b = min(i, j), max(i, j)
        groups[a] += groups.pop(b)
        tot[a] += tot.pop(b)
        merges += 1
    out = np.empty(len(sizes), dtype=np.int64)
    for g, members in enumerate(groups):
        out[members] = g
    return out, merges


def fixed_intervals(x: np.ndarray, w: np.ndarray, n: int, k: float, strategy: str = "width",
                    decimals: int | None = 0, theta: float | None = None
                    ) -> tuple[np.ndarray, np.ndarray, list[dict], int]:
    """One numeric column → (interval per row, −1 for NULL; released value per row, NaN for NULL; the final
    intervals' bounds, records, mean and released value; number of merges)."""
    nan = np.isnan(x)
    b = np.full(len(x), -1, dtype=np.int64)
    out = np.full(len(x), np.nan)
    if nan.all():
        return b, out, [], 0
    xv, wv = x[~nan], w[~nan]
    raw = raw_intervals(xv, wv, n, strategy)
    present, dense = np.unique(raw, return_inverse=True)
    sizes = np.bincount(dense, weights=wv, minlength=len(present))
    group, merges = merge_small(sizes, k)
    g = group[dense]
    m = int(g.max()) + 1
    total = np.bincount(g, weights=wv, minlength=m)
    mean = np.bincount(g, weights=wv * xv, minlength=m) / total
    lo = np.full(m, np.inf)
    hi = np.full(m, -np.inf)
    np.minimum.at(lo, g, xv)
    np.maximum.at(hi, g, xv)
    step = theta if theta is not None else (10.0 ** -decimals if decimals is not None else 1.0)
    released = np.where(lo == hi, mean + step, mean)
    if decimals is not None:
        released = np.round(released, decimals)   # round half to even
    b[~nan] = g
    out[~nan] = released[g]
    table = [{"interval": i, "low": float(lo[i]), "high": float(hi[i]), "records": float(total[i]),
              "mean": float(mean[i]), "released": float(released[i])} for i in range(m)]
    return b, out, table, merges


INTERVAL_PARAMETERS = (
    key("intervals", integer(ge=1), "intervals per numeric QI (default: k)"),
    key("strategy", choice(*STRATEGIES), "equal-width or equal-frequency intervals", "width"),
    key("theta", number(), "offset of an interval's released mean when all its values are equal (default: one unit "
        "of the column's precision)"),
)


def interval_params(params: dict[str, Any]) -> tuple[int | None, str, float | None]:
    """``intervals``, ``strategy`` and ``theta`` of ``[method_params]`` (checked by INTERVAL_PARAMETERS)."""
    return params.get("intervals"), params.get("strategy", INTERVAL_PARAMETERS[1].default), params.get("theta")


@register
class FixedInterval(Method):
    """Fixed-interval recoding of the numeric QIs; ``[method_params] intervals`` (default: k), ``strategy``
    ("width" | "frequency"), ``theta`` (default: one unit of the column's precision)."""

    name = "fixed_interval"
    parameters = INTERVAL_PARAMETERS
    plan_kind = "assignment"
    needs_taxonomies = False

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.intervals, self.strategy, self.theta = interval_params(params)

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        k = int(getattr(ctx.policy.privacy, "k", None) or 1)
        n = int(self.intervals or k)
        data = load_source(ctx)
        numeric = [c for c in data.columns if c.numeric]
        if not numeric:
            raise PolicyError("method 'fixed_interval' needs at least one numeric quasi-identifier; "
                              f"the quasi-identifiers {list(ctx.policy.quasi)} are all categorical")
        codes, values, tables, merges = [], {}, {}, {}
        for c in numeric:
            b, rel, tables[c.name], merges[c.name] = fixed_intervals(c.x, data.weights, n, k, self.strategy,
                                            precision(data.types.get(c.name, "DOUBLE")), self.theta)
            codes.append(b)
            values[c.name] = rel
        combo = np.stack(codes, axis=1)
        uniq, first, ec = np.unique(combo, axis=0, return_index=True, return_inverse=True)
        ec = np.asarray(ec).reshape(-1) + 1
        sizes = np.bincount(ec, weights=data.weights)[1:]
        class_values = pd.DataFrame({"ec_id": np.arange(1, len(uniq) + 1)})
        for c in numeric:
            v = values[c.name][first]
            text = format_numbers(np.nan_to_num(v))
            text[np.isnan(v)] = None
            class_values[c.name] = pd.Series(text, dtype="string")
        info: dict[str, Any] = {"strategy": self.strategy, "intervals_requested": n, "intervals": tables,
                                "small_classes": int((sizes < k).sum()),
                                "merges": merges}
        return AssignmentPlan(pd.DataFrame({ROW_ID: data.rows, "ec_id": ec}), class_values, None, info,
                              released_quasi=[c.name for c in numeric])


__all__ = ["FixedInterval", "STRATEGIES", "fixed_intervals", "merge_small", "precision", "raw_intervals"]
