"""The population of k-map / δ-presence for the local-recoding planners: its distinct quasi-identifier combinations
(read and aggregated in SQL), encoded in the spaces of a method's :class:`QIColumn` s, and the records of it that
match any set of classes — so that a partitioner can refuse a split whose halves fail the population models.

A class is matched as its released values describe it (:mod:`methods.local_values`, and the SQL of
:mod:`anon_sql.compiler.population` that verifies the release): on a numeric QI the box [min, max] of its values
(all-NULL: only NULL; NULL mixed with values: ``*``, anything), on a categorical QI the leaves under its lowest
common ancestor (contiguous leaf ranks in the taxonomy's depth-first order; the top covers everything, values the
taxonomy does not know and NULL included). Counting is vectorized: the points are sorted once per QI, each class
takes the slice of the QI that cuts them shortest and tests the others on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ..models import population_models
from ..models.population import WEIGHT
from ..common.sqlbuild import alias, col, dtype, ident, render
from .local_values import QIColumn

_CHUNK = 4_000_000   # points tested at once (memory bound of the expanded slices)
_UNKNOWN = -1        # the rank of a population value a categorical column does not know (only the top covers it)


@dataclass
class PopulationPoints:
    """Distinct population combinations: per column an ordinal key (numeric: the value, NULL = +inf; categorical:
    the leaf rank, unknown = -1), their records, and the columns they were encoded for."""

    columns: list[QIColumn]
    keys: list[np.ndarray]
    weights: np.ndarray

    def __post_init__(self) -> None:
        self._order = [np.argsort(k, kind="stable") for k in self.keys]
        self._sorted = [k[o] for k, o in zip(self.keys, self._order)]
        self._ranges = {j: _leaf_ranges(c) for j, c in enumerate(self.columns) if not c.numeric}

    @property
    def n(self) -> int:
        return len(self.weights)

    def boxes(self, rows: np.ndarray, cls: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per class (0..n-1, from the rows ``rows`` assigned to ``cls``) and column: the key range it covers."""
        q = len(self.columns)
        lo, hi = np.full((n, q), np.inf), np.full((n, q), -np.inf)
        for j, c in enumerate(self.columns):
            if c.numeric:
                x = c.x[rows]
                nan = np.isnan(x)
                np.minimum.at(lo[:, j], cls[~nan], x[~nan])
                np.maximum.at(hi[:, j], cls[~nan], x[~nan])
                has_nan = np.bincount(cls[nan], minlength=n) > 0
                has_val = np.bincount(cls[~nan], minlength=n) > 0
                lo[has_nan & ~has_val, j] = hi[has_nan & ~has_val, j] = np.inf      # released NULL
                lo[has_nan & has_val, j], hi[has_nan & has_val, j] = -np.inf, np.inf   # released *
            else:
                o = c.order[rows]
                first, last = np.full(n, np.iinfo(np.int64).max), np.full(n, -1)
                np.minimum.at(first, cls, o)
                np.maximum.at(last, cls, o)
                present = last >= 0
                level, code = c.lca(first[present], last[present])
                top = c.tree.shape[1] - 1
                a, b = self._ranges[j]
                lo_j, hi_j = np.empty(len(level)), np.empty(len(level))
                for lv in np.unique(level):
                    m = level == lv
                    lo_j[m], hi_j[m] = a[lv][code[m]], b[lv][code[m]]
                lo_j[level == top], hi_j[level == top] = -np.inf, np.inf
                lo[present, j], hi[present, j] = lo_j, hi_j
        return lo, hi

    def counts(self, rows: np.ndarray, cls: np.ndarray, n: int) -> np.ndarray:
        """Records of the population matching each class 0..n-1 (boxes of :meth:`boxes`)."""
        out = np.zeros(n)
        if not self.columns:   # nothing generalized: every population record matches every class
            return out + self.weights.sum()
        if n == 0 or self.n == 0:
            return out
        lo, hi = self.boxes(rows, cls, n)
        starts, ends = [], []
        for j in range(len(self.columns)):
            starts.append(np.searchsorted(self._sorted[j], lo[:, j], side="left"))
            ends.append(np.searchsorted(self._sorted[j], hi[:, j], side="right"))
        lengths = np.stack([np.maximum(e - s, 0) for s, e in zip(starts, ends)], axis=1)
        d = int(np.argmin(lengths.sum(axis=0)))   # the QI whose slices hold the fewest points
        length, start, order = lengths[:, d], starts[d], self._order[d]
        cum = np.cumsum(length)
        begin = 0
        while begin < n:
            before = cum[begin - 1] if begin else 0
            end = max(int(np.searchsorted(cum, before + _CHUNK, side="right")), begin + 1)
            chunk = np.arange(begin, end)
            ln = length[chunk]
            idx = np.repeat(np.arange(len(chunk)), ln)
            offset = np.cumsum(ln) - ln
            points = order[start[chunk][idx] + np.arange(len(idx)) - offset[idx]]
            ok = np.ones(len(idx), dtype=bool)
            for j in range(len(self.columns)):
                if j != d:
                    k = self.keys[j][points]
                    ok &= (k >= lo[chunk[idx], j]) & (k <= hi[chunk[idx], j])
            out[chunk] = np.bincount(idx[ok], weights=self.weights[points[ok]], minlength=len(chunk))
            begin = end
        return out


