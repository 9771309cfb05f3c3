"""The Spark engine (issue 9): the same policies on Spark give the same release as on DuckDB — same rows, same
classes, same checks — for fixed levels, the lattice searches and Mondrian; the kernels as pandas UDFs; fail-closed
behaviour; the CLI; Spark jobs that grow with the search / tree depth, not with the data."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]'); "
                                                "the Spark engine tests need it and Java 17+")

import anon_sql  # noqa: E402
from anon_sql import spark as aspark  # noqa: E402
from anon_sql.errors import PrivacyRequirementError, ReleaseExistsError  # noqa: E402
from anon_sql.udfs import kernels  # noqa: E402
from conftest import SPARK_TEST_SHUFFLE_PARTITIONS, adult_policy, data_path  # noqa: E402

pytestmark = [pytest.mark.spark]

LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "native-country": 1, "workclass": 2,
          "occupation": 1}
BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def spark(spark_session):
    """The test process's one SparkSession (tests/conftest.py: 4 GB of driver memory for the 1M-row runs)."""
    return spark_session


@pytest.fixture(scope="module")
def adult_parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("adult") / "adult.parquet"
    c = duckdb.connect()
    c.execute("COPY (SELECT * FROM read_csv(?, delim=';', header=true)) TO ? (FORMAT parquet)",
              [str(data_path("adult", "adult.csv")), str(path)])
    return str(path)


@pytest.fixture(scope="module")
def engines(spark, adult_parquet):
    """Adult as table ``adult`` in a DuckDB connection and as a cached temporary view in Spark."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [adult_parquet])
    frame = spark.read.parquet(adult_parquet).cache()
    frame.createOrReplaceTempView("adult")
    yield con, spark
    con.close()


def _policy(method: str, levels: dict | None = None, **privacy) -> dict:
    pol = adult_policy(levels, **privacy)
    pol["method"] = method
    if method != "levels":
        pol["method_params"] = {}
    return pol


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows as text in a canonical order (types differ across engines: BIGINT vs INT)."""
    out = frame.astype(object).where(frame.notna(), None).astype(str)
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


def _assert_same(con, spark, a, b, name: str) -> None:
    """Same plan, rows, classes and checks on both engines."""
    assert a.plan == b.plan
    assert (a.records_in, a.records_out, a.suppressed) == (b.records_in, b.records_out, b.suppressed)
    duck_rows = con.execute(f'SELECT * FROM "{name}"').df()
    spark_rows = spark.table(name).toPandas()
    assert list(duck_rows.columns) == list(spark_rows.columns)
    pd.testing.assert_frame_equal(_rows(duck_rows), _rows(spark_rows))
    assert list(a.classes.columns) == list(b.classes.columns)
    for c in a.classes.columns:
        x, y = a.classes[c].to_numpy(), b.classes[c].to_numpy()
        if pd.api.types.is_numeric_dtype(a.classes[c]) and pd.api.types.is_numeric_dtype(b.classes[c]):
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=1e-9, atol=1e-12, err_msg=c)
        else:
            assert [str(v) for v in x] == [str(v) for v in y], c
    pd.testing.assert_frame_equal(a.checks.reset_index(drop=True), b.checks.reset_index(drop=True),
                                  check_dtype=False)
    assert a.metrics == pytest.approx(b.metrics)


