"""The method contract, after scikit-learn's ``check_estimator``: one battery runs every registered method on a small
Adult sample (the packaged 3,000-row sample, first 1,200 records), so a new method gets all of it by registering —
and by adding its example policy to ``EXAMPLES`` (a registered method without one fails the first test).

Each method must: give the same release for the same seed; plan every declared quasi-identifier; never modify the
source; leave nothing behind when it refuses; and pass an independent pandas recomputation of k over the declared
quasi-identifiers, with every record reconciled (released = in − suppressed + noise). On Spark every method gives
the same release as on DuckDB: plan, released rows, classes and checks (``-m spark``).
"""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.cli.demo import load_demo_data
from anon_sql.methods import REGISTRY, load_all, method_class

QIS = ["age", "sex", "race", "education", "marital-status"]
SA = "occupation"
SAMPLE = 1200
TAXONOMIES = {q: f"adult_{q}" for q in QIS}

# method → what its example policy changes (QIs: a subset of QIS; the rest of the policy is shared)
EXAMPLES: dict[str, dict] = {
    "levels": {"method_params": {"levels": {"age": 3, "sex": 0, "race": 1, "education": 2, "marital-status": 1}},
               "privacy": {"k": 5, "max_suppression": 0.2}},
    "iab": {"privacy": {"k": 5, "max_suppression": 0.05}},
    "exhaustive": {"privacy": {"k": 5, "max_suppression": 0.05}},
    "greedy": {"privacy": {"k": 5, "max_suppression": 0.05}},
    "optimal": {"privacy": {"k": 5, "max_suppression": 0.05}},
    "mondrian": {"privacy": {"k": 5}},
    "theta": {"privacy": {"k": 5, "theta": {"mu": 0.6}}},
    "fixed_interval": {"quasi": ["age"], "privacy": {"k": 5}},
    "slicing": {"privacy": {"k": 5, "l_diversity": {"kind": "slicing", "l": 2}}, "method_params": {"columns": 2}},
    "attribute_focused": {"privacy": {"k": 5, "l_diversity": {"kind": "slicing", "l": 2}},
                          "method_params": {"columns": 2}},
    "adaptive": {"privacy": {"k": 5}, "method_params": {"iv": {"age": 0.3, "sex": 0.2, "race": 0.1, "education": 0.2,
                                                              "marital-status": 0.2}}},
    "upa": {"privacy": {"k": 5}},
    "local_suppression": {"privacy": {"k": 5}, "method_params": {"importance": {"sex": 2, "race": 1}}},
}
# k-map and δ-presence against this population (the packaged 3,000 records; the source is its first 1,200)
POPULATION = "adult_population"
POPULATION_MODELS = {"k_map": {"k": 8, "population": POPULATION},
                     "delta_presence": {"delta_min": 0.1, "delta_max": 0.75, "population": POPULATION}}
# what each method needs to meet them here (the others: max_suppression = 0.1): theta, adaptive and slicing form
# their classes without the population, so the classes that fail are suppressed (θ's wide classes match hundreds of
# population records: δ >= 0.1 is out of their reach)
POPULATION_PRIVACY = {"theta": {"max_suppression": 0.3, "delta_presence": {**POPULATION_MODELS["delta_presence"],
                                                                           "delta_min": 0.005}},
                      "adaptive": {"max_suppression": 0.4}, "slicing": {"max_suppression": 0.3},
                      "attribute_focused": {"max_suppression": 0.3}}
# methods whose guarantee is k over the buckets they form, not over the released QI values (slicing's semantics)
BUCKETED = {"slicing", "attribute_focused"}
# methods whose released '*' cells match any value (sdcMicro's local suppression): their k is over the records a
# record matches, not over groups of equal values; they form no classes, so k-map and δ-presence (which compare
# classes with a population) are refused for them, and they run on DuckDB only (refused on Spark: docs/sdc.md)
WILDCARD = {"local_suppression"}


def example(method: str, name: str, **privacy) -> dict:
    spec = EXAMPLES[method]
    quasi = spec.get("quasi", QIS)
    attrs = {q: {"role": "quasi", "taxonomy": TAXONOMIES[q]} for q in quasi}
    attrs["patient_id"] = {"role": "identifier"}
    attrs[SA] = {"role": "sensitive"}
    return {"name": name, "source": "adult", "method": method, "seed": 3, "default_role": "insensitive",
            "attributes": attrs, "privacy": {**spec.get("privacy", {}), **privacy},
            "method_params": spec.get("method_params", {})}


