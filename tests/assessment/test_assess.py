"""anon_sql.assess and `anon-sql assess`: hand-computed measures, pycanon as an oracle, brute-force EMD for the
hierarchical distance, the population estimators' equations, read-only behaviour and fail-closed input checks."""
from __future__ import annotations

import json
import math
from math import comb, log

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import AnonSQLError, PolicyError, TaxonomyError
from anon_sql.data.taxonomy import from_mapping
from anon_sql.udfs import risk_kernels as rk

from conftest import data_path

ROWS = [(1, "x", "p"), (1, "x", "p"), (1, "x", "q"), (2, "y", "p"), (2, "y", "q"), (3, "z", "r")]


@pytest.fixture
def small():
    c = duckdb.connect()
    c.execute("CREATE TABLE t (a INTEGER, b VARCHAR, s VARCHAR)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", ROWS)
    yield c
    c.close()


def test_hand_computed_small_table(small):
    m = anon_sql.assess(small, "t", ["a", "b"], ["s"], threshold=0.4).measures
    # classes (1,x): p p q; (2,y): p q; (3,z): r — table shares p 1/2, q 1/3, r 1/6
    assert (m["k"], m["classes"], m["records"]) == (1, 3, 6)
    assert m["sample_uniques"] == pytest.approx(1 / 6)
    assert m["records_at_risk"] == pytest.approx(3 / 6)          # risks 1/2 and 1 exceed 0.4
    assert m["prosecutor_risk_highest"] == 1 and m["prosecutor_risk_lowest"] == pytest.approx(1 / 3)
    assert m["prosecutor_risk_avg_records"] == pytest.approx(3 / 6)
    assert m["prosecutor_risk_avg_classes"] == pytest.approx((1 / 3 + 1 / 2 + 1) / 3)
    assert m["marketer_risk"] == pytest.approx(0.5)
    assert m["l_distinct"] == 1 and m["l_entropy"] == pytest.approx(1)
    assert m["alpha"] == 1
    assert m["beta_basic"] == pytest.approx(5)                    # r: (1 − 1/6) / (1/6)
    assert math.isinf(m["beta_enhanced"])                         # gain 5 > −ln(1/6)
    assert m["beta_enhanced_pycanon"] == pytest.approx(log(6))    # max_s min(5, −ln q_s)
    assert m["delta_disclosure"] == pytest.approx(log(6))
    assert m["delta_disclosure_log2"] == pytest.approx(math.log2(6))
    assert m["t_equal"] == pytest.approx(5 / 6)                   # ½ (1/2 + 1/3 + 5/6)
    assert m["distinction"] == pytest.approx(0.5)
    assert m["separation"] == pytest.approx(1 - (3 * 2 + 2 * 1) / 30)
    assert math.isnan(m["journalist_risk_highest"])


def test_recursive_c_per_l():
    # one class with counts 5, 3, 2: c for l=2 is 5/(3+2), for l=3 5/2; a class with 2 values has none for l=3
    c, seg = np.array([5, 3, 2, 4, 4]), np.array([0, 0, 0, 1, 1])
    assert rk.recursive_c_segments(c, seg, 2, 2).tolist() == [1.0, 1.0]
    r3 = rk.recursive_c_segments(c, seg, 2, 3)
    assert r3[0] == pytest.approx(2.5) and math.isinf(r3[1])


def test_population_table(small):
    extra = [(1, "x", "p"), (1, "x", "q"), (3, "z", "p"), (4, "w", "p"), (4, "w", "p"), (4, "w", "q"), (4, "w", "r")]
    pop = pd.DataFrame(ROWS + extra, columns=["a", "b", "s"])
    m = anon_sql.assess(small, "t", ["a", "b"], population=pop).measures
    # F: (1,x) 5, (2,y) 2, (3,z) 2 for f = 3, 2, 1
    assert m["population_size"] == 13
    assert m["journalist_risk_highest"] == pytest.approx(1 / 2)
    assert m["journalist_risk_lowest"] == pytest.approx(1 / 5)
    assert m["journalist_risk_avg_records"] == pytest.approx((3 / 5 + 2 / 2 + 1 / 2) / 6)
    assert m["journalist_risk_avg_classes"] == pytest.approx((1 / 5 + 1 / 2 + 1 / 2) / 3)
    assert m["marketer_risk"] == pytest.approx((3 / 5 + 1 + 1 / 2) / 6)
    assert m["k_map"] == 2
    assert (m["delta_presence_min"], m["delta_presence_max"]) == (pytest.approx(1 / 2), 1)   # f/F: 3/5, 2/2, 1/2
    with pytest.raises(PolicyError, match="does not contain every record"):
        anon_sql.assess(small, "t", ["a", "b"], population=pd.DataFrame(ROWS[:4], columns=["a", "b", "s"]))


