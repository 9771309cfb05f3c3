"""perturb() per kind against its oracle (spec/10-sdc.md): top/bottom coding exact, PRAM seeded and keeping the
marginals, noise variance and covariance, rank swapping within its window, determinism, bad parameters refused."""
from __future__ import annotations

import duckdb
import numpy as np
import pytest

from anon_sql.errors import PolicyError
from anon_sql.sdc import pram
from anon_sql.sdc.perturb import perturb, swap_partners, validate_perturbation
from anon_sql.sdc.utility import il1s, perturbation_utility


@pytest.fixture
def con():
    c = duckdb.connect()
    rng = np.random.default_rng(3)
    n = 20_000
    import pandas as pd

    frame = pd.DataFrame({
        "id": np.arange(n),
        "income": rng.lognormal(10, 0.5, n),
        "age": rng.integers(17, 90, n).astype(np.int32),
        "height": rng.normal(170, 10, n),
        "colour": rng.choice(["red", "green", "blue", "it's"], n, p=[0.6, 0.25, 0.1, 0.05]),
    })
    frame["weight"] = 0.9 * frame["height"] + rng.normal(0, 5, n) - 80
    c.register("frame", frame)
    c.execute("CREATE TABLE people AS SELECT * FROM frame")
    c.execute("UPDATE people SET age = NULL, colour = NULL WHERE id % 101 = 0")
    c.unregister("frame")
    yield c
    c.close()


def column(con, table, name, order="rid"):
    return con.execute(f'SELECT "{name}" FROM "{table}" ORDER BY "{order}"').fetchnumpy()[name]


def test_top_and_bottom_coding_are_exact(con):
    perturb(con, "people", {"income": {"kind": "top_code", "above": 40000},
                            "age": {"kind": "bottom_code", "below": 20, "replacement": 18}}, seed=1, row_id="rid")
    x = column(con, "people", "income", "id")
    np.testing.assert_array_equal(column(con, "people__perturbed", "income"), np.where(x > 40000, 40000, x))
    a = con.execute('SELECT age FROM people ORDER BY id').fetchall()
    b = con.execute('SELECT age FROM people__perturbed ORDER BY rid').fetchall()
    assert [None if v is None else (18 if v < 20 else v) for (v,) in a] == [v for (v,) in b]
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'people__perturbed'").fetchall())
    assert types["age"] == "INTEGER"  # coding keeps the column's type


def test_same_seed_same_release_other_seed_other_release(con):
    specs = {"colour": {"kind": "pram", "retain": 0.7}, "height": {"kind": "noise", "scale": 0.2},
             "age": {"kind": "swap", "window": 5}, "income": {"kind": "microaggregation", "k": 3}}
    perturb(con, "people", specs, seed=11, output="a", row_id="rid")
    perturb(con, "people", specs, seed=11, output="b", row_id="rid")
    perturb(con, "people", specs, seed=12, output="c", row_id="rid")
    assert con.execute("SELECT COUNT(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM b)").fetchall()[0][0] == 0
    assert con.execute("SELECT COUNT(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM c)").fetchall()[0][0] > 0
    # a column's draws do not depend on the other columns of the policy
    perturb(con, "people", {"colour": specs["colour"]}, seed=11, output="d", row_id="rid")
    np.testing.assert_array_equal(column(con, "a", "colour"), column(con, "d", "colour"))


def test_pram_keeps_the_retain_share_and_nulls(con):
    info = perturb(con, "people", {"colour": {"kind": "pram", "retain": 0.8}}, seed=5, row_id="rid").details["colour"]
    kept, total, nulls = con.execute("""
        SELECT SUM(CASE WHEN p.colour = o.colour THEN 1 ELSE 0 END), COUNT(o.colour),
               SUM(CASE WHEN (p.colour IS NULL) <> (o.colour IS NULL) THEN 1 ELSE 0 END)
        FROM people__perturbed p JOIN people o ON o.id = p.rid""").fetchall()[0]
    assert nulls == 0
    assert abs(kept / total - 0.8) < 4 * np.sqrt(0.8 * 0.2 / total)
    assert info["categories"] == sorted(info["categories"]) and np.allclose(np.sum(info["matrix"], axis=1), 1)


