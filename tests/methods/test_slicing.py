"""l-diverse slicing pieces (seed 001 §2): φ² golden values and SQL vs pandas, PAM on a hand-made distance matrix,
and p(t, s) of the slicing kernel against hand computations from Definitions 8–10 (Table 10) and against a naive
O(n²) reference implementation on random sliced tables."""
from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import chi2_contingency

from anon_sql.methods.slicing import correlation_matrix, pam, phi2
from anon_sql.udfs.slicing import slicing_diverse, slicing_max_p, slicing_probabilities
from conftest import working

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TABLE2 = DATA / "examples" / "seed001_table2.csv"


# -- φ² ------------------------------------------------------------------------------------------------------------
def test_phi2_independent_and_bijection():
    assert phi2(np.array([[10, 20], [30, 60]])) == pytest.approx(0.0)          # f_ij = f_i f_j
    assert phi2(np.diag([3, 5, 7])) == pytest.approx(1.0)                       # bijection
    assert phi2(np.array([[4, 0, 0], [0, 2, 3]])) == pytest.approx(1.0)         # function of a 3-valued attribute
    assert phi2(np.array([[5, 6]])) == 0.0                                      # constant attribute


def test_phi2_formula_recomputed():
    t = np.array([[12, 3, 5], [2, 9, 4]], dtype=float)
    f = t / t.sum()
    fi, fj = f.sum(axis=1, keepdims=True), f.sum(axis=0, keepdims=True)
    expected = ((f - fi * fj) ** 2 / (fi * fj)).sum() / (min(t.shape) - 1)
    assert phi2(t) == pytest.approx(expected)
    chi2 = chi2_contingency(t, correction=False)[0]
    assert phi2(t) == pytest.approx(chi2 / t.sum() / (min(t.shape) - 1))


def test_correlation_matrix_sql_matches_pandas():
    c = duckdb.connect()
    c.execute("CREATE TABLE t2 AS SELECT * FROM read_csv(?)", [str(TABLE2)])
    attrs = ["sex", "age", "zipcode", "diagnosis"]
    got = correlation_matrix(c, "t2", attrs, numeric=["age", "zipcode"], bins=3)
    frame = c.execute("SELECT * FROM t2").df()
    for a in ("age", "zipcode"):   # equal-width bins, 3 of them
        lo, hi = frame[a].min(), frame[a].max()
        frame[a] = np.minimum(2, np.floor((frame[a] - lo) / ((hi - lo) / 3)))
    for i, a in enumerate(attrs):
        for j, b in enumerate(attrs):
            ct = pd.crosstab(frame[a], frame[b]).to_numpy()
            assert got[i, j] == pytest.approx(phi2(ct) if i != j else 1.0)
    # zipcode's 3 bins are the 3 buckets and each has one sex majority: sex–zipcode is not independent
    assert 0 < got[0, 2] < 1 and got[1, 1] == 1.0
    c.close()


# -- PAM -----------------------------------------------------------------------------------------------------------
def test_pam_finds_the_obvious_clusters():
    # points 0, 1, 2 close together, 3, 4 close together, 5 alone
    d = np.array([[0, .1, .2, .9, .9, .8],
                  [.1, 0, .1, .9, .8, .9],
                  [.2, .1, 0, .8, .9, .9],
                  [.9, .9, .8, 0, .1, .7],
                  [.9, .8, .9, .1, 0, .7],
                  [.8, .9, .9, .7, .7, 0]])
    labels, medoids = pam(d, 3)
    groups = sorted(sorted(np.flatnonzero(labels == g).tolist()) for g in range(3))
    assert groups == [[0, 1, 2], [3, 4], [5]] and medoids.tolist()[0] == 1
    labels, _ = pam(d, 2)
    assert sorted(sorted(np.flatnonzero(labels == g).tolist()) for g in range(2)) in ([[0, 1, 2], [3, 4, 5]],)
    with pytest.raises(ValueError, match="columns"):
        pam(d, 7)


# -- p(t, s): hand computations from Definitions 8–10 ----------------------------------------------------------------
def _codes(values) -> np.ndarray:
    return pd.factorize(pd.Series(values), sort=True)[0]


