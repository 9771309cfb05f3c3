"""UPA (spec/04 §2): KTFS-selected clustering k-anonymization on Pima (seed 003), the age rule of Table 6, repair
steps, determinism; every property is recomputed from the released table and the source in pandas/numpy."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler

import anon_sql
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.methods.upa import refine_unique_only
from conftest import working

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PIMA = ["preg", "plas", "pres", "skin", "insu", "mass", "pedi", "age"]
SELECTED = ["preg", "pres", "skin", "insu", "pedi", "age"]   # δ = 0.2 selection + age (vulnerable), spec/04 §1
UNCHANGED = ["plas", "mass", "class"]
TABLE5_TAU = {"plas": 0.3905, "mass": 0.2536, "age": 0.2573, "preg": 0.1703, "pedi": 0.1433, "pres": 0.1192,
              "skin": 0.0762, "insu": 0.0585}
NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
RANGE = re.compile(rf"^\[({NUM})-({NUM})\]$")


@pytest.fixture(scope="module")
def pima():
    path = DATA / "pima" / "pima-indians-diabetes.data.csv"
    if not path.exists():
        pytest.skip(f"shared data {path} not present")
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE pima AS SELECT * FROM read_csv(?, header = false, names = ?)",
              [str(path), PIMA + ["class"]])
    yield c
    c.close()


def pima_ktfs_policy(name: str, k: int, seed: int = 3, **params) -> dict:
    """All eight Pima attributes declared quasi-identifiers; KTFS chooses which to generalize."""
    mp = {"quasi": "ktfs", "target": "class", "delta": 0.2, "vulnerable": ["age"],
          "generalize_unique_only": ["age"], **params}
    return {"name": name, "source": "pima", "method": "upa", "seed": seed, "default_role": "insensitive",
            "attributes": {q: {"role": "quasi"} for q in PIMA}, "privacy": {"k": k}, "method_params": mp}


def pima_policy(name: str, k: int, seed: int = 3, **params) -> dict:
    """The paper's release: the KTFS selection (Table 5, δ = 0.2 + age) declared as the quasi-identifiers; plas and
    mass, which KTFS keeps exact for the class, are declared insensitive (the data owner's explicit trade-off)."""
    mp = {"generalize_unique_only": ["age"], **params}
    return {"name": name, "source": "pima", "method": "upa", "seed": seed, "default_role": "insensitive",
            "attributes": {q: {"role": "quasi"} for q in SELECTED}, "privacy": {"k": k}, "method_params": mp}


def bounds(label: str) -> tuple[float, float]:
    """Released label → (lo, hi): "[a-b]" or a single number."""
    m = RANGE.match(label)
    return (float(m.group(1)), float(m.group(2))) if m else (float(label), float(label))


def original_with_ec(con, name: str) -> pd.DataFrame:
    """The source rows with their class: ``__row`` recomputed as the source view defines it (row number over all
    columns, in order), joined to the release's assignment table."""
    src = con.execute("SELECT * FROM pima").df()
    src = src.sort_values(list(src.columns), kind="stable", na_position="first").reset_index(drop=True)
    src["__row"] = np.arange(1, len(src) + 1)
    assign = con.execute(f'SELECT * FROM {working(name, "assignment")}').df()
    return src.merge(assign, on="__row", validate="one_to_one")


# -- the age rule (spec/04 §2.5, Table 6) ---------------------------------------------------------------------
def test_refine_unique_only_table6():
    # one cluster: 23 held by 5 records (= k) is kept, the singletons 21, 22, 24, 25, 26 stay together
    ages = np.array([23, 21, 23, 22, 23, 24, 23, 25, 23, 26])
    new, kept = refine_unique_only(np.zeros(10, dtype=np.int64), ages, np.ones(10), k=5)
    assert kept.tolist() == (ages == 23).tolist()
    assert new.tolist() == np.where(ages == 23, 1, 0).tolist()   # rest first, then kept values by code


def test_refine_unique_only_keeps_k_and_the_rest():
    w = np.ones(13)
    # k = 5: 23 ×5 and 30 ×6 are held by >= k, but the rest (21, 22) would hold 2 < k records:
    # the kept value with the fewest records (23) rejoins it → rest 7, 30 kept
    ages = np.array([23] * 5 + [30] * 6 + [21, 22])
    new, kept = refine_unique_only(np.zeros(13, dtype=np.int64), ages, w, k=5)
    assert kept.tolist() == (ages == 30).tolist()
    assert np.bincount(new).tolist() == [7, 6]
    # k = 2: 23 and 30 kept, the rest {21, 22} holds 2 = k records
    new, kept = refine_unique_only(np.zeros(13, dtype=np.int64), ages, w, k=2)
    assert kept.tolist() == np.isin(ages, [23, 30]).tolist()
    assert np.bincount(new).tolist() == [2, 5, 6]
    # a value held by the whole class is kept; a value held by fewer than k is not; classes are refined separately
    cls = np.array([0, 0, 0, 1, 1, 1, 1])
    vals = np.array([7, 7, 7, 1, 1, 2, 3])
    new, kept = refine_unique_only(cls, vals, np.ones(7), k=3)
    assert kept.tolist() == [True, True, True, False, False, False, False]
    assert new.tolist() == [0, 0, 0, 1, 1, 1, 1]
    # record weights (count column) count as records
    z = np.zeros(3, dtype=np.int64)
    new, kept = refine_unique_only(z, np.array([1, 2, 3]), np.array([4.0, 3.0, 2.0]), k=4)
    assert kept.tolist() == [True, False, False] and new.tolist() == [1, 0, 0]
    new, kept = refine_unique_only(z, np.array([1, 2, 2]), np.array([4.0, 2.0, 1.0]), k=4)
    assert kept.tolist() == [False, False, False] and new.tolist() == [0, 0, 0]


def test_release_reproduces_table6_age_rule():
    """A release whose single cluster holds 23 five times and 21, 22, 24, 25, 26 once (k = 5): 23 is kept, the
    singletons become [21-26] (Table 6); without the option the cluster is halved along age instead."""
    c = duckdb.connect()
    anon_sql.install(c)
    ages = [23, 21, 23, 22, 23, 24, 23, 25, 23, 26]
    c.execute("CREATE TABLE t AS SELECT unnest(?) AS age, 1 AS grp, unnest(?) AS y", [ages, list(range(10))])
    pol = {"name": "r", "source": "t", "method": "upa", "seed": 0, "privacy": {"k": 5},
           "attributes": {"age": {"role": "quasi"}, "grp": {"role": "quasi"}, "y": {"role": "sensitive"}},
           "method_params": {"generalize_unique_only": ["age"]}}
    rel = anon_sql.release(c, pol)
    out = c.execute("SELECT age, count(*) AS n FROM r GROUP BY age ORDER BY age").fetchall()
    assert out == [("23", 5), ("[21-26]", 5)]
    assert rel.plan["unique_only"] == {"age": {"records_kept": 5, "values_kept": 1}}
    pol["name"], pol["method_params"] = "r2", {}
    anon_sql.release(c, pol)
    assert c.execute("SELECT age, count(*) FROM r2 GROUP BY age ORDER BY age").fetchall() == [
        ("[21-23]", 5), ("[23-26]", 5)]
    c.close()


# -- the Pima golden releases ------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [5, 10, 25, 50, 100])
def test_pima_release(pima, k):
    name = f"pima_upa_{k}"
    rel = anon_sql.release(pima, pima_policy(name, k))
    info = rel.plan
    assert info["selection"] == "policy" and info["released_quasi"] == SELECTED and info["released_unchanged"] == []
    assert rel.policy.quasi == SELECTED and rel.policy.attributes["plas"].role == "insensitive"
    assert rel.passed

    released = pima.execute(f'SELECT * FROM "{name}"').df()
    assert len(released) == 768 and rel.suppressed == 0
    # every class has >= k records, by ec_id and by the released values of the generalized attributes
    assert released.groupby("ec_id").size().min() >= k
    assert released.groupby(SELECTED).size().min() >= k
    assert released.groupby("ec_id")[SELECTED].nunique().max().max() == 1
    assert info["clusters"] == released["ec_id"].nunique() == len(rel.classes)

    orig = original_with_ec(pima, name)
    labels = released.groupby("ec_id")[SELECTED].first()
    for a in SELECTED:
        lo_hi = labels[a].map(bounds)
        lo = orig["ec_id"].map(lo_hi.str[0])
        hi = orig["ec_id"].map(lo_hi.str[1])
        # each released value is the class's [min-max] (a single value when min = max)
        assert ((lo <= orig[a]) & (orig[a] <= hi)).all(), a
        span = orig.groupby("ec_id")[a].agg(["min", "max"])
        assert np.allclose(lo_hi.str[0].loc[span.index], span["min"])
        assert np.allclose(lo_hi.str[1].loc[span.index], span["max"])
    # attributes not generalized are released unchanged, class by class
    key = ["ec_id", *UNCHANGED]
    a = released[key].astype({"plas": float, "mass": float}).sort_values(key).reset_index(drop=True)
    b = orig[key].astype({"plas": float, "mass": float}).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    # the paper's metrics
    sizes = released.groupby("ec_id").size()
    assert rel.metrics["discernibility"] == float((sizes ** 2).sum())
    assert rel.metrics["cavg"] == pytest.approx(768 / len(sizes) / k)
    # silhouette of the released classes over the standardized generalized attributes, recomputed
    X = StandardScaler().fit_transform(orig[SELECTED].to_numpy(float))
    assert info["silhouette"] == pytest.approx(silhouette_score(X, orig["ec_id"]), abs=1e-9)


def test_ktfs_selection_table5(pima):
    """KTFS: δ = 0.2 plus the vulnerable age; SU and |τ_b| listed (Table 5, truncated to 4 decimals)."""
    from anon_sql.analytics.relevance import feature_relevance

    table = feature_relevance(pima, "pima", PIMA, "class", 0.2, vulnerable=["age"])
    chosen = set(table.loc[table["selected_for_anonymization"], "attribute"])
    assert [q for q in PIMA if q in chosen] == SELECTED
    tau = dict(zip(table["attribute"], table["kendall_tau"]))
    assert {a: np.floor(t * 1e4) / 1e4 for a, t in tau.items()} == pytest.approx(TABLE5_TAU, abs=1e-9)
    assert table["su"].between(0, 1).all()


def test_ktfs_fails_closed_over_every_declared_quasi_identifier(pima):
    """Issue 13.2: KTFS leaves plas and mass unchanged; with all eight declared quasi-identifiers the release is
    checked over all of them (plas and mass are near-unique), so it is refused, naming them — never released with
    k verified over the selected six only."""
    with pytest.raises(PrivacyRequirementError, match=r"\['plas', 'mass'\] unchanged \(ktfs selection\)") as err:
        anon_sql.release(pima, pima_ktfs_policy("pima_ktfs", 5))
    assert "k-anonymity" in str(err.value) or "k fails" in str(err.value)
    assert pima.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'pima_ktfs'"
                        ).fetchall() == [(0,)]


