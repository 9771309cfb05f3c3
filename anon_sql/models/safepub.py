"""SafePub (Bild, Kuhn & Prasser, PoPETs 2018; spec/09): the (ε,δ)-DP microdata model. Its parameters — the
sampling rate β and the class size k that ε and δ imply — and the model a release is checked with: every released
class of the (sampled, generalized) data holds at least k records.

The sampling itself is the runner's (anon_sql/runner/sampling.py, in SQL); this module never touches a database.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import lit
from ..errors import PolicyError
from ..policy.keys import REQUIRED, key, number, section, section_table
from .base import ClassColumns, ClassStats, PrivacyModel, SQLCheck
from .registry import ModelKey, register_model_key

__all__ = ["SafePubParameters", "safepub_parameters", "sampling_rate", "safepub_k", "safepub_delta", "SafePub"]


@dataclass(frozen=True)
class SafePubParameters:
    """What an (ε,δ)-DP SafePub release needs: ε spent on sampling + suppression, on the search, β and k."""

    epsilon: float
    delta: float
    epsilon_anon: float
    epsilon_search: float
    beta: float
    k: int


def _check(epsilon: float, delta: float) -> None:
    if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not math.isfinite(epsilon) or epsilon <= 0:
        raise PolicyError(f"differential_privacy epsilon = {epsilon!r}: must be a finite number > 0 (e.g. 2.0)")
    if not isinstance(delta, (int, float)) or isinstance(delta, bool) or not (0 < delta < 1):
        raise PolicyError(f"differential_privacy delta = {delta!r}: must be in (0, 1), typically 1e-5 or smaller")
    if delta < MIN_DELTA:   # k grows with log(1/δ) and each k examines more sizes (round 16, E14: 1e-300 never finished)
        raise PolicyError(f"differential_privacy delta = {delta!r}: SafePub needs at least {MIN_DELTA:g} (its k takes "
                          "minutes to compute below it); typical values are 1e-5 to 1e-10")


def sampling_rate(epsilon_anon: float) -> float:
    """β = 1 − e^(−ε_anon): each record is kept in the sample with this probability."""
    return -math.expm1(-epsilon_anon)


def _gamma(epsilon: float, beta: float) -> float:
    return (math.exp(epsilon) - 1 + beta) / math.exp(epsilon)


def _upper_tail(n: int, beta: float, gamma: float) -> float:
    """a_n = Σ_{j=⌊nγ⌋+1}^{n} Binom(n, β)(j), summed in log space (exact enough for n in the thousands)."""
    first = math.floor(n * gamma) + 1
    if first > n:
        return 0.0
    j = np.arange(first, n + 1, dtype=float)
    log_pmf = (math.lgamma(n + 1) - np.vectorize(math.lgamma)(j + 1) - np.vectorize(math.lgamma)(n - j + 1)
               + j * math.log(beta) + (n - j) * math.log1p(-beta))
    return float(np.exp(log_pmf).sum())


def _chernoff(n: int, beta: float, gamma: float) -> float:
    """c_n = exp(−n (γ ln(γ/β) − (γ − β))), an upper bound of every a_m with m ≥ n."""
    return math.exp(-n * (gamma * math.log(gamma / beta) - (gamma - beta)))


MIN_DELTA = 1e-20         # the smallest δ: k in seconds (ε = 0.01, δ = 1e-20: 20 s; ε = 2: 0.5 s)
MIN_EPSILON_ANON = 0.01   # the smallest ε for sampling and suppression: k in about a second (0.005: 6 s, 0.001: 136 s)
MAX_STEPS = 20_000   # sizes n examined for one δ(k); ε up to 3 needs far fewer (tests/dp)


def safepub_delta(epsilon_anon: float, beta: float, k: int, _cache: dict | None = None) -> float:
    """δ(k) = max over n ≥ n_m = ⌈k/γ − 1⌉ of a_n, iterating n upward until the running max reaches c_n."""
    gamma = _gamma(epsilon_anon, beta)
    cache = {} if _cache is None else _cache
    n = max(1, math.ceil(k / gamma - 1))
    start = n
    worst, bound = 0.0, math.inf
    while worst < bound:
        if n - start > MAX_STEPS:   # a large ε: γ → 1 and the Chernoff bound falls too slowly to ever meet the tail
            raise PolicyError(f"differential_privacy epsilon = {epsilon_anon!r}: SafePub's class size k does not "
                              f"settle within {MAX_STEPS:,} sizes at this ε (the sampling rate is {beta:.6f}, almost "
                              "every record); use epsilon <= 3 or a DP query (docs/dp.md)")
        if n not in cache:
            cache[n] = (_upper_tail(n, beta, gamma), _chernoff(n, beta, gamma))
        a_n, c_n = cache[n]
        worst, bound = max(worst, a_n), c_n
        n += 1
    return worst


def safepub_k(epsilon_anon: float, delta: float, beta: float | None = None) -> int:
    """The class size below which SafePub suppresses: 1 + the smallest k' with δ(k') < δ.

    ARX's ParameterCalculation increments k once more after its test succeeds; anon_sql returns the same k so that
    figures compare side by side with ARX (spec/09: 114 for ε = 2, δ = 1e-5)."""
    if epsilon_anon < MIN_EPSILON_ANON:   # the sizes to examine grow as 1/ε: ε = 0.001 took minutes (round 14, S06)
        raise PolicyError(f"differential_privacy epsilon = {epsilon_anon!r} (for sampling and suppression): SafePub "
                          f"needs at least {MIN_EPSILON_ANON} (below it, it samples under 1% of the records and its k "
                          "takes minutes to compute); raise epsilon, or use a DP query (docs/dp.md)")
    beta = sampling_rate(epsilon_anon) if beta is None else beta
    cache: dict = {}
    k = 1
    while safepub_delta(epsilon_anon, beta, k, cache) >= delta:
        k += 1
        if k > 1_000_000:
            raise PolicyError(f"differential_privacy delta = {delta!r} is too small for epsilon = {epsilon_anon!r}: "
                              "k would exceed 1,000,000; raise delta or epsilon")
    return k + 1


def safepub_parameters(epsilon: float, delta: float, search_share: float = 0.0) -> SafePubParameters:
    """β and k for an (ε,δ)-DP SafePub release; `search_share` of ε goes to a DP lattice search (0 when the
    level vector is given), the rest to sampling and suppression (ε_anon)."""
    _check(epsilon, delta)
    if not isinstance(search_share, (int, float)) or isinstance(search_share, bool) or not (0 <= search_share < 1):
        raise PolicyError(f"differential_privacy search_share = {search_share!r}: must be in [0, 1) "
                          "(0 when the level vector is given; e.g. 0.1 for a DP search)")
    epsilon_search = epsilon * search_share
    epsilon_anon = epsilon - epsilon_search
    beta = sampling_rate(epsilon_anon)
    return SafePubParameters(epsilon=float(epsilon), delta=float(delta), epsilon_anon=epsilon_anon,
                             epsilon_search=epsilon_search, beta=beta, k=safepub_k(epsilon_anon, delta, beta))



class SafePub(PrivacyModel):
    """The deterministic part of SafePub's guarantee: every released class has at least the k that ε and δ imply
    (the records were sampled with probability β before generalization; sampling is not checkable afterwards)."""

    name = "safepub"
    class_local = True

    def __init__(self, epsilon: float, delta: float, search_share: float = 0.0):
        self.parameters = safepub_parameters(epsilon, delta, search_share)
        self.k = self.parameters.k

    def check(self, stats: ClassStats) -> np.ndarray:
        return stats.sizes >= self.k

    def measure(self, stats: ClassStats) -> np.ndarray:
        return stats.sizes.astype(float)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        p = self.parameters
        return [SQLCheck("safepub_k", cols.size, exp.GTE(this=cols.size, expression=lit(self.k)),
                         f"k >= {self.k} (SafePub, epsilon = {p.epsilon:g}, delta = {p.delta:g})")]

    def describe(self) -> str:
        p = self.parameters
        return f"SafePub (epsilon = {p.epsilon:g}, delta = {p.delta:g}: beta = {p.beta:.6f}, k = {self.k})"


DIFFERENTIAL_PRIVACY = section(
    "privacy.differential_privacy",
    key("epsilon", number(gt=0), "ε of the (ε,δ)-DP release (e.g. 2.0); sets the sampling rate β = 1 − e^(−ε)",
        REQUIRED),
    key("delta", number(gt=0, lt=1), "δ of the (ε,δ)-DP release (e.g. 1e-5); with ε it sets the class size k "
        "below which classes are suppressed", REQUIRED),
    key("search_share", number(ge=0, lt=1), "share of ε spent on a DP choice of the level vector (the "
        "exponential mechanism over the lattice; leave `method_params.levels` out); 0: the given levels are used",
        0.0))


register_model_key(ModelKey(
    key("differential_privacy", section_table(DIFFERENTIAL_PRIVACY), "(ε,δ)-DP release by SafePub (Bild, Kuhn & Prasser "
        "2018; docs/dp.md): records sampled with probability β (seeded by `seed`, which must be secret and not 0), "
        "generalized at method `levels`' vector or one a DP search chooses, every class below the k that ε and δ "
        "imply suppressed"),
    build=lambda spec, attribute, context: [SafePub(spec["epsilon"], spec["delta"], spec.get("search_share", 0.0))],
    per_attribute=False,
    sections=(("`differential_privacy = { … }` (SafePub, method `levels`, DuckDB; docs/dp.md)", DIFFERENTIAL_PRIVACY),),
    classes=(SafePub,), examples=({"epsilon": 2.0, "delta": 1e-5},)))
