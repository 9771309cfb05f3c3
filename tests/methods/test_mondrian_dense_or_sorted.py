"""Mondrian counts per segment either with a dense (segment × value) histogram or by sorting the rows
(``methods/mondrian._dense`` picks by size, issue 29): both ways must give the same cut and the same distinct
counts, on hypothesis segments and keys (one segment, many, one key value, sparse keys, zero weights)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from anon_sql.methods import mondrian


@st.composite
def segments(draw):
    m = draw(st.integers(1, 6))
    rows = []
    for s in range(m):   # every segment holds at least two distinct keys (median_cut's contract)
        keys = draw(st.lists(st.integers(0, draw(st.sampled_from([3, 40, 5000]))), min_size=2, max_size=12))
        if len(set(keys)) < 2:
            keys = [keys[0], keys[0] + 1]
        rows += [(s, k, draw(st.sampled_from([0.0, 1.0, 2.5, 7.0]))) for k in keys]
    seg, key, w = (np.array(c) for c in zip(*rows))
    return seg.astype(np.int64), key.astype(np.int64), w.astype(np.float64), m


def _both(monkeypatch, fn):
    monkeypatch.setattr(mondrian, "_dense", lambda cells, rows: True)
    dense = fn()
    monkeypatch.setattr(mondrian, "_dense", lambda cells, rows: False)
    return dense, fn()


@settings(max_examples=200, deadline=None)
@given(segments())
def test_median_cut_is_the_same_dense_or_sorted(data):
    seg, key, w, m = data
    with pytest.MonkeyPatch.context() as mp:
        dense, ordered = _both(mp, lambda: mondrian.median_cut(seg, key, w, m))
    assert np.array_equal(np.asarray(dense, dtype=np.int64), np.asarray(ordered, dtype=np.int64))


@settings(max_examples=200, deadline=None)
@given(segments())
def test_distinct_counts_are_the_same_dense_or_sorted(data):
    seg, key, _, _ = data
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    with pytest.MonkeyPatch.context() as mp:
        dense, ordered = _both(mp, lambda: mondrian._distinct(key, starts))
    assert np.array_equal(dense, ordered)


def test_a_large_histogram_over_few_rows_is_not_dense():
    assert not mondrian._dense(20_000_000, 31_500) and mondrian._dense(100_000, 31_500)
    assert mondrian._dense(60_000, 10) and not mondrian._dense(30_000_000, 10_000_000)