def test_pima_age_rule_keeps_repeated_ages(pima):
    """k = 5 on Pima: ages held by >= k records of a cluster keep their value; they are true values of classes of
    >= k records; the same release without the option keeps fewer exact ages."""
    rel = anon_sql.release(pima, pima_policy("pima_age", 5))
    kept = rel.plan["unique_only"]["age"]
    assert kept["records_kept"] > 0 and kept["values_kept"] > 0
    released = pima.execute('SELECT * FROM "pima_age"').df()
    exact = released[~released["age"].str.startswith("[")]
    assert len(exact) >= kept["records_kept"]
    assert exact.groupby("ec_id").size().min() >= 5
    orig = original_with_ec(pima, "pima_age")
    exact_ec = exact.groupby("ec_id")["age"].first().astype(float)
    per_ec = orig[orig["ec_id"].isin(exact_ec.index)].groupby("ec_id")["age"].agg(["min", "max"])
    assert (per_ec["min"] == exact_ec.loc[per_ec.index]).all() and (per_ec["max"] == per_ec["min"]).all()
    params = pima_policy("pima_noage", 5)
    del params["method_params"]["generalize_unique_only"]
    anon_sql.release(pima, params)
    plain = pima.execute("""SELECT count(*) FROM pima_noage WHERE NOT starts_with(age, '[')""").fetchall()[0][0]
    assert len(exact) > plain


