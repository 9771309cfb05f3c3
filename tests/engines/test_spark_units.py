"""Privacy units on Spark (issue 24.5, spec/08-privacy-units.md): the same policy gives DuckDB's release — the same
rows, classes counted in people, suppression of whole people within a budget of people, the same report of people
and rows — for fixed levels, the lattice searches and Mondrian; what Spark cannot release by people is refused by
name, leaving the session as it was."""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]'); the Spark engine tests "
                                      "need it and Java 17+")

import anon_sql  # noqa: E402
from anon_sql import spark as aspark  # noqa: E402
from units_fixtures import visits_policy  # noqa: E402 (spec 08's policy, shared with tests/runner/test_units.py)

pytestmark = [pytest.mark.spark]

KEY = "units-spark-key-0123456789abcdef"
# the cases CI runs (spark, not slow) cover every method once; the repeats are opt-in (-m "spark and slow"), to keep
# the whole CI run under 20 minutes on 2 cores
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(spark_session):
    """The test process's one SparkSession (tests/conftest.py)."""
    return spark_session


@pytest.fixture
def con(monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)   # one key: the pseudonyms of both engines are the same hex
    c = duckdb.connect()
    anon_sql.install(c)
    yield c
    c.close()


def load(con, spark, name: str, frame: pd.DataFrame) -> None:
    """``frame`` as table ``name`` in DuckDB and as a temporary view of the Spark session."""
    con.register("frame_in", frame)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM frame_in')
    con.unregister("frame_in")
    spark.createDataFrame(frame).createOrReplaceTempView(name)


