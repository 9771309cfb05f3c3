"""PRAM (Gouweleeuw et al. 1998; spec/10-sdc.md): each categorical value is redrawn from its row of a transition
matrix. The matrix is built in numpy from the observed frequencies; the draw happens in SQL, one seeded uniform per
row (from sha256(seed, column, row), the same on DuckDB and Spark) looked up in the cumulative matrix — no Python
loop over rows."""
from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from .portable import hex_fraction, keyed_digest
from .sqlparts import fill

def transition_matrix(categories: int, retain: float) -> np.ndarray:
    """P with P[v, v] = retain and the rest of each row spread evenly over the other categories (sdcMicro's
    construction with a constant diagonal). One category: P = [[1]]."""
    if not 0.0 < retain <= 1.0:
        raise PolicyError(f"pram: retain = {retain!r} must be in (0, 1] (set retain = 0.8, say)")
    if categories <= 1:
        return np.ones((max(categories, 0), max(categories, 0)))
    off = (1.0 - retain) / (categories - 1)
    P = np.full((categories, categories), off)
    np.fill_diagonal(P, retain)
    return P


def invariant_matrix(P: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """R = P·Q with Q the backward matrix of P under π = counts / n: Q[j, i] = π_i P[i, j] / (πP)_j, so π R = π
    (the marginal distribution is kept in expectation)."""
    pi = np.asarray(counts, dtype=float)
    pi = pi / pi.sum()
    forward = pi @ P  # (πP)_j
    Q = (P * pi[:, None]).T / np.where(forward > 0, forward, 1.0)[:, None]
    R = P @ Q
    return R / R.sum(axis=1, keepdims=True)  # exact row sums against rounding


def cumulative(M: np.ndarray) -> np.ndarray:
    """Row-wise lower bounds of each target's interval in [0, 1): the draw u picks j with lo[i, j] <= u < lo[i, j+1]
    (see matrix_rows for the last interval of a row)."""
    lo = np.zeros_like(M)
    lo[:, 1:] = np.cumsum(M, axis=1)[:, :-1]
    return lo


def matrix_rows(M: np.ndarray) -> dict[str, np.ndarray]:
    """The cumulative matrix as columns (from_code, to_code, lo, hi), zero-probability cells left out."""
    m = M.shape[0]
    lo = cumulative(M)
    hi = lo + M
    f, t = np.nonzero(M > 0)
    # the last positive cell of each row extends to 2 (covers the rounding gap of the cumulative sum)
    last = np.zeros_like(M, dtype=bool)
    if m:
        last_idx = m - 1 - np.argmax((M > 0)[:, ::-1], axis=1)
        last[np.arange(m), last_idx] = True
    hi = np.where(last, 2.0, hi)
    return {"from_code": f.astype(np.int64), "to_code": t.astype(np.int64), "lo": lo[f, t], "hi": hi[f, t]}


def uniform_sql(seed: int, column: str, row: exp.Expression) -> exp.Expression:
    """A seeded uniform in [0, 1) per row: the first 52 bits of sha256(seed, column name, row id), written so that
    DuckDB and Spark compute the same double (:mod:`anon_sql.sdc.portable`)."""
    return hex_fraction(keyed_digest(seed, row, str(column)))


def categories_sql(source: str | exp.Table, column: str) -> exp.Expression:
    """The observed categories of a column with a 0-based code (value order) and their counts; NULL is not PRAMed."""
    return fill("""
        SELECT __x AS __value, CAST(DENSE_RANK() OVER (ORDER BY __x) - 1 AS BIGINT) AS __code, COUNT(*) AS __n
        FROM __src WHERE __x IS NOT NULL GROUP BY __x
    """, names={"__x": column}, tables={"__src": source})


def pram_sql(source: str | exp.Table, column: str, categories: str | exp.Table, matrix: str | exp.Table, seed: int,
             row_id: str = "__row") -> exp.Expression:
    """``SELECT row_id, value``: each non-NULL value replaced by the category its row's uniform falls on (the
    uniform computed once per row, below the join)."""
    digest = keyed_digest(seed, exp.column(row_id, quoted=True), str(column))
    drawn = fill("SELECT __row, __x, __d AS __anon_digest FROM __src WHERE __x IS NOT NULL",
                 names={"__row": row_id, "__x": column}, tables={"__src": source}, values={"__d": digest})
    uniform = fill("SELECT __row, __x, __u AS __anon_u FROM __drawn", names={"__row": row_id, "__x": column},
                   tables={"__drawn": drawn.subquery("d")},
                   values={"__u": hex_fraction(exp.column("__anon_digest", quoted=True))})
    return fill("""
        SELECT w.__row, target.__value AS __x
        FROM __src AS w
        JOIN __cats AS origin ON w.__x = origin.__value
        JOIN __matrix AS m ON m.from_code = origin.__code AND w.__anon_u >= m.lo AND w.__anon_u < m.hi
        JOIN __cats AS target ON target.__code = m.to_code
    """, names={"__row": row_id, "__x": column},
        tables={"__src": uniform.subquery(), "__cats": categories, "__matrix": matrix})
