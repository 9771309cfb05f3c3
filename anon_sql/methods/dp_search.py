"""SafePub's DP choice of the level vector (Bild, Kuhn & Prasser 2018; spec/09 step 2): the exponential mechanism
over every node of the generalization lattice, spending the search's share of ε, run as OpenDP's report-noisy-max.

Utility of a node, on the sample: Σ over sampled records of (1 − the node's generalization intensity) for a
released record, 0 for a suppressed one, i.e. released · (1 − intensity), with intensity = the mean over quasi-
identifiers of level / height (ARX's "generalization intensity"). One record added or removed changes the released
count of a node by 0, 1 or k (it completes or breaks a class of size k), and in the same direction at every node:
the scores move monotonically with L∞ sensitivity k, so OpenDP's noisy max with exponential noise at scale k/ε is
ε-DP (its privacy map is checked). OpenDP's samplers take no seed: the choice is not reproducible.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
# OpenDP's core modules, not opendp.prelude: the prelude imports its extras (scikit-learn, scipy, polars), about
# 1 s and 60 MB that every release paid for importing this module (issue 29)
from opendp import domains, measurements, measures, metrics
from opendp.mod import enable_features

from ..errors import AnonSQLError, PolicyError
from .base import LevelPlan, MethodContext
from .lattice import Lattice

enable_features("contrib")

__all__ = ["MAX_SEARCH_NODES", "generalization_intensity", "noisy_max_measurement", "choose_index",
           "search_scores", "search_levels"]

MAX_SEARCH_NODES = 20_000   # every node is evaluated from counts: a larger lattice is refused, naming the fix


def generalization_intensity(node: Sequence[int], heights: Sequence[int]) -> float:
    """Mean over quasi-identifiers of level / height (a QI whose taxonomy has no levels above 0 counts 0)."""
    parts = [level / height if height else 0.0 for level, height in zip(node, heights)]
    return float(np.mean(parts)) if parts else 0.0


def noisy_max_measurement(scale: float):
    """OpenDP's report-noisy-max (exponential noise: the exponential mechanism's pure-DP form) over float scores
    that move monotonically (all up or all down) when one record is added or removed."""
    return measurements.make_noisy_max(domains.vector_domain(domains.atom_domain(T=float, nan=False)),
                                       metrics.linf_distance(T=float, monotonic=True), measures.max_divergence(),
                                       scale=scale)


def choose_index(scores: Sequence[float], sensitivity: float, epsilon: float) -> tuple[int, float, float]:
    """The index OpenDP's noisy max picks, its scale and the ε its privacy map reports (≤ epsilon)."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise PolicyError(f"the DP search's epsilon = {epsilon!r}: must be a finite number > 0")
    scale = float(sensitivity) / epsilon
    if not math.isfinite(scale) or scale <= 0:
        raise PolicyError(f"the DP search's epsilon = {epsilon!r} is too small for sensitivity {sensitivity}: raise "
                          "search_share or epsilon")
    for _ in range(64):
        measurement = noisy_max_measurement(scale)
        spent = measurement.map(float(sensitivity))
        if spent <= epsilon:
            return int(measurement([float(s) for s in scores])), scale, float(spent)
        scale = math.nextafter(scale * (1 + 1e-12), math.inf)
    raise AnonSQLError(f"OpenDP could not calibrate the search's noise for sensitivity {sensitivity}, ε {epsilon}")


def search_scores(lattice: Lattice, nodes: np.ndarray, sampled: int) -> np.ndarray:
    """released · (1 − intensity) of each node, released = sampled records outside the suppressed classes."""
    scores = np.empty(len(nodes))
    for i, node in enumerate(nodes):
        ev = lattice.evaluate(tuple(int(x) for x in node))
        scores[i] = (sampled - ev.suppressed) * (1.0 - generalization_intensity(node, lattice.heights))
    return scores


def search_levels(ctx: MethodContext, epsilon_search: float, k: int, sampled: int) -> LevelPlan:
    """The level vector chosen by the exponential mechanism over the whole lattice of ``ctx``'s policy (the source
    view is the sample), with the report the release records."""
    lattice = Lattice.from_context(ctx, rows=False, measures=())
    if lattice.size > MAX_SEARCH_NODES:
        raise PolicyError(f"privacy.differential_privacy.search_share: the lattice of {lattice.quasi} has "
                          f"{lattice.size:,} nodes (more than {MAX_SEARCH_NODES:,} to score); give the level vector "
                          "instead (search_share = 0, method_params.levels) or use taxonomies with fewer levels")
    nodes = lattice.all_nodes()
    ctx.progress(f"DP search: scoring {len(nodes):,} level vectors")
    scores = search_scores(lattice, nodes, sampled)
    index, scale, spent = choose_index(scores, float(k), epsilon_search)
    chosen = tuple(int(x) for x in nodes[index])
    info: dict[str, Any] = {"search": "SafePub exponential mechanism (OpenDP make_noisy_max, exponential noise)",
                            "epsilon_search": spent, "candidates": int(len(nodes)), "sensitivity": float(k),
                            "scale": scale, "utility": "released records x (1 - generalization intensity)"}
    # the scores themselves are not DP (counts of the sample at every node): they are not reported
    return LevelPlan(lattice.as_dict(chosen), {"dp_search": info})