# -- consistency with DuckDB on Adult -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def levels_release(engines):
    """One levels release of Adult (k, distinct l, t-closeness, suppression) on each engine, read by the two tests
    below; the checks Spark computes on the driver are recorded (a spy on ``checks_on_driver``)."""
    from anon_sql.engines.spark import driver_checks

    con, spark = engines
    seen = []
    real = driver_checks.checks_on_driver

    def spy(compiled, driver):
        out = real(compiled, driver)
        seen.append(None if out is None else out.copy())
        return out

    pol = _policy("levels", LEVELS, max_suppression=0.05, l_diversity={"kind": "distinct", "l": 2},
                  t_closeness=0.5)
    pol["name"] = "adult_levels"     # a name no other test releases: the tables stay as this release left them
    duck = anon_sql.release(con, pol, replace=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(driver_checks, "checks_on_driver", spy)
        rel = aspark.release(spark, pol, replace=True)
    return duck, rel, seen


def test_levels_release_is_the_duckdb_release(engines, levels_release):
    con, spark = engines
    duck, rel, _ = levels_release
    _assert_same(con, spark, duck, rel, "adult_levels")
    assert rel.suppressed > 0 and rel.passed
    # the release is a temporary view of the session, and its checks view re-verifies it
    assert spark.catalog.tableExists("adult_levels") and spark.catalog.tableExists("adult_levels__checks")
    assert any("CACHE TABLE" in s for s in rel.sql)


def test_optimal_with_entropy_l_uses_the_kernels_as_pandas_udfs(engines):
    con, spark = engines
    pol = _policy("optimal", max_suppression=0.02, l_diversity={"kind": "entropy", "l": 1.5})
    duck = anon_sql.release(con, pol, replace=True)
    rel = aspark.release(spark, pol, replace=True)
    _assert_same(con, spark, duck, rel, "adult_rel")
    assert any("ANON_ENTROPY_COUNTS" in s for s in rel.sql)
    # the search ran on the driver over counts aggregated in Spark: a handful of jobs, however many nodes
    assert rel.info["nodes_evaluated"] > 50
    assert rel.info["spark_jobs"]["plan"] <= 6


def test_mondrian_is_the_duckdb_partition(engines):
    con, spark = engines
    pol = _policy("mondrian", l_diversity={"kind": "distinct", "l": 2})
    duck = anon_sql.release(con, pol, replace=True)
    rel = aspark.release(spark, pol, replace=True)
    _assert_same(con, spark, duck, rel, "adult_rel")
    depth = rel.plan["depth"]
    assert depth == duck.plan["depth"] > 10
    # jobs grow with the depth of the tree (a fixed number of aggregations per level), not with its size
    per_level = rel.info["spark_jobs"]["plan"] / (depth + 1)
    assert per_level <= 16, rel.info["spark_jobs"]
    assert rel.plan["partitions"] > 50 * per_level


@pytest.mark.slow   # opt-in (-m "spark and slow"): two more Mondrian trees on full Adult; the battery covers mondrian
def test_mondrian_categorical_width_is_honoured_on_spark(engines):
    # the widths are one function for both engines: a non-default measure gives the DuckDB partition too
    con, spark = engines
    pol = _policy("mondrian")
    pol["privacy"]["k"] = 200          # a shallow tree keeps the test short
    pol["method_params"] = {"categorical_width": "mixed"}
    duck = anon_sql.release(con, pol, replace=True)
    rel = aspark.release(spark, pol, replace=True)
    assert rel.plan["categorical_width"] == duck.plan["categorical_width"] == "mixed"
    _assert_same(con, spark, duck, rel, "adult_rel")
    pol["method_params"] = {"categorical_width": "widest"}
    with pytest.raises(anon_sql.PolicyError, match="categorical_width must be one of"):
        aspark.release(spark, pol, replace=True)


# -- kernels, failures, CLI --------------------------------------------------------------------------------------
def test_pandas_udfs_equal_the_numpy_kernels(spark):
    from anon_sql.engines.spark import udfs

    udfs.register_spark_udfs(spark)
    rng = np.random.default_rng(0)
    lists = [rng.integers(1, 20, size=rng.integers(1, 8)).tolist() for _ in range(60)]
    frame = spark.createDataFrame([(i, c) for i, c in enumerate(lists)], "i long, c array<long>")
    frame.createOrReplaceTempView("__counts")
    got = spark.sql("SELECT i, anon_entropy_counts(c) e, anon_simpson_diversity_counts(c) d, "
                    "anon_simpson_evenness_counts(c) ev, anon_theta_variance_counts(c) tv, "
                    "anon_recursive_l_ok_counts(c, 2.0, 2) r, anon_theta_threshold(10, 0.5) th "
                    "FROM __counts ORDER BY i").toPandas()
    np.testing.assert_allclose(got["e"], [kernels.entropy_counts(c) for c in lists])
    np.testing.assert_allclose(got["d"], [kernels.simpson_diversity_counts(c) for c in lists])
    np.testing.assert_allclose(got["ev"], [kernels.simpson_evenness_counts(c) for c in lists])
    np.testing.assert_allclose(got["tv"], [kernels.theta_variance_counts(c) for c in lists])
    assert got["r"].tolist() == [kernels.recursive_l_ok_counts(c, 2.0, 2) for c in lists]
    assert got["th"].tolist() == pytest.approx([0.5 * 99 / 12] * len(lists))
    # an independent formula for one golden case: entropy of (2, 2) is ln 2
    assert kernels.entropy_counts([2, 2]) == pytest.approx(np.log(2))


def test_failed_release_leaves_nothing_and_names_the_requirement(engines):
    con, spark = engines
    pol = _policy("levels", {}, l_diversity={"kind": "distinct", "l": 2})
    pol["name"] = "adult_fail"
    with pytest.raises(PrivacyRequirementError, match=r"k fails for \d+ classes .*max_suppression"):
        aspark.release(spark, pol)
    left = [t.name for t in spark.catalog.listTables() if t.name.startswith("adult_fail")]
    assert left == []



def test_a_committed_release_frees_the_caches_only_it_needed(engines):
    """After a release, the views its own statements alone read (hoisted CTEs, the base counts) stay — the release's
    views read them — but hold no cache; the released table's rows keep theirs, and a cache the user made (the
    ``adult`` view, a cached table of their own) is left alone."""
    con, spark = engines
    spark.sql("CACHE TABLE user_cached AS SELECT 1 AS x")
    adult_cached = spark.catalog.isCached("adult")
    try:
        pol = _policy("levels", LEVELS, max_suppression=0.05, l_diversity={"kind": "distinct", "l": 2})
        pol["name"] = "adult_scratch"
        rel = aspark.release(spark, pol, replace=True)
        hoisted = [t.name for t in spark.catalog.listTables()
                   if t.name.startswith(rel.name + "__") and "__cte" in t.name]
        assert hoisted, "the checks view reads a shared CTE: it is hoisted as a view of its own"
        for name in [*hoisted, rel.name + "__base"]:
            assert spark.catalog.tableExists(name) and not spark.catalog.isCached(name), name
        # the released table is a view repeating its counted rows, which keep their cache
        assert not spark.catalog.isCached(rel.name) and spark.catalog.isCached(rel.name + "__rows")
        assert spark.catalog.isCached("user_cached") and spark.catalog.isCached("adult") == adult_cached
        # the views over them still answer: the checks view re-verifies the release
        checks = spark.table(rel.name + "__checks")
        assert checks.count() == checks.where("__all_ok").count() == len(rel.classes) > 0
    finally:
        spark.sql("UNCACHE TABLE IF EXISTS user_cached")
        spark.catalog.dropTempView("user_cached")


def test_checks_of_counted_rows_are_computed_on_the_driver(engines, levels_release):
    """Issue 29.4: verify reads the checks of a counted-rows release from the driver (the counted rows fetched once,
    the same view evaluated by DuckDB), not from Spark's view; the oracle is Spark's own evaluation of that view."""
    con, spark = engines
    _, rel, seen = levels_release
    assert seen and all(frame is not None for frame in seen)
    driver = seen[-1].sort_values("ec_id", ignore_index=True)
    view = spark.table(rel.name + "__checks").toPandas().sort_values("ec_id", ignore_index=True)
    assert list(driver.columns) == list(view.columns) and len(driver) == len(rel.classes) > 0
    for c in view.columns:
        if c.startswith(("__counts__", "__values__")):
            assert [list(x) for x in driver[c]] == [list(x) for x in view[c]], c
        elif pd.api.types.is_numeric_dtype(view[c]) or pd.api.types.is_bool_dtype(view[c]):
            np.testing.assert_allclose(driver[c].to_numpy(float), view[c].to_numpy(float), rtol=1e-9, err_msg=c)
        else:
            assert [str(v) for v in driver[c]] == [str(v) for v in view[c]], c


def test_suppression_settles_to_the_duckdb_fixed_point(spark):
    """A group rule that suppression itself breaks: (b, x) fails k = 2; once it is gone the group b holds 3 < 4
    records, so (b, y) must go too. Spark settles to the same fixed point as DuckDB (same rows, classes, checks)
    and, with too small a budget, advises the same max_suppression (tests/runner/test_advice.py's example)."""
    rows = [("a", "x")] * 5 + [("b", "x")] + [("b", "y")] * 3
    frame = pd.DataFrame(rows, columns=["q1", "q2"]).assign(s=list("uvwuvwuvw"))
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", frame)
    con.execute("CREATE TABLE grouped AS SELECT * FROM frame")
    spark.createDataFrame(frame).createOrReplaceTempView("grouped")
    top = {"kind": "top"}
    pol = {"name": "grouped_rel", "source": "grouped", "method": "levels",
           "method_params": {"levels": {"q1": 0, "q2": 0}},
           "attributes": {"q1": {"role": "quasi", "taxonomy": top}, "q2": {"role": "quasi", "taxonomy": top},
                          "s": {"role": "sensitive"}},
           "privacy": {"k": 2, "requirements": [{"quasi": ["q1"], "k": 4}], "max_suppression": 0.2}}
    with pytest.raises(PrivacyRequirementError) as duck_err:
        anon_sql.release(con, pol)
    with pytest.raises(PrivacyRequirementError) as spark_err:
        aspark.release(spark, pol)
    assert "max_suppression = 0.4445 (or more)" in str(duck_err.value)
    assert str(spark_err.value) == str(duck_err.value)
    pol["privacy"]["max_suppression"] = 0.4445
    duck = anon_sql.release(con, pol)
    rel = aspark.release(spark, pol)
    assert rel.passed and rel.suppressed == 4
    _assert_same(con, spark, duck, rel, "grouped_rel")

def test_existing_release_needs_replace(engines, adult_parquet):
    con, spark = engines
    pol = _policy("levels", LEVELS, max_suppression=0.1)
    pol["name"], pol["source"] = "adult_twice", adult_parquet     # a Parquet path as the source
    first = aspark.release(spark, pol)
    assert first.records_in == 30162
    with pytest.raises(ReleaseExistsError, match="replace=True"):
        aspark.release(spark, pol)
    assert spark.table("adult_twice").count() == first.records_out   # the refusal left the first release whole


def test_spark_never_replaces_what_it_did_not_create(spark):
    # the DuckDB ownership rule on Spark: a view of the user's named like the release, or like one of its working
    # objects, is refused whatever replace says, and left as it was; a release of this session needs replace
    small = pd.read_csv(data_path("adult", "adult.csv"), sep=";").head(300)
    spark.createDataFrame(small).createOrReplaceTempView("own_src")
    users = spark.createDataFrame(pd.DataFrame({"x": [1, 2]}))
    pol = _policy("levels", LEVELS, max_suppression=1.0)
    pol["name"], pol["source"] = "own_rel", "own_src"
    for name, match in (("own_rel", "not a release of anon_sql"), ("own_rel__assignment", "working objects"),
                        ("own_rel__rows", "working objects")):
        users.createOrReplaceTempView(name)
        with pytest.raises(ReleaseExistsError, match=match):
            aspark.release(spark, pol, replace=True)
        assert spark.table(name).columns == ["x"] and spark.table(name).count() == 2
        assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("own_rel") and t.name != name]
        spark.catalog.dropTempView(name)
    first = aspark.release(spark, pol)
    with pytest.raises(ReleaseExistsError, match="replace=True"):
        aspark.release(spark, pol)
    again = aspark.release(spark, pol, replace=True)
    assert (again.records_out, again.plan) == (first.records_out, first.plan)
    # a view of the user's named like a CTE view the release hoists: the release names its own view otherwise
    users.createOrReplaceTempView("own_rel__checks__cte1")
    third = aspark.release(spark, pol, replace=True)
    assert spark.table("own_rel__checks__cte1").columns == ["x"] and spark.table("own_rel__checks__cte1").count() == 2
    assert third.records_out == first.records_out and spark.table("own_rel").count() == first.records_out
    assert any(t.startswith("`own_rel__checks__cte1_") or "own_rel__checks__cte1_" in t for t in third.sql)
    spark.catalog.dropTempView("own_rel__checks__cte1")
    spark.catalog.dropTempView("own_src")