def methods() -> list[str]:
    load_all()                          # imports every registered method module
    return sorted(REGISTRY)


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    load_demo_data(c, "adult_full")
    c.execute(f'CREATE TABLE adult AS SELECT * FROM adult_full WHERE patient_id <= {SAMPLE}')
    c.execute(f"CREATE TABLE {POPULATION} AS SELECT * FROM adult_full")   # the source is a 40% sample of it
    c.execute("DROP TABLE adult_full")
    yield c
    c.close()


def objects(c) -> dict[str, int]:
    """Every table and view outside the catalog, with the row count of each table."""
    tables = c.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE schema_name <> 'anon'").fetchall()
    views = c.execute("SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal "
                      "AND schema_name <> 'anon'").fetchall()
    out = {f"{s}.{t}": c.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall()[0][0] for s, t in tables}
    out.update({f"{s}.{v} (view)": -1 for s, v in views})
    return out


def source_digest(c) -> tuple:
    return c.execute("SELECT count(*), sum(hash(COLUMNS(*))) FROM adult").fetchall()[0]


def released(c, name: str) -> pd.DataFrame:
    frame = c.execute(f'SELECT * FROM "{name}"').df()
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def wildcard_matches(out: pd.DataFrame, quasi: list[str]) -> pd.Series:
    """Records each distinct released QI combination matches, ``*`` matching any value (numpy over the distinct
    combinations, written apart from the SQL verifier)."""
    combos = out.groupby(quasi, dropna=False).size().reset_index(name="n")
    values = combos[quasi].astype(str).to_numpy()
    star = values == "*"
    match = np.ones((len(values), len(values)), dtype=bool)
    for j in range(len(quasi)):
        col = values[:, j]
        match &= (col[:, None] == col[None, :]) | star[:, j][:, None] | star[:, j][None, :]
    return pd.Series(match.astype(int) @ combos["n"].to_numpy())


def test_every_registered_method_has_an_example():
    assert set(methods()) == set(EXAMPLES), "add an example policy for each new method to EXAMPLES"


def test_row_releasing_methods_are_known_without_importing_them():
    """`check` tells a method that releases values per row (its recorded policy holds every QI insensitive) from
    the name alone (methods.ROW_RELEASING: slicing's module loads scipy); the set is exactly the classes' flags."""
    from anon_sql.methods import ROW_RELEASING

    load_all()
    assert {n for n, cls in REGISTRY.items() if cls.releases_rows} == set(ROW_RELEASING)


@pytest.mark.parametrize("method", methods())
def test_contract(con, method):
    before, digest = objects(con), source_digest(con)
    a = anon_sql.release(con, example(method, f"mc_{method}_a"))
    b = anon_sql.release(con, example(method, f"mc_{method}_b"))
    timing = ("seconds", "search_seconds", "base_seconds")
    assert {k: v for k, v in a.plan.items() if k not in timing} == {k: v for k, v in b.plan.items()
                                                                      if k not in timing}
    out = released(con, a.name)
    pd.testing.assert_frame_equal(out, released(con, b.name))           # same seed ⇒ same release
    declared = [q for q in EXAMPLES[method].get("quasi", QIS)]
    assert set(declared) <= set(out.columns)                            # every declared QI is released
    if a.plan.get("kind") != "assignment":
        assert set(a.plan) == set(declared)                             # a level for every declared QI
    # independent recomputation: k over the declared QIs as released (buckets for slicing), records reconciled
    keys = ["ec_id"] if method in BUCKETED else declared
    sizes = out.groupby(keys, dropna=False).size()
    if method in WILDCARD:
        sizes = wildcard_matches(out, declared)
    assert sizes.min() >= a.policy.privacy.k, sizes.min()
    assert len(out) == a.records_in - a.suppressed + a.noise
    assert source_digest(con) == digest                                 # the source is never modified
    made = set(objects(con)) - set(before)
    assert f"main.mc_{method}_a" in made and a.passed