def _p_table(frame: pd.DataFrame, bucket, groups: list[list[str]], sens: str) -> dict:
    """{t's key columns → {s: p(t, s)}} through the kernel."""
    col_codes = [_codes(frame[g].astype(str).agg("|".join, axis=1)) for g in groups[:-1]]
    rest = [a for a in groups[-1] if a != sens]
    skey = _codes(frame[rest].astype(str).agg("|".join, axis=1)) if rest else np.zeros(len(frame), dtype=int)
    s_codes = _codes(frame[sens])
    labels = sorted(frame[sens].unique())
    sig, p = slicing_probabilities(np.asarray(bucket), np.column_stack(col_codes) if col_codes else
                                   np.zeros((len(frame), 0)), skey, s_codes)
    keys = frame[[a for g in groups for a in g if a != sens]].astype(str).agg("|".join, axis=1)
    return {k: {labels[j]: p[sig[i], j] for j in range(len(labels)) if p[sig[i], j] > 0} for i, k in enumerate(keys)}


def test_table10_matching_probabilities():
    # Table 10: fixed-interval values, columns {sex, age} | {zipcode, diagnosis}, buckets of 3
    t = pd.read_csv(TABLE2)
    t["age"] = np.repeat([22, 32, 38], 3)
    t["zipcode"] = np.repeat([620709, 641013, 651571], 3)
    bucket = np.repeat([0, 1, 2], 3)
    got = _p_table(t, bucket, [["sex", "age"], ["zipcode", "diagnosis"]], "diagnosis")
    # t = (Female, 22, 620709): only B1 matches (f1 = 3/3, f2 = 3/3), D = {Flu 2/3, Dyspepsia 1/3}
    assert got["Female|22|620709"] == pytest.approx({"Flu": 2 / 3, "Dyspepsia": 1 / 3})
    # B2 and B3 tuples: every diagnosis of their bucket with 1/3
    assert got["Male|32|641013"] == pytest.approx({"Gastritis": 1 / 3, "Cancer": 1 / 3, "Pneumonia": 1 / 3})
    assert got["Female|38|651571"] == pytest.approx({"Breast Cancer": 1 / 3, "Insomnia": 1 / 3, "Flu": 1 / 3})
    assert got["Male|38|651571"] == pytest.approx({"Breast Cancer": 1 / 3, "Insomnia": 1 / 3, "Flu": 1 / 3})
    codes = [_codes(t[["sex", "age"]].astype(str).agg("|".join, axis=1))]
    args = (bucket, np.column_stack(codes), _codes(t["zipcode"]), _codes(t["diagnosis"]))
    assert slicing_max_p(*args).tolist() == pytest.approx([2 / 3] * 3 + [1 / 3] * 6)
    # under its own definitions Table 10 is neither 2- nor 3-diverse (the paper says 2-diverse: spec/02 §2.3)
    assert not slicing_diverse(*args, l=2) and not slicing_diverse(*args, l=3)
    # bucket B2 alone is 3-diverse and not 4-diverse
    b2 = slice(3, 6)
    sub = (bucket[b2] - 1, args[1][b2], args[2][b2], _codes(t["diagnosis"][b2]))
    assert slicing_diverse(*sub, l=2) and slicing_diverse(*sub, l=3) and not slicing_diverse(*sub, l=4)


def test_tuple_matching_several_buckets():
    # columns {sex} | {diagnosis} (C_c = {S}, f_c = 1) over Table 2's buckets of 3
    t = pd.read_csv(TABLE2)
    bucket = np.repeat([0, 1, 2], 3)
    got = _p_table(t, bucket, [["sex"], ["diagnosis"]], "diagnosis")
    # Female: f(t, B1) = 1, f(t, B3) = 2/3 → p(t, B1) = 3/5, p(t, B3) = 2/5
    female = {"Flu": F(3, 5) * F(2, 3) + F(2, 5) * F(1, 3), "Dyspepsia": F(3, 5) * F(1, 3),
              "Breast Cancer": F(2, 5) * F(1, 3), "Insomnia": F(2, 5) * F(1, 3)}
    assert got["Female"] == pytest.approx({k: float(v) for k, v in female.items()})
    # Male: f(t, B2) = 1, f(t, B3) = 1/3 → p(t, B2) = 3/4, p(t, B3) = 1/4
    male = {"Gastritis": F(1, 4), "Cancer": F(1, 4), "Pneumonia": F(1, 4), "Breast Cancer": F(1, 12),
            "Insomnia": F(1, 12), "Flu": F(1, 12)}
    assert got["Male"] == pytest.approx({k: float(v) for k, v in male.items()})
    assert sum(female.values()) == 1 and sum(male.values()) == 1