def test_database_is_unchanged(tmp_path):
    path = tmp_path / "db.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (a INTEGER, b VARCHAR, s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", ROWS)
    con.execute("CREATE VIEW v AS SELECT * FROM t WHERE a < 3")

    def snapshot():
        return [con.execute(q).fetchall() for q in (
            "SELECT database_name, schema_name, table_name, estimated_size FROM duckdb_tables() ORDER BY ALL",
            "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL",
            "SELECT schema_name FROM duckdb_schemas() ORDER BY ALL",
            "SELECT schema_name, function_name FROM duckdb_functions() WHERE NOT internal ORDER BY ALL",
            "SELECT * FROM t ORDER BY ALL")]

    before = snapshot()
    frame = pd.DataFrame(ROWS, columns=["a", "b", "s"])
    for source in ("t", "v", frame):
        anon_sql.assess(con, source, ["a", "b"], ["s"], population=frame, combination_size=2)
    assert snapshot() == before
    con.close()


def test_sources_agree(small, tmp_path):
    csv = tmp_path / "t.csv"
    small.execute(f"COPY t TO '{csv}' (HEADER)")
    small.execute("CREATE VIEW v AS SELECT * FROM t")
    frame = pd.DataFrame(ROWS, columns=["a", "b", "s"])
    import pyarrow as pa

    sources = ("t", "v", str(csv), csv, frame, pa.Table.from_pandas(frame), small.table("t"))
    results = [anon_sql.assess(small, s, ["a", "b"], ["s"]).measures for s in sources]
    assert not small.execute("SELECT * FROM duckdb_views() WHERE NOT internal AND view_name LIKE '__anon%'").fetchall()
    for r in results[1:]:
        _same(r, results[0])


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], dict):
            assert a[k] == pytest.approx(b[k]), k
        elif isinstance(a[k], str):
            assert a[k] == b[k], k
        else:
            assert a[k] == pytest.approx(b[k], nan_ok=True), k


def test_count_column(small):
    small.execute("CREATE TABLE w AS SELECT a, b, s, count(*) AS n FROM t GROUP BY ALL")
    a = anon_sql.assess(small, "w", ["a", "b"], ["s"], count_column="n").measures
    b = anon_sql.assess(small, "t", ["a", "b"], ["s"]).measures
    _same(a, b)


def test_attribute_combinations(small):
    att = anon_sql.assess(small, "t", ["a", "b", "s"], combination_size=2).attributes
    row = att.set_index("quasi").loc["s"]
    # s: values p p p q q r → distinction 3/6, separation 1 − (3·2 + 2·1 + 0)/30
    assert row["distinction"] == pytest.approx(0.5)
    assert row["separation"] == pytest.approx(1 - 8 / 30)
    assert len(att) == 3 + 3 + 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(quasi=["nope"]), "not in"),
    (dict(quasi=["a"], sensitive=["a"]), "both"),
    (dict(quasi=[]), "at least one"),
    (dict(quasi=["a"], threshold=0), "threshold"),
    (dict(quasi=["a"], population=3), "smaller"),
    (dict(quasi=["a"], population=100, sampling_fraction=0.1), "not both"),
    (dict(quasi=["a"], sampling_fraction=1.5), "sampling_fraction"),
    (dict(quasi=["a"], sensitive=["s"], taxonomies={"b": "x"}), "not sensitive"),
    (dict(quasi=["a"], count_column="a"), "count_column"),
])
def test_bad_input(small, kwargs, match):
    with pytest.raises(AnonSQLError, match=match):
        anon_sql.assess(small, "t", **kwargs)


def test_taxonomy_must_cover(small):
    tax = from_mapping("s", {"p": ["pq"], "q": ["pq"]})
    with pytest.raises(TaxonomyError, match="does not cover"):
        anon_sql.assess(small, "t", ["a"], ["s"], taxonomies={"s": tax})


# -- hierarchical EMD against a linear program ----------------------------------------------------------------------
def _emd_lp(p: np.ndarray, q: np.ndarray, dist: np.ndarray) -> float:
    from scipy.optimize import linprog

    m = len(p)
    a_eq = []
    for i in range(m):
        row = np.zeros((m, m))
        row[i, :] = 1
        a_eq.append(row.ravel())
    for j in range(m):
        row = np.zeros((m, m))
        row[:, j] = 1
        a_eq.append(row.ravel())
    res = linprog(dist.ravel(), A_eq=np.array(a_eq), b_eq=np.r_[p, q], bounds=(0, None), method="highs")
    return float(res.fun)


