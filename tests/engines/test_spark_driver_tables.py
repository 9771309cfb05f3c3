"""The small working tables of a Spark release computed on the driver (issue 29.4, engines/spark/driver_tables.py):
the counted rows of a level release, its value counts and its checks come from the driver's DuckDB, and the release
is the one Spark computes itself — the same rows in the same class order, the same types, classes and checks (the oracle:
the same release with the driver's row bound at 0, so that Spark makes every table). Tables above the bound, types
whose text differs between the engines and timestamps stay in Spark."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]'); the Spark engine tests "
                                      "need it and Java 17+")

from anon_sql import spark as aspark  # noqa: E402
from anon_sql.engines.spark import driver_tables  # noqa: E402
from anon_sql.engines.spark.engine import SparkEngine  # noqa: E402

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def spark(spark_session):
    return spark_session


@pytest.fixture
def made_on_driver(monkeypatch):
    """The names of the tables the engine made on the driver during the test (a spy on ``_create_on_driver``)."""
    made: list[str] = []
    real = SparkEngine._create_on_driver

    def spy(self, name, query):
        out = real(self, name, query)
        if out:
            made.append(name)
        return out
    monkeypatch.setattr(SparkEngine, "_create_on_driver", spy)
    return made


def _release(spark, frame: pd.DataFrame, policy: dict, bound: int | None = None):
    """``policy`` released on Spark over ``frame`` (registered as the view of its source); ``bound`` replaces the
    driver's row bound for this release. Returns the release, its rows (Spark's order) and their schema."""
    spark.createDataFrame(frame).createOrReplaceTempView(policy["source"])
    saved = driver_tables.DRIVER_TABLE_ROWS
    if bound is not None:
        driver_tables.DRIVER_TABLE_ROWS = bound
    try:
        rel = aspark.release(spark, policy, replace=True)
    finally:
        driver_tables.DRIVER_TABLE_ROWS = saved
    table = spark.table(rel.name)
    return rel, table.toPandas(), table.schema


def _text(frame: pd.DataFrame) -> list[tuple]:
    return [tuple(None if pd.isna(v) else str(v) for v in row) for row in frame.itertuples(index=False)]


def _assert_same_release(a, b) -> None:
    """Two releases of one policy: same plan, rows in the same class order, schema, classes and checks."""
    rel_a, rows_a, schema_a = a
    rel_b, rows_b, schema_b = b
    assert rel_a.plan == rel_b.plan
    assert (rel_a.records_out, rel_a.suppressed, rel_a.passed) == (rel_b.records_out, rel_b.suppressed, rel_b.passed)
    assert [(f.name, f.dataType) for f in schema_a.fields] == [(f.name, f.dataType) for f in schema_b.fields]
    # the same rows, in the same class order (rows of one class with the same values come in no set order)
    assert sorted(_text(rows_a), key=str) == sorted(_text(rows_b), key=str)
    assert rows_a["ec_id"].tolist() == rows_b["ec_id"].tolist()
    # classes and checks as numbers where numeric: Spark hands a sum over as an integer, DuckDB's frame as a double
    assert list(rel_a.classes.columns) == list(rel_b.classes.columns)
    for c in rel_a.classes.columns:
        x, y = rel_a.classes[c], rel_b.classes[c]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            np.testing.assert_allclose(x.to_numpy(float), y.to_numpy(float), rtol=1e-12, err_msg=c)
        else:
            assert [str(v) for v in x] == [str(v) for v in y], c
    pd.testing.assert_frame_equal(rel_a.checks.reset_index(drop=True), rel_b.checks.reset_index(drop=True),
                                  check_dtype=False)


def _visits(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n).astype("int32"),
        "zip": rng.choice(["10001", "10002", "10115", "20095", None], n),
        "visit": [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 3, n)],
        "member": rng.choice([True, False], n),
        "diagnosis": rng.choice(["flu", "cold", "asthma", "diabetes"], n)})


def _policy(levels: dict, name: str = "drv_rel", **privacy) -> dict:
    return {"name": name, "source": "drv_src", "method": "levels",
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20, 100]}},
                           "zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                           "visit": {"role": "quasi", "taxonomy": {"kind": "date"}},
                           "member": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "diagnosis": {"role": "sensitive"}},
            "privacy": {"k": 3, "max_suppression": 0.2, **privacy},
            "method_params": {"levels": levels}}


def test_level_release_made_on_the_driver_is_sparks_own(spark, made_on_driver):
    pol = _policy({"age": 1, "zip": 2, "member": 0, "visit": 1}, l_diversity={"kind": "distinct", "l": 2}, t_closeness=0.6)
    frame = _visits()
    driver = _release(spark, frame, pol)
    assert made_on_driver == ["drv_rel__rows"]
    assert driver[0].suppressed > 0   # suppression deleted classes from the counted rows after the driver made them
    made_on_driver.clear()
    spark_made = _release(spark, frame, pol, bound=0)
    assert made_on_driver == []
    _assert_same_release(driver, spark_made)
    # Spark makes fewer jobs' worth of work: the counted rows cost it no shuffle
    assert sum(driver[0].info["spark_jobs"].values()) < sum(spark_made[0].info["spark_jobs"].values())


def test_classes_deleted_after_the_driver_made_the_rows_leave_its_copy(spark, made_on_driver):
    """A group rule that suppression itself breaks (tests/engines/test_spark.py's fixed point): classes are deleted
    from the Spark view of the counted rows after the driver made them, so the checks read on the driver afterwards
    must see the rows that are left, not the driver's first copy."""
    rows = [("a", "x")] * 5 + [("b", "x")] + [("b", "y")] * 3
    frame = pd.DataFrame(rows, columns=["q1", "q2"]).assign(s=list("uvwuvwuvw"))
    top = {"kind": "top"}
    pol = {"name": "drv_grouped", "source": "drv_src", "method": "levels",
           "method_params": {"levels": {"q1": 0, "q2": 0}},
           "attributes": {"q1": {"role": "quasi", "taxonomy": top}, "q2": {"role": "quasi", "taxonomy": top},
                          "s": {"role": "sensitive"}},
           "privacy": {"k": 2, "requirements": [{"quasi": ["q1"], "k": 4}], "max_suppression": 0.4445}}
    driver = _release(spark, frame, pol)
    assert made_on_driver == ["drv_grouped__rows"]
    assert driver[0].passed and driver[0].suppressed == 4 and sorted(set(driver[1]["q1"])) == ["a"]
    _assert_same_release(driver, _release(spark, frame, pol, bound=0))


def test_script_stays_spark_sql_that_makes_the_same_rows(spark, made_on_driver):
    """The release's script records the counted rows as Spark SQL: run again in Spark it gives the driver's rows."""
    pol = _policy({"age": 3, "zip": 5, "member": 1, "visit": 2}, name="drv_script")
    pol["privacy"] = {"k": 2}   # no suppression: the script's statement alone makes the rows
    rel, _, _ = _release(spark, _visits(seed=3), pol)
    assert rel.suppressed == 0
    assert made_on_driver == ["drv_script__rows"]
    statement = next(s for s in rel.sql if s.startswith("CACHE TABLE `drv_script__rows`"))
    query = statement.split(" AS\n", 1)[1]
    again = spark.sql(query).toPandas()
    kept = spark.table("drv_script__rows").toPandas()
    assert sorted(_text(again), key=str) == sorted(_text(kept), key=str) and len(kept) > 1
    assert again["ec_id"].tolist() == kept["ec_id"].tolist()


def test_rows_above_the_bound_stay_in_spark(spark, made_on_driver):
    frame = _visits()
    pol = _policy({"age": 0, "zip": 0, "member": 0, "visit": 0}, name="drv_big")
    pol["privacy"] = {"k": 2, "max_suppression": 1.0}
    distinct = len(frame.drop_duplicates(["age", "zip", "member", "visit", "diagnosis"]))
    small = _release(spark, frame, pol, bound=distinct - 1)
    assert made_on_driver == []
    big = _release(spark, frame, pol, bound=distinct)
    assert made_on_driver == ["drv_big__rows"]
    _assert_same_release(small, big)


def test_float_quasi_identifiers_cast_to_text_stay_in_spark(spark, made_on_driver):
    """Spark writes 1.0E10 where DuckDB writes 10000000000.0: a taxonomy map matches leaves as text, so a release
    whose base counts hold a double and whose counted rows cast to text is left to Spark."""
    frame = pd.DataFrame({"score": [1.5, 2.5, 1e10, 1.5, 2.5, 1e10] * 3, "s": list("abcabc") * 3})
    pol = {"name": "drv_float", "source": "drv_src", "method": "levels",
           "attributes": {"score": {"role": "quasi", "taxonomy": {"kind": "top"}}, "s": {"role": "sensitive"}},
           "privacy": {"k": 2}, "method_params": {"levels": {"score": 1}}}
    rel, rows, _ = _release(spark, frame, pol)
    assert made_on_driver == [] and rel.passed and set(rows["score"]) == {"*"}


def test_timestamps_are_never_copied(spark):
    tables = driver_tables.DriverTables(spark)
    try:
        spark.sql("SELECT TIMESTAMP '2020-01-01 10:00:00' AS t, 1L AS n").createOrReplaceTempView("drv_ts")
        tables.offer("drv_ts")
        assert not tables.copy("drv_ts")
        spark.sql("SELECT 'a' AS v, 1L AS n, DATE '2020-01-01' AS d, CAST(1.5 AS DECIMAL(5, 2)) AS x"
                  ).createOrReplaceTempView("drv_plain")
        tables.offer("drv_plain")
        assert tables.copy("drv_plain")
        # a copy answers as Spark does, and is forgotten when its view changes
        from sqlglot import parse_one

        query = parse_one("SELECT v, SUM(n) AS n, MIN(d) AS d, MAX(x) AS x FROM drv_plain GROUP BY v")
        got = tables.compute_frame(query)   # DuckDB's frame, as a DuckDB release reads it: the sums as numbers
        assert (got["v"].tolist(), float(got["n"][0]), str(got["d"][0])[:10], float(got["x"][0])) == (
            ["a"], 1.0, "2020-01-01", 1.5)
        tables.forget("drv_plain")
        assert not tables.covers(query)
    finally:
        tables.close()
        spark.catalog.dropTempView("drv_ts")
        spark.catalog.dropTempView("drv_plain")


def test_types_cast_to_text_on_the_driver_print_as_in_spark(spark):
    """The types a statement may cast to text on the driver (driver_tables._SAME_TEXT) print alike in both engines:
    extremes, zero with a scale, negative decimals, dates at both ends, non-ASCII and empty text, NULLs."""
    from sqlglot import exp, parse_one

    spark.sql("""SELECT * FROM VALUES
        (CAST(-128 AS TINYINT), CAST(-32768 AS SMALLINT), -2147483648, -9223372036854775808L, true,
         DATE '0001-01-01', CAST(0 AS DECIMAL(20, 10)), CAST(-1.5 AS DECIMAL(5, 2)), 'ü x', CAST('ab' AS CHAR(3))),
        (CAST(127 AS TINYINT), CAST(32767 AS SMALLINT), 2147483647, 9223372036854775807L, false,
         DATE '9999-12-31', CAST(12345678.9 AS DECIMAL(20, 10)), CAST(0.01 AS DECIMAL(5, 2)), '', 'a'),
        (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
        AS t(a, b, c, d, e, f, g, h, i, j)""").createOrReplaceTempView("drv_types")
    columns = list("abcdefghij")
    query = exp.select(*[exp.cast(exp.column(c), "VARCHAR").as_(c) for c in columns]).from_("drv_types")
    types = [f.dataType.simpleString().split("(")[0] for f in spark.table("drv_types").schema.fields]
    assert set(types) <= set(driver_tables._SAME_TEXT)
    tables = driver_tables.DriverTables(spark)
    try:
        tables.offer("drv_types")
        on_driver = tables.compute_frame(query)
        assert on_driver is not None
        in_spark = spark.sql(parse_one(query.sql("duckdb"), read="duckdb").sql("spark")).toPandas()
        assert _text(on_driver) == _text(in_spark)
    finally:
        tables.close()
        spark.catalog.dropTempView("drv_types")


def test_value_counts_from_the_driver_equal_sparks(spark):
    """The reader's per-column value counts (the taxonomy coverage check) answered by the driver copy of the base
    counts equal the same query run by Spark."""
    from anon_sql.data import base_counts
    from anon_sql.engines.spark.session import SparkSQL
    from sqlglot import exp

    spark.createDataFrame(_visits(seed=5)).createOrReplaceTempView("drv_counts_rows")
    spark.sql("SELECT age, zip, member, visit, diagnosis, COUNT(*) AS __w FROM drv_counts_rows GROUP BY ALL"
              ).createOrReplaceTempView("drv_counts")   # base counts, as base_counts.query makes them
    sq = SparkSQL(spark)
    tables = driver_tables.DriverTables(spark)
    try:
        tables.offer("drv_counts")
        first = driver_tables.DriverFirstSQL(sq, tables)
        table = exp.Table(this=exp.to_identifier("drv_counts", quoted=True))
        columns = ["age", "zip", "member", "visit"]
        on_driver = base_counts.all_value_counts(first, table, columns)
        in_spark = base_counts.all_value_counts(sq, table, columns)
        assert tables.covers(exp.select("*").from_("drv_counts"))   # the driver really answered
        for c in columns:
            a = on_driver[c].astype(str).sort_values(list(on_driver[c].columns)).reset_index(drop=True)
            b = in_spark[c].astype(str).sort_values(list(in_spark[c].columns)).reset_index(drop=True)
            pd.testing.assert_frame_equal(a, b, check_dtype=False)
    finally:
        tables.close()
        spark.catalog.dropTempView("drv_counts")
        spark.catalog.dropTempView("drv_counts_rows")


_texts = st.sampled_from(["a", "b", "ü", "Ab", "", "*", "x y", None])


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 40)), _texts, _texts,
                               st.sampled_from(["p", "q", "r"])), min_size=1, max_size=60),
       levels=st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 1)),
       k=st.integers(1, 4))
def test_hostile_level_releases_are_sparks_own(spark, rows, levels, k):
    """Hypothesis: NULLs, empty text, '*', non-ASCII text, negative numbers, classes under k: the release made on the
    driver is the one Spark makes, refusals included."""
    frame = pd.DataFrame(rows, columns=["n", "t", "u", "s"])
    frame["n"] = frame["n"].astype("Int64")
    pol = {"name": "drv_hyp", "source": "drv_src", "method": "levels",
           "attributes": {"n": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 100]}},
                          "t": {"role": "quasi", "taxonomy": {"kind": "top"}},
                          "u": {"role": "sensitive"}, "s": {"role": "sensitive"}},
           "privacy": {"k": k, "max_suppression": 0.5}, "method_params": {"levels": {"n": levels[0], "t": levels[1]}}}
    outcomes = []
    for bound in (None, 0):
        try:
            outcomes.append(_release(spark, frame, pol, bound))
        except Exception as error:   # noqa: BLE001 - a refusal must be the same refusal
            outcomes.append(("refused", type(error), str(error)))
    if outcomes[0][0] == "refused" or outcomes[1][0] == "refused":
        assert outcomes[0] == outcomes[1]
    else:
        _assert_same_release(*outcomes)
