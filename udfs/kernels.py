"""Numpy kernels for the per-class diversity formulas (spec 03, 05, 06): one source of truth each.

Every formula is written once over *segmented counts*: a flat array of per-value counts and, beside it, the id of the
class (segment) each count belongs to. The single-class functions (`entropy_counts`, ...) are that code with one
segment, the value functions (`entropy`, ...) count first, and `batch` runs many classes in one vectorized pass.

Conventions: NULL / None / NaN / pd.NA is a value of its own (all missing markers are the *same* value, since pandas
cannot tell them apart; in SQL a real NaN double is distinct from NULL, as DuckDB's equality says). Counts <= 0 are
ignored. An empty class has no defined metric: NaN for numbers, False for the `*_ok` tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:   # pandas loads where a kernel factorizes values: `anon-sql check` starts without it
    import pandas as pd

    Values = Sequence[Any] | np.ndarray | pd.Series | pd.Index | pd.api.extensions.ExtensionArray

__all__ = [
    "THETA_TOLERANCE",
    "batch",
    "entropy",
    "entropy_counts",
    "entropy_segments",
    "group_counts",
    "hashable",
    "recursive_l_ok",
    "recursive_l_ok_counts",
    "recursive_l_ok_segments",
    "recursive_ratio_segments",
    "segments",
    "simpson_diversity",
    "simpson_diversity_counts",
    "simpson_diversity_segments",
    "simpson_evenness",
    "simpson_evenness_counts",
    "simpson_evenness_segments",
    "theta_full",
    "theta_ok",
    "theta_ok_counts",
    "theta_ok_segments",
    "theta_threshold",
    "theta_variance",
    "theta_variance_counts",
    "theta_variance_segments",
    "value_codes",
    "value_counts",
]

THETA_TOLERANCE = 1e-9
"""σ² passes θ when σ² >= θ − THETA_TOLERANCE (absorbs float rounding in the threshold)."""

Seg = tuple[np.ndarray, np.ndarray, int]
"""(counts, segment id of each count, number of segments)."""


# ---------------------------------------------------------------------------------------------------------------------
# counting


def hashable(v: Any) -> Any:
    """Nested lists / dicts / arrays as tuples, so they can be counted."""
    if isinstance(v, dict):
        return tuple((k, hashable(x)) for k, x in v.items())
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(hashable(x) for x in v)
    return v


def value_codes(values: Values) -> np.ndarray:
    """Dense int64 codes 0..k-1 of the distinct values (all missing markers share one code)."""
    import pandas as pd

    if isinstance(values, (np.ndarray, pd.Series, pd.Index, pd.api.extensions.ExtensionArray)):
        arr = values
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
    try:
        codes, _ = pd.factorize(arr, use_na_sentinel=False)
    except TypeError:  # unhashable (nested) values
        obj = np.empty(len(arr), dtype=object)
        obj[:] = [hashable(v) for v in arr]
        codes, _ = pd.factorize(obj, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64)


def value_counts(values: Values) -> np.ndarray:
    """int64 count of each distinct value (NULL/NaN is one value); order irrelevant."""
    codes = value_codes(values)
    return np.bincount(codes).astype(np.int64) if codes.size else np.zeros(0, dtype=np.int64)


def group_counts(codes: np.ndarray, groups: np.ndarray, n_groups: int) -> Seg:
    """Counts of each (group, code) pair present, with their group ids: the segmented input of the kernels."""
    codes = np.asarray(codes, dtype=np.int64)
    groups = np.asarray(groups, dtype=np.int64)
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), int(n_groups)
    order = np.lexsort((codes, groups))
    g, c = groups[order], codes[order]
    start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (c[1:] != c[:-1])])
    counts = np.diff(np.r_[start, g.size]).astype(np.int64)
    return counts, g[start], int(n_groups)


def segments(arrays: Sequence[Values]) -> Seg:
    """Segmented counts of many classes at once (values coded together, one segment per array)."""
    n = len(arrays)
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=n)
    if n and all(isinstance(a, np.ndarray) for a in arrays):
        flat: Values = np.concatenate(arrays)
    else:
        flat = [v for a in arrays for v in (a.tolist() if hasattr(a, "tolist") else a)]
    codes = value_codes(flat)
    return group_counts(codes, np.repeat(np.arange(n, dtype=np.int64), lengths), n)


def _one(counts: Sequence[int] | np.ndarray) -> Seg:
    c = np.asarray(counts, dtype=np.int64).ravel()
    return c, np.zeros(c.size, dtype=np.int64), 1


def _clean(s: Seg) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Drop non-positive counts; counts as float64 and the class sizes m."""
    counts, seg, n = s
    counts = np.asarray(counts)
    seg = np.asarray(seg, dtype=np.int64)
    keep = counts > 0
    c = counts[keep].astype(np.float64)
    seg = seg[keep]
    m = np.bincount(seg, weights=c, minlength=n)
    return c, seg, n, m