@pytest.mark.parametrize("seed", range(5))
def test_t_hierarchical_equals_linear_program(seed):
    rng = np.random.default_rng(seed)
    leaves = [f"v{i}" for i in range(7)]
    mid = {v: f"m{int(rng.integers(0, 3))}" for v in leaves}
    top = {m: f"g{int(rng.integers(0, 2))}" for m in set(mid.values())}
    tax = from_mapping("s", {v: [mid[v], top[mid[v]]] for v in leaves})
    height = tax.height
    lv = tax.levels

    def lca_level(i, j):
        return next(h for h in range(height + 1) if lv.iloc[i, h] == lv.iloc[j, h])

    dist = np.array([[lca_level(i, j) / height for j in range(7)] for i in range(7)])
    values = rng.choice(leaves, size=60)
    classes = rng.integers(0, 4, size=60)
    frame = pd.DataFrame({"c": classes, "s": values})
    con = duckdb.connect()
    got = anon_sql.assess(con, frame, ["c"], ["s"], taxonomies={"s": tax}).measures["t_hierarchical"]
    q = frame["s"].value_counts(normalize=True).reindex(lv["level0"], fill_value=0).to_numpy()
    want = max(_emd_lp(frame[frame.c == k]["s"].value_counts(normalize=True).reindex(lv["level0"], fill_value=0)
                       .to_numpy(), q, dist) for k in np.unique(classes))
    assert got == pytest.approx(want, abs=1e-9)


# -- independent oracles on Adult -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def adult_sample():
    frame = pd.read_csv(data_path("adult", "adult.csv"), sep=";")
    return frame.sample(1500, random_state=3).reset_index(drop=True)


def test_pycanon_agrees(adult_sample):
    pycanon = pytest.importorskip("pycanon.anonymity")
    qi, sa = ["age", "sex"], ["salary-class"]
    m = anon_sql.assess(duckdb.connect(), adult_sample, qi, sa).measures
    df = adult_sample.copy()
    assert m["k"] == pycanon.k_anonymity(df, qi)
    assert m["l_distinct"] == pycanon.l_diversity(df, qi, sa)
    assert m["alpha"] == pytest.approx(pycanon.alpha_k_anonymity(df, qi, sa)[0])
    assert m["beta_basic"] == pytest.approx(pycanon.basic_beta_likeness(df, qi, sa))
    assert m["beta_enhanced_pycanon"] == pytest.approx(pycanon.enhanced_beta_likeness(df, qi, sa))
    assert m["delta_disclosure"] == pytest.approx(pycanon.delta_disclosure(df, qi, sa))
    assert m["t_equal"] == pytest.approx(pycanon.t_closeness(df, qi, sa), abs=1e-9)


def test_pandas_recomputation(adult_sample):
    qi = ["age", "race", "education"]
    a = anon_sql.assess(duckdb.connect(), adult_sample, qi, combination_size=2)
    sizes = adult_sample.groupby(qi, dropna=False).size().to_numpy()
    n = len(adult_sample)
    assert a.measures["k"] == sizes.min()
    assert a.measures["prosecutor_risk_avg_classes"] == pytest.approx((1 / sizes).mean())
    assert a.measures["records_at_risk_count"] == sizes[sizes < 5].sum()
    assert a.measures["separation"] == pytest.approx(1 - (sizes * (sizes - 1)).sum() / (n * (n - 1)))
    pair = adult_sample.groupby(["age", "race"]).size().to_numpy()
    assert a.attributes.set_index("quasi").loc["age, race", "distinction"] == pytest.approx(len(pair) / n)
    assert sorted(a.classes["__size"]) == sorted(sizes)


# -- population uniqueness ------------------------------------------------------------------------------------------
def test_zayatz_by_hand():
    sizes, freqs, big_n = np.array([1, 2, 3]), np.array([4, 2, 1]), 100
    n = 4 + 4 + 3

    def hyper1(k):  # P(exactly one of k population members drawn in n of N)
        return comb(k, 1) * comb(big_n - k, n - 1) / comb(big_n, n)

    total = sum(f / 7 * hyper1(s) for s, f in zip(sizes, freqs))
    want = 4 * ((4 / 7) * hyper1(1) / total) / (n / big_n)
    assert rk.zayatz_uniques(sizes, freqs, big_n) == pytest.approx(want)


def test_pitman_solves_the_likelihood_equations():
    sizes, freqs = np.array([1, 2, 3, 5, 8]), np.array([40, 12, 5, 2, 1])
    t, a = rk.pitman_parameters(sizes, freqs, 10_000)
    n, u = int((sizes * freqs).sum()), int(freqs.sum())
    # the sum forms of Hoshino's equations (independent of the digamma closed forms the solver uses)
    o1 = sum(1 / (t + i * a) for i in range(1, u))
    o2 = sum(1 / (t + i) for i in range(1, n))
    o3 = sum(i / (t + i * a) for i in range(1, u))
    o4 = sum(f * sum(1 / (j - a) for j in range(1, s)) for s, f in zip(sizes, freqs) if s > 1)
    assert o1 == pytest.approx(o2, rel=1e-8) and o3 == pytest.approx(o4, rel=1e-8)
    want = math.exp(math.lgamma(t + 1) - math.lgamma(t + a)) * 10_000 ** a
    assert rk.pitman_uniques(sizes, freqs, 10_000) == pytest.approx(want)