def test_same_seed_same_release(pima):
    anon_sql.release(pima, pima_policy("det_a", 10, seed=11))
    anon_sql.release(pima, pima_policy("det_b", 10, seed=11))
    a = pima.execute("SELECT * FROM det_a").df()
    b = pima.execute("SELECT * FROM det_b").df()
    pd.testing.assert_frame_equal(a, b)


def test_policy_quasi_and_kmeanspp_init(pima):
    """quasi = "policy" generalizes every quasi-identifier; init = "k-means++" is scikit-learn's initialization."""
    pol = pima_ktfs_policy("pima_all", 20)
    pol["method_params"] = {"init": "k-means++"}
    rel = anon_sql.release(pima, pol)
    assert rel.plan["released_quasi"] == PIMA and rel.plan["init"] == "k-means++"
    released = pima.execute("SELECT * FROM pima_all").df()
    assert released.groupby(PIMA).size().min() >= 20


def test_categorical_quasi_identifiers_and_l_diversity(con):
    """Local recoding of categorical QIs (taxonomy LCA) with distinct 2-diversity; pycanon as the oracle."""
    canon = pytest.importorskip("pycanon.anonymity")
    path = DATA / "adult" / "adult.csv"
    if not path.exists():
        pytest.skip("adult data not present")
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true) USING SAMPLE 1500 ROWS "
                "(reservoir, 7)", [str(path)])
    qi = ["age", "sex", "race", "education"]
    pol = {"name": "adult_upa", "source": "adult", "method": "upa", "seed": 1, "default_role": "insensitive",
           "attributes": {"age": {"role": "quasi"}, "sex": {"role": "quasi", "taxonomy": "adult_sex"},
                          "race": {"role": "quasi", "taxonomy": "adult_race"},
                          "education": {"role": "quasi", "taxonomy": "adult_education"},
                          "salary-class": {"role": "sensitive"}},
           "privacy": {"k": 10, "l_diversity": {"kind": "distinct", "l": 2}}}
    rel = anon_sql.release(con, pol)
    df = con.execute("SELECT * FROM adult_upa").df()
    assert rel.passed and len(df) == 1500
    assert canon.k_anonymity(df, qi) >= 10
    assert canon.l_diversity(df, qi, ["salary-class"]) >= 2
    assert set(df["sex"]) <= {"Male", "Female", "*"}


