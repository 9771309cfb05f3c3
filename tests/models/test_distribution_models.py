"""α-k-anonymity, β-likeness (basic, enhanced) and δ-disclosure as privacy models: golden classes by hand, releases
that pass and are refused (levels, Mondrian, optimal search), and the SQL checks equal to the numpy kernels."""
from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.models import AlphaKAnonymity, BetaLikeness, ClassStats, DeltaDisclosure, SensitiveCounts
from anon_sql.udfs import risk_kernels as rk
from conftest import load_classes, working

# classes A: a a b b, B: a a a b, C: a b c c — table shares a 1/2, b 1/3, c 1/6
GOLDEN = {"10001": "aabb", "10002": "aaab", "10003": "abcc"}
ALPHA = [0.5, 0.75, 0.5]
BETA = [0.5, 0.5, 2.0]                                   # b: (1/2 − 1/3)/(1/3); a: (3/4 − 1/2)/(1/2); c: (1/2 − 1/6)/(1/6)
BETA_ENHANCED = [0.5, 0.5, math.inf]                     # C: gain 2 > −ln(1/6) = 1.79
DELTA = [math.log(1.5), math.log(1.5), math.log(3)]      # b in A, a in B, c in C


def _stats() -> ClassStats:
    vals = {"a": 0, "b": 1, "c": 2}
    codes = np.array([vals[v] for s in GOLDEN.values() for v in s])
    cls = np.repeat(np.arange(3), 4)
    return ClassStats(np.full(3, 4.0), {"s": SensitiveCounts.from_codes(cls, codes, np.ones(12), 3, 3)})


def test_golden_numpy():
    st = _stats()
    assert AlphaKAnonymity("s", 0.7).measure(st) == pytest.approx(ALPHA)
    assert AlphaKAnonymity("s", 0.7).check(st).tolist() == [True, False, True]
    assert BetaLikeness("s", 1).measure(st) == pytest.approx(BETA)
    assert BetaLikeness("s", 1, enhanced=True).measure(st).tolist()[:2] == pytest.approx(BETA_ENHANCED[:2])
    assert math.isinf(BetaLikeness("s", 1, enhanced=True).measure(st)[2])
    assert DeltaDisclosure("s", 1).measure(st) == pytest.approx(DELTA)
    assert DeltaDisclosure("s", 1, base=2).measure(st) == pytest.approx([d / math.log(2) for d in DELTA])


@pytest.fixture
def golden(con):
    load_classes(con, GOLDEN)
    return con


def _policy(method: str = "levels", **privacy) -> dict:
    params = {"levels": {"method_params": {"levels": {"zip": 0}}}, "mondrian": {}, "optimal": {}}[method]
    return {"name": "rel", "source": "golden", "method": method,
            "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}}, "s": {"role": "sensitive"}},
            "privacy": {"k": 2, **privacy}, **params}


@pytest.mark.parametrize("privacy, ok, column", [
    ({"alpha": 0.75}, True, "alpha__s"), ({"alpha": 0.7}, False, "alpha__s"),
    ({"beta_likeness": {"beta": 2.0}}, True, "beta_basic__s"), ({"beta_likeness": {"beta": 1.9}}, False, "beta_basic__s"),
    ({"beta_likeness": {"beta": 0.5, "kind": "enhanced"}}, False, "beta_enhanced__s"),
    ({"delta_disclosure": 1.1}, True, "delta__s"), ({"delta_disclosure": 1.09}, False, "delta__s"),
    ({"delta_disclosure": {"delta": 1.59, "log": "2"}}, True, "delta__s"),
    ({"delta_disclosure": {"delta": 1.58, "log": "2"}}, False, "delta__s"),
])
def test_levels_release_passes_or_is_refused(golden, privacy, ok, column):
    if ok:
        rel = anon_sql.release(golden, _policy(**privacy))
        assert rel.checks.set_index("check").loc[column, "passed"]
        assert sorted(rel.classes[f"{column}_value"]) == pytest.approx(sorted(
            {"alpha__s": ALPHA, "beta_basic__s": BETA, "delta__s": DELTA}[column]) if "log" not in str(privacy)
            else sorted(d / math.log(2) for d in DELTA))
    else:
        with pytest.raises(PrivacyRequirementError, match=column):
            anon_sql.release(golden, _policy(**privacy))
        assert golden.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'rel'").fetchall()[0][0] == 0


