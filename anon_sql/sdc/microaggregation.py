"""Microaggregation (spec/10-sdc.md): MDAV over one column (sorting + grouping) or over a group of standardized
numeric columns (Domingo-Ferrer & Torra 2005), and individual ranking as SQL window functions.

Group labels are computed in numpy; every value then becomes its group's mean, so column totals are unchanged and
groups hold k … 2k − 1 records.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from .sqlparts import fill


@dataclass(frozen=True)
class Grouping:
    """Group label of every record (0 … groups − 1) and the within/total sum of squares of the aggregation."""

    labels: np.ndarray
    groups: int
    sse: float
    sst: float

    @property
    def information_loss(self) -> float:
        """SSE / SST (0 when the data has no spread)."""
        return self.sse / self.sst if self.sst > 0 else 0.0


def _check(n: int, k: int) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 2:
        raise PolicyError(f"microaggregation: k = {k!r} must be an integer >= 2 (set k = 3, say)")
    if 0 < n < k:
        raise PolicyError(f"microaggregation: {n} values are fewer than k = {k}: lower k or drop the column")


def mdav_univariate(x: np.ndarray, k: int) -> np.ndarray:
    """MDAV group labels of one column. On a line, the record farthest from the centroid is an extreme and its k − 1
    nearest records are its sorted neighbours, so MDAV is: sort, take k from each end while ≥ 3k remain, then (2k …
    3k − 1 left) k from the end farther from the remaining mean, the rest one group. O(n log n), no loop over rows."""
    x = np.asarray(x, dtype=float)
    n = x.size
    _check(n, k)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    t = (n - 3 * k) // (2 * k) + 1 if n >= 3 * k else 0  # iterations of the "≥ 3k remain" loop
    lo, hi = t * k, n - t * k
    rest = hi - lo
    if rest >= 2 * k:
        centre = xs[lo:hi].mean()
        if centre - xs[lo] >= xs[hi - 1] - centre:
            middle = [k, rest - k]
        else:
            middle = [rest - k, k]
    else:
        middle = [rest]
    sizes = np.array([k] * t + middle + [k] * t, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    return labels


def mdav_multivariate(X: np.ndarray, k: int) -> np.ndarray:
    """MDAV group labels of the rows of X (n × d), on standardized columns. Each pass of the loop forms two groups
    with vectorised distance computations: O(n / 2k) passes of O(n d) work — MDAV's inherent O(n² d / k)."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    _check(n, k)
    std = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0)
    labels = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n)
    g = 0

    def nearest(R: np.ndarray, centre: np.ndarray, free: np.ndarray, anchor: int) -> np.ndarray:
        d = ((R - centre) ** 2).sum(axis=1)
        d[~free] = np.inf
        d[anchor] = -1.0  # the anchor is in its own group whatever the ties
        return np.argpartition(d, k - 1)[:k]

    def farthest_group(R: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """MDAV's first step: r, the record farthest from the centroid, its group of k, and the records left free."""
        free = np.ones(R.shape[0], dtype=bool)
        r = int(np.argmax(((R - R.mean(axis=0)) ** 2).sum(axis=1)))
        group = nearest(R, R[r], free, r)
        free[group] = False
        return r, group, free

    while remaining.size >= 3 * k:
        R = Z[remaining]
        r, group_r, free = farthest_group(R)
        d_r = ((R - R[r]) ** 2).sum(axis=1)
        d_r[~free] = -np.inf
        s = int(np.argmax(d_r))
        group_s = nearest(R, R[s], free, s)
        free[group_s] = False
        labels[remaining[group_r]] = g
        labels[remaining[group_s]] = g + 1
        g += 2
        remaining = remaining[free]
    if remaining.size >= 2 * k:
        _, group_r, free = farthest_group(Z[remaining])
        labels[remaining[group_r]] = g
        g += 1
        remaining = remaining[free]
    if remaining.size:
        labels[remaining] = g
    return labels


def aggregate(X: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, Grouping]:
    """Replace every row of X by its group's mean; returns the aggregated values and the grouping's SSE / SST."""
    X = np.asarray(X, dtype=float)
    flat = X.ndim == 1
    X2 = X[:, None] if flat else X
    groups = int(labels.max()) + 1 if labels.size else 0
    sizes = np.bincount(labels, minlength=groups).astype(float)
    means = np.stack([np.bincount(labels, weights=X2[:, j], minlength=groups) / sizes for j in range(X2.shape[1])],
                     axis=1) if groups else np.zeros((0, X2.shape[1]))
    out = means[labels]
    sse = float(((X2 - out) ** 2).sum())
    sst = float(((X2 - X2.mean(axis=0)) ** 2).sum()) if X2.size else 0.0
    grouping = Grouping(labels=labels, groups=groups, sse=sse, sst=sst)
    return (out[:, 0] if flat else out), grouping


def mdav(X: np.ndarray, k: int) -> tuple[np.ndarray, Grouping]:
    """MDAV microaggregation of a column (1-d) or of a group of columns (n × d): aggregated values and the grouping."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1 or X.shape[1] == 1:
        labels = mdav_univariate(X.reshape(-1), k)
    else:
        labels = mdav_multivariate(X, k)
    return aggregate(X, labels)


def individual_ranking_sql(source: str | exp.Table, column: str, k: int, row_id: str = "__row") -> exp.Expression:
    """Individual ranking in SQL: rank the non-NULL values of one column (ties broken by the row id), groups of k
    consecutive ranks, the last group taking the remainder (k … 2k − 1), each value replaced by its group's mean.
    Returns ``SELECT row_id, column`` for the non-NULL rows."""
    _check(0, k)
    template = """
        SELECT __row, AVG(__x) OVER (PARTITION BY __grp) AS __x
        FROM (
            SELECT __row, __x,
                   LEAST((ROW_NUMBER() OVER (ORDER BY __x, __row) - 1) // __k,
                         GREATEST(COUNT(*) OVER () // __k - 1, 0)) AS __grp
            FROM __src WHERE __x IS NOT NULL
        ) AS ranked
    """
    return fill(template, names={"__row": row_id, "__x": column}, tables={"__src": source}, values={"__k": int(k)})