# -- p(t, s) against the naive definition ------------------------------------------------------------------------------
def _naive(bucket, groups, skey, sens, n_sens):
    """Definitions 8–10 literally: a loop over tuples and buckets (O(n²), test only)."""
    n = len(bucket)
    out = np.zeros((n, n_sens))
    for r in range(n):
        f = {}
        for b in np.unique(bucket):
            m = bucket == b
            fb = np.prod([np.mean(groups[m, i] == groups[r, i]) for i in range(groups.shape[1])])
            fb *= np.mean(skey[m] == skey[r])
            f[b] = fb
        ft = sum(f.values())
        for b, fb in f.items():
            m = (bucket == b) & (skey == skey[r])
            if fb == 0:
                continue
            for s in range(n_sens):
                out[r, s] += fb / ft * np.mean(sens[m] == s)
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 30).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 3), min_size=n, max_size=n), st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n), st.lists(st.integers(0, 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 3), min_size=n, max_size=n))))
def test_kernel_matches_naive_definition(data):
    bucket, g1, g2, skey, sens = (np.array(x) for x in data)
    bucket = pd.factorize(bucket)[0]
    groups = np.column_stack([g1, g2])
    sig, p = slicing_probabilities(bucket, groups, skey, sens, n_sens=4)
    naive = _naive(bucket, groups, skey, sens, 4)
    np.testing.assert_allclose(p[sig], naive, atol=1e-12)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


# -- method = "slicing" ------------------------------------------------------------------------------------------------
def _slicing_policy(name="sl", seed=7, **params):
    return {"name": name, "source": "t2", "method": "slicing", "seed": seed,
            "attributes": {"sex": {"role": "quasi"}, "age": {"role": "quasi"}, "zipcode": {"role": "quasi"},
                           "diagnosis": {"role": "sensitive"}},
            "privacy": {"k": 3, "l_diversity": {"kind": "slicing", "l": 2}},
            "method_params": {"columns": 2, "sensitive_column_size": 1, **params}}


@pytest.fixture
def t2(con):
    con.execute("CREATE TABLE t2 AS SELECT * FROM read_csv(?)", [str(TABLE2)])
    return con


def test_slicing_release_buckets_permutation_and_diversity(t2):
    import anon_sql
    rel = anon_sql.release(t2, _slicing_policy())
    groups = rel.plan["columns"]
    assert groups[-1] == ["diagnosis"] and sorted(a for g in groups for a in g) == ["age", "diagnosis", "sex",
                                                                                        "zipcode"]
    out = t2.execute("SELECT sex, CAST(age AS INTEGER) AS age, CAST(zipcode AS INTEGER) AS zipcode, diagnosis, "
                     "ec_id FROM sl").df()
    src = t2.execute(f"SELECT s.*, a.ec_id FROM {working('sl', 'source')} s JOIN {working('sl', 'assignment')} a USING (__row)").df()
    assert rel.passed and out.groupby("ec_id").size().min() >= 3 and len(out) == 9
    # inside each bucket, every column group's multiset of value combinations is the original one
    for g in groups:
        for b in out["ec_id"].unique():
            got = sorted(map(tuple, out.loc[out.ec_id == b, g].astype(str).values.tolist()))
            want = sorted(map(tuple, src.loc[src.ec_id == b, g].astype(str).values.tolist()))
            assert got == want
    # the released buckets are l-diverse under Definition 10 (recomputed with the kernel from the original tuples)
    qi = groups[0]
    gc = _codes(src[qi].astype(str).agg("|".join, axis=1))
    maxp = slicing_max_p(src["ec_id"].to_numpy(), gc[:, None], np.zeros(9, dtype=int), _codes(src["diagnosis"]))
    assert maxp.max() <= 0.5 and rel.plan["max_p"] == pytest.approx(maxp.max())
    # the same value in SQL over the released table (one non-sensitive group: released signatures = original ones)
    sql_p = t2.execute("SELECT anon_slicing_diversity(list(ec_id), list([concat_ws('|', sex, age, zipcode)]), "
                       "list(''), list(diagnosis)) FROM sl").fetchone()[0]
    assert sql_p == pytest.approx(maxp.max())
    # same seed ⇒ same release; another seed permutes differently
    anon_sql.release(t2, _slicing_policy("sl2"))
    anon_sql.release(t2, _slicing_policy("sl3", seed=8))
    a, b, c = (t2.execute(f"SELECT * FROM {n} ORDER BY ALL").df() for n in ("sl", "sl2", "sl3"))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