def test_invariant_pram_keeps_the_marginals(con):
    before = dict(con.execute("SELECT colour, COUNT(*) FROM people WHERE colour IS NOT NULL GROUP BY 1").fetchall())
    n = sum(before.values())
    for seed in (1, 2):
        perturb(con, "people", {"colour": {"kind": "pram", "retain": 0.5, "invariant": True}}, seed=seed)
        after = dict(con.execute("SELECT colour, COUNT(*) FROM people__perturbed WHERE colour IS NOT NULL "
                                 "GROUP BY 1").fetchall())
        for value, count in before.items():
            p = count / n
            assert abs(after[value] - count) < 5 * np.sqrt(n * p * (1 - p)), (value, count, after[value])
    # plain PRAM with retain 0.5 moves the marginals towards uniform: visibly different
    perturb(con, "people", {"colour": {"kind": "pram", "retain": 0.5}}, seed=1)
    red = con.execute("SELECT COUNT(*) FROM people__perturbed WHERE colour = 'red'").fetchall()[0][0]
    assert red < before["red"] - 1000


@pytest.mark.parametrize("retain", [0.3, 0.9, 1.0])
def test_invariant_matrix_keeps_pi_exactly(retain):
    counts = np.array([600.0, 250, 100, 50])
    P = pram.transition_matrix(4, retain)
    R = pram.invariant_matrix(P, counts)
    pi = counts / counts.sum()
    np.testing.assert_allclose(pi @ R, pi, atol=1e-12)
    np.testing.assert_allclose(R.sum(axis=1), 1)
    assert np.all(np.diag(P) >= retain - 1e-12)


def test_noise_scale_is_relative_to_the_standard_deviation(con):
    perturb(con, "people", {"height": {"kind": "noise", "scale": 0.5}}, seed=3, row_id="rid")
    e = column(con, "people__perturbed", "height") - column(con, "people", "height", "id")
    sd = column(con, "people", "height", "id").std(ddof=1)
    assert abs(e.mean()) < 4 * 0.5 * sd / np.sqrt(e.size)
    assert e.std(ddof=1) == pytest.approx(0.5 * sd, rel=0.03)
    # IL1s of N(0, (s σ)²) noise is s·√(2/π)/√2 = s/√π
    assert il1s(column(con, "people", "height", "id"), column(con, "people__perturbed", "height")) == \
        pytest.approx(0.5 / np.sqrt(np.pi), rel=0.03)


def test_correlated_noise_keeps_the_covariance_up_to_one_plus_scale_squared(con):
    spec = {"kind": "noise", "scale": 0.3, "correlated": True, "group": "body"}
    perturb(con, "people", {"height": spec, "weight": dict(spec)}, seed=9, row_id="rid")
    o = np.column_stack([column(con, "people", c, "id") for c in ("height", "weight")])
    p = np.column_stack([column(con, "people__perturbed", c) for c in ("height", "weight")])
    np.testing.assert_allclose(np.cov(p, rowvar=False), 1.09 * np.cov(o, rowvar=False), rtol=0.05)
    assert np.corrcoef(p, rowvar=False)[0, 1] == pytest.approx(np.corrcoef(o, rowvar=False)[0, 1], abs=0.02)
    u = perturbation_utility(con, "people", "people__perturbed", ["height", "weight"])
    assert u["correlations"] < 0.02 and u["means"] < 0.01
    # independent noise of the same scale weakens the correlation
    perturb(con, "people", {"height": {"kind": "noise", "scale": 0.3}, "weight": {"kind": "noise", "scale": 0.3}},
            seed=9, output="indep", row_id="rid")
    q = np.column_stack([column(con, "indep", c) for c in ("height", "weight")])
    assert np.corrcoef(q, rowvar=False)[0, 1] < np.corrcoef(o, rowvar=False)[0, 1] - 0.03


