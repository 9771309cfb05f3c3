"""``method = "fixed_interval"``: fixed-interval anonymization of numeric quasi-identifiers (seed 001, Algorithm 1).

Each numeric QI is cut into ``intervals`` intervals (``strategy = "width"``: IW = (max − min)/N, the paper's;
``"frequency"``: equal-count intervals, a value never split); an interval with fewer than k records is merged with
its smaller adjacent neighbour until all hold k. Each value is released as its interval's (weighted) mean, rounded to
the column's precision, plus θ when the interval is constant.

Categorical QIs are declared quasi-identifiers too, so they are never released unchanged behind the method's back:
each is generalized full-domain through its taxonomy (a QI without one: the flat hierarchy value → ``*``), at the
lowest levels a greedy ascent finds (:func:`categorical_levels`) at which every class meets every model — or at most
``max_suppression`` of the records fail. The release's checks then verify all declared QIs as released.
The plan is an :class:`AssignmentPlan` whose classes are the combinations of intervals and generalized categorical
values: the compiler, the SQL checks and the catalog treat them as equivalence classes with no special case.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PolicyError
from ..models import find, group_rules
from ..policy.keys import choice, integer, key, number
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext
from .local_values import QIColumn, format_numbers, load_source
from .mondrian import StatsBuilder, all_ok
from .population_points import population_points

STRATEGIES = ("width", "frequency")
_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "INT")


def decimal_places(type_name: str) -> int | None:
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


@register_method
class FixedInterval(Method):
    """Fixed-interval recoding of the numeric QIs; ``[method_params] intervals`` (default: k), ``strategy``
    ("width" | "frequency"), ``theta`` (default: one unit of the column's precision)."""

    name = "fixed_interval"
    parameters = INTERVAL_PARAMETERS
    plan_kind = "assignment"
    needs_taxonomies = False
    plans_population = True

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.intervals, self.strategy, self.theta = interval_params(params)

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        k = find(ctx.models, "k_anonymity").k
        n = int(self.intervals or k)
        data = load_source(ctx)
        numeric = [c for c in data.columns if c.numeric]
        categorical = [c for c in data.columns if not c.numeric]
        if not numeric:
            raise PolicyError("method 'fixed_interval' needs at least one numeric quasi-identifier; "
                              f"the quasi-identifiers {list(ctx.policy.quasi)} are all categorical")
        codes, values, tables, merges = [], {}, {}, {}
        for c in numeric:
            b, rel, tables[c.name], merges[c.name] = fixed_intervals(c.x, data.weights, n, k, self.strategy,
                                            decimal_places(data.types.get(c.name, "DOUBLE")), self.theta)
            codes.append(b)
            values[c.name] = rel
        interval_codes = np.stack(codes, axis=1)
        budget = float(ctx.policy.privacy.max_suppression) * float(data.weights.sum())
        requirements = [(r.quasi, r.k) for r in group_rules(ctx.models)]
        population = interval_population(ctx, numeric, categorical, tables)
        levels = categorical_levels(interval_codes, numeric, categorical, data, ctx.models, requirements, budget,
                                    population)
        cls = class_codes(interval_codes, categorical, levels)
        _, first = np.unique(cls, return_index=True)
        ec = cls + 1
        sizes = np.bincount(ec, weights=data.weights)[1:]
        class_values = pd.DataFrame({"ec_id": np.arange(1, len(first) + 1)})
        for c in data.columns:   # the policy's order
            if c.numeric:
                v = values[c.name][first]
                text = format_numbers(np.nan_to_num(v))
                text[np.isnan(v)] = None
            else:
                lv = levels[c.name]
                text = c.labels[lv][c.anc[first, lv]]
            class_values[c.name] = pd.Series(text, dtype="string")
        info: dict[str, Any] = {"strategy": self.strategy, "intervals_requested": n, "intervals": tables,
                                "small_classes": int((sizes < k).sum()), "merges": merges,
                                "categorical_levels": levels}
        return AssignmentPlan(pd.DataFrame({ROW_ID: data.rows, "ec_id": ec}), class_values, None, info,
                              value_intervals={c: published_intervals(t) for c, t in tables.items()})


def published_intervals(table: list[dict]) -> list[dict[str, Any]]:
    """An interval table as the release reads it: each interval's upper bound and released text."""
    texts = format_numbers(np.array([iv["released"] for iv in table], dtype=np.float64))
    return [{"high": float(iv["high"]), "text": str(t)} for iv, t in zip(table, texts)]


@dataclass
class IntervalPopulation:
    """The population of k-map / δ-presence in a fixed-interval plan's terms: per distinct combination its interval
    code per numeric QI (the cut points of :func:`anon_sql.compiler.population.interval_case`; −1 = NULL), its leaf
    rank per categorical QI (−1: a value the column does not know) and its records."""

    interval_codes: np.ndarray
    ranks: np.ndarray
    weights: np.ndarray

    def codes(self, categorical: list[QIColumn], levels: dict[str, int]) -> list[np.ndarray]:
        """The class-key parts of every combination at ``levels`` (an unknown value matches only at the top)."""
        parts = [self.interval_codes[:, j] for j in range(self.interval_codes.shape[1])]
        for j, c in enumerate(categorical):
            lv, r = levels[c.name], self.ranks[:, j]
            top = lv == c.tree.shape[1] - 1
            parts.append(np.where(r >= 0, c.tree[np.maximum(r, 0), lv], 0 if top else -2))
        return parts


def interval_population(ctx: MethodContext, numeric: list[QIColumn], categorical: list[QIColumn],
                        tables: dict[str, list[dict]]) -> IntervalPopulation | None:
    """The policy's population for :func:`categorical_levels` (None without k-map / δ-presence)."""
    points = population_points(ctx, [*numeric, *categorical])
    if points is None:
        return None
    codes = []
    for j, c in enumerate(numeric):
        highs = np.array([iv["high"] for iv in tables[c.name]], dtype=np.float64)
        x = points.keys[j]
        code = np.minimum(np.searchsorted(highs, x, side="left"), max(len(highs) - 1, 0))
        codes.append(np.where(np.isinf(x) | (len(highs) == 0), -1, code))
    ranks = [points.keys[len(numeric) + j].astype(np.int64) for j in range(len(categorical))]
    return IntervalPopulation(np.stack(codes, axis=1) if codes else np.zeros((points.n, 0), dtype=np.int64),
                              np.stack(ranks, axis=1) if ranks else np.zeros((points.n, 0), dtype=np.int64),
                              points.weights)


def class_codes(interval_codes: np.ndarray, categorical: list[QIColumn], levels: dict[str, int]) -> np.ndarray:
    """Dense class code per row (0..classes−1, in the lexicographic order of the interval codes, then the generalized
    categorical codes) — one mixed-radix key densified column by column, so it never overflows."""
    parts = [interval_codes[:, j] for j in range(interval_codes.shape[1])]
    parts += [c.anc[:, levels[c.name]] for c in categorical]
    return class_key(parts, len(interval_codes))


def class_key(parts: list[np.ndarray], n: int) -> np.ndarray:
    """Dense code 0.. of each row of the parts' combinations (lexicographic order), densified part by part."""
    key = np.zeros(n, dtype=np.int64)   # no part: one class
    for p in parts:
        p = p.astype(np.int64) + 2                       # interval code −1 (NULL) → 1, −2 (no match) → 0
        _, key = np.unique(key * (int(p.max(initial=0)) + 1) + p, return_inverse=True)
        key = np.asarray(key, dtype=np.int64).reshape(-1)
    return key


def categorical_levels(interval_codes: np.ndarray, numeric: list[QIColumn], categorical: list[QIColumn], data,
                       models, requirements: list[tuple[list[str], int]], budget: float,
                       population: IntervalPopulation | None = None) -> dict[str, int]:
    """Full-domain levels of the categorical QIs, classes = (interval combination, generalized values): from the
    leaves, raise one QI a level at a time — the one whose raise leaves the fewest records failing (in a class that
    fails a model, or in a group of a ``[[privacy.requirements]]`` rule below its k; ties: the policy's order) —
    until at most ``budget`` records fail or every QI is at its top. ``population``: k-map / δ-presence count, per
    class, the population combinations with the same interval codes and generalized values."""
    if not categorical:
        return {}
    stats = StatsBuilder.from_source(data, models)
    rows = np.arange(data.n)
    position = {c.name: j for j, c in enumerate(numeric)}

    def failing(lv: dict[str, int]) -> float:
        if population is None:
            cls = class_codes(interval_codes, categorical, lv)
            st = stats.build(rows, cls, int(cls.max()) + 1)
        else:   # sample and population keyed together, so that equal descriptions get equal codes
            parts = [interval_codes[:, j] for j in range(interval_codes.shape[1])]
            parts += [c.anc[:, lv[c.name]] for c in categorical]
            pop_parts = population.codes(categorical, lv)
            key = class_key([np.r_[a, b] for a, b in zip(parts, pop_parts)], data.n + len(population.weights))
            cls, pop_cls = key[:data.n], key[data.n:]
            n_cls = int(key.max()) + 1
            st = stats.build(rows, cls, n_cls)
            st.population = np.bincount(pop_cls, weights=population.weights, minlength=n_cls)
        bad = ~all_ok(models, st)[cls]
        for quasi, k in requirements:
            sub = [c for c in categorical if c.name in quasi]
            group = class_codes(interval_codes[:, [position[q] for q in quasi if q in position]], sub, lv)
            bad |= (np.bincount(group, weights=data.weights) < k)[group]
        return float(data.weights[bad].sum())

    levels = {c.name: 0 for c in categorical}
    worst = failing(levels)
    while worst > budget + 1e-9:
        trials = []
        for c in categorical:
            if levels[c.name] + 1 < c.tree.shape[1]:
                trial = {**levels, c.name: levels[c.name] + 1}
                trials.append((failing(trial), trial))
        if not trials:
            break
        worst, levels = min(trials, key=lambda t: t[0])   # min keeps the first of equals: the policy's order
    return levels


__all__ = ["FixedInterval", "STRATEGIES", "categorical_levels", "fixed_intervals", "merge_small", "decimal_places",
           "published_intervals", "raw_intervals"]