@pytest.fixture
def restore_test_settings(spark):
    """The CLI starts its session with the product's settings (``local_session()``: 4 shuffle partitions), applied to
    the running one; the later tests get the test settings back."""
    yield
    spark.conf.set("spark.sql.shuffle.partitions", str(SPARK_TEST_SHUFFLE_PARTITIONS))


def test_cli_release_on_spark_writes_the_duckdb_rows(engines, adult_parquet, tmp_path, restore_test_settings):
    from click.testing import CliRunner

    from anon_sql.cli.main import main

    con, spark = engines
    pol = _policy("levels", LEVELS, max_suppression=0.05)
    pol["name"], pol["source"] = "adult_cli", "not_used"
    path = tmp_path / "policy.toml"
    path.write_text(anon_sql.Policy.from_dict(pol).to_toml())
    out = tmp_path / "out.parquet"
    res = CliRunner().invoke(main, ["release", str(path), "--engine", "spark", "--source-path", adult_parquet,
                                    "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert "released" in res.output and "spark jobs" in res.output
    pol["source"] = "adult"
    anon_sql.release(con, pol, replace=True)
    written = con.execute("SELECT * FROM read_parquet(?)", [str(out / "*.parquet")]).df()
    pd.testing.assert_frame_equal(_rows(written), _rows(con.execute('SELECT * FROM "adult_cli"').df()))
    bad = CliRunner().invoke(main, ["release", str(path), "--engine", "spark", "--dry-run"])
    assert bad.exit_code == 2 and "--dry-run" in bad.output
    # an existing output without --replace: refused before anything runs, the file and the session as they were
    before = sorted(p.name for p in out.iterdir())
    views = {t.name for t in spark.catalog.listTables()}
    again = CliRunner().invoke(main, ["release", str(path), "--engine", "spark", "--source-path", adult_parquet,
                                      "--output", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output and "--replace" in again.output, again.output
    assert sorted(p.name for p in out.iterdir()) == before and {t.name for t in spark.catalog.listTables()} == views


# -- 1M rows ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def million(spark):
    """The seeded 1M-row Adult resample (bench/generate.py) as DuckDB table / cached Spark view ``adult1m``."""
    import sys

    sys.path.insert(0, str(BENCH))
    from generate import generate

    path = BENCH / "data" / "adult_1000000.parquet"
    if not path.exists():
        data_path("adult", "adult.csv")
        generate(1_000_000, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult1m AS SELECT * FROM read_parquet(?)", [str(path)])
    spark.read.parquet(str(path)).cache().createOrReplaceTempView("adult1m")
    yield con, spark
    spark.catalog.dropTempView("adult1m")
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["levels", "optimal", "mondrian"])
def test_one_million_rows_same_release(million, method):
    con, spark = million
    pol = _policy(method, LEVELS if method == "levels" else None,
                  max_suppression=0 if method == "mondrian" else 0.02, l_diversity={"kind": "distinct", "l": 2})
    pol["name"], pol["source"] = f"adult1m_{method}", "adult1m"
    if method == "mondrian":
        pol["privacy"]["k"] = 100   # a shallower tree keeps the test within its time budget
    duck = anon_sql.release(con, pol)
    rel = aspark.release(spark, pol)
    assert json.dumps(duck.plan, sort_keys=True) == json.dumps(rel.plan, sort_keys=True)
    _assert_same(con, spark, duck, rel, pol["name"])