@pytest.mark.parametrize("window", [0.1, 1, 5, 50])
def test_swap_partners_stay_within_the_window_and_swap_once(window):
    rng = np.random.default_rng(0)
    x = rng.normal(size=2_001)
    partner = swap_partners(x, window, np.random.default_rng(1))
    assert np.array_equal(partner[partner], np.arange(x.size))  # pairs: each record swapped at most once
    rank = np.empty(x.size, dtype=int)
    rank[np.argsort(x, kind="stable")] = np.arange(x.size)
    w = int(np.floor(window / 100 * x.size))
    assert np.abs(rank - rank[partner]).max() <= w
    assert (partner != np.arange(x.size)).mean() > 0.95  # nearly everyone swaps


def test_swap_through_perturb_keeps_the_values(con):
    info = perturb(con, "people", {"income": {"kind": "swap", "window": 2}}, seed=4, row_id="rid").details["income"]
    o, p = column(con, "people", "income", "id"), column(con, "people__perturbed", "income")
    np.testing.assert_array_equal(np.sort(o), np.sort(p))
    assert info["swapped"] > 0.95 * o.size
    rank = np.empty(o.size, dtype=int)
    rank[np.argsort(o, kind="stable")] = np.arange(o.size)
    moved = np.searchsorted(np.sort(o), p)
    assert np.abs(moved - rank).max() <= int(0.02 * o.size)


def test_multivariate_group_and_utility(con):
    spec = {"kind": "microaggregation", "k": 4, "group": "g"}
    info = perturb(con, "people", {"height": spec, "weight": dict(spec)}, seed=0, row_id="rid").details["g"]
    sizes = con.execute("SELECT COUNT(*) FROM people__perturbed GROUP BY height, weight").fetchnumpy()
    assert sizes["count_star()"].min() >= 4
    assert info["groups"] == 20_000 // 4 or info["groups"] >= 20_000 // 7
    con.execute("CREATE TABLE people_r AS SELECT id AS rid, * FROM people")  # the source rows are numbered by id
    u = perturbation_utility(con, "people_r", "people__perturbed", ["height", "weight"], row_id="rid")
    assert u["means"] < 1e-9 and 0 < u["variances"] < 0.1 and u["il1s"] > 0


@pytest.mark.parametrize("spec,column_type,match", [
    ({"kind": "microaggregation", "k": 1}, "DOUBLE", r"income\.perturb\.k = 1 must be an integer >= 2"),
    ({"kind": "microaggregation", "k": 3, "method": "kmeans"}, "DOUBLE", "method"),
    ({"kind": "pram", "retain": 0}, "VARCHAR", r"retain = 0 must be in \(0, 1\]"),
    ({"kind": "pram", "retain": 1.5}, "VARCHAR", "retain"),
    ({"kind": "noise", "scale": 0.1}, "VARCHAR", "needs a numeric column but 'income' is VARCHAR"),
    ({"kind": "microaggregation", "k": 3}, "DATE", "numeric"),
    ({"kind": "noise", "scale": -1}, "DOUBLE", "scale"),
    ({"kind": "swap", "window": 0}, "DOUBLE", "window"),
    ({"kind": "swap", "window": 5, "seed": 3}, "DOUBLE", "unknown key 'seed'"),
    ({"kind": "blur"}, "DOUBLE", "kind = 'blur' is not a perturbation"),
    ({"kind": "top_code"}, "DOUBLE", "needs 'above'"),
    ({"kind": "top_code", "above": "high"}, "DOUBLE", "above"),
    ("noise", "DOUBLE", "must be a table"),
])
def test_bad_parameters_are_refused_naming_column_key_and_fix(spec, column_type, match):
    with pytest.raises(PolicyError, match=match) as err:
        validate_perturbation(spec, "income", column_type)
    assert "attributes.income.perturb" in str(err.value)


def test_defaults_and_group_consistency(con):
    assert validate_perturbation({"kind": "microaggregation", "k": 3}, "x", "DECIMAL(10,2)")["method"] == "mdav"
    with pytest.raises(PolicyError, match="group 'g'"):
        perturb(con, "people", {"height": {"kind": "microaggregation", "k": 3, "group": "g"},
                                "weight": {"kind": "microaggregation", "k": 4, "group": "g"}}, seed=0)
    with pytest.raises(PolicyError, match="no column 'nope'"):
        perturb(con, "people", {"nope": {"kind": "noise", "scale": 1}}, seed=0)
    tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert tables == {"people"}  # nothing written on a refused policy