def _desc_rank(c: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by (segment, count descending); returns the order and the 1-based rank within the segment."""
    order = np.lexsort((-c, seg))
    s = seg[order]
    start = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if s.size else np.zeros(0, dtype=np.int64)
    first = np.repeat(start, np.diff(np.r_[start, s.size]))
    return order, np.arange(s.size) - first + 1


# ---------------------------------------------------------------------------------------------------------------------
# segmented formulas (the single source of truth)


def entropy_segments(counts: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    """Shannon entropy −Σ p ln p in nats per segment (entropy l-diversity = exp of it); NaN when empty."""
    c, seg, n, m = _clean((counts, seg, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = c / m[seg]
        h = -np.bincount(seg, weights=p * np.log(p), minlength=n)
        return np.where(m > 0, h, np.nan)


def simpson_diversity_segments(counts: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    """Simpson diversity D = 1 / Σ p² per segment; NaN when empty."""
    c, seg, n, m = _clean((counts, seg, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = c / m[seg]
        return np.where(m > 0, 1.0 / np.bincount(seg, weights=p * p, minlength=n), np.nan)


def simpson_evenness_segments(counts: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    """Simpson evenness E = D / #distinct per segment; NaN when empty."""
    c, seg, n, _ = _clean((counts, seg, n))
    distinct = np.bincount(seg, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return simpson_diversity_segments(c, seg, n) / distinct


def theta_variance_segments(counts: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    """σ² = Σ f x²/m − (Σ f x/m)², x = rank 1, 2, ... of the values by descending frequency; NaN when empty."""
    c, seg, n, m = _clean((counts, seg, n))
    order, x = _desc_rank(c, seg)
    f, s = c[order], seg[order]
    s1 = np.bincount(s, weights=f * x, minlength=n)
    s2 = np.bincount(s, weights=f * x * x, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m > 0, s2 / m - (s1 / m) ** 2, np.nan)


def theta_full(m: float | np.ndarray) -> float | np.ndarray:
    """σ² of a fully diverse class of m records: (m² − 1) / 12."""
    r = (np.asarray(m, dtype=np.float64) ** 2 - 1.0) / 12.0
    return float(r) if r.ndim == 0 else r


def theta_threshold(m: float | np.ndarray, mu: float | np.ndarray) -> float | np.ndarray:
    """θ(m) = μ · (m² − 1) / 12."""
    r = np.asarray(mu, dtype=np.float64) * theta_full(m)
    return float(r) if r.ndim == 0 else r


def theta_ok_segments(counts: np.ndarray, seg: np.ndarray, n: int, mu: float | np.ndarray) -> np.ndarray:
    """σ² >= θ(m) − 1e-9 per segment (m = records of the segment); False when empty."""
    c, seg, n, m = _clean((counts, seg, n))
    var = theta_variance_segments(c, seg, n)
    with np.errstate(invalid="ignore"):
        return (m > 0) & (var >= theta_threshold(m, np.asarray(mu, dtype=np.float64)) - THETA_TOLERANCE)


def _recursive_parts(counts: np.ndarray, seg: np.ndarray, n: int, l: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment: r_1, r_l + r_{l+1} + ... (r_i the i-th largest count) and the number of distinct values."""
    if l < 1:
        raise ValueError(f"recursive (c, l)-diversity needs l >= 1, got {l}")
    f, seg, n, _ = _clean((counts, seg, n))
    order, rank = _desc_rank(f, seg)
    fs, s = f[order], seg[order]
    r1 = np.bincount(s, weights=np.where(rank == 1, fs, 0.0), minlength=n)
    tail = np.bincount(s, weights=np.where(rank >= l, fs, 0.0), minlength=n)
    return r1, tail, np.bincount(s, minlength=n)


def recursive_l_ok_segments(counts: np.ndarray, seg: np.ndarray, n: int, c: float, l: int) -> np.ndarray:
    """Recursive (c, l)-diversity r1 < c·(r_l + r_{l+1} + ...) per segment; False with fewer than l values."""
    r1, tail, distinct = _recursive_parts(counts, seg, n, l)
    return (distinct >= l) & (r1 < c * tail)


def recursive_ratio_segments(counts: np.ndarray, seg: np.ndarray, n: int, l: int) -> np.ndarray:
    """r_1 / (r_l + r_{l+1} + ...) per segment: recursive (c, l)-diversity holds for every c above it; inf with
    fewer than l values (or an empty segment)."""
    r1, tail, _ = _recursive_parts(counts, seg, n, l)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tail > 0, r1 / np.where(tail > 0, tail, 1.0), np.inf)


# ---------------------------------------------------------------------------------------------------------------------
# one class: from counts


def entropy_counts(counts: Sequence[int] | np.ndarray) -> float:
    """Shannon entropy in nats of one class given its per-value counts."""
    return float(entropy_segments(*_one(counts))[0])


def simpson_diversity_counts(counts: Sequence[int] | np.ndarray) -> float:
    """Simpson diversity D = 1 / Σ p² of one class."""
    return float(simpson_diversity_segments(*_one(counts))[0])


def simpson_evenness_counts(counts: Sequence[int] | np.ndarray) -> float:
    """Simpson evenness E = D / #distinct of one class."""
    return float(simpson_evenness_segments(*_one(counts))[0])


def theta_variance_counts(counts: Sequence[int] | np.ndarray) -> float:
    """θ-sensitivity variance σ² of one class (ties in frequency do not change it)."""
    return float(theta_variance_segments(*_one(counts))[0])


def theta_ok_counts(counts: Sequence[int] | np.ndarray, mu: float) -> bool:
    """σ² >= μ·(m² − 1)/12 − 1e-9 for one class, m = Σ counts."""
    return bool(theta_ok_segments(*_one(counts), mu)[0])


def recursive_l_ok_counts(counts: Sequence[int] | np.ndarray, c: float, l: int) -> bool:
    """Recursive (c, l)-diversity of one class: r1 < c·(r_l + ...); False with fewer than l distinct values."""
    return bool(recursive_l_ok_segments(*_one(counts), c, l)[0])


# ---------------------------------------------------------------------------------------------------------------------
# one class: from raw values


def entropy(values: Values) -> float:
    """Shannon entropy in nats of the values (NULL is a value)."""
    return entropy_counts(value_counts(values))


def simpson_diversity(values: Values) -> float:
    """Simpson diversity D of the values."""
    return simpson_diversity_counts(value_counts(values))


def simpson_evenness(values: Values) -> float:
    """Simpson evenness E of the values."""
    return simpson_evenness_counts(value_counts(values))


def theta_variance(values: Values) -> float:
    """θ-sensitivity variance σ² of the values."""
    return theta_variance_counts(value_counts(values))


def theta_ok(values: Values, mu: float) -> bool:
    """σ²(values) >= μ·(m² − 1)/12 − 1e-9 with m = len(values); False when empty."""
    return theta_ok_counts(value_counts(values), mu)


def recursive_l_ok(values: Values, c: float, l: int) -> bool:
    """Recursive (c, l)-diversity of the values."""
    return recursive_l_ok_counts(value_counts(values), c, l)


# ---------------------------------------------------------------------------------------------------------------------
# many classes


_SEGMENTED: dict[Callable[..., Any], tuple[Callable[..., np.ndarray], bool]] = {
    # value kernel / counts kernel -> (segmented kernel, takes counts?)
    entropy: (entropy_segments, False),
    simpson_diversity: (simpson_diversity_segments, False),
    simpson_evenness: (simpson_evenness_segments, False),
    theta_variance: (theta_variance_segments, False),
    theta_ok: (theta_ok_segments, False),
    recursive_l_ok: (recursive_l_ok_segments, False),
    entropy_counts: (entropy_segments, True),
    simpson_diversity_counts: (simpson_diversity_segments, True),
    simpson_evenness_counts: (simpson_evenness_segments, True),
    theta_variance_counts: (theta_variance_segments, True),
    theta_ok_counts: (theta_ok_segments, True),
    recursive_l_ok_counts: (recursive_l_ok_segments, True),
}


def batch(kernel: Callable[..., Any], arrays: Sequence[Values], *args: Any) -> np.ndarray:
    """`kernel(array, *args)` for each array (one per class) as a numpy array; the kernels above run vectorized."""
    if kernel in _SEGMENTED:
        seg_kernel, takes_counts = _SEGMENTED[kernel]
        if takes_counts:
            lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
            flat = np.concatenate([np.asarray(a, dtype=np.int64).ravel() for a in arrays]) if len(arrays) else []
            s: Seg = (np.asarray(flat, dtype=np.int64), np.repeat(np.arange(len(arrays)), lengths), len(arrays))
        else:
            s = segments(arrays)
        return seg_kernel(*s, *args)
    return np.asarray([kernel(a, *args) for a in arrays])
