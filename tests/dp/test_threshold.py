"""Partition selection's threshold is the smallest one OpenDP's own privacy map accepts for the δ asked: checked
against the map directly (threshold passes, threshold − 1 does not), over ε, δ and max_groups_contributed."""
from __future__ import annotations

import pytest

from anon_sql.dp import mechanisms


@pytest.mark.parametrize("groups", [1, 3, 7])
@pytest.mark.parametrize("epsilon", [0.001, 0.05, 1.0, 100.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-7, 1e-14])
def test_threshold_is_the_smallest_that_meets_delta(groups, epsilon, delta):
    selected = mechanisms.select_partitions({"a": 5}, groups, epsilon, delta)
    d_in = (groups, groups, 1)
    assert selected.delta <= delta and selected.epsilon <= epsilon
    assert mechanisms.threshold_measurement(selected.scale, selected.threshold).map(d_in)[1] <= delta
    if selected.threshold > 1:
        assert mechanisms.threshold_measurement(selected.scale, selected.threshold - 1).map(d_in)[1] > delta
