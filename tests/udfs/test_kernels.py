"""Diversity kernels: golden cases (spec 03, 05) through the numpy kernels, the arrow UDFs and the SQL macros, and
properties asserting kernel == UDF == macro."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anon_sql.udfs import duckdb_udfs, kernels

EC_DIVERSE = ["Hepatitis", "Phthisis", "Asthma", "Obesity"]
EC_FLU = ["Flu", "Flu", "Cancer", "HIV"]
METRICS = ["entropy", "simpson_diversity", "simpson_evenness", "theta_variance"]
KERNEL = {name: getattr(kernels, name) for name in METRICS}


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    duckdb_udfs.register_udfs(c)
    duckdb_udfs.install_macros(c)
    yield c
    c.close()


def sql_fn(style: str, name: str) -> str:
    return f"anon_{name}" if style == "udf" else f"anon.{name}"


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# --------------------------------------------------------------------------------------------------------------------
# golden cases

SIMPSON_GOLDEN = [
    (["a", "a", "b", "b"], 2.0, 1.0),
    (["a", "a", "a", "a"], 1.0, 1.0),
    (["a", "b", "c", "c"], 1 / (0.25**2 + 0.25**2 + 0.5**2), 2.6666666666666665 / 3),
]
THETA_GOLDEN = [(EC_DIVERSE, 1.25), (EC_FLU, 0.6875)]


@pytest.mark.parametrize(("values", "d", "e"), SIMPSON_GOLDEN)
def test_simpson_golden_kernel(values, d, e):
    assert kernels.simpson_diversity(values) == pytest.approx(d)
    assert kernels.simpson_evenness(values) == pytest.approx(e)
    assert kernels.simpson_diversity_counts(kernels.value_counts(values)) == pytest.approx(d)
    assert kernels.simpson_evenness_counts(kernels.value_counts(values)) == pytest.approx(e)


def test_simpson_golden_rounded():
    assert round(kernels.simpson_diversity(["a", "b", "c", "c"]), 3) == 2.667
    assert round(kernels.simpson_evenness(["a", "b", "c", "c"]), 3) == 0.889


@pytest.mark.parametrize(("values", "var"), THETA_GOLDEN)
def test_theta_golden_kernel(values, var):
    assert kernels.theta_variance(values) == pytest.approx(var)
    assert kernels.theta_variance_counts(kernels.value_counts(values)) == pytest.approx(var)


def test_theta_threshold_golden():
    assert kernels.theta_full(4) == pytest.approx(1.25)
    assert [kernels.theta_full(m) for m in (2, 3, 5)] == pytest.approx([0.25, 2 / 3, 2.0])
    assert kernels.theta_threshold(4, 0.6) == pytest.approx(0.75)
    assert kernels.theta_threshold(4, 0.5) == pytest.approx(0.625)
    assert kernels.theta_ok(EC_FLU, 0.6) is False
    assert kernels.theta_ok(EC_FLU, 0.5) is True
    assert kernels.theta_ok(EC_DIVERSE, 1.0) is True  # σ² == θ exactly: tolerance keeps it passing


def test_theta_ties_do_not_matter():
    # {a,a,b,b,c}: a and b tie; any tie order gives the same σ²
    assert kernels.theta_variance_counts([2, 2, 1]) == pytest.approx(kernels.theta_variance_counts([2, 1, 2]))
    f, x = np.array([2, 2, 1]), np.array([1, 2, 3])
    assert kernels.theta_variance_counts([2, 2, 1]) == pytest.approx((f * x * x).sum() / 5 - ((f * x).sum() / 5) ** 2)


def test_entropy_and_recursive_kernel():
    assert kernels.entropy(["a", "b"]) == pytest.approx(math.log(2))
    assert math.exp(kernels.entropy(EC_DIVERSE)) == pytest.approx(4)
    assert kernels.entropy(["x", "x"]) == 0.0
    assert kernels.recursive_l_ok_counts([3, 1, 1], 2, 2) is True  # 3 < 2·(1+1)
    assert kernels.recursive_l_ok_counts([4, 1, 1], 2, 2) is False  # 4 < 4 fails
    assert kernels.recursive_l_ok_counts([3, 1], 5, 3) is False  # fewer than l values
    assert kernels.recursive_l_ok_counts([1, 3, 1, 0], 2, 2) is True  # order and zeros irrelevant
    assert kernels.recursive_l_ok(["a", "a", "a", None, "b"], 2, 2) is True
    with pytest.raises(ValueError):
        kernels.recursive_l_ok_counts([1, 1], 2, 0)


def test_recursive_ratio_kernel_golden():
    """r_1 / (r_l + ...) by hand: counts {3, 2, 1}: l = 2 → 3 / 3, l = 3 → 3 / 1; one value and l = 2 → inf; the
    recursive test passes exactly for c above the ratio."""
    counts = np.array([1, 3, 2, 5])
    seg = np.array([0, 0, 0, 1])
    assert kernels.recursive_ratio_segments(counts, seg, 3, 2).tolist() == [1.0, math.inf, math.inf]
    assert kernels.recursive_ratio_segments(counts, seg, 3, 3).tolist() == [3.0, math.inf, math.inf]
    for c in (0.5, 1.0, 1.5, 3.0, 3.5):
        assert kernels.recursive_l_ok_segments(counts, seg, 3, c, 3)[0] == (c > 3.0)


def test_null_is_a_value_kernel():
    assert sorted(kernels.value_counts(["a", None, None, "a", float("nan")]).tolist()) == [2, 3]
    assert kernels.simpson_diversity([None, None, "a", "a"]) == pytest.approx(2.0)
    assert kernels.theta_variance([1, None, 2, np.nan]) == pytest.approx(kernels.theta_variance_counts([2, 1, 1]))
    assert kernels.entropy(np.array([1.0, np.nan])) == pytest.approx(math.log(2))


def test_empty_class_kernel():
    for name in METRICS:
        assert math.isnan(KERNEL[name]([]))
    assert kernels.theta_ok([], 0.5) is False
    assert kernels.recursive_l_ok_counts([], 2, 1) is False


def test_batch_matches_single():
    classes = [EC_DIVERSE, EC_FLU, [], ["a", None, None], [1, 1, 2]]
    for name in METRICS:
        got = kernels.batch(KERNEL[name], classes)
        want = [KERNEL[name](c) for c in classes]
        assert all(close(a, b) for a, b in zip(got.tolist(), want, strict=True)), name
    assert kernels.batch(kernels.theta_ok, classes, 0.6).tolist() == [True, False, False, False, False]
    counts = [kernels.value_counts(c) for c in classes]
    assert np.allclose(kernels.batch(kernels.theta_variance_counts, counts),
                       kernels.batch(kernels.theta_variance, classes), equal_nan=True)
    assert kernels.batch(kernels.recursive_l_ok_counts, [[3, 1, 1], [4, 1, 1]], 2, 2).tolist() == [True, False]
    assert kernels.batch(len, classes).tolist() == [4, 4, 0, 3, 3]  # any kernel: one call per class
    assert kernels.batch(kernels.entropy, [np.array([1, 2]), np.array([3.0, np.nan])]).tolist() == pytest.approx(
        [math.log(2)] * 2)


@pytest.mark.parametrize("style", ["udf", "macro"])
@pytest.mark.parametrize(("values", "d", "e"), SIMPSON_GOLDEN)
def test_simpson_golden_sql(con, style, values, d, e):
    got = con.execute(
        f"SELECT {sql_fn(style, 'simpson_diversity')}(?::VARCHAR[]), {sql_fn(style, 'simpson_evenness')}(?::VARCHAR[])",
        [values, values]).fetchone()
    assert got == pytest.approx((d, e))


@pytest.mark.parametrize("style", ["udf", "macro"])
def test_theta_golden_sql(con, style):
    tv, ok = sql_fn(style, "theta_variance"), sql_fn(style, "theta_ok")
    row = con.execute(
        f"SELECT {tv}($1::VARCHAR[]), {tv}($2::VARCHAR[]), {ok}($2::VARCHAR[], 0.6), {ok}($2::VARCHAR[], 0.5),"
        f" {ok}($1::VARCHAR[], 0.6)", [EC_DIVERSE, EC_FLU]).fetchone()
    assert row[:2] == pytest.approx((1.25, 0.6875))
    assert row[2:] == (False, True, True)


def test_macro_only_golden(con):
    row = con.execute(
        "SELECT anon.theta_threshold(4, 0.6), anon.theta_threshold(4, 0.5), anon.theta_full(5),"
        " anon.theta_variance_counts([1, 2, 1]), anon.simpson_diversity_counts([1, 1, 2]),"
        " anon.simpson_evenness_counts([2, 2]), anon.entropy_counts([1, 1]), anon.value_counts([1, NULL, NULL])"
    ).fetchone()
    assert row[:7] == pytest.approx((0.75, 0.625, 2.0, 0.6875, 1 / 0.375, 1.0, math.log(2)))
    assert sorted(row[7]) == [1, 2]
    rec = con.execute(
        "SELECT anon.recursive_l_ok_counts([3, 1, 1], 2, 2), anon.recursive_l_ok_counts([4, 1, 1], 2, 2),"
        " anon.recursive_l_ok_counts([3, 1], 5, 3), anon.recursive_l_ok_counts([1, 3, 1, 0], 2, 2),"
        " anon.recursive_l_ok(['a', 'a', 'a', NULL, 'b'], 2, 2)").fetchone()
    assert rec == (True, False, False, True, True)


# --------------------------------------------------------------------------------------------------------------------
# UDF typing, NULLs, registration


@pytest.mark.parametrize("style", ["udf", "macro"])
@pytest.mark.parametrize(("literal", "values"), [
    ("[1, 1, 2, NULL]::INTEGER[]", [1, 1, 2, None]),
    ("[1, 1, 2, NULL]::BIGINT[]", [1, 1, 2, None]),
    ("['x', 'x', 'y', NULL]::VARCHAR[]", ["x", "x", "y", None]),
    ("[1.5, 1.5, 2.25, NULL]::DOUBLE[]", [1.5, 1.5, 2.25, None]),
    ("[1.5, 1.5, 2.25, NULL]", [1.5, 1.5, 2.25, None]),  # DECIMAL
    ("[true, true, false, NULL]", [True, True, False, None]),
    ("[DATE '2020-01-01', DATE '2020-01-01', DATE '2021-01-01', NULL]", ["d1", "d1", "d2", None]),
    ("[[1], [1], [2], NULL]", [(1,), (1,), (2,), None]),
])
def test_sql_element_types(con, style, literal, values):
    for name in METRICS:
        got = con.execute(f"SELECT {sql_fn(style, name)}({literal})").fetchone()[0]
        assert close(got, KERNEL[name](values)), (name, literal)
    got = con.execute(f"SELECT {sql_fn(style, 'theta_ok')}({literal}, 0.5)").fetchone()[0]
    assert got is kernels.theta_ok(values, 0.5)


@pytest.mark.parametrize("style", ["udf", "macro"])
def test_sql_nulls_and_empty(con, style):
    for name in METRICS:
        f = sql_fn(style, name)
        assert con.execute(f"SELECT {f}(NULL::INTEGER[]), {f}([]::INTEGER[])").fetchone() == (None, None)
        # NULL elements are one value: {NULL, NULL, 1, 1} is {a, a, b, b}
        assert close(con.execute(f"SELECT {f}([NULL, NULL, 1, 1])").fetchone()[0], KERNEL[name]("aabb"))
    ok = sql_fn(style, "theta_ok")
    assert con.execute(f"SELECT {ok}(NULL::INTEGER[], 0.5), {ok}([1, 2], NULL)").fetchone() == (None, None)


def test_udf_null_literal_list(con):
    assert con.execute("SELECT anon_entropy(NULL), anon_theta_ok(NULL, 0.5)").fetchone() == (None, None)


def test_udf_column_of_lists_and_row_mu(con):
    rows = con.execute(
        "SELECT anon_theta_ok(x, mu), anon.theta_ok(x, mu), anon_simpson_diversity(x) FROM"
        " (VALUES (['Flu','Flu','Cancer','HIV'], 0.6), (['Flu','Flu','Cancer','HIV'], 0.5), (NULL, 0.5),"
        "         (['a','b'], 0.9)) t(x, mu)").fetchall()
    d_flu = 1 / (0.5**2 + 0.25**2 + 0.25**2)
    assert rows == [(False, False, pytest.approx(d_flu)), (True, True, pytest.approx(d_flu)), (None, None, None),
                    (True, True, 2.0)]


def test_udf_not_a_list_errors(con):
    with pytest.raises(duckdb.Error):
        con.execute("SELECT anon_entropy(1)").fetchall()


def test_register_and_install_idempotent():
    c = duckdb.connect()
    duckdb_udfs.register_udfs(c)
    duckdb_udfs.register_udfs(c)
    duckdb_udfs.install_macros(c)
    duckdb_udfs.install_macros(c)
    assert c.execute("SELECT anon_entropy(['a', 'b']), anon.entropy(['a', 'b'])").fetchone() == pytest.approx(
        (math.log(2), math.log(2)))
    names = {r[0] for r in c.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'anon_%'").fetchall()}
    assert names == set(duckdb_udfs.UDF_NAMES)
    c.close()


def test_macro_statements_packaged():
    stmts = duckdb_udfs.macro_statements()
    assert all(s.upper().startswith("CREATE OR REPLACE MACRO ANON.") for s in stmts)
    names = {s.split()[4].split("(")[0] for s in stmts}
    assert {"anon.value_counts", "anon.entropy", "anon.theta_ok", "anon.recursive_l_ok_counts"} <= names
    assert len(names) == len(stmts)


def test_macros_persist_without_python(tmp_path):
    path = str(tmp_path / "macros.duckdb")
    c = duckdb.connect(path)
    duckdb_udfs.install_macros(c)
    c.close()
    fresh = duckdb.connect(path)  # no register(), no install_macros()
    try:
        assert not fresh.execute(
            "SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'anon_%'").fetchone()[0]
        row = fresh.execute(
            "SELECT anon.simpson_diversity(['a','a','b','b']), anon.theta_variance($1::VARCHAR[]),"
            " anon.theta_ok($1::VARCHAR[], 0.6), anon.theta_ok($1::VARCHAR[], 0.5), anon.entropy([1, NULL]),"
            " anon.recursive_l_ok_counts([3, 1, 1], 2, 2)", [EC_FLU]).fetchone()
        assert row == (2.0, pytest.approx(0.6875), False, True, pytest.approx(math.log(2)), True)
    finally:
        fresh.close()


# --------------------------------------------------------------------------------------------------------------------
# properties: kernel == UDF == macro


def _lists(elements):
    return st.lists(st.lists(st.one_of(st.none(), elements), max_size=25), min_size=1, max_size=12)


STRATEGIES = {
    "VARCHAR": (_lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "", "NULL"])), pa.string()),
    "BIGINT": (_lists(st.integers(-3, 6)), pa.int64()),
    "DOUBLE": (_lists(st.sampled_from([0.0, -1.5, 2.25, 1e300, 3.0])), pa.float64()),
}
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_all(con, lists, arrow_type, mu):
    tbl = pa.table({"i": pa.array(range(len(lists)), pa.int64()), "x": pa.array(lists, pa.list_(arrow_type))})
    con.register("prop_lists", tbl)
    try:
        cols = ", ".join(f"anon_{n}(x), anon.{n}(x)" for n in METRICS)
        rows = con.execute(
            f"SELECT {cols}, anon_theta_ok(x, $mu), anon.theta_ok(x, $mu) FROM prop_lists ORDER BY i",
            {"mu": mu}).fetchall()
    finally:
        con.unregister("prop_lists")
    batched = {n: kernels.batch(KERNEL[n], lists) for n in METRICS}
    for j, (values, row) in enumerate(zip(lists, rows, strict=True)):
        for k, name in enumerate(METRICS):
            want = KERNEL[name](values)
            udf, macro = row[2 * k], row[2 * k + 1]
            if not values:
                assert math.isnan(want) and udf is None and macro is None
                continue
            assert close(udf, want) and close(macro, want), (name, values, want, udf, macro)
            assert close(float(batched[name][j]), want)
        udf_ok, macro_ok = row[-2:]
        if values:
            assert udf_ok is macro_ok is kernels.theta_ok(values, mu), (values, mu)
        else:
            assert udf_ok is None and macro_ok is None


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_property_kernel_udf_macro_agree(kind):
    strategy, arrow_type = STRATEGIES[kind]
    con = duckdb.connect()        # its own connection: no result left open by another test can get in the way
    duckdb_udfs.register_udfs(con)
    duckdb_udfs.install_macros(con)

    @PROPERTY_SETTINGS
    @given(lists=strategy, mu=st.sampled_from([0.5, 0.6, 0.75, 0.9]))
    def run(lists, mu):
        _check_all(con, lists, arrow_type, mu)

    run()


@PROPERTY_SETTINGS
@given(counts=st.lists(st.integers(0, 9), max_size=12), c=st.sampled_from([0.5, 1.0, 2.0, 3.5]),
       l=st.integers(1, 5))
def test_property_counts_macros(con, counts, c, l):
    row = con.execute(
        "SELECT anon.entropy_counts($c), anon.simpson_diversity_counts($c), anon.simpson_evenness_counts($c),"
        " anon.theta_variance_counts($c), anon.recursive_l_ok_counts($c, $cc, $l)",
        {"c": counts, "cc": c, "l": l}).fetchone()
    positive = [n for n in counts if n > 0]
    for got, fn in zip(row[:4], [kernels.entropy_counts, kernels.simpson_diversity_counts,
                                 kernels.simpson_evenness_counts, kernels.theta_variance_counts], strict=True):
        want = fn(counts)
        assert close(got, want) if positive else (got is None and math.isnan(want))
    assert row[4] is kernels.recursive_l_ok_counts(counts, c, l)
    # the counts of the raw values give the same numbers as the values themselves
    values = [v for v, n in enumerate(positive) for _ in range(n)]
    if values:
        assert close(kernels.theta_variance(values), kernels.theta_variance_counts(counts))
        assert kernels.recursive_l_ok(values, c, l) is kernels.recursive_l_ok_counts(counts, c, l)


# --------------------------------------------------------------------------------------------------------------------
# the models: their numpy checks (which call the kernels) against their SQL checks (which call the macros)

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_models_numpy_and_sql_checks_agree(seed):
    """Each diversity model's per-class value and pass flag, from ClassStats (numpy, through the kernels), equal the
    checks view the compiler builds over the same table (SQL, through the macros); counts with a weight column."""
    import pandas as pd

    from anon_sql.common.columns import EC_ID
    from anon_sql.compiler.views import CompileInput, ReleaseNames, checks_view
    from anon_sql.methods import LevelPlan
    from anon_sql.models import (ClassStats, DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity,
            SensitiveCounts, SimpsonDiversity, ThetaCapacity, ThetaFeasible, ThetaSensitivity)
    from anon_sql.policy.model import Policy
    from anon_sql.common.sqlbuild import render

    con = duckdb.connect()
    duckdb_udfs.install_macros(con)
    rng = np.random.default_rng(seed)
    n = 120   # 20 classes of about 6 records: every model passes some classes and fails others
    frame = pd.DataFrame({EC_ID: rng.integers(1, 21, n), "s": rng.choice(list("abcdef"), n, p=[.4, .2, .15, .1, .1, .05])})
    frame["q"] = frame[EC_ID].astype(str)
    con.register("__models_src", frame)
    con.execute("CREATE OR REPLACE TABLE models_t AS SELECT * FROM __models_src")
    models = [DistinctLDiversity("s", 3), EntropyLDiversity("s", 2.5), RecursiveCLDiversity("s", 1.0, 2),
              SimpsonDiversity("s", 2.5, 0.7), ThetaSensitivity("s", 0.2), ThetaFeasible("s", 2, 2),
              ThetaCapacity("s", 2, 0)]
    policy = Policy.from_dict({"name": "models_t", "source": "models_t", "method": "levels",
                               "attributes": {"q": {"role": "quasi"}, "s": {"role": "sensitive"}},
                               "privacy": {"k": 1}})
    names = ReleaseNames("models_t")
    ci = CompileInput(policy, names.table, [EC_ID, "s", "q"], LevelPlan({}), {}, models)
    sql = con.execute(render(checks_view(ci, names).order_by(EC_ID))).df()
    codes, labels = pd.factorize(frame["s"])
    cls = frame[EC_ID].to_numpy() - 1
    k = int(cls.max()) + 1
    stats = ClassStats(np.bincount(cls, minlength=k).astype(float),
                       {"s": SensitiveCounts.from_codes(cls, codes, np.ones(n), k, len(labels))})
    assert sql[EC_ID].tolist() == list(range(1, k + 1))
    pairs = {"l_distinct__s": models[0], "l_entropy__s": models[1], "l_recursive__s": models[2],
             "theta__s": models[4], "theta_feasible__s": models[5], "theta_capacity__s": models[6]}
    for check, model in pairs.items():
        assert sql[f"{check}_ok"].astype(bool).tolist() == model.check(stats).tolist(), check
    assert np.allclose(sql["l_distinct__s_value"], models[0].measure(stats))
    assert np.allclose(sql["l_entropy__s_value"], models[1].measure(stats))
    assert np.allclose(sql["simpson_d__s_value"], models[3].values(stats)[0])
    assert np.allclose(sql["simpson_e__s_value"], models[3].values(stats)[1])
    assert ((sql["simpson_d__s_ok"] & sql["simpson_e__s_ok"]).astype(bool).tolist() == models[3].check(stats).tolist())
    assert np.allclose(sql["theta__s_value"], models[4].measure(stats))


# --------------------------------------------------------------------------------------------------------------------
# utility formulas: the numpy kernels of udfs/utility.py against their SQL macros

def test_utility_macros_golden(con):
    """Hand-computed: NCP of [20-29] on ages 17..90 (9 / 73), of a value covering 3 of 9 leaves (2 / 8); DM of
    classes 3, 2 with 1 of 6 records suppressed (9 + 4 + 6); C_AVG of 5 records in 2 classes at k = 2."""
    row = con.execute("SELECT anon.ncp_numeric(9, 73), anon.ncp_numeric(9, 73, mixed := true),"
                      " anon.ncp_numeric(0, 0), anon.ncp_numeric(0, 0, flat := 1), anon.ncp_categorical(3, 9),"
                      " anon.ncp_categorical(1, 1), anon.discernibility_sizes([3, 2], 6, 1), anon.cavg(5, 2, 2),"
                      " anon.cavg(0, 0, 2), anon.cavg(0, 0, 2, empty := 0)").fetchall()[0]
    assert row[:6] == (pytest.approx(9 / 73), 1.0, 0.0, 1.0, pytest.approx(2 / 8), 0.0)
    assert row[6:9] == (19.0, 1.25, pytest.approx(float("nan"), nan_ok=True)) and row[9] == 0.0
    from anon_sql.udfs import utility

    assert utility.discernibility(np.array([3, 2]), 6, 1) == 19.0 and utility.cavg_formula(5, 2, 2) == 1.25
    assert utility.ncp_numeric(np.array([9.0]), 73)[0] == pytest.approx(9 / 73)
    assert utility.ncp_categorical(np.array([3]), 9)[0] == pytest.approx(2 / 8)


_finite = st.floats(-1e6, 1e6, allow_nan=False)


@PROPERTY_SETTINGS
@given(width=st.one_of(_finite, st.just(float("nan")), st.just(float("inf"))), span=st.one_of(_finite, st.just(0.0)),
       mixed=st.booleans(), flat=st.sampled_from([0.0, 1.0]), leaves=st.integers(1, 50), total=st.integers(0, 50),
       sizes=st.lists(st.integers(1, 40), max_size=15), suppressed=st.integers(0, 30), k=st.integers(1, 10))
def test_property_utility_macros_equal_kernels(con, width, span, mixed, flat, leaves, total, sizes, suppressed, k):
    from anon_sql.udfs import utility

    records_in = sum(sizes) + suppressed
    row = con.execute("SELECT anon.ncp_numeric($w, $s, mixed := $m, flat := $f), anon.ncp_categorical($l, $t),"
                      " anon.discernibility_sizes($z, $n, $u), anon.cavg($r, $c, $k)",
                      {"w": width, "s": span, "m": mixed, "f": flat, "l": leaves, "t": total, "z": sizes,
                       "n": records_in, "u": suppressed, "r": sum(sizes), "c": len(sizes), "k": k}).fetchall()[0]
    assert close(row[0], float(utility.ncp_numeric(np.array([width]), span, np.array([mixed]), flat)[0]))
    assert close(row[1], float(utility.ncp_categorical(np.array([leaves]), total)[0]))
    assert close(row[2], utility.discernibility(np.array(sizes), records_in, suppressed))
    assert close(row[3], utility.cavg_formula(sum(sizes), len(sizes), k))


def test_discernibility_table_macro_equals_the_kernel(con):
    """anon.discernibility over a table's classes = the kernel over the class sizes pandas counts."""
    import pandas as pd

    from anon_sql.udfs import utility

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.integers(0, 4, 200), "b": rng.choice(["x", "y", None], 200)})
    con.register("__dm_src", frame)
    got = con.execute("SELECT * FROM anon.discernibility('__dm_src', ['a', 'b'])").fetchall()[0]
    sizes = frame.groupby(["a", "b"], dropna=False).size().to_numpy()
    assert got == (utility.discernibility(sizes, len(frame), 0), len(sizes), len(frame))
    con.unregister("__dm_src")


def test_chunked_dot_equals_the_exact_sum_across_chunk_edges():
    """utility.dot (single-threaded chunks) = the exact integer Σ a·b for lengths around and above a chunk, and the
    DM kernel over 30,000 class sizes = Python's integer Σ s²."""
    from anon_sql.udfs import utility

    rng = np.random.default_rng(5)
    chunk = 8192   # the chunk length (utility's _DOT_CHUNK)
    for n in (0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 7):
        a, b = rng.integers(0, 1000, n), rng.integers(0, 1000, n)
        assert utility.dot(a.astype(float), b.astype(float)) == sum(int(x) * int(y) for x, y in zip(a, b))
    sizes = rng.integers(1, 500, 30_000)
    assert utility.discernibility(sizes, 10**6, 3) == sum(int(s) ** 2 for s in sizes) + 3 * 10**6