@pytest.mark.parametrize("method", methods())
def test_multirow_people(con, method, monkeypatch):
    """A person with several rows (1–3 visits each, QIs constant per person) and ``privacy_unit``: a method either
    releases classes of at least k people — a pandas oracle counts distinct (pseudonymized) people per class over
    the declared QIs — with whole people suppressed and rows reconciled, or refuses, naming the methods that count
    people, and leaves nothing (docs/units.md)."""
    monkeypatch.setenv("ANON_SQL_KEY", "contract-units-key-0123456789")
    con.execute("CREATE OR REPLACE TABLE adult_visits AS SELECT a.*, v.visit FROM adult a, "
                "LATERAL range(1 + a.patient_id % 3) v(visit)")
    policy = example(method, f"mc_{method}_people")
    policy.update(source="adult_visits", privacy_unit="patient_id")
    policy["attributes"]["patient_id"] = {"role": "identifier", "action": "pseudonymize"}
    before, digest = objects(con), source_digest(con)
    if not method_class(method).counts_units:
        with pytest.raises(anon_sql.PolicyError, match="methods that count people: levels"):
            anon_sql.release(con, policy)
        assert objects(con) == before and source_digest(con) == digest
        return
    rel = anon_sql.release(con, policy)
    out = con.execute(f'SELECT * FROM "{rel.name}"').df()
    keys = ["ec_id"] if method in BUCKETED else [q for q in EXAMPLES[method].get("quasi", QIS)]
    people = out.groupby(keys, dropna=False)["patient_id"].nunique()
    assert people.min() >= rel.policy.privacy.k, people.min()
    assert "__unit" not in out.columns
    src = con.execute("SELECT patient_id, count(*) AS n FROM adult_visits GROUP BY ALL").df()
    assert rel.info["people"]["in"] == len(src) and rel.info["people"]["released"] == out["patient_id"].nunique()
    # whole people: the rows per released person are the rows per person of the source (1–3), rows reconciled
    assert set(out.groupby("patient_id").size()) <= {1, 2, 3}
    assert len(out) == rel.records_in - rel.suppressed
    assert rel.info["people"]["suppressed"] <= rel.policy.privacy.max_suppression * len(src) + 1e-9
    con.execute(f'DROP TABLE "{rel.name}"')


@pytest.mark.parametrize("method", methods())
def test_refusal_leaves_nothing(con, method):
    before, digest = objects(con), source_digest(con)
    impossible = {"kind": "slicing" if method in BUCKETED else "distinct", "l": 50}   # occupation has 14 values
    with pytest.raises(anon_sql.AnonSQLError):
        anon_sql.release(con, example(method, f"mc_{method}_refused", l_diversity=impossible))
    assert objects(con) == before and source_digest(con) == digest


def _covers(pop: pd.DataFrame, q: str, value, intervals: dict, taxonomies: dict, cache: dict) -> np.ndarray:
    """Oracle of one released value's cover over the population records (pandas, written apart from the SQL):
    NULL ↔ NULL, ``*`` everything, an interval-recoded QI the values its cut points send to ``value``, a numeric
    QI ``[lo-hi]`` / a number the values between, a taxonomy node its leaves (a root NULL too), else equal text."""
    import re

    key = (q, value)
    if key in cache:
        return cache[key]
    x = pop[q]
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        mask = x.isna().to_numpy()
    elif value == "*":
        mask = np.ones(len(pop), dtype=bool)
    elif q in intervals:
        table = sorted(intervals[q], key=lambda r: r["high"])
        highs = [r["high"] for r in table]
        texts = [r["text"] for r in table]
        mapped = [None if pd.isna(v) else texts[min(sum(h < v for h in highs), len(texts) - 1)] for v in x]
        mask = np.array([m == value for m in mapped])
    else:
        text = x.astype(str)
        mask = (text == str(value)).to_numpy().copy()
        m = re.fullmatch(r"\[(-?[\d.]+)-(-?[\d.]+)\]", str(value))
        if pd.api.types.is_numeric_dtype(x):
            lo, hi = (float(m.group(1)), float(m.group(2))) if m else (None, None)
            if lo is None:
                try:
                    lo = hi = float(value)
                except ValueError:
                    pass
            if lo is not None:
                mask |= ((x >= lo) & (x <= hi)).fillna(False).to_numpy(dtype=bool)
        if q in taxonomies:
            levels = taxonomies[q].levels
            leaves = set(levels["level0"][(levels.iloc[:, 1:] == str(value)).any(axis=1)])
            mask |= text.isin(leaves).to_numpy() & x.notna().to_numpy()
            if str(value) in set(levels.iloc[:, -1]):
                mask |= x.isna().to_numpy()
    cache[key] = mask
    return mask


