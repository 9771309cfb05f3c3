"""MDAV (spec/10-sdc.md) against an independent, literal implementation written here: same partition, group sizes
k … 2k − 1, totals kept, within-group squared error equal; individual ranking in SQL against numpy."""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anon_sql.errors import PolicyError
from anon_sql.sdc import microaggregation
from anon_sql.sdc.perturb import perturb
from anon_sql.sdc.sqlparts import fill, render

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "adult.csv"


def reference_mdav(X: np.ndarray, k: int) -> list[frozenset[int]]:
    """The spec's MDAV, one record at a time (slow, obvious): standardized columns, r farthest from the centroid,
    its k − 1 nearest; s farthest from r, its k − 1 nearest; 2k … 3k − 1 left: one group around the farthest from the
    centroid, the rest; fewer than 2k: one group."""
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1)
    remaining = list(range(len(Z)))
    groups = []

    def dist(i, c):
        return float(((Z[i] - c) ** 2).sum())

    def group_around(anchor):
        others = sorted((i for i in remaining if i != anchor), key=lambda i: dist(i, Z[anchor]))
        g = [anchor] + others[: k - 1]
        for i in g:
            remaining.remove(i)
        groups.append(frozenset(g))

    while len(remaining) >= 3 * k:
        centre = Z[remaining].mean(axis=0)
        r = max(remaining, key=lambda i: dist(i, centre))
        group_around(r)
        s = max(remaining, key=lambda i: dist(i, Z[r]))
        group_around(s)
    if len(remaining) >= 2 * k:
        centre = Z[remaining].mean(axis=0)
        group_around(max(remaining, key=lambda i: dist(i, centre)))
    if remaining:
        groups.append(frozenset(remaining))
    return groups


def partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)}


def check_aggregation(X, k, values, grouping):
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    values = np.asarray(values).reshape(len(X), -1)
    sizes = np.bincount(grouping.labels)
    if len(X) >= k:
        assert sizes.min() >= k and sizes.max() <= 2 * k - 1
    np.testing.assert_allclose(values.sum(axis=0), X.sum(axis=0), rtol=1e-9, atol=1e-6)  # totals kept
    for g in range(grouping.groups):  # every value is its group's mean
        members = grouping.labels == g
        np.testing.assert_allclose(values[members], np.broadcast_to(X[members].mean(axis=0), values[members].shape))


@settings(max_examples=40)
@given(n=st.integers(2, 80), k=st.integers(2, 6), data_seed=st.integers(0, 2**16))
def test_univariate_mdav_is_the_spec_algorithm(n, k, data_seed):
    k = min(k, n)
    x = np.random.default_rng(data_seed).normal(50, 15, n)  # continuous: no distance ties
    labels = microaggregation.mdav_univariate(x, k)
    assert partition(labels) == set(reference_mdav(x, k))
    values, grouping = microaggregation.mdav(x, k)
    check_aggregation(x, k, values, grouping)
    ref_sse = sum(((x[list(g)] - x[list(g)].mean()) ** 2).sum() for g in reference_mdav(x, k))
    assert grouping.sse == pytest.approx(ref_sse, rel=1e-9, abs=1e-9)


@settings(max_examples=25)
@given(n=st.integers(2, 60), k=st.integers(2, 5), d=st.integers(2, 3), data_seed=st.integers(0, 2**16))
def test_multivariate_mdav_is_the_spec_algorithm(n, k, d, data_seed):
    k = min(k, n)
    rng = np.random.default_rng(data_seed)
    X = rng.normal(size=(n, d)) * np.array([1, 100, 0.01][:d]) + np.array([0, 1000, 5][:d])
    labels = microaggregation.mdav_multivariate(X, k)
    assert partition(labels) == set(reference_mdav(X, k))
    values, grouping = microaggregation.mdav(X, k)
    check_aggregation(X, k, values, grouping)


def test_mdav_on_adult_age_through_perturb_keeps_the_total_and_group_sizes():
    if not ADULT.exists():
        pytest.skip(f"shared data {ADULT} not present")
    con = duckdb.connect()
    con.execute(render(fill("CREATE TABLE adult AS SELECT * FROM read_csv(__p, delim = ';')", values={"__p": str(ADULT)})))
    result = perturb(con, "adult", {"age": {"kind": "microaggregation", "k": 5}}, seed=7, row_id="rid")
    before, after = con.execute("SELECT (SELECT SUM(age) FROM adult), (SELECT SUM(age) FROM adult__perturbed)").fetchall()[0]
    assert after == pytest.approx(before, rel=1e-12)
    x = con.execute("SELECT age FROM adult ORDER BY rowid").fetchnumpy()["age"].astype(float)
    labels = microaggregation.mdav_univariate(x, 5)
    sizes = np.bincount(labels)
    assert sizes.min() >= 5 and sizes.max() <= 9
    assert result.details["age"]["groups"] == labels.max() + 1
    # every released value is the mean of a group of 5 … 9 records
    released = con.execute("SELECT age FROM adult__perturbed ORDER BY rid").fetchnumpy()["age"]
    means = np.bincount(labels, weights=x) / sizes
    np.testing.assert_allclose(released, means[labels])


def test_sse_over_sst_is_reported():
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0])
    values, grouping = microaggregation.mdav(x, 3)
    np.testing.assert_allclose(values, [2, 2, 2, 11, 11, 11])
    assert grouping.sse == pytest.approx(4.0)
    assert grouping.information_loss == pytest.approx(4.0 / ((x - x.mean()) ** 2).sum())


@pytest.mark.parametrize("k", [1, 0, -3, 2.5, True])
def test_k_below_two_is_refused(k):
    with pytest.raises(PolicyError, match="k"):
        microaggregation.mdav(np.arange(10.0), k)


def test_fewer_values_than_k_is_refused():
    with pytest.raises(PolicyError, match="fewer than k"):
        microaggregation.mdav(np.arange(3.0), 5)


@settings(max_examples=25)
@given(values=st.lists(st.integers(-50, 50), min_size=2, max_size=40), k=st.integers(2, 5))
def test_individual_ranking_sql_groups_consecutive_ranks(values, k):
    k = min(k, len(values))
    con = duckdb.connect()
    con.execute("CREATE TABLE t (__row BIGINT, x INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    got = dict(con.execute(render(microaggregation.individual_ranking_sql("t", "x", k))).fetchall())
    x = np.array(values, dtype=float)
    order = np.lexsort((np.arange(x.size), x))
    grp = np.minimum(np.arange(x.size) // k, max(x.size // k - 1, 0))
    expected = np.empty(x.size)
    for g in np.unique(grp):  # loop over groups of the oracle
        expected[order[grp == g]] = x[order[grp == g]].mean()
    assert np.allclose([got[i] for i in range(x.size)], expected)
    assert np.bincount(grp).min() >= k and np.bincount(grp).max() <= 2 * k - 1