def test_slicing_fails_closed_when_not_diverse(t2):
    import anon_sql
    from anon_sql.errors import PolicyError, PrivacyRequirementError
    # "pam" mode, α = 2 tops the sensitive column up with the QI most correlated with the diagnosis, a unique-valued
    # one: D(t, B) is a point mass, max p(t, s) = 1 > 1/2 even as one bucket
    with pytest.raises(PrivacyRequirementError, match="max p"):
        anon_sql.release(t2, _slicing_policy("bad", sensitive_column_size=2, sensitive_column="pam"))
    # "alpha" mode, l = 3: sex would give p(Female, Flu) = 2/5 > 1/3 as one bucket, age and zipcode 1: no QI can join
    pol = _slicing_policy("bad", sensitive_column_size=2)
    pol["privacy"]["l_diversity"]["l"] = 3
    with pytest.raises(PrivacyRequirementError, match="sensitive_column_size = 1"):
        anon_sql.release(t2, pol)
    # l = 4: Flu holds 3/9 > 1/4 of the table, no sliced table is 4-diverse
    pol["privacy"]["l_diversity"]["l"] = 4
    with pytest.raises(PrivacyRequirementError, match="'Flu' of 'diagnosis' holds 0.3333"):
        anon_sql.release(t2, pol)
    assert not t2.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'bad'").fetchone()[0]
    with pytest.raises(PolicyError, match="columns"):
        anon_sql.release(t2, _slicing_policy("bad", columns=0))
    with pytest.raises(PolicyError, match=r"unknown key `.*` in \[method_params\]"):
        anon_sql.release(t2, _slicing_policy("bad", buckets=3))
    t2.execute("CREATE TABLE t2n AS SELECT *, 1 AS n FROM t2")
    with pytest.raises(PolicyError, match="count_column"):
        anon_sql.release(t2, {**_slicing_policy("bad"), "source": "t2n", "count_column": "n"})


def test_permutation_stays_inside_buckets():
    from anon_sql.methods.slicing import permute_within_buckets
    bucket = np.repeat([0, 1, 2], [4, 3, 5])
    for src in permute_within_buckets(bucket, 3, 2):
        assert sorted(src.tolist()) == list(range(12)) and (bucket[src] == bucket).all()


def test_udf_matches_hand_computation(con):
    con.execute("CREATE TABLE t2 AS SELECT * FROM read_csv(?)", [str(TABLE2)])
    # Table 2's buckets of 3, columns {sex} | {diagnosis}: max p = p(Female, Flu) = 8/15 (test above)
    got = con.execute("WITH t AS (SELECT *, CASE WHEN age < 30 THEN 0 WHEN age < 35 THEN 1 ELSE 2 END AS b FROM t2) "
                      "SELECT anon_slicing_diversity(list(b), list([sex]), list(''), list(diagnosis)) FROM t"
                      ).fetchone()[0]
    assert got == pytest.approx(8 / 15)
    # Table 10 values, columns {sex, age} | {zipcode, diagnosis}: 2/3
    got = con.execute("WITH t AS (SELECT *, CASE WHEN age < 30 THEN 0 WHEN age < 35 THEN 1 ELSE 2 END AS b FROM t2) "
                      "SELECT anon_slicing_diversity(list(b), list([sex, CAST(b AS VARCHAR)]), list(b), "
                      "list(diagnosis)) FROM t").fetchone()[0]
    assert got == pytest.approx(2 / 3)
    assert con.execute("SELECT anon_slicing_diversity([], [], [], [])").fetchone()[0] is None


# -- column formation, guide, SQL check, validity rules -----------------------------------------------------------------
def test_sensitive_column_by_alpha_skips_infeasible_qis():
    from anon_sql.methods.slicing import form_columns, max_conditional_share, sensitive_column
    attrs = ["a", "b", "c", "s"]
    phi = np.array([[1, .1, .2, .9], [.1, 1, .3, .5], [.2, .3, 1, .4], [.9, .5, .4, 1]])
    # S's correlations: a .9, b .5, c .4; "a" fails the feasibility test, so b then c join
    members, skipped = sensitive_column(phi, attrs, "s", 3, lambda m: "a" not in m)
    assert members == ["s", "b", "c"] and skipped == ["a"]
    assert form_columns(phi, attrs, "s", 2, 3, "alpha", lambda m: "a" not in m) == [["a"], ["b", "c", "s"]]
    assert form_columns(phi, attrs, "s", 2, 1, "alpha") == [["a", "b", "c"], ["s"]]
    # one-bucket max p(t, s): key 0 → s {0, 0, 1} = 2/3; key 1 → s {1} = 1
    assert max_conditional_share(np.array([0, 0, 0, 1]), np.array([0, 0, 1, 1])) == pytest.approx(1.0)
    assert max_conditional_share(np.array([0, 0, 0]), np.array([0, 0, 1])) == pytest.approx(2 / 3)