def population_oracle(out: pd.DataFrame, pop: pd.DataFrame, quasi: list[str], plan: dict, bucketed: bool,
                      taxonomies: dict) -> pd.Series:
    """Population records matching each released class (ec_id + QIs; buckets: ec_id), recomputed in pandas from
    the released rows: every QI covered by the class's value — buckets: on every column group, by one row
    (``taxonomies``: QI → Taxonomy)."""
    intervals = plan.get("value_intervals") or {}
    cache: dict = {}
    if bucketed:
        groups = [[a for a in g if a in quasi] for g in plan["slicing_check"]["columns"]]
        groups = [g for g in groups if g]
        keys = ["ec_id"]
    else:
        groups, keys = [quasi], ["ec_id", *quasi]
    counts = {}
    for key, rows in out.groupby(keys, dropna=False):
        match = np.ones(len(pop), dtype=bool)
        for g in groups:
            any_row = np.zeros(len(pop), dtype=bool)
            for _, row in rows[g].drop_duplicates().iterrows():
                tup = np.ones(len(pop), dtype=bool)
                for q in g:
                    tup &= _covers(pop, q, None if pd.isna(row[q]) else str(row[q]), intervals, taxonomies,
                                   cache)
                any_row |= tup
            match &= any_row
        counts[key if isinstance(key, tuple) else (key,)] = float(match.sum())
    return pd.Series(counts)


@pytest.mark.parametrize("method", methods())
def test_population_models(con, method):
    """k-map and δ-presence for every method: each released class's population matches (recomputed in pandas from
    the released rows and the population: level plans' generalized values, local recoding's ranges and taxonomy
    nodes, fixed intervals' cut points, slicing's buckets by column group) equal the verified ``k_map_value``, and
    every class meets k-map and δ-presence; an unreachable k refuses, leaving the database as before."""
    before, digest = objects(con), source_digest(con)
    if method in WILDCARD:     # no classes to compare with a population: refused, the database as before
        with pytest.raises(anon_sql.PolicyError, match="k-anonymity only"):
            anon_sql.release(con, example(method, f"mc_{method}_pop", **POPULATION_MODELS))
        assert objects(con) == before and source_digest(con) == digest
        return
    policy = example(method, f"mc_{method}_pop", **POPULATION_MODELS)
    # methods that form their classes without the population reach the models by suppressing failing classes
    policy["privacy"].update(POPULATION_PRIVACY.get(method, {"max_suppression": 0.1}))
    rel = anon_sql.release(con, policy)
    out = released(con, rel.name)
    declared = EXAMPLES[method].get("quasi", QIS)
    pop = con.execute(f"SELECT * FROM {POPULATION}").df()
    bucketed = method in BUCKETED
    from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy

    want = population_oracle(out, pop, declared, rel.plan, bucketed, {q: load_builtin_taxonomy(TAXONOMIES[q]) for q in declared})
    keys = ["ec_id"] if bucketed else ["ec_id", *declared]
    cl = rel.classes
    got = pd.Series({tuple(None if pd.isna(v) else v for v in r[:-1]): float(r[-1])
                     for r in cl[keys + ["k_map_value"]].itertuples(index=False)})
    want.index = [tuple(None if pd.isna(v) else (str(v) if k != "ec_id" else int(v)) for k, v in zip(keys, i))
                  for i in want.index]
    got.index = [tuple(None if v is None else (str(v) if k != "ec_id" else int(v)) for k, v in zip(keys, i))
                 for i in got.index]
    assert len(want) == len(cl) > 1
    pd.testing.assert_series_equal(got.sort_index(), want.sort_index(), check_names=False)
    assert cl["k_map_value"].min() >= 8
    delta = cl["__size"] / cl["k_map_value"]
    bounds = policy["privacy"]["delta_presence"]
    assert delta.min() >= bounds["delta_min"] - 1e-9 and delta.max() <= bounds["delta_max"] + 1e-9
    np.testing.assert_allclose(cl["delta_presence_value"], delta)
    assert rel.passed and source_digest(con) == digest
    # anon_sql.check recompiles the models from the stored policy and plan: the same matches, over the table alone
    frame = anon_sql.check(con, rel.name).set_index("check")
    assert frame["passed"].all() and frame.loc["k_map", "worst_value"] == cl["k_map_value"].min()
    # fail closed: a k-map no class can reach (the population has 3,000 records) refuses, database as before
    before = objects(con)
    with pytest.raises(anon_sql.PrivacyRequirementError, match="k_map|k-map") as err:
        anon_sql.release(con, example(method, f"mc_{method}_pop_refused",
                                      k_map={"k": 3001, "population": POPULATION}, max_suppression=0.0))
    assert objects(con) == before and source_digest(con) == digest
    # a method that forms its classes without the population says so (the others refuse while planning)
    blind = REGISTRY[method].plan_kind == "assignment" and not REGISTRY[method].plans_population
    assert ("forms its classes without the population" in str(err.value)) == blind