def _leaf_ranges(c: QIColumn) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per level: the first and last leaf rank under each code (contiguous in depth-first order)."""
    ranks = np.arange(c.tree.shape[0])
    a, b = [], []
    for lv in range(c.tree.shape[1]):
        size = len(c.labels[lv])
        first, last = np.full(size, np.inf), np.full(size, -np.inf)
        np.minimum.at(first, c.tree[:, lv], ranks)
        np.maximum.at(last, c.tree[:, lv], ranks)
        a.append(first)
        b.append(last)
    return a, b


def leaf_ranks(c: QIColumn, values: Any) -> np.ndarray:
    """The leaf rank of each text value (None or NaN = NULL) in a categorical column's encoding; -1 when it has
    none. One hash lookup over all values (pandas), not a Python loop over the population's combinations."""
    leaf_labels = pd.Index(c.labels[0][c.tree[:, 0]], dtype=object)
    ranks = np.arange(len(leaf_labels), dtype=np.int64)
    keep = ~leaf_labels.duplicated(keep="last")           # a label twice: its last rank, as a dict would keep
    leaf_labels, ranks = leaf_labels[keep], ranks[keep]
    text = np.asarray(pd.array(values, dtype=object), dtype=object)
    text[pd.isna(text)] = None                            # NULL however the frame spells it (None, NaN, pd.NA)
    pos = leaf_labels.get_indexer(pd.Index(text, dtype=object))
    if not len(ranks):
        return np.full(len(text), _UNKNOWN, dtype=np.int64)
    return np.where(pos >= 0, ranks[np.maximum(pos, 0)], _UNKNOWN).astype(np.int64)


def population_points(ctx: Any, columns: Sequence[QIColumn]) -> PopulationPoints | None:
    """The population of the policy's k-map / δ-presence encoded for ``columns`` (None without those models):
    one GROUP BY in SQL over the resolved population relation, numeric columns as DOUBLE, the others as text."""
    models = population_models(ctx.models)
    if not models:
        return None
    relation = models[0].population.relation
    if relation is None:
        raise ValueError(f"population {models[0].population.name!r} was not resolved against the source")
    items = [alias(exp.Cast(this=col(c.name), to=dtype("DOUBLE" if c.numeric else "VARCHAR")), f"q{i}")
             for i, c in enumerate(columns)]
    query = (exp.select(*items, alias(exp.Sum(this=col(WEIGHT)), "w"))
             .from_(exp.Subquery(this=relation.copy(), alias=exp.TableAlias(this=ident("p"))))
             .group_by(*[exp.Column(this=ident(f"q{i}")) for i in range(len(columns))]))
    frame = ctx.con.execute(render(query)).df()
    keys = []
    for i, c in enumerate(columns):
        values = frame[f"q{i}"]
        if c.numeric:
            keys.append(np.nan_to_num(values.to_numpy(dtype=np.float64, na_value=np.nan), nan=np.inf))
        else:
            keys.append(leaf_ranks(c, values).astype(np.float64))
    return PopulationPoints(list(columns), keys, frame["w"].to_numpy(dtype=np.float64))


__all__ = ["PopulationPoints", "leaf_ranks", "population_points"]
