"""OpenDP measurements for DP queries: discrete Laplace on counts, Laplace on bounded sums, Laplace-threshold
partition selection, report-noisy-max over quantile scores, and the accuracy (interval half-width) each noise
scale implies.

Every measurement is constructed with OpenDP and its own privacy map is checked against the ε it was given; no
noise is drawn anywhere else. OpenDP's samplers take no seed: DP answers are not reproducible, by design.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

# OpenDP's core modules, not opendp.prelude: the prelude imports its extras (scikit-learn, scipy, polars), about
# 1 s and 60 MB that every release paid for importing this module (issue 29)
from opendp import accuracy, domains, measurements, measures, metrics, transformations
from opendp.mod import enable_features

from anon_sql.errors import AnonSQLError, PolicyError

enable_features("contrib")

__all__ = ["Noised", "Selected", "noisy_counts", "noisy_sums", "select_partitions", "count_accuracy",
           "sum_accuracy", "count_measurement", "sum_measurement", "threshold_measurement", "quantile_candidates",
           "quantile_score_transformation", "quantile_fraction", "quantile_scores", "noisy_quantiles",
           "QUANTILE_CANDIDATES", "selection_delta", "selection_threshold", "smallest_epsilon", "infinite_scale_error"]

QUANTILE_CANDIDATES = 1001   # candidates spread evenly over a PERCENTILE_CONT's bounds: a resolution of 0.1 %
_TAIL = 1e-9   # noise past its (1 − _TAIL) half-width counts as impossible when fitting an answer into its type
_LIMITS = {"count": 2.0 ** 63, "sum": sys.float_info.max}   # a count's 64-bit integer, a sum's double


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
    return measurements.make_laplace(domains.vector_domain(domains.atom_domain(T="i64")), metrics.l1_distance(T="i64"),
                                     scale=scale)


def sum_measurement(scale: float):
    """Laplace on a vector of floats (OpenDP's make_laplace), L1 input distance."""
    return measurements.make_laplace(domains.vector_domain(domains.atom_domain(T=float, nan=False)),
                                     metrics.l1_distance(T=float), scale=scale)


def threshold_measurement(scale: float, threshold: int):
    """OpenDP's make_laplace_threshold on a map group key -> count of units, L0/L1/L∞ input distance."""
    return measurements.make_laplace_threshold(
        domains.map_domain(domains.atom_domain(T=str), domains.atom_domain(T="i64")),
        metrics.l01inf_distance(metrics.absolute_distance(T="i64")), scale=scale, threshold=threshold)


def infinite_scale_error(sensitivity: float, epsilon: float) -> PolicyError:
    """The refusal of an ε and sensitivity whose noise scale sensitivity/ε is not a finite number."""
    return PolicyError(f"epsilon = {epsilon!r} is too small for sensitivity {sensitivity}: the noise scale would be "
                       "infinite; ask for a larger epsilon or narrower contribution bounds")


def smallest_epsilon(family: str, sensitivity: float, largest: float) -> float:
    """The smallest ε at which Laplace noise of scale sensitivity/ε on a statistic of at most ``largest`` in size
    stays inside the answer's type (``family`` "count": a 64-bit integer, where OpenDP's discrete noise saturates,
    hostile round 6 D56; "sum": a double, where it reaches ±inf) but for a tail of probability 1e-9:
    sensitivity·ln(1e9) / (type's limit − largest). Infinite when ``largest`` alone fills the type."""
    room = _LIMITS[family] - abs(float(largest))
    if not (math.isfinite(room) and room > 0):
        return math.inf
    return float(sensitivity) * math.log(1 / _TAIL) / room


def _calibrate(make, d_in, epsilon: float) -> tuple[object, float, float]:
    """The measurement with the smallest scale ≥ d_in/ε whose OpenDP privacy map stays ≤ ε."""
    scale = float(d_in) / epsilon
    if not math.isfinite(scale):   # a subnormal ε (or huge bounds): no finite noise scale exists
        raise infinite_scale_error(d_in, epsilon)
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


def selection_delta(scale: float, threshold: int, d_in: tuple) -> float:
    """The δ of partition selection at ``threshold``: OpenDP 0.16's ``make_laplace_threshold`` keeps a noisy count
    that is *at least* the threshold, but its privacy map gives the mass *above* it (opendp/opendp#2922, open), so
    the true δ of threshold t is the map's δ at t − 1 (hostile round 12, M29: at ε = 50 the map's threshold was 1,
    and every one-person group was released while δ = 1e-6 was charged)."""
    return float(threshold_measurement(scale, threshold - 1).map(d_in)[1])


def _smallest_threshold(scale: float, d_in: tuple, delta: float) -> int:
    """The smallest threshold whose OpenDP privacy map gives δ ≤ delta (δ falls as the threshold grows); the
    selection uses the next one up (:func:`selection_delta`).

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
    max_groups/ε; the threshold is one above the smallest whose OpenDP map gives a δ ≤ the δ asked
    (:func:`selection_delta`: the map leaves out the mass at the threshold), and the δ spent is that map's δ."""
    d_in, scale, threshold = selection_threshold(max_groups, epsilon, delta)
    measurement = threshold_measurement(scale, threshold)
    spent_epsilon, spent_delta = measurement.map(d_in)[0], selection_delta(scale, threshold, d_in)
    kept = measurement({str(k): int(v) for k, v in unit_counts.items()})
    return Selected(dict(kept), scale, threshold, spent_epsilon, spent_delta)


def selection_threshold(max_groups: int, epsilon: float, delta: float) -> tuple[tuple[int, int, int], float, int]:
    """(distance in, noise scale, threshold) of :func:`select_partitions`: a function of the query's options alone
    (no data), so a query whose threshold no group can reach is refused before it is charged."""
    d_in = (int(max_groups), int(max_groups), 1)
    scale = max_groups / epsilon
    for _ in range(64):
        if threshold_measurement(scale, 2 ** 62).map(d_in)[0] <= epsilon:
            break
        scale = math.nextafter(scale * (1 + 1e-12), math.inf)
    return d_in, scale, _smallest_threshold(scale, d_in, delta) + 1   # the true δ of t is the map's at t − 1


def count_accuracy(scale: float, alpha: float) -> float:
    """Half-width a with P[|noise| ≥ a] = α for discrete Laplace of this scale (OpenDP's accuracy function)."""
    return float(accuracy.discrete_laplacian_scale_to_accuracy(scale, alpha))


def sum_accuracy(scale: float, alpha: float) -> float:
    """Half-width scale·ln(1/α) with P[|noise| ≥ a] = α for continuous Laplace (OpenDP's accuracy function)."""
    return float(accuracy.laplacian_scale_to_accuracy(scale, alpha))


def quantile_candidates(low: float, high: float, count: int = QUANTILE_CANDIDATES) -> list[float]:
    """The values a DP quantile may return: `count` points spread evenly over [low, high], strictly increasing
    (OpenDP requires it); one point when low = high."""
    if low == high:
        return [float(low)]
    step = (high - low) / (count - 1)
    points = [low + i * step for i in range(count - 1)] + [float(high)]
    return sorted(set(points))


def quantile_score_transformation(candidates: list[float], alpha: float):
    """OpenDP's make_quantile_score_candidates over float vectors with the symmetric distance (a unit adding k
    values moves the input by k)."""
    return transformations.make_quantile_score_candidates(
        domains.vector_domain(domains.atom_domain(T=float, nan=False)), metrics.symmetric_distance(), candidates, alpha)


def quantile_fraction(alpha: float) -> tuple[int, int]:
    """The fraction (numerator, denominator) OpenDP's scorer uses for alpha, read from OpenDP itself: with one
    candidate 1.0, the input [2.0] scores numerator and the input [0.0] scores |denominator − numerator|."""
    transformation = quantile_score_transformation([1.0], alpha)
    numerator = int(transformation([2.0])[0])
    return numerator, numerator + int(transformation([0.0])[0])


def quantile_scores(below, equal, total: int, fraction: tuple[int, int]) -> list[int]:
    """OpenDP's candidate scores from counts: |den·#(x < c) − num·(n − #(x = c))| for each candidate c (lower is
    better); tests check them against OpenDP's transformation on the values themselves."""
    numerator, denominator = fraction
    return [abs(denominator * int(lt) - numerator * (int(total) - int(eq))) for lt, eq in zip(below, equal)]


def noisy_quantiles(scores: list[list[int]], candidates: list[float], alpha: float, rows_per_unit: int,
                    groups_per_unit: int, epsilon: float) -> Noised:
    """One candidate per score vector, chosen by OpenDP's report-noisy-max (negated: the lowest score wins).

    A unit adds at most rows_per_unit values to each of at most groups_per_unit groups: the score vector of a group
    moves by the scorer's stability map at rows_per_unit (L∞), and the groups compose, so each group's selection
    gets ε / groups_per_unit."""
    d_scores = quantile_score_transformation(candidates, alpha).map(int(rows_per_unit))
    metric = quantile_score_transformation(candidates, alpha).output_metric

    def make(scale: float):
        return measurements.make_noisy_max(domains.vector_domain(domains.atom_domain(T="u64")), metric,
                                           measures.max_divergence(), scale=scale, negate=True)
    share = epsilon / groups_per_unit
    scale = 2.0 * float(d_scores) / share
    if not math.isfinite(scale):
        raise PolicyError(f"epsilon = {epsilon!r} is too small for PERCENTILE_CONT: the noise scale would be infinite")
    for _ in range(64):
        measurement = make(scale)
        spent = measurement.map(d_scores)
        if spent <= share:
            break
        scale = math.nextafter(scale * (1 + 1e-12), math.inf)
    else:
        raise AnonSQLError(f"OpenDP could not calibrate report-noisy-max for epsilon {epsilon}")
    chosen = [candidates[measurement([int(s) for s in vector])] for vector in scores]
    return Noised(chosen, scale, spent * groups_per_unit)