@pytest.fixture(scope="module")
def spark(con, spark_session):
    """The test process's one Spark session (tests/conftest.py), with the same Adult sample as the temporary view
    ``adult``."""
    session = spark_session
    session.createDataFrame(con.execute("SELECT * FROM adult").df()).createOrReplaceTempView("adult")
    yield session
    session.catalog.dropTempView("adult")


def as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows as text (NULL as None) in a canonical order: a multiset comparison across engines (BIGINT vs INT)."""
    out = frame.astype(object).where(frame.notna(), None).astype(str)
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


@pytest.mark.spark
@pytest.mark.parametrize("method", methods())
def test_duckdb_equals_spark(con, spark, method):
    """Every registered method gives the same release on both engines: plan, record counts, released rows (as a
    multiset), classes (ids, values, sizes, model values and flags) and the check summary."""
    from anon_sql import spark as aspark

    name = f"mcs_{method}"
    duck = anon_sql.release(con, example(method, name), replace=True)
    rel = aspark.release(spark, example(method, name), replace=True)
    assert_same_release(con, spark, duck, rel)
    assert rel.passed and duck.passed


@pytest.mark.spark
def test_pseudonyms_on_spark_are_the_duckdb_pseudonyms(con, spark, monkeypatch):
    """A pseudonymized identifier gets the same keyed hash on both engines: hex HMAC-SHA256 of the id's text under
    the key (recomputed here with hmac), on an assignment method (θ) whose rows also carry the row key."""
    import hashlib
    import hmac

    from anon_sql import spark as aspark

    key = "spark-and-duckdb-share-this-key"
    monkeypatch.setenv("ANON_SQL_KEY", key)
    pol = example("theta", "mcs_pseudonyms")
    pol["attributes"]["patient_id"] = {"role": "identifier", "action": "pseudonymize"}
    duck = anon_sql.release(con, pol, replace=True)
    rel = aspark.release(spark, pol, replace=True)
    duck_rows, spark_rows = released(con, duck.name), spark.table(rel.name).toPandas()
    pd.testing.assert_frame_equal(as_text(spark_rows), as_text(duck_rows))
    ids = con.execute("SELECT patient_id FROM adult").df()["patient_id"]
    expected = {hmac.new(key.encode(), str(i).encode(), hashlib.sha256).hexdigest() for i in ids}
    released_ids = set(spark_rows["patient_id"].dropna())
    assert released_ids <= expected and len(released_ids) == rel.records_out - rel.noise
    assert not any(key in s for s in rel.sql)    # the key never appears in the executed SQL


@pytest.mark.spark
def test_driver_planning_refuses_beyond_its_row_limit(con, spark, monkeypatch):
    """A method planned on the driver over collected rows refuses a source above the limit, naming it, and leaves
    nothing in the session."""
    from anon_sql import spark as aspark
    from anon_sql.engines.spark import planning

    monkeypatch.setattr(planning, "DRIVER_ROWS_LIMIT", SAMPLE - 1)
    before = {t.name for t in spark.catalog.listTables()}
    with pytest.raises(anon_sql.PolicyError, match=f"limit {SAMPLE - 1:,}: driver memory"):
        aspark.release(spark, example("upa", "mcs_too_big"))
    assert {t.name for t in spark.catalog.listTables()} == before


@pytest.fixture(scope="module")
def spark_population(con, spark):
    """The population of the k-map / δ-presence examples as the temporary view of the same name in Spark."""
    spark.createDataFrame(con.execute(f"SELECT * FROM {POPULATION}").df()).createOrReplaceTempView(POPULATION)
    yield spark
    spark.catalog.dropTempView(POPULATION)


def assert_same_release(con, spark, duck, rel) -> None:
    """Plan, record counts, released rows (as a multiset), classes and the check summary equal across engines."""
    timing = ("seconds", "search_seconds", "base_seconds")
    assert {k: v for k, v in rel.plan.items() if k not in timing} == {k: v for k, v in duck.plan.items()
                                                                        if k not in timing}
    assert (rel.records_in, rel.records_out, rel.suppressed, rel.noise) == (duck.records_in, duck.records_out,
                                                                             duck.suppressed, duck.noise)
    duck_rows, spark_rows = released(con, duck.name), spark.table(rel.name).toPandas()
    assert list(spark_rows.columns) == list(duck_rows.columns)
    pd.testing.assert_frame_equal(as_text(spark_rows), as_text(duck_rows))
    assert list(rel.classes.columns) == list(duck.classes.columns) and len(rel.classes) == len(duck.classes)
    for c in duck.classes.columns:
        x, y = duck.classes[c], rel.classes[c]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            np.testing.assert_allclose(y.to_numpy(float), x.to_numpy(float), rtol=1e-9, atol=1e-12, err_msg=c)
        else:
            assert [str(v) for v in y] == [str(v) for v in x], c
    pd.testing.assert_frame_equal(rel.checks.reset_index(drop=True), duck.checks.reset_index(drop=True),
                                  check_dtype=False)


# in CI: a level plan, a search and two assignment plans (cut points, Mondrian's ranges through the cover joins);
# the other assignment methods are opt-in (-m "spark and slow"): 2-6 minutes each on 2 shared cores, and
# attribute_focused's per-row cover join ran out of the 1 GB default driver's aggregation memory once in CI
_SLOW_POPULATION = ("upa", "theta", "adaptive", "slicing", "attribute_focused")


@pytest.mark.spark
@pytest.mark.parametrize("method", ["levels", "optimal", "fixed_interval", "mondrian",
                                    *[pytest.param(m, marks=pytest.mark.slow) for m in _SLOW_POPULATION]])
def test_population_models_duckdb_equals_spark(con, spark_population, method):
    """k-map and δ-presence on Spark (the population a view of the session): the same plan, rows, classes — their
    ``k_map_value`` / ``delta_presence_value`` included — and checks as on DuckDB, for a level plan, a lattice
    search and every assignment method: fixed intervals matched through its cut points, the others' released ranges
    and taxonomy nodes through population_match's cover joins (slicing, attribute_focused: per column group)."""
    from anon_sql import spark as aspark

    spark = spark_population
    name = f"mcs_{method}_pop"
    policy = example(method, name, **POPULATION_MODELS)
    policy["privacy"].update(POPULATION_PRIVACY.get(method, {"max_suppression": 0.1}))
    duck = anon_sql.release(con, policy, replace=True)
    rel = aspark.release(spark, policy, replace=True)
    assert_same_release(con, spark, duck, rel)
    assert rel.passed and rel.classes["k_map_value"].min() >= POPULATION_MODELS["k_map"]["k"]
    assert set(rel.checks["check"]) >= {"k_map", "delta_presence"}


