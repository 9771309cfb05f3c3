"""Utility formulas shared by the lattice searches, the methods and the metrics (one definition each): the
normalized certainty penalty (NCP) of a released value, discernibility (DM) and C_AVG.

Numpy over arrays of released values or class sizes. Their SQL twins are the macros ``anon.ncp_numeric``,
``anon.ncp_categorical``, ``anon.discernibility_sizes`` and ``anon.cavg`` of sql/macros.sql (plus the table
measure ``anon.discernibility(tbl, qi)``), cross-tested in tests/udfs/test_kernels.py.
"""
from __future__ import annotations

import numpy as np

__all__ = ["cavg_formula", "discernibility", "dot", "ncp_categorical", "ncp_numeric"]

# OpenBLAS runs a dot product of more than 10,000 elements on several threads: on a loaded machine waking them costs
# milliseconds (measured 15 ms for 15,000 elements at load 12, against 0.01 ms in one thread)
_DOT_CHUNK = 8192


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a_i·b_i of two 1-D vectors, in single-threaded BLAS chunks of at most 8,192 elements (see _DOT_CHUNK)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if len(a) <= _DOT_CHUNK:
        return float(np.dot(a, b))
    return float(sum(np.dot(a[i:i + _DOT_CHUNK], b[i:i + _DOT_CHUNK]) for i in range(0, len(a), _DOT_CHUNK)))


def ncp_numeric(width: np.ndarray, span: float, mixed: np.ndarray | None = None,
                flat: np.ndarray | float = 0.0) -> np.ndarray:
    """NCP of numeric released values: width / span of the attribute's whole domain, at most 1 (a NaN or −∞ ratio
    counts 0); 1 where NULL and numbers mix (the value is released as ``*``). ``flat``: the NCP when the domain has
    no width (span 0)."""
    width = np.asarray(width, dtype=np.float64)
    if span > 0:
        with np.errstate(invalid="ignore"):
            r = np.minimum(width / span, 1.0)
        r = np.where(np.isfinite(r), r, 0.0)
    else:
        r = np.broadcast_to(np.asarray(flat, dtype=np.float64), width.shape).copy()
    return r if mixed is None else np.where(mixed, 1.0, r)


def ncp_categorical(leaves: np.ndarray, total_leaves: int) -> np.ndarray:
    """NCP of categorical released values: (leaves the value covers − 1) / (leaves of the domain − 1); 0 for a
    domain of one leaf."""
    leaves = np.asarray(leaves, dtype=np.float64)
    return (leaves - 1) / (total_leaves - 1) if total_leaves > 1 else np.zeros(leaves.shape)


def discernibility(sizes: np.ndarray, records_in: float, suppressed: float) -> float:
    """Discernibility (ARX's DM, the DCP): Σ_EC |EC|² over the released classes + N_in · #suppressed (each suppressed
    record is indistinguishable from all)."""
    s = np.asarray(sizes, dtype=np.float64)
    return float(dot(s, s) + records_in * suppressed)


def cavg_formula(released: float, classes: int, k: int, empty: float = float("nan")) -> float:
    """C_AVG = (N / #EC) / k; 1 is optimal (``empty`` when there is no class)."""
    return float(released / classes / k) if classes else empty