def test_count_column(con):
    """Rows standing for n records: class sizes are sums of n."""
    con.execute("CREATE TABLE w AS SELECT i % 7 AS a, i % 5 AS b, 1 + i % 3 AS n FROM range(60) t(i)")
    pol = {"name": "w_upa", "source": "w", "method": "upa", "count_column": "n", "privacy": {"k": 6},
           "attributes": {"a": {"role": "quasi"}, "b": {"role": "quasi"}}}
    rel = anon_sql.release(con, pol)
    sizes = con.execute("SELECT ec_id, sum(n) FROM w_upa GROUP BY ec_id").fetchall()
    assert min(s for _, s in sizes) >= 6 and rel.records_out == 120


def test_errors(pima):
    def plan(**mp):
        pol = pima_ktfs_policy("bad", 5)
        pol["method_params"] = mp
        return anon_sql.release(pima, pol, dry_run=True)

    with pytest.raises(PolicyError, match=r"unknown key `.*` in \[method_params\]"):
        plan(quasi="ktfs", target="class", k_clusters=3)
    with pytest.raises(PolicyError, match="needs method_params.target"):
        plan(quasi="ktfs")
    with pytest.raises(PolicyError, match="only apply with"):
        plan(delta=0.3)
    with pytest.raises(PolicyError, match="quasi must be"):
        plan(quasi="all")
    with pytest.raises(PolicyError, match="init must be"):
        plan(init="random")
    with pytest.raises(PolicyError, match="oversampling"):
        plan(oversampling=0)
    with pytest.raises(PolicyError, match="not generalized"):
        plan(quasi="ktfs", target="class", generalize_unique_only=["plas"])
    with pytest.raises(PolicyError, match="selected no quasi-identifier"):
        plan(quasi="ktfs", target="class", delta=0.0)
    assert pima.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'bad'").fetchall() == [(0,)]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(8, 60), k=st.integers(2, 8), seed=st.integers(0, 3),
       data=st.data())
def test_property_every_class_has_k(n, k, seed, data):
    """Random numeric tables (with ties and NULLs): the release exists, every class has >= k records and every
    released range covers its records' values."""
    k = min(k, n)
    xs = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=n, max_size=n))
    ys = data.draw(st.lists(st.floats(-5, 5, allow_nan=False).map(lambda v: round(v, 2)), min_size=n, max_size=n))
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE t AS SELECT unnest(?::INTEGER[]) AS x, unnest(?::DOUBLE[]) AS y", [xs, ys])
    pol = {"name": "r", "source": "t", "method": "upa", "seed": seed, "privacy": {"k": k},
           "attributes": {"x": {"role": "quasi"}, "y": {"role": "quasi"}},
           "method_params": {"generalize_unique_only": ["x"]}}
    anon_sql.release(c, pol)
    out = c.execute("SELECT * FROM r").df()
    assert len(out) == n
    assert out.groupby("ec_id").size().min() >= k
    assert out.groupby(["x", "y"], dropna=False).size().min() >= k
    src = c.execute(f'SELECT s.y, a.ec_id FROM {working("r", "source")} s JOIN {working("r", "assignment")} a USING ("__row")').df()
    lab = out.groupby("ec_id")["y"].first().map(bounds)
    lo, hi = src["ec_id"].map(lab.str[0]), src["ec_id"].map(lab.str[1])
    assert ((lo <= src["y"] + 1e-9) & (src["y"] <= hi + 1e-9)).all()
    c.close()