@pytest.mark.spark
@pytest.mark.parametrize("method", ["levels", "upa"])
@pytest.mark.parametrize("population, error", [
    ("no_such_population", "population 'no_such_population' of privacy model"),   # missing: names it
    ("adult_population_no_age", r"has no column\(s\) \['age'\]"),                  # a QI missing
    ("adult_population_bad_age", "column 'age' does not read as the source's type"),
    ("no_age.parquet", r"has no column\(s\) \['age'\]"),                         # a file: its view goes too
])
def test_population_refusals_on_spark_leave_nothing(con, spark_population, tmp_path, method, population, error):
    """A population that is missing, lacks a quasi-identifier or holds a value of another type fails closed on
    Spark, naming it, with nothing left in the session (a population file's view included)."""
    from anon_sql import spark as aspark

    spark = spark_population
    frame = con.execute(f"SELECT * FROM {POPULATION}").df()
    spark.createDataFrame(frame.drop(columns=["age"])).createOrReplaceTempView("adult_population_no_age")
    bad = frame.astype({"age": object})
    bad.loc[0, "age"] = "unknown"
    spark.createDataFrame(bad.astype({"age": str})).createOrReplaceTempView("adult_population_bad_age")
    if population.endswith(".parquet"):
        frame.drop(columns=["age"]).to_parquet(tmp_path / population)
        population = str(tmp_path / population)
    before = {t.name for t in spark.catalog.listTables()}
    policy = example(method, f"mcs_{method}_pop_refused",
                     k_map={"k": 2, "population": population})
    with pytest.raises(anon_sql.AnonSQLError, match=error):
        aspark.release(spark, policy)
    assert {t.name for t in spark.catalog.listTables()} == before
    assert not spark.catalog.tableExists(f"mcs_{method}_pop_refused")