def visits_frame() -> pd.DataFrame:
    """Spec 08, visits: 199 units × 3 rows (age 30 + i % 5, sex by i % 2) + unit 0 (97, F) with 6 rows."""
    rows = [(i, 30 + i % 5, "F" if i % 2 == 0 else "M", f"d{(i * 7 + v) % 4}") for i in range(1, 200) for v in range(3)]
    rows += [(0, 97, "F", f"d{v % 4}") for v in range(6)]
    return pd.DataFrame(rows, columns=["patient_id", "age", "sex", "diagnosis"])


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows as text in a canonical order (integer widths differ across engines)."""
    out = frame.astype(object).where(frame.notna(), None).astype(str)
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


def assert_same_release(con, spark, duck, rel, name: str) -> pd.DataFrame:
    """Same plan, rows (sorted), people and rows reported, classes and checks on both engines; the released rows."""
    assert rel.plan == duck.plan
    assert (rel.records_in, rel.records_out, rel.suppressed) == (duck.records_in, duck.records_out, duck.suppressed)
    assert rel.info["people"] == duck.info["people"]
    duck_rows = con.execute(f'SELECT * FROM "{name}"').df()
    spark_rows = spark.table(name).toPandas()
    assert list(spark_rows.columns) == list(duck_rows.columns)
    assert "__unit" not in spark_rows.columns
    pd.testing.assert_frame_equal(canonical(spark_rows), canonical(duck_rows))
    assert rel.classes["__size"].tolist() == duck.classes["__size"].tolist()   # people per class
    pd.testing.assert_frame_equal(rel.checks.reset_index(drop=True), duck.checks.reset_index(drop=True),
                                  check_dtype=False)
    assert rel.metrics == pytest.approx(duck.metrics)
    return spark_rows


def left_in_session(spark, prefix: str) -> list[str]:
    return sorted(t.name for t in spark.catalog.listTables() if t.name.startswith(prefix))


# -- the golden visits case ----------------------------------------------------------------------------------------
def test_visits_golden_levels_is_the_duckdb_release(con, spark):
    """k = 5 at level 0, max_suppression = 0.05: unit 0 (6 rows) suppressed, every class >= 19 people, 597 rows —
    on Spark as on DuckDB; the released view holds no unit, its checks view still counts people."""
    load(con, spark, "visits", visits_frame())
    duck = anon_sql.release(con, visits_policy())
    rel = aspark.release(spark, visits_policy(), replace=True)
    rows = assert_same_release(con, spark, duck, rel, "vis")
    assert (rel.records_in, rel.records_out, rel.suppressed) == (603, 597, 6)
    assert rel.info["people"] == {"in": 200, "released": 199, "suppressed": 1}
    assert rel.metrics["k"] == 19
    assert "people (patient_id): 200 in, 199 released, 1 suppressed" in rel.summary()
    # the pandas oracle: distinct pseudonyms per class are distinct people (the keyed hash is injective)
    assert rows.groupby("ec_id")["patient_id"].nunique().min() == 19
    assert 97 not in set(rows["age"])
    checks = spark.table("vis__checks").toPandas()
    assert checks["__size"].min() == 19 and bool(checks["__all_ok"].all())


def test_visits_without_a_budget_is_refused_in_people_and_leaves_nothing(con, spark):
    load(con, spark, "visits", visits_frame())
    policy = visits_policy(name="vis_nobudget", privacy={"k": 5})
    with pytest.raises(anon_sql.PrivacyRequirementError, match=r"k fails for 1 class \(1 person\).*1 of 200 people"):
        aspark.release(spark, policy)
    assert left_in_session(spark, "vis_nobudget") == []


@pytest.mark.parametrize("method", ["iab", pytest.param("exhaustive", marks=SLOW), pytest.param("greedy", marks=SLOW),
                                    "optimal", "mondrian"])
def test_visits_every_search_and_mondrian_is_the_duckdb_release(con, spark, method):
    load(con, spark, "visits", visits_frame())
    duck = anon_sql.release(con, visits_policy(method))
    rel = aspark.release(spark, visits_policy(method), replace=True)
    rows = assert_same_release(con, spark, duck, rel, "vis")
    assert rows.groupby("ec_id")["patient_id"].nunique().min() >= 5
    assert set(rows.groupby("patient_id").size()) <= {3, 6}   # whole people: every row of a person, or none


# -- sensitive values read as shares of people (the flu case) -------------------------------------------------------
def flu_frame() -> pd.DataFrame:
    """Spec 08, flu: units 0–8 hold only 'flu', unit 9 holds flu, a, b, c, d (30, M); units 100–109 one distinct
    value each (40, F)."""
    rows = [(u, 30, "M", "flu") for u in range(9)] + [(9, 30, "M", d) for d in ("flu", "a", "b", "c", "d")]
    rows += [(u, 40, "F", f"v{u}") for u in range(100, 110)]
    return pd.DataFrame(rows, columns=["pid", "age", "sex", "diag"])


def flu_policy(method: str, **privacy) -> dict:
    policy = {"name": "fl", "source": "flu", "privacy_unit": "pid", "method": method,
              "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}, "diag": {"role": "sensitive"}},
              "privacy": {"k": 2, "l_diversity": {"kind": "distinct", "l": 2}, **privacy}}
    if method == "levels":
        policy["method_params"] = {"levels": {"age": 0, "sex": 0}}
    return policy


@pytest.mark.parametrize("method", ["levels", pytest.param("optimal", marks=SLOW), "mondrian"])
def test_flu_counts_people_holding_a_value_on_spark(con, spark, method):
    """Distinct 2-diversity over people: (30, M) fails (every person holds 'flu') although it has 5 values."""
    load(con, spark, "flu", flu_frame())
    duck = anon_sql.release(con, flu_policy(method, max_suppression=0.5))
    rel = aspark.release(spark, flu_policy(method, max_suppression=0.5), replace=True)
    rows = assert_same_release(con, spark, duck, rel, "fl")
    for _, g in rows.groupby("ec_id"):   # pandas oracle: no value is held by every person of a class
        assert g["diag"].nunique() >= 2 and g.groupby("diag")["pid"].nunique().max() < g["pid"].nunique()
    if method == "levels":
        assert rel.info["people"] == {"in": 20, "released": 10, "suppressed": 10}
        assert set(rows["age"].astype(str)) == {"40"}


def test_flu_without_a_budget_names_people_on_spark(con, spark):
    load(con, spark, "flu", flu_frame())
    with pytest.raises(anon_sql.PrivacyRequirementError,
                       match=r"l_distinct__diag fails for 1 class \(10 people\).*10 of 20 people"):
        aspark.release(spark, flu_policy("levels") | {"name": "fl_nobudget"})
    assert left_in_session(spark, "fl_nobudget") == []


# -- seeded multi-row data against DuckDB and a pandas oracle --------------------------------------------------------
def random_people(seed: int) -> pd.DataFrame:
    """120 people with 1–5 rows each: QIs constant per person (age, sex, zip), a sensitive value per row."""
    rng = np.random.default_rng(seed)
    n = 120
    rows_per = rng.integers(1, 6, n)
    pid = np.repeat(np.arange(n) * 7 + 3, rows_per)
    age = np.repeat(rng.integers(20, 70, n), rows_per)
    sex = np.repeat(rng.choice(["F", "M"], n), rows_per)
    zipc = np.repeat(rng.choice(["10115", "10117", "10243", "10245"], n), rows_per)
    diag = rng.choice(["flu", "cold", "asthma", "gout", "covid"], len(pid), p=[0.4, 0.25, 0.15, 0.1, 0.1])
    return pd.DataFrame({"pid": pid, "age": age, "sex": sex, "zip": zipc, "diag": diag})


def random_policy(method: str) -> dict:
    policy = {"name": "rnd", "source": "people_rows", "privacy_unit": "pid", "method": method,
              "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20, 100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                             "diag": {"role": "sensitive"}},
              "privacy": {"k": 4, "l_diversity": {"kind": "distinct", "l": 2}, "max_suppression": 0.1}}
    if method == "levels":
        policy["method_params"] = {"levels": {"age": 2, "sex": 0, "zip": 1}}
    return policy


@pytest.mark.parametrize(("method", "seed"), [pytest.param("levels", 1, marks=SLOW), ("optimal", 2), ("mondrian", 3),
                                             pytest.param("mondrian", 4, marks=SLOW)])
def test_seeded_multirow_people_are_the_duckdb_release(con, spark, method, seed):
    source = random_people(seed)
    load(con, spark, "people_rows", source)
    try:
        duck = anon_sql.release(con, random_policy(method))
    except anon_sql.PrivacyRequirementError as err:   # refused on DuckDB: refused on Spark too
        with pytest.raises(anon_sql.PrivacyRequirementError) as on_spark:
            aspark.release(spark, random_policy(method), replace=True)
        assert str(on_spark.value).split(";")[0] == str(err).split(";")[0]
        return
    rel = aspark.release(spark, random_policy(method), replace=True)
    rows = assert_same_release(con, spark, duck, rel, "rnd")
    # pandas oracle counting people: >= k people per class, no value held by every person of a class, whole
    # people kept (their number of rows as in the source), the budget a share of people
    per_class = rows.groupby("ec_id")["pid"].nunique()
    assert per_class.min() >= 4
    for _, g in rows.groupby("ec_id"):
        assert g.groupby("diag")["pid"].nunique().max() < g["pid"].nunique()
    source_rows = source.groupby("pid").size().sort_values().tolist()
    kept_rows = rows.groupby("pid").size().sort_values().tolist()
    assert len(kept_rows) == rel.info["people"]["released"] and sum(kept_rows) == rel.records_out
    assert rel.info["people"]["in"] == source["pid"].nunique() == len(source_rows)
    assert rel.info["people"]["suppressed"] <= 0.1 * rel.info["people"]["in"]
    assert rel.records_in == len(source) and rel.records_out + rel.suppressed == len(source)


# -- what stays refused on Spark, and replacing a release by people --------------------------------------------------
def test_qis_varying_inside_a_unit_are_refused_on_spark_naming_what_works(con, spark):
    frame = pd.DataFrame([(1, 30, "M", "a"), (1, 31, "M", "b"), (2, 30, "M", "a"), (2, 31, "M", "c")],
                         columns=["pid", "age", "sex", "diag"])
    load(con, spark, "varying", frame)
    policy = {"name": "vr", "source": "varying", "privacy_unit": "pid", "method": "levels",
              "method_params": {"levels": {"age": 0, "sex": 0}},
              "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}, "diag": {"role": "insensitive"}},
              "privacy": {"k": 2}}
    before = left_in_session(spark, "")
    with pytest.raises(anon_sql.PolicyError, match=r"\['age'\] vary within units of privacy_unit 'pid'.*only the "
                                                   r"DuckDB engine.*levels, iab, exhaustive, greedy, optimal, "
                                                   r"mondrian"):
        aspark.release(spark, policy)
    assert left_in_session(spark, "") == before
    assert anon_sql.release(con, policy).info["people"]["released"] == 2   # DuckDB releases it by signatures


def test_related_tables_are_refused_on_spark(con, spark):
    load(con, spark, "visits", visits_frame())
    policy = visits_policy(name="vis_rel", related={"more": {"source": "visits", "key": "patient_id",
                                                              "default_role": "insensitive"}})
    before = left_in_session(spark, "")
    with pytest.raises(anon_sql.PolicyError, match=r"related table\(s\) \['more'\].*DuckDB engine only"):
        aspark.release(spark, policy)
    assert left_in_session(spark, "") == before


def test_replacing_a_release_by_people_and_its_parquet_output(con, spark, tmp_path):
    load(con, spark, "visits", visits_frame())
    aspark.release(spark, visits_policy(name="vis_twice"), replace=True)
    out = tmp_path / "vis.parquet"
    rel = aspark.release(spark, visits_policy("optimal", name="vis_twice"), replace=True, output=str(out))
    assert rel.info["people"] == {"in": 200, "released": 199, "suppressed": 1}
    written = pd.read_parquet(out)
    assert "__unit" not in written.columns and len(written) == rel.records_out
    assert spark.table("vis_twice__checks").toPandas()["__size"].min() >= 5
    assert left_in_session(spark, "vis_twice__units") == ["vis_twice__units"]
