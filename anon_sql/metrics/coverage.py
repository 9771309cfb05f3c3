"""Which released tuples cover which original tuples: the pair search behind re-identification probability and KL
divergence, on aggregates (distinct original tuples × distinct released tuples), vectorized.

QIs whose released values partition the leaves (full-domain recoding) are matched by a hash join on the value each
leaf maps to; the other QIs filter the candidate pairs by sorted-key lookups. Without such a QI, candidates come from
dense boolean blocks over the most selective QIs' distinct value combinations: O(#original × #released) at worst.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .values import Cover


def covering_pairs(oc: np.ndarray, tc: np.ndarray, covers: list[Cover], n_leaves: list[int],
                   selective: float = 1 / 8) -> tuple[np.ndarray, np.ndarray]:
    """(original tuple, released tuple) index pairs such that the released values cover the original leaves on every
    column; ``oc`` holds leaf codes (−1: outside the domain), ``tc`` value indexes into ``covers``. The hash join is
    used when its candidates number at most ``selective`` · #original · #released."""
    functional = [j for j, c in enumerate(covers) if len(c.pair_leaf) == 0
                  or np.bincount(c.pair_leaf).max() <= 1]
    left = right = None
    if functional:   # candidate pairs of a hash join on the functional QIs, if that is selective enough
        left = pd.DataFrame({f"k{j}": _leaf_to_value(covers[j], n_leaves[j])[np.maximum(oc[:, j], 0)]
                             for j in functional})
        right = pd.DataFrame({f"k{j}": tc[:, j] for j in functional})
        keys = [f"k{j}" for j in functional]
        sizes = left.value_counts(keys).rename("a").to_frame().join(right.value_counts(keys).rename("b"),
                                                                    how="inner")
        if float((sizes["a"] * sizes["b"]).sum()) > selective * len(oc) * len(tc):
            left = None
    if left is not None:
        left["oi"] = np.arange(len(oc))
        right["ti"] = np.arange(len(tc))
        pairs = left.merge(right, on=[f"k{j}" for j in functional])
        oi, ti = pairs["oi"].to_numpy(np.int64), pairs["ti"].to_numpy(np.int64)
        rest = [j for j in range(oc.shape[1]) if j not in functional]
    else:
        first = _dense_qis(sorted(range(oc.shape[1]), key=lambda j: _expansion(covers[j], n_leaves[j], oc[:, j],
                                                                            tc[:, j])), oc, tc)
        oi, ti = _dense_candidates([covers[j] for j in first], [n_leaves[j] for j in first], oc[:, first],
                                   tc[:, first])
        rest = [j for j in range(oc.shape[1]) if j not in first]
    for j in rest:
        keep = _member(covers[j], oc[oi, j], tc[ti, j])
        oi, ti = oi[keep], ti[keep]
    valid = (oc[oi] >= 0).all(axis=1) if len(oi) else np.zeros(0, bool)
    return oi[valid], ti[valid]


def _leaf_to_value(c: Cover, n_leaves: int) -> np.ndarray:
    """The single released value covering each leaf (−1 when none) of a QI whose values partition the leaves."""
    out = np.full(max(n_leaves, 1), -1, dtype=np.int64)
    out[c.pair_leaf] = c.pair_val
    return out


def _member(c: Cover, leaves: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Does released value ``values[i]`` cover leaf ``leaves[i]``? (sorted-key lookup, vectorized)"""
    keys = np.unique(c.pair_leaf * len(c.labels) + c.pair_val)
    q = leaves * len(c.labels) + values
    pos = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
    return (leaves >= 0) & (len(keys) > 0) & (keys[pos] == q) if len(keys) else np.zeros(len(q), bool)


def _expansion(c: Cover, n_leaves: int, leaves: np.ndarray, values: np.ndarray) -> float:
    """Candidate pairs a QI alone would produce: Σ_o Σ_{v covers o} #released tuples with value v."""
    per_value = np.bincount(values, minlength=len(c.labels))
    per_leaf = np.bincount(c.pair_leaf, weights=per_value[c.pair_val], minlength=n_leaves)
    return float(per_leaf[np.maximum(leaves, 0)].sum())


def _dense_qis(ranked: list[int], oc: np.ndarray, tc: np.ndarray, budget: float = 2e7) -> list[int]:
    """The most selective QIs whose distinct original × released combinations fit in ``budget`` cells (>= 1)."""
    chosen = ranked[:1]
    for j in ranked[1:]:
        trial = chosen + [j]
        cells = len(np.unique(oc[:, trial], axis=0)) * float(len(np.unique(tc[:, trial], axis=0)))
        if cells > budget:
            break
        chosen = trial
    return chosen


def _dense_candidates(covers: list[Cover], n_leaves: list[int], oc: np.ndarray, tc: np.ndarray,
                      block: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    """(original, released) tuple pairs covering on the given QIs: dense boolean blocks over the *distinct* value
    combinations of both sides, then expanded to the tuples of each matching combination."""
    ou, o_inv = np.unique(oc, axis=0, return_inverse=True)
    tu, t_inv = np.unique(tc, axis=0, return_inverse=True)
    dense = []
    for c, n in zip(covers, n_leaves):
        m = np.zeros((max(n, 1), len(c.labels)), dtype=bool)
        m[c.pair_leaf, c.pair_val] = True
        dense.append(m)
    step = max(1, block // max(len(tu), 1))
    ga, gb = [], []
    for start in range(0, len(ou), step):       # blocks of distinct original combinations (aggregates)
        rows = ou[start:start + step]
        hit = np.ones((len(rows), len(tu)), dtype=bool)
        for j, m in enumerate(dense):
            hit &= m[np.maximum(rows[:, j], 0)][:, tu[:, j]]
        a, b = np.nonzero(hit)
        ga.append(a + start)
        gb.append(b)
    ga_all = np.concatenate(ga).astype(np.int64) if ga else np.zeros(0, np.int64)
    gb_all = np.concatenate(gb).astype(np.int64) if gb else np.zeros(0, np.int64)
    return _expand(ga_all, gb_all, np.asarray(o_inv).ravel(), np.asarray(t_inv).ravel())


def _groups(inv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members of each group: (indices sorted by group, start of each group, size of each group)."""
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv)
    return order, np.cumsum(counts) - counts, counts


def _ranges(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ranges [starts[i], starts[i] + counts[i]): (owner i, position) per element."""
    owner = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, np.repeat(starts, counts) + offset


def _expand(ga: np.ndarray, gb: np.ndarray, o_inv: np.ndarray, t_inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (o, t) with o in group ga[i] and t in group gb[i]."""
    o_order, o_start, o_count = _groups(o_inv)
    t_order, t_start, t_count = _groups(t_inv)
    pair, pos = _ranges(o_start[ga], o_count[ga])
    oi = o_order[pos]
    g = gb[pair]
    owner, pos_t = _ranges(t_start[g], t_count[g])
    return oi[owner], t_order[pos_t]
