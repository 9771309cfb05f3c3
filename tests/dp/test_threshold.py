"""Partition selection's threshold: OpenDP's ``make_laplace_threshold`` keeps a noisy count at least the threshold,
but its privacy map gives the mass above it (opendp/opendp#2922), so the threshold is one above the smallest the map
accepts, and the δ charged is the map's at threshold − 1 (hostile round 12, M29: at ε = 50 the map's threshold was
1, and every one-person group was released while δ = 1e-6 was charged). Checked against the map over ε, δ and
max_groups_contributed, and against the exact release probability of a one-person group."""
from __future__ import annotations

import math

import duckdb
import pytest

import anon_sql
from anon_sql.dp import mechanisms


@pytest.mark.parametrize("groups", [1, 3, 7])
@pytest.mark.parametrize("epsilon", [0.001, 0.05, 1.0, 100.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-7, 1e-14])
def test_threshold_is_one_above_the_smallest_the_map_accepts(groups, epsilon, delta):
    selected = mechanisms.select_partitions({"a": 5}, groups, epsilon, delta)
    d_in = (groups, groups, 1)
    assert selected.delta <= delta and selected.epsilon <= epsilon and selected.threshold >= 2
    below = mechanisms.threshold_measurement(selected.scale, selected.threshold - 1).map(d_in)[1]
    assert selected.delta == below <= delta
    if selected.threshold > 2:
        assert mechanisms.threshold_measurement(selected.scale, selected.threshold - 2).map(d_in)[1] > delta


def released_probability(scale: float, threshold: int) -> float:
    """P[1 + Z ≥ threshold] for OpenDP's discrete Laplace Z of ``scale`` (P(Z = k) ∝ q^|k|, q = e^(−1/scale)):
    the chance that a group held by one person is released, in closed form."""
    q = math.exp(-1 / scale)
    m = threshold - 1
    return q ** m / (1 + q) if m >= 1 else 1.0 if m < 0 else 1 / (1 + q)


@pytest.mark.parametrize("epsilon", [0.5, 5.0, 10.0, 25.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9])
def test_a_one_person_group_is_released_with_probability_at_most_the_delta_charged(epsilon, delta):
    selected = mechanisms.select_partitions({"a": 1}, 1, epsilon, delta)
    assert released_probability(selected.scale, selected.threshold) <= selected.delta * (1 + 1e-9)
    assert selected.delta <= delta


def test_m29_group_by_the_unit_at_a_large_epsilon_releases_no_one():
    """Round 12's DP3: 300 people, one group each; at ε = 50 the old threshold 1 released all 300 ids."""
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, 'g' || g AS grp FROM range(300) a(p), range(6) b(g)")
    anon_sql.execute(c, "CREATE PRIVACY BUDGET ON visits WITH (epsilon = 100, delta = 1e-5, privacy_unit = 'pid')")
    frame = anon_sql.execute(c, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 50, delta = 1e-6) pid, "
                                "COUNT(*) AS n FROM visits GROUP BY pid")[-1].frame
    assert len(frame) == 0
