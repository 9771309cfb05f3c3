"""Query accuracy (spec/06, seed 004): a seeded workload of COUNT(*) queries with ``dim`` QI predicates (a range for
numeric QIs, an IN-set for categorical ones) of a target selectivity, answered exactly on the source and estimated on
the release (each released record counts by the share of its generalized cell inside the predicate).

Both answers are sums over aggregates — the distinct original / released QI tuples with their counts — so 1,000
queries cost a few vectorized passes, not 1,000 scans. :meth:`Query.condition` gives the same predicate as SQL.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

import numpy as np
import pandas as pd
from sqlglot import exp

from ..errors import PolicyError
from ..common.sqlbuild import col, lit
from .data import ReleaseData, varchar
from .registry import register_metric
from .values import Domain

DEFAULT_QUERIES = 1000
DEFAULT_SELECTIVITY = (0.01, 0.05, 0.1)


@dataclass
class Query:
    """One COUNT(*) query: per QI a boolean mask over its domain leaves."""

    dim: int
    selectivity: float
    masks: dict[str, np.ndarray] = field(default_factory=dict)

    def condition(self, domains: dict[str, Domain]) -> exp.Expression:
        """The predicate as SQL over the source: BETWEEN for numeric QIs, IN (text values) for categorical ones."""
        parts = []
        for q, mask in self.masks.items():
            dom = domains[q]
            if dom.numeric:
                x = dom.x[mask]
                parts.append(exp.Between(this=col(q), low=lit(float(np.nanmin(x))), high=lit(float(np.nanmax(x)))))
            else:
                parts.append(exp.In(this=varchar(col(q)), expressions=[lit(v) for v in dom.labels[mask]]))
        return exp.and_(*parts)


def _leaf_mass(d: ReleaseData) -> dict[str, np.ndarray]:
    """Records per domain leaf of every QI (from the original tuples)."""
    n = d.original["n"].to_numpy(dtype=float)
    return {q: np.bincount(d.original_codes[:, i], weights=n, minlength=d.domains[q].n)
            for i, q in enumerate(d.quasi)}


def _mask(dom: Domain, mass: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """Leaves holding about ``share`` of the records: a range of consecutive values (numeric) or a random set."""
    usable = mass.copy()
    if dom.null_leaf >= 0:
        usable[dom.null_leaf] = 0.0          # NULL matches neither a range nor an IN-set
    p = usable / usable.sum()
    mask = np.zeros(dom.n, dtype=bool)
    if dom.numeric:
        cum = np.cumsum(p)
        start = rng.uniform(0.0, max(1.0 - share, 0.0))
        lo = int(np.searchsorted(cum, start, side="right"))
        hi = int(np.searchsorted(cum, min(start + share, 1.0) - 1e-12, side="left"))
        lo, hi = min(lo, dom.n - 1), min(max(hi, lo), dom.n - 1)
        x = dom.x
        mask = (x >= x[lo]) & (x <= x[hi])
    else:
        present = np.flatnonzero(p > 0)
        order = rng.permutation(present)
        cum = np.cumsum(p[order])
        take = int(np.searchsorted(cum, share - 1e-12, side="left")) + 1
        mask[order[:take]] = True
    return mask


def workload(d: ReleaseData) -> list[Query]:
    """The seeded workload: parameters queries (1000), query_dims ([1, 2, 3] up to |Q|), query_selectivity
    ([0.01, 0.05, 0.1]) and query_seed (the policy's seed); queries cycle over (dim, selectivity)."""
    if "workload" in d.cache:
        return d.cache["workload"]
    n = int(d.params.get("queries", DEFAULT_QUERIES))
    dims = [int(x) for x in d.params.get("query_dims", [x for x in (1, 2, 3) if x <= len(d.quasi)])]
    sels = [float(x) for x in d.params.get("query_selectivity", DEFAULT_SELECTIVITY)]
    if n < 1 or not dims or any(not 1 <= x <= len(d.quasi) for x in dims):
        raise PolicyError(f"metrics parameters: queries must be >= 1 and query_dims between 1 and the number of "
                          f"quasi-identifiers ({len(d.quasi)}); got queries = {n}, query_dims = {dims}")
    if not sels or any(not 0 < s <= 1 for s in sels):
        raise PolicyError(f"metrics parameter query_selectivity must be fractions in (0, 1]; got {sels}")
    rng = np.random.default_rng(int(d.params.get("query_seed", d.policy.seed)))
    mass = _leaf_mass(d)
    combos = list(product(dims, sels))
    out = []
    for j in range(n):   # one step per query (the workload), never per row
        dim, sel = combos[j % len(combos)]
        chosen = rng.choice(len(d.quasi), size=dim, replace=False)
        share = sel ** (1.0 / dim)
        masks = {d.quasi[i]: _mask(d.domains[d.quasi[i]], mass[d.quasi[i]], share, rng) for i in sorted(chosen)}
        out.append(Query(dim, sel, masks))
    d.cache["workload"] = out
    return out


def answers(d: ReleaseData, queries: list[Query]) -> tuple[np.ndarray, np.ndarray]:
    """(true counts on the source, estimated counts on the release) for each query."""
    n_o = d.original["n"].to_numpy(dtype=float)
    n_t = d.tuples["n"].to_numpy(dtype=float)
    col_of = {q: i for i, q in enumerate(d.quasi)}
    true, est = np.zeros(len(queries)), np.zeros(len(queries))
    for j, query in enumerate(queries):
        hit = np.ones(len(n_o), dtype=bool)
        share = np.ones(len(n_t))
        for q, mask in query.masks.items():
            i = col_of[q]
            codes = d.original_codes[:, i]
            hit &= (codes >= 0) & mask[np.maximum(codes, 0)]
            share *= d.covers[q].fraction(mask)[d.tuple_codes[:, i]]
        true[j] = n_o[hit].sum()
        est[j] = (n_t * share).sum()
    return true, est


def query_errors(d: ReleaseData) -> pd.DataFrame:
    """One row per query: dim, selectivity, true, estimate, relative error |est − true| / true (NaN when true = 0)."""
    if "query_errors" not in d.cache:
        qs = workload(d)
        true, est = answers(d, qs)
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.where(true > 0, np.abs(est - true) / np.where(true > 0, true, 1), np.nan)
        d.cache["query_errors"] = pd.DataFrame({"dim": [q.dim for q in qs], "selectivity": [q.selectivity for q in qs],
                                                "true": true, "estimate": est, "error": err})
    return d.cache["query_errors"]


def query_error_table(d: ReleaseData) -> pd.DataFrame:
    """Mean and median relative error by dim and selectivity, with the number of queries and of skipped ones."""
    e = query_errors(d)
    g = e.groupby(["dim", "selectivity"])
    return pd.DataFrame({"mean": g["error"].mean(), "median": g["error"].median(), "queries": g.size(),
                         "skipped": g["error"].apply(lambda s: int(s.isna().sum()))}).reset_index()


@register_metric("query_error", "query", "mean over a seeded workload of COUNT(*) queries of |est − true| / true "
          "(queries with true = 0 skipped and counted: query_skipped; also query_error_median)", "lower",
          needs="release+source", reads=("tuples",))
def query_error(d: ReleaseData) -> dict[str, float]:
    e = query_errors(d)["error"]
    ok = e.dropna()
    return {"query_error": float(ok.mean()) if len(ok) else float("nan"),
            "query_error_median": float(ok.median()) if len(ok) else float("nan"),
            "query_skipped": float(e.isna().sum())}