def test_dankar_rule():
    assert rk.dankar_uniques(5.0, 7.0, 6.0, 0.05) == (5.0, "pitman")
    assert rk.dankar_uniques(float("nan"), 7.0, 6.0, 0.05) == (7.0, "zayatz")
    assert rk.dankar_uniques(5.0, 7.0, 6.0, 0.5) == (6.0, "snb")
    assert rk.dankar_uniques(5.0, 7.0, float("nan"), 0.5) == (7.0, "zayatz")
    assert rk.population_uniques(np.array([2, 3]), np.array([4, 1]), 100)["population_uniques_dankar"] == 0


def test_no_sample_uniques_means_no_population_uniques(small):
    small.execute("CREATE TABLE t2 AS SELECT * FROM t UNION ALL SELECT * FROM t")
    m = anon_sql.assess(small, "t2", ["b"], sampling_fraction=0.5).measures
    assert m["population_size"] == 24 and m["sample_uniques"] == 0
    assert [m[f"population_uniques_{e}"] for e in ("pitman", "zayatz", "snb", "dankar")] == [0, 0, 0, 0]
    with_uniques = anon_sql.assess(small, "t", ["b"], sampling_fraction=0.5).measures
    assert with_uniques["population_uniques_zayatz"] > 0


# -- CLI ------------------------------------------------------------------------------------------------------------
def test_cli_json_and_html(small, tmp_path):
    csv = tmp_path / "t.csv"
    small.execute(f"COPY t TO '{csv}' (HEADER)")
    html = tmp_path / "a.html"
    res = CliRunner().invoke(main, ["assess", str(csv), "--quasi", "a,b", "--sensitive", "s", "--population", "60",
                                    "--json", "--html", str(html)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)              # stdout is the JSON alone; the text summary went to stderr
    assert data["measures"]["k"] == 1 and data["measures"]["population_size"] == 60
    assert res.stderr.startswith("assessment of")
    assert "Assessment of" in html.read_text()


def test_cli_db_read_only_and_errors(tmp_path):
    db = tmp_path / "d.duckdb"
    c = duckdb.connect(str(db))
    c.execute("CREATE TABLE t (a INTEGER, b VARCHAR, s VARCHAR)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", ROWS)
    c.close()
    ok = CliRunner().invoke(main, ["assess", "t", "--db", str(db), "--quasi", "a", "--sensitive", "s"])
    assert ok.exit_code == 0, ok.output
    assert "prosecutor_risk_highest: 1" in ok.output
    bad = CliRunner().invoke(main, ["assess", "t", "--db", str(db), "--quasi", "zz"])
    assert bad.exit_code == 2 and "zz" in bad.output


# -- ARX's published expectations (TestRiskMetrics.testAverageRisk2 / testDecisionRule2: Adult, every column a QI,
#    compared as ARX does, on four significant digits) ------------------------------------------------------------
@pytest.fixture(scope="module")
def adult_all():
    c = duckdb.connect()
    c.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true)",
              [str(data_path("adult", "adult.csv"))])
    yield c, [r[0] for r in c.execute("DESCRIBE adult").fetchall()]
    c.close()


def _four_digits(v: float) -> int:
    return int(v * 10000)


@pytest.mark.parametrize("fraction, expected, model", [
    (0.1, 0.27684993883653597, "pitman"), (0.2, 0.3577099234829125, "zayatz"),
    (0.01, 0.1446083531167384, "pitman"), (1.0, 0.5142895033485844, "snb")])
def test_arx_decision_rule_on_adult(adult_all, fraction, expected, model):
    con, qi = adult_all
    m = anon_sql.assess(con, "adult", qi, sampling_fraction=fraction).measures
    assert _four_digits(m["population_uniques_dankar"]) == _four_digits(expected)
    assert m["population_uniques_dankar_model"] == model
    assert m["population_uniques_dankar"] <= m["sample_uniques"] + 1e-12
    if fraction == 0.1:   # ARX's test names both candidates' values for π = 0.1
        assert _four_digits(m["population_uniques_zayatz"]) == _four_digits(0.3207402393466189)
    if fraction == 1.0:
        assert _four_digits(m["sample_uniques"]) == _four_digits(expected)


def test_arx_average_risk_on_adult(adult_all):
    con, qi = adult_all
    m = anon_sql.assess(con, "adult", qi).measures
    assert m["prosecutor_risk_avg_records"] == pytest.approx(0.6465751607983555, rel=1e-12)
    assert m["prosecutor_risk_highest"] == 1.0
