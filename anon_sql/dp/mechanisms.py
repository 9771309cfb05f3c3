"""OpenDP measurements for DP queries: discrete Laplace on counts, Laplace on bounded sums, Laplace-threshold
partition selection, and the accuracy (interval half-width) each noise scale implies.

Every measurement is constructed with OpenDP and its own privacy map is checked against the ε it was given; no
noise is drawn anywhere else. OpenDP's samplers take no seed: DP answers are not reproducible, by design.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import opendp.prelude as dp

from anon_sql.errors import AnonSQLError, PolicyError

dp.enable_features("contrib")

__all__ = ["Noised", "Selected", "noisy_counts", "noisy_sums", "select_partitions", "count_accuracy",
           "sum_accuracy", "count_measurement", "sum_measurement", "threshold_measurement"]


@dataclass(frozen=True)
class Noised:
    values: list
    scale: float
    epsilon: float  # what OpenDP's privacy map reports for the declared sensitivity


@dataclass(frozen=True)
class Selected:
    counts: dict  # kept key -> noisy count
    scale: float
    threshold: int
    epsilon: float
    delta: float


def count_measurement(scale: float):
    """Discrete Laplace (OpenDP's make_laplace over integers) on a vector of counts, L1 input distance."""
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)


def sum_measurement(scale: float):
    """Laplace on a vector of floats (OpenDP's make_laplace), L1 input distance."""
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float),
                             scale=scale)


def threshold_measurement(scale: float, threshold: int):
    """OpenDP's make_laplace_threshold on a map group key -> count of units, L0/L1/L∞ input distance."""
    return dp.m.make_laplace_threshold(dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T="i64")),
                                       dp.l01inf_distance(dp.absolute_distance(T="i64")), scale=scale,
                                       threshold=threshold)


def _calibrate(make, d_in, epsilon: float) -> tuple[object, float, float]:
    """The measurement with the smallest scale ≥ d_in/ε whose OpenDP privacy map stays ≤ ε."""
    scale = float(d_in) / epsilon
    if not math.isfinite(scale):   # a subnormal ε (or huge bounds): no finite noise scale exists
        raise PolicyError(f"epsilon = {epsilon!r} is too small for sensitivity {d_in}: the noise scale would be "
                          "infinite; ask for a larger epsilon or narrower contribution bounds")
    for _ in range(64):
        measurement = make(scale)
        spent = measurement.map(d_in)
        if spent <= epsilon:
            return measurement, scale, spent
        scale = math.nextafter(scale * (1 + 1e-12), math.inf)
    raise AnonSQLError(f"OpenDP could not calibrate a scale for sensitivity {d_in} and epsilon {epsilon}")


def noisy_counts(counts: list[int], sensitivity: int, epsilon: float) -> Noised:
    """Counts plus discrete Laplace noise; sensitivity is the L1 bound of one unit over the whole vector."""
    measurement, scale, spent = _calibrate(count_measurement, int(sensitivity), epsilon)
    return Noised([int(v) for v in measurement([int(c) for c in counts])], scale, spent)


def noisy_sums(sums: list[float], sensitivity: float, epsilon: float) -> Noised:
    """Bounded sums plus Laplace noise; sensitivity is the L1 bound of one unit over the whole vector."""
    measurement, scale, spent = _calibrate(sum_measurement, float(sensitivity), epsilon)
    return Noised([float(v) for v in measurement([float(s) for s in sums])], scale, spent)


def _smallest_threshold(scale: float, d_in: tuple, delta: float) -> int:
    """The smallest threshold whose OpenDP privacy map gives δ ≤ delta (δ falls as the threshold grows).

    Starts at the continuous-Laplace estimate L∞ + scale·ln(L0/2δ), which lands within one of the answer for
    OpenDP's discrete map, and gallops from there: two or three map calls instead of a 62-step bisection."""
    def passes(threshold: int) -> bool:
        return threshold_measurement(scale, threshold).map(d_in)[1] <= delta

    top = 2 ** 62
    estimate = d_in[2] + scale * math.log(d_in[0] / (2 * delta))
    start = min(max(1, math.ceil(estimate)) if math.isfinite(estimate) else top, top)
    step = 1
    if passes(start):
        high, low = start, start - 1          # high passes; find a low that fails (0 stands for "none below")
        while low >= 1 and passes(low):
            high, step = low, step * 2
            low = max(0, high - step)
    else:
        low, high = start, min(start + 1, top)   # low fails; find a high that passes
        while not passes(high):
            if high == top:
                raise AnonSQLError(f"no threshold reaches delta = {delta} at scale {scale}")
            low, step = high, step * 2
            high = min(low + step, top)
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= 1 and passes(middle):
            high = middle
        else:
            low = middle
    return high


def select_partitions(unit_counts: dict[str, int], max_groups: int, epsilon: float, delta: float) -> Selected:
    """Partition selection: release a group only if its noisy count of units passes a threshold.

    One unit changes at most max_groups keys, each by 1 (L0 = max_groups, L1 = max_groups, L∞ = 1). The scale is
    max_groups/ε; the threshold is the smallest one whose OpenDP map gives a δ ≤ the δ asked."""
    d_in = (int(max_groups), int(max_groups), 1)
    scale = max_groups / epsilon
    for _ in range(64):
        if threshold_measurement(scale, 2 ** 62).map(d_in)[0] <= epsilon:
            break
        scale = math.nextafter(scale * (1 + 1e-12), math.inf)
    threshold = _smallest_threshold(scale, d_in, delta)
    measurement = threshold_measurement(scale, threshold)
    spent_epsilon, spent_delta = measurement.map(d_in)
    kept = measurement({str(k): int(v) for k, v in unit_counts.items()})
    return Selected(dict(kept), scale, threshold, spent_epsilon, spent_delta)


def count_accuracy(scale: float, alpha: float) -> float:
    """Half-width a with P[|noise| ≥ a] = α for discrete Laplace of this scale (OpenDP's accuracy function)."""
    return float(dp.discrete_laplacian_scale_to_accuracy(scale, alpha))


def sum_accuracy(scale: float, alpha: float) -> float:
    """Half-width scale·ln(1/α) with P[|noise| ≥ a] = α for continuous Laplace (OpenDP's accuracy function)."""
    return float(dp.laplacian_scale_to_accuracy(scale, alpha))