def test_share_suppression_water_filling_hand_case():
    from anon_sql.methods.slicing import share_suppression
    # 12 records, l = 2: A holds 8 (cells: 5 in cell 0, 2 in cell 1, 1 in cell 2), B and C 2 each. Fewest: r = 4
    # (N' = 8, A capped at 4; r = 3 leaves cap floor(9/2) = 4 and needs 4 > 3). Water-filling takes cell 0's records
    # at priorities 5, 4, 3, then priority 2 is a seeded tie between cell 0 and cell 1; the singleton is never taken
    sens = np.array([0] * 8 + [1, 1, 2, 2])
    cell = np.array([0] * 5 + [1, 1, 2] + [3, 3, 4, 4])
    picks = {seed: share_suppression(sens, cell, 2, seed) for seed in range(12)}
    for drop in picks.values():
        assert drop.sum() == 4 and (sens[drop] == 0).all() and not drop[7] and drop[:5].sum() >= 3
    assert {int(d[5:7].sum()) for d in picks.values()} == {0, 1}                  # both sides of the tie occur
    np.testing.assert_array_equal(share_suppression(sens, cell, 2, 3), picks[3])   # same seed, same records
    assert not share_suppression(np.array([0, 1, 2, 0, 1, 2]), np.zeros(6), 3, 0).any()   # already 3-diverse
    with pytest.raises(ValueError, match="exceeds the 3 distinct"):
        share_suppression(sens, cell, 4, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=60), st.floats(1, 3), st.integers(0, 2 ** 31))
def test_share_suppression_fewest_records(values, l, seed):
    """The count equals the brute-force least r with Σ_s max(0, freq_s − floor((N − r)/l)) <= r (fewer removals
    cannot cap every value), and the rest satisfies the share bound."""
    from anon_sql.methods.slicing import share_suppression
    sens = np.array(values)
    freq = np.bincount(sens)
    n = len(sens)
    if l > np.count_nonzero(freq):
        return
    need = lambda r: np.maximum(freq - np.floor((n - r) / l + 1e-9), 0).sum()   # noqa: E731
    least = next(r for r in range(n + 1) if need(r) <= r)
    drop = share_suppression(sens, sens * 7 % 3, l, seed)
    assert drop.sum() == least
    rest = np.bincount(sens[~drop], minlength=len(freq))
    assert (rest * l <= (n - least) + 1e-9).all()