@pytest.mark.parametrize("method", ["mondrian", "optimal"])
def test_other_methods_honour_the_models(golden, method):
    # every class of the golden table fails α = 0.6 except when merged: the methods must generalize to pass
    rel = anon_sql.release(golden, _policy(method, alpha=0.6, delta_disclosure=1.2))
    assert rel.checks["passed"].all()
    released = golden.execute("SELECT ec_id, s FROM rel").df()
    assert released.groupby("ec_id")["s"].apply(lambda x: x.value_counts(normalize=True).max()).max() <= 0.6


@pytest.mark.parametrize("bad", [{"alpha": 0}, {"alpha": 1.5}, {"beta_likeness": {"beta": -1}},
                                 {"beta_likeness": {"beta": 1, "kind": "strong"}}, {"beta_likeness": 2},
                                 {"delta_disclosure": 0}, {"delta_disclosure": {"delta": 1, "log": "10"}}])
def test_bad_parameters_fail_closed(bad):
    with pytest.raises(PolicyError):
        anon_sql.Policy.from_dict(_policy(**bad))


def test_models_need_a_sensitive_attribute():
    d = _policy(alpha=0.5)
    d["attributes"]["s"]["role"] = "insensitive"
    with pytest.raises(PolicyError, match="sensitive"):
        anon_sql.Policy.from_dict(d)


@pytest.mark.parametrize("seed", range(4))
def test_sql_checks_equal_numpy_kernels(con, seed):
    rng = np.random.default_rng(seed)
    n = 300
    frame = pd.DataFrame({"zip": rng.integers(0, 15, n).astype(str), "s": rng.choice(list("abcdef"), n,
                                                                                       p=[.3, .25, .2, .1, .1, .05])})
    con.register("src", frame)
    con.execute("CREATE TABLE golden AS SELECT * FROM src")
    pol = _policy(alpha=1.0, beta_likeness={"beta": 1e9, "kind": "enhanced"}, delta_disclosure=1e9,
                  max_suppression=1.0)
    # the compiled release up to its (pre-suppression) classes view, which this test reads
    for statement in anon_sql.compile(pol, con=con):
        con.execute(statement)
        if working("rel", "classes") in statement.split(" AS ")[0]:
            break
    sql = con.execute(f'SELECT zip, "alpha__s_value", "beta_enhanced__s_value", "delta__s_value" '
                      f'FROM {working("rel", "classes")} ORDER BY zip').df()
    cls, zips = pd.factorize(frame["zip"])
    vals, _ = pd.factorize(frame["s"])
    counts = frame.groupby([cls, vals]).size()
    c_cls = counts.index.get_level_values(0).to_numpy()
    c_val = counts.index.get_level_values(1).to_numpy()
    cnt = counts.to_numpy(dtype=float)
    q = np.bincount(vals) / n
    k = len(zips)
    want = pd.DataFrame({"zip": zips, "alpha": rk.alpha_segments(cnt, c_cls, k),
                         "beta": rk.beta_enhanced_segments(cnt, c_cls, k, c_val, q),
                         "delta": rk.delta_segments(cnt, c_cls, k, c_val, q)}).sort_values("zip")
    assert sql["alpha__s_value"].to_numpy() == pytest.approx(want["alpha"].to_numpy())
    assert sql["beta_enhanced__s_value"].to_numpy() == pytest.approx(want["beta"].to_numpy())
    assert sql["delta__s_value"].to_numpy() == pytest.approx(want["delta"].to_numpy())


def test_alpha_macro_equals_kernel(con):
    rows = con.execute("SELECT anon.alpha_counts([3, 1, 0]), anon.alpha_counts([2, 2]), anon.alpha_counts([5])"
                       ).fetchall()[0]
    assert rows == pytest.approx((rk.alpha_segments(np.array([3, 1]), np.array([0, 0]), 1)[0], 0.5, 1.0))
