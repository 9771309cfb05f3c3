"""Simpson diversity D = 1/Σp² and evenness E = D/#distinct (spec/03 §3): the golden classes of seed 002 through the
Python API, the privacy model, the UDFs and macros in SQL, per class over a table, and per release (fail closed)."""
from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.errors import PrivacyRequirementError
from anon_sql.methods.adaptive import simpson
from anon_sql.models import ClassStats, SensitiveCounts, SimpsonDiversity
from anon_sql.udfs import kernels

# spec/03 §3 and the issue: {a,a,b,b} → D = 2, E = 1; {a,a,a,a} → D = 1, E = 1; {a,b,c,c} → D = 1/(3/8) = 8/3, E = 8/9
GOLDEN = [(["a", "a", "b", "b"], 2.0, 1.0), (["a", "a", "a", "a"], 1.0, 1.0), (["a", "b", "c", "c"], 8 / 3, 8 / 9)]


def _formula(values) -> tuple[float, float]:
    """D and E written from the formula with pandas (the independent recomputation)."""
    p = pd.Series(list(values), dtype=object).value_counts(normalize=True, dropna=False)
    d = 1.0 / float((p ** 2).sum())
    return d, d / len(p)


@pytest.mark.parametrize(("values", "d", "e"), GOLDEN)
def test_golden_python_api(values, d, e):
    assert _formula(values) == pytest.approx((d, e))
    assert kernels.simpson_diversity(values) == pytest.approx(d)
    assert kernels.simpson_evenness(values) == pytest.approx(e)
    assert (round(kernels.simpson_diversity(values), 3), round(kernels.simpson_evenness(values), 3)) == \
        (round(d, 3), round(e, 3))


def test_golden_rounded_as_in_the_issue():
    assert round(kernels.simpson_diversity(["a", "b", "c", "c"]), 3) == 2.667
    assert round(kernels.simpson_evenness(["a", "b", "c", "c"]), 3) == 0.889


def test_golden_class_level_numpy_paths():
    # the three golden classes at once: the adaptive method's helper and the privacy model's numpy check
    values = [v for vals, _, _ in GOLDEN for v in vals]
    codes = pd.factorize(pd.Series(values))[0]
    cls = np.repeat(np.arange(3), 4)
    d, e = simpson(codes, cls, 3)
    assert d == pytest.approx([g[1] for g in GOLDEN])
    assert e == pytest.approx([g[2] for g in GOLDEN])
    sc = SensitiveCounts.from_codes(cls, codes, np.ones(12), 3, int(codes.max()) + 1)
    stats = ClassStats(np.full(3, 4.0), {"s": sc})
    model = SimpsonDiversity("s", diversity=1.75, evenness=0.75)
    dm, em = model.values(stats)
    assert dm == pytest.approx(d) and em == pytest.approx(e)
    assert model.check(stats).tolist() == [True, False, True]     # {a,a,a,a}: D = 1 < 1.75 → not diverse


@pytest.mark.parametrize(("values", "d", "e"), GOLDEN)
def test_golden_sql_udfs_and_macros(con, values, d, e):
    row = con.execute(
        "SELECT anon_simpson_diversity($v::VARCHAR[]), anon_simpson_evenness($v::VARCHAR[]), "
        "anon.simpson_diversity($v::VARCHAR[]), anon.simpson_evenness($v::VARCHAR[])", {"v": values}).fetchall()[0]
    assert row == pytest.approx((d, e, d, e))


def test_per_class_sql_over_a_table_matches_pandas(con):
    frame = pd.DataFrame({"cls": np.repeat([1, 2, 3], 4), "s": [v for vals, _, _ in GOLDEN for v in vals]})
    con.register("golden_frame", frame)
    got = con.execute(
        "SELECT cls, anon_simpson_diversity(list(s)) AS udf_d, anon.simpson_diversity(list(s)) AS mac_d, "
        "anon_simpson_evenness(list(s)) AS udf_e, anon.simpson_evenness(list(s)) AS mac_e "
        "FROM golden_frame GROUP BY cls ORDER BY cls").df()
    expected = frame.groupby("cls")["s"].apply(_formula)
    for _, r in got.iterrows():
        d, e = expected.loc[r["cls"]]
        assert (r["udf_d"], r["mac_d"], r["udf_e"], r["mac_e"]) == pytest.approx((d, d, e, e))


def _golden_table(c: duckdb.DuckDBPyConnection) -> None:
    # three classes (zip at level 0) whose salaries are the golden sets
    frame = pd.DataFrame({"zip": np.repeat(["10001", "10002", "10003"], 4),
                          "salary": [v for vals, _, _ in GOLDEN for v in vals]})
    c.register("golden_src", frame)
    c.execute("CREATE TABLE golden AS SELECT * FROM golden_src")


def _policy(**privacy) -> dict:
    return {"name": "golden_rel", "source": "golden", "method": "levels",
            "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}}, "salary": {"role": "sensitive"}},
            "privacy": {"k": 4, "simpson": {"diversity": 1.75, "evenness": 0.75}, **privacy},
            "method_params": {"levels": {"zip": 0}}}


def test_release_fails_closed_on_a_non_diverse_class(con):
    _golden_table(con)
    with pytest.raises(PrivacyRequirementError, match=r"simpson_d__salary fails for 1 class \(4 records\)"):
        anon_sql.release(con, _policy())
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'golden_rel'"
                       ).fetchall()[0][0] == 0


def test_release_per_class_values_in_checks_and_catalog(con):
    _golden_table(con)
    rel = anon_sql.release(con, _policy(max_suppression=0.34))
    assert (rel.records_in, rel.records_out, rel.suppressed) == (12, 8, 4)
    released = con.execute('SELECT * FROM golden_rel').df()
    expected = released.groupby("zip")["salary"].apply(_formula)
    checks = rel.classes
    assert sorted(checks["simpson_d__salary_value"]) == pytest.approx(sorted(d for d, _ in expected))
    assert sorted(checks["simpson_e__salary_value"]) == pytest.approx(sorted(e for _, e in expected))
    stats = [json.loads(s) for (s,) in con.execute(
        "SELECT stats FROM anon.equivalence_classes WHERE release = 'golden_rel' ORDER BY ec_id").fetchall()]
    assert sorted(s["simpson_d__salary_value"] for s in stats) == pytest.approx([2.0, 8 / 3])
    assert sorted(s["simpson_e__salary_value"] for s in stats) == pytest.approx([8 / 9, 1.0])
    # and the same per class with the persisted macros over the released table alone
    sql = con.execute("SELECT zip, anon.simpson_diversity(list(salary)) d, anon.simpson_evenness(list(salary)) e "
                      "FROM golden_rel GROUP BY zip ORDER BY zip").fetchall()
    assert [(z, round(d, 3), round(e, 3)) for z, d, e in sql] == [("10001", 2.0, 1.0), ("10003", 2.667, 0.889)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["x", "y", "z", None])), min_size=1, max_size=60))
def test_segmented_helper_matches_the_formula(rows):
    frame = pd.DataFrame(rows, columns=["cls", "s"])
    cls = pd.factorize(frame["cls"], sort=True)[0]
    codes = pd.factorize(frame["s"], use_na_sentinel=False)[0]
    d, e = simpson(codes, cls, int(cls.max()) + 1)
    expected = frame.groupby(cls)["s"].apply(_formula)
    assert d == pytest.approx([x for x, _ in expected])
    assert e == pytest.approx([y for _, y in expected])
    assert np.all((d >= 1 - 1e-9) & (e > 0) & (e <= 1 + 1e-9))
