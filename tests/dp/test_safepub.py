"""SafePub's β and k (spec/09's golden table, confirmed against ARX 3.9), sampling and class suppression."""
from __future__ import annotations

import math

import numpy as np
import pytest

from anon_sql.dp import safepub_parameters, sample_records, suppressed_classes, suppression_summary
from anon_sql.errors import PolicyError

GOLDEN = [(2.0, 1e-5, 0.864665, 114), (1.0, 1e-5, 0.632121, 62), (math.log(2), 1e-7, 0.5, 81),
          (1.5, 1e-6, 0.776870, 100), (math.log(3), 1e-8, 0.666667, 109)]


@pytest.mark.parametrize("epsilon, delta, beta, k", GOLDEN)
def test_golden_beta_and_k(epsilon, delta, beta, k):
    p = safepub_parameters(epsilon, delta)
    assert p.beta == pytest.approx(beta, abs=5e-7)
    assert p.k == k


def test_search_share_leaves_less_for_sampling():
    p = safepub_parameters(2.0, 1e-5, search_share=0.1)
    assert p.epsilon_anon == pytest.approx(1.8) and p.epsilon_search == pytest.approx(0.2)
    assert p.beta == pytest.approx(1 - math.exp(-1.8))


@pytest.mark.parametrize("epsilon, delta", [(0, 1e-5), (-1, 1e-5), (float("inf"), 1e-5), (1, 0), (1, 1), ("1", 1e-5)])
def test_bad_parameters_are_policy_errors(epsilon, delta):
    with pytest.raises(PolicyError):
        safepub_parameters(epsilon, delta)


def test_sampling_is_seeded_and_at_rate_beta():
    a, b = sample_records(100_000, 0.632121, seed=7), sample_records(100_000, 0.632121, seed=7)
    assert (a == b).all()
    assert a.mean() == pytest.approx(0.632121, abs=0.005)
    assert not (a == sample_records(100_000, 0.632121, seed=8)).all()


def test_classes_below_k_are_suppressed():
    counts = np.array([113, 114, 0, 500, 1])
    assert suppressed_classes(counts, 114).tolist() == [True, False, True, False, True]
    summary = suppression_summary(1000, counts, 114)
    assert summary == {"records": 1000, "sampled": 728, "unsampled": 272, "released": 614, "suppressed": 386,
                       "suppressed_share": 0.386, "classes_suppressed": 3}
    with pytest.raises(PolicyError):
        suppressed_classes([[1, 2]], 3)
    with pytest.raises(PolicyError):
        suppressed_classes([-1, 2], 3)


def test_a_large_epsilon_is_refused_not_looped_on():
    """At ε = 5 the sampling rate is 0.9933 and δ(k)'s Chernoff bound falls too slowly to meet the tail: the search
    for k once ran without end; it is refused, naming ε and what works."""
    import time

    from anon_sql.errors import PolicyError

    started = time.perf_counter()
    with pytest.raises(PolicyError, match="epsilon = 5.0"):
        safepub_parameters(5.0, 1e-5)
    assert time.perf_counter() - started < 60


def test_an_epsilon_too_small_to_compute_k_is_refused_at_once():
    """Hostile round 14, S06: ε = 1e-6 ran for minutes (the sizes examined grow as 1/ε); refused before any of it."""
    from anon_sql.models.safepub import MIN_EPSILON_ANON

    for epsilon in (1e-6, 0.001, MIN_EPSILON_ANON / 2):
        with pytest.raises(PolicyError, match="SafePub needs at least 0.01"):
            safepub_parameters(epsilon, 1e-5)
    assert safepub_parameters(MIN_EPSILON_ANON, 1e-5).k >= 2
    with pytest.raises(PolicyError, match="SafePub needs at least 1e-20"):     # round 16, E14: δ = 1e-300 ran on
        safepub_parameters(0.01, 1e-300)
