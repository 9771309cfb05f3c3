"""Metrics of the class-size distribution alone: one definition each, read by the release's built-in metrics
(:mod:`anon_sql.runner.verify`) and by the registered metrics of :mod:`.risk` / :mod:`.utility`.

``sizes`` holds the record count of every released class (noise records included); ``empty`` is what a ratio gives
when its denominator is zero (the registry reports NaN, a release's built-in row 0)."""
from __future__ import annotations

import numpy as np

from ..udfs.utility import cavg_formula, discernibility

NAN = float("nan")


def nonempty(sizes: np.ndarray) -> np.ndarray:
    """The sizes, or ``[0]`` for a release without classes (so min() and friends are defined)."""
    sizes = np.asarray(sizes)
    return sizes if len(sizes) else np.zeros(1)


def k_from_sizes(sizes: np.ndarray) -> float:
    """min_EC |EC|."""
    return float(nonempty(sizes).min())


def at_risk_from_sizes(sizes: np.ndarray, threshold: float) -> float:
    """Σ |EC| over the classes smaller than ``threshold``."""
    s = nonempty(sizes)
    return float(s[s < threshold].sum())


def prosecutor_max_from_sizes(sizes: np.ndarray) -> float:
    """max_EC 1/|EC| (1 when the smallest class is empty)."""
    m = nonempty(sizes).min()
    return float(1.0 / m) if m > 0 else 1.0


def prosecutor_avg_from_sizes(classes: int, released: float, empty: float = NAN) -> float:
    """#EC / N over the released records."""
    return float(classes / released) if released else empty


def builtin(sizes: np.ndarray, records_in: int, released: int, suppressed: int, k: int) -> dict[str, float]:
    """The metrics every release stores in ``anon.metrics`` (no taxonomy or source needed)."""
    s = nonempty(sizes)
    classes = len(sizes)
    return {
        "k": k_from_sizes(sizes),
        "classes": float(classes),
        "avg_class_size": float(s.mean()),
        "records_at_risk": at_risk_from_sizes(sizes, k),
        "prosecutor_risk_max": prosecutor_max_from_sizes(sizes),
        "prosecutor_risk_avg": prosecutor_avg_from_sizes(classes, released, empty=0.0),
        "suppressed_fraction": float(suppressed / records_in) if records_in else 0.0,
        # (N / #EC) / k over the released rows, noise included — the class sizes DCP squares
        "cavg": cavg_formula(released, max(classes, 1), k),
        "discernibility": discernibility(s, records_in, suppressed),
    }