def test_slicing_guide_hand_counts():
    from anon_sql.models.slicing import PAIR, SlicingGuide
    from anon_sql.models.base import ClassStats, SensitiveCounts
    # 3 sensitive values; pair code = x * 3 + s. Class 0: x=0 → s {0: 1, 1: 1}, x=1 → s {2: 2} (point mass: fails l=2)
    # class 1: x=0 → s {0: 2, 1: 1, 2: 1} (top 2/4 <= 1/2 passes l=2, fails l=3)
    cls = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    val = np.array([0, 1, 5, 5, 0, 1, 0, 0, 1, 2])
    stats = ClassStats(np.array([6.0, 4.0]), {PAIR: SensitiveCounts.from_codes(cls, val, np.ones(10), 2, 6)})
    assert SlicingGuide(2, 3).check(stats).tolist() == [False, True]
    assert SlicingGuide(3, 3).check(stats).tolist() == [False, False]

    # the measured share per class: class 0 max(1/2, 2/2) = 1, class 1 2/4
    assert SlicingGuide(2, 3).measure(stats).tolist() == [1.0, 0.5]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_slicing_guide_sql_equals_numpy(seed):
    """The guide's SQL check (the checks view the compiler builds: the class's {x, s, w} rows through the
    anon.slicing_guide_* macros) gives the numpy check's pass flag and measured share for every class, on random
    buckets with NULLs in the companions and the sensitive value, a two-column x, one-column x and no x, and weights."""
    from anon_sql.common.columns import EC_ID
    from anon_sql.compiler.views import CompileInput, ReleaseNames, checks_view
    from anon_sql.methods import LevelPlan
    from anon_sql.models import ClassStats, SensitiveCounts
    from anon_sql.models.slicing import PAIR, SlicingGuide
    from anon_sql.policy.model import Policy
    from anon_sql.common.sqlbuild import render
    from anon_sql.udfs import duckdb_udfs

    rng = np.random.default_rng(seed)
    n = 480   # 8 buckets of about 60 rows: about 7 rows per two-column x, so some buckets pass and some fail
    frame = pd.DataFrame({EC_ID: rng.integers(1, 9, n), "a": rng.choice(["p", "q", None], n),
                          "b": rng.choice([1.0, 2.0, np.nan], n), "s": rng.choice(["u", "v", "w", None], n, p=[.5, .2, .2, .1]),
                          "cnt": rng.integers(1, 4, n)})
    frame["q"] = frame[EC_ID].astype(str)
    con = duckdb.connect()
    duckdb_udfs.install_macros(con)
    con.register("__guide_src", frame)
    con.execute("CREATE TABLE guide_t AS SELECT * FROM __guide_src")
    policy = Policy.from_dict({"name": "guide_t", "source": "guide_t", "method": "levels", "count_column": "cnt",
                               "attributes": {"q": {"role": "quasi"}, "s": {"role": "sensitive"},
                                              "a": {"role": "insensitive"}, "b": {"role": "insensitive"}},
                               "privacy": {"k": 1}})
    cls = frame[EC_ID].to_numpy() - 1
    k = int(cls.max()) + 1
    s_codes, s_labels = pd.factorize(frame["s"], use_na_sentinel=False)
    outcomes: set[bool] = set()
    for companions, l in ((["a", "b"], 1.25), (["a"], 1.6), ([], 1.6)):
        x = (pd.MultiIndex.from_frame(frame[companions]).factorize()[0] if companions
             else np.zeros(n, dtype=np.int64))
        ns = len(s_labels)
        pair = x * ns + s_codes
        w = frame["cnt"].to_numpy(dtype=float)
        stats = ClassStats(np.bincount(cls, weights=w, minlength=k),
                           {PAIR: SensitiveCounts.from_codes(cls, pair, w, k, (int(x.max()) + 1) * ns)})
        guide = SlicingGuide(l, ns, "s", companions)
        ci = CompileInput(policy, "guide_t", [EC_ID, "s", "q", "a", "b", "cnt"], LevelPlan({}), {}, [guide])
        sql = con.execute(render(checks_view(ci, ReleaseNames("guide_t")).order_by(EC_ID))).df()
        assert sql[EC_ID].tolist() == list(range(1, k + 1))
        ok = sql["slicing_guide__s_ok"].astype(bool).tolist()
        assert ok == guide.check(stats).tolist(), companions
        assert np.allclose(sql["slicing_guide__s_value"].to_numpy(float), guide.measure(stats)), companions
        outcomes.update(ok)
    assert outcomes == {True, False}   # the data exercise both outcomes


def test_sql_risk_table_matches_kernel(t2):
    import anon_sql
    from anon_sql.udfs.slicing import slicing_probabilities
    # α = 2: columns {age, zipcode} | {sex, diagnosis}: f_c and D(t, B) condition on sex
    rel = anon_sql.release(t2, _slicing_policy("sq", sensitive_column_size=2))
    assert rel.plan["columns"] == [["age", "zipcode"], ["sex", "diagnosis"]]
    assert sorted(rel.plan["sensitive_column_skipped"]) == ["age", "zipcode"]
    src = t2.execute(f"SELECT s.*, a.ec_id FROM {working('sq', 'source')} s JOIN {working('sq', 'assignment')} a "
                     "USING (__row) ORDER BY __row").df()
    g = _codes(src[["age", "zipcode"]].astype(str).agg("|".join, axis=1))
    sig, p = slicing_probabilities(src["ec_id"].to_numpy(), g[:, None], _codes(src["sex"]), _codes(src["diagnosis"]))
    risk = t2.execute(f"SELECT * FROM {working('sq', 'risk')} ORDER BY __row").df()
    np.testing.assert_allclose(risk["max_p_sensitive"], p.max(axis=1)[sig])
    # buckets split by sex: every tuple matches only its own bucket; Female {Dyspepsia, Flu, Flu, Breast Cancer,
    # Insomnia} → 2/5, Male 4 distinct → 1/4
    assert risk["max_p_bucket"].tolist() == [1.0] * 9
    assert risk["max_p_sensitive"].tolist() == pytest.approx(np.where(src["sex"] == "Female", .4, .25).tolist())
    row = rel.checks.set_index("check").loc["slicing_l_diversity"]
    assert row["passed"] and row["worst_value"] == pytest.approx(0.4)
    # anon_sql.check re-runs it from the catalog; tampering with the release makes it fail
    assert anon_sql.check(t2, "sq").set_index("check").loc["slicing_l_diversity", "passed"]
    t2.execute("UPDATE sq SET diagnosis = 'Flu' WHERE sex = 'Female'")
    again = anon_sql.check(t2, "sq").set_index("check").loc["slicing_l_diversity"]
    assert not again["passed"] and again["worst_value"] == pytest.approx(1.0)


