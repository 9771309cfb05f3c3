"""SafePub's (ε,δ)-DP microdata parameters (Bild, Kuhn & Prasser, PoPETs 2018): the sampling rate β and the class
size k that ε and δ imply (computed in anon_sql/models/safepub.py, where the release's model lives), plus record
sampling and class suppression as pure functions over class counts (for benchmarks and tests; a release samples in
SQL: anon_sql/runner/sampling.py). This module never touches a database.
"""
from __future__ import annotations

import numpy as np

from anon_sql.errors import PolicyError
from anon_sql.models.safepub import (SafePubParameters, safepub_delta, safepub_k, safepub_parameters,
                                     sampling_rate)

__all__ = ["SafePubParameters", "safepub_parameters", "sampling_rate", "safepub_k", "safepub_delta",
           "sample_records", "suppressed_classes", "suppression_summary"]


def sample_records(n_records: int, beta: float, seed: int) -> np.ndarray:
    """Which of n records SafePub keeps: independent Bernoulli(β) draws from a seeded generator (mask of length n).

    The guarantee needs the draws to be unknown to the attacker: the seed is a secret of the data owner."""
    if not (0 < beta <= 1):
        raise PolicyError(f"sampling rate beta = {beta!r}: must be in (0, 1]")
    if n_records < 0:
        raise PolicyError(f"n_records = {n_records!r}: must be ≥ 0")
    return np.random.default_rng(seed).random(n_records) < beta


def suppressed_classes(class_counts, k: int) -> np.ndarray:
    """Mask of the classes SafePub suppresses: those whose sampled size is below k (counts per class after sampling)."""
    counts = np.asarray(class_counts)
    if counts.ndim != 1:
        raise PolicyError("class_counts: expected one count per class (a 1-D array or Series)")
    if counts.size and (not np.issubdtype(counts.dtype, np.number) or (counts < 0).any()):
        raise PolicyError("class_counts: expected non-negative numbers (records per class after sampling)")
    if int(k) < 1:
        raise PolicyError(f"k = {k!r}: must be ≥ 1")
    return counts < k


def suppression_summary(n_records: int, class_counts, k: int) -> dict:
    """Records kept and suppressed (unsampled plus in classes below k) for one SafePub release."""
    counts = np.asarray(class_counts)
    mask = suppressed_classes(counts, k)
    sampled = int(counts.sum())
    released = int(counts[~mask].sum())
    return {"records": int(n_records), "sampled": sampled, "unsampled": int(n_records) - sampled,
            "released": released, "suppressed": int(n_records) - released,
            "suppressed_share": (int(n_records) - released) / n_records if n_records else 0.0,
            "classes_suppressed": int(mask.sum())}