def test_validity_rules_report_and_repair(t2):
    import anon_sql
    from anon_sql.errors import PolicyError
    rule = "sex = 'Male' AND diagnosis = 'Breast Cancer'"

    def pol(name, repair):
        p = _slicing_policy(name, sensitive_column_size=1, invalid_tuples=[rule], repair_invalid=repair)
        p["privacy"]["k"] = 9   # one bucket: the permutation can pair a male with breast cancer
        return p
    rel = anon_sql.release(t2, pol("v0", False))
    v = rel.plan["validity"]
    assert v["invalid_original"] == 0 and v["invalid_released"] == v["invalid_left"] >= 1
    assert t2.execute(f"SELECT count(*) FROM v0 WHERE {rule}").fetchone()[0] == v["invalid_left"]
    rel = anon_sql.release(t2, pol("v1", True))
    v = rel.plan["validity"]
    assert v["invalid_released"] >= 1 and v["invalid_after_repair"] == 0
    assert t2.execute(f"SELECT count(*) FROM v1 WHERE {rule}").fetchone()[0] == 0
    # the repair swaps values inside the bucket: each column group's multiset is unchanged
    for cols in ("sex, age, zipcode", "diagnosis"):
        q = f"SELECT {cols} FROM {{}} ORDER BY ALL"
        assert t2.execute(q.format("v1")).fetchall() == t2.execute(
            q.format("t2").replace("age, zipcode", "CAST(age AS VARCHAR), CAST(zipcode AS VARCHAR)")).fetchall()
    for bad, match in (("sex = 'Male'; DROP TABLE t2", "cannot parse|uses"), ("lower(sex) = 'male'", "uses"),
                       ("gender = 'Male'", "not an attribute")):
        with pytest.raises(PolicyError, match=match):
            anon_sql.release(t2, _slicing_policy("bad", invalid_tuples=[bad]))
    assert t2.execute("SELECT count(*) FROM t2").fetchone()[0] == 9


@settings(max_examples=25, deadline=None)
@given(st.integers(4, 25).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 3), min_size=n, max_size=n), st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n), st.lists(st.integers(0, 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 3), min_size=n, max_size=n), st.lists(st.integers(1, 3), min_size=n, max_size=n))))
def test_sql_check_matches_kernel_on_random_tables(data):
    """The SQL twin (slicing_sql.risk_query) and the numpy kernel agree per tuple, with record weights."""
    from anon_sql.models.slicing_sql import risk_query
    from anon_sql.common.sqlbuild import render, table
    bucket, a, b, x, s, w = (np.array(v) for v in data)
    bucket = pd.factorize(bucket)[0]
    src = pd.DataFrame({"__row": np.arange(len(a)), "a": a, "b": b, "x": [None if v == 1 else "x0" for v in x],
                        "s": [f"s{v}" for v in s], "n": w})
    rel = src.assign(ec_id=bucket).drop(columns="__row")
    c = duckdb.connect()
    c.register("src", src)
    c.register("rel", rel)
    q = risk_query(table("rel"), table("src"), [["a"], ["b"], ["x", "s"]], "s", "n")
    got = c.execute(render(q)).df().sort_values("__row")
    sig, p = slicing_probabilities(bucket, np.column_stack([a, b]), x, s, w.astype(float), n_sens=4)
    np.testing.assert_allclose(got["max_p_sensitive"].to_numpy(), p.max(axis=1)[sig], atol=1e-12)
    c.close()
