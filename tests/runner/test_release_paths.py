"""The ways a level release writes its rows — from the base counts (every column a QI or sensitive), by joining the
source to the class map (other columns present), or as rows with their counts that a view repeats (how Spark
keeps a release) — against a pandas oracle, byte-for-byte determinism, ENUM-typed generalized columns and the temp
base-count table's lifetime."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import anon_sql
from anon_sql.engines import DuckDBEngine
from anon_sql.runner.run import release_on
from conftest import adult_policy, data_path, load_adult


class CountedRowsEngine(DuckDBEngine):
    """DuckDB keeping a release of repeated rows as Spark does: rows with their counts, the table a view
    repeating them, the checks over the counts."""

    keeps_counted_rows = True

ADULT_LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
                "workclass": 2, "occupation": 1}

AGE_BOUNDS = [[0, 20, 40, 60, 80, 100], [0, 40, 100]]
COLOR = {"red": ["warm"], "orange": ["warm"], "blue": ["cool"], "green": ["cool"]}   # leaf → its parent


def _oracle(frame: pd.DataFrame, age_level: int, color_level: int, k: int) -> pd.DataFrame:
    """Generalize with pandas, drop classes smaller than k: the released multiset, independent of the compiler."""
    out = frame.copy()
    if age_level:
        cuts = AGE_BOUNDS[age_level - 1]
        bins = pd.cut(out["age"], cuts, right=False)
        out["age"] = [f"[{int(b.left)}-{int(b.right) - 1}]" for b in bins]   # integer intervals, closed
    if color_level:
        out["color"] = out["color"].map(lambda c: COLOR[c][0] if isinstance(c, str) else "*")   # NULL → top
    sizes = out.groupby(["age", "color"], dropna=False)["age"].transform("size")
    return out[sizes >= k]


def _policy(name: str, age_level: int, color_level: int, k: int, extra: bool) -> dict:
    attrs = {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "bounds": AGE_BOUNDS}},
             "color": {"role": "quasi", "taxonomy": {"kind": "mapping", "mapping": COLOR}},
             "s": {"role": "sensitive"}}
    if extra:
        attrs["note"] = {"role": "insensitive"}
    return {"name": name, "source": "t_x" if extra else "t", "method": "levels", "attributes": attrs,
            "privacy": {"k": k, "max_suppression": 1.0},
            "method_params": {"levels": {"age": age_level, "color": color_level}}}


rows = st.lists(st.tuples(st.integers(0, 99), st.sampled_from(["red", "orange", "blue", "green", None]),
                          st.sampled_from(["x", "y", None]), st.integers(0, 3)), min_size=1, max_size=60)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows, age_level=st.integers(0, 2), color_level=st.integers(0, 1), k=st.integers(1, 4))
def test_both_write_paths_release_the_oracle_rows(data, age_level, color_level, k):
    assume(k <= len(data))
    frame = pd.DataFrame(data, columns=["age", "color", "s", "note"])
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE t_x AS SELECT * FROM frame")
    c.execute("CREATE TABLE t AS SELECT age, color, s FROM frame")
    expected = _oracle(frame, age_level, color_level, k)
    for name, extra in (("from_counts", False), ("joined", True), ("kept_rows", False)):
        try:
            engine = CountedRowsEngine(c) if name == "kept_rows" else DuckDBEngine(c)
            rel = release_on(engine, _policy(name, age_level, color_level, k, extra))
        except anon_sql.PrivacyRequirementError:
            assert expected.empty   # everything suppressed is refused, never released empty
            continue
        got = c.execute(f"SELECT * FROM {name}").df()
        cols = ["age", "color", "s"] + (["note"] if extra else [])
        key = lambda f: f[cols].astype(str).sort_values(cols).reset_index(drop=True)  # noqa: E731
        pd.testing.assert_frame_equal(key(got), key(expected))
        assert rel.records_out + rel.suppressed == len(frame)
        # every class is one released QI tuple and one ec_id
        if len(got):
            assert got.groupby("ec_id")[["age", "color"]].nunique(dropna=False).max().max() == 1
    c.close()


@pytest.mark.parametrize("extra", [False, True], ids=["from_counts", "joined"])
def test_release_rows_are_identical_run_to_run(adult, extra):
    source = "adult"
    if extra:
        adult.execute("CREATE OR REPLACE TABLE adult_x AS SELECT *, CAST(hash(age) % 7 AS INTEGER) AS hours "
                      "FROM adult")
        source = "adult_x"
    frames = []
    for i in range(2):
        pol = adult_policy(ADULT_LEVELS, max_suppression=0.05)
        pol.update(name=f"det_{extra}_{i}", source=source)
        if extra:
            pol["attributes"]["hours"] = {"role": "insensitive"}
        anon_sql.release(adult, pol)
        frames.append(adult.execute(f'SELECT * FROM "det_{extra}_{i}"').df())
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert frames[0]["ec_id"].is_monotonic_increasing   # rows come grouped by class, never in source order


def test_generalized_columns_are_enums_in_taxonomy_order_and_ec_ids_follow_text_order(adult):
    pol = adult_policy(ADULT_LEVELS, max_suppression=0.05)
    pol["name"] = "enum_rel"
    rel = anon_sql.release(adult, pol)
    types = dict(adult.execute("SELECT column_name, data_type FROM information_schema.columns "
                               "WHERE table_name = 'enum_rel'").fetchall())
    assert types["age"].startswith("ENUM(") and types["sex"] == "VARCHAR"   # sex is at level 0: its own type
    # the ENUM keeps the taxonomy's order: age intervals sort numerically, not as text
    ages = [r[0] for r in adult.execute("SELECT DISTINCT age FROM enum_rel ORDER BY age").fetchall()]
    lows = [int(a.split("-")[0].strip("[(")) for a in ages if a != "*"]
    assert lows == sorted(lows)
    # ec_ids number the classes in the text order of their released values, as on the other engines
    classes = rel.classes.sort_values("ec_id")
    keys = classes[list(pol["attributes"])[:-1]].astype(str).apply(tuple, axis=1).tolist()
    assert keys == sorted(keys)
    # plain string comparisons work on the ENUM columns
    assert adult.execute("SELECT count(*) FROM enum_rel WHERE age = ?", [ages[0]]).fetchall()[0][0] > 0


def test_temp_base_counts_are_dropped_after_success_and_failure(con):
    load_adult(con)
    anon_sql.release(con, adult_policy(ADULT_LEVELS, max_suppression=0.05))
    with pytest.raises(anon_sql.PrivacyRequirementError):
        pol = adult_policy({}, l_diversity={"kind": "distinct", "l": 2})
        pol["name"] = "fails"
        anon_sql.release(con, pol)
    temps = con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
    assert temps == []


def test_enum_domain_is_in_natural_leaf_order_for_a_catalog_taxonomy(adult):
    # the catalog returns leaves in text order ("1", "10", "100", "11", ...): the released domain must still run
    # 0-4, 5-9, ..., 95-99, then the top
    anon_sql.load_taxonomy_file(adult, data_path("adult", "adult_hierarchy_age.csv"), name="age_catalog")
    pol = adult_policy({**ADULT_LEVELS, "age": 1}, max_suppression=0.5)
    pol["name"] = "enum_catalog"
    pol["attributes"]["age"]["taxonomy"] = "age_catalog"
    anon_sql.release(adult, pol)
    enum_type = dict(adult.execute("SELECT column_name, data_type FROM information_schema.columns "
                                   "WHERE table_name = 'enum_catalog'").fetchall())["age"]
    domain = adult.execute(f"SELECT enum_range(NULL::{enum_type})").fetchall()[0][0]
    assert domain[-1] == "*"
    lows = [int(v.split("-")[0]) for v in domain[:-1]]
    assert lows == sorted(lows) and domain[:3] == ["0-4", "5-9", "10-14"]


def test_counted_rows_repeated_by_a_view_are_the_released_table(adult):
    """Spark's way of keeping a level release (rows with their counts ``__w``, the table a view repeating
    each row ``__w`` times, the checks aggregating the counts), run on DuckDB: the same rows, classes, checks and
    counts as the materialized table, through suppression to a fixed point (a group rule that suppression breaks)."""
    pol = adult_policy(ADULT_LEVELS, max_suppression=0.05, l_diversity={"kind": "distinct", "l": 2})
    pol["privacy"]["requirements"] = [{"quasi": ["sex"], "k": 20}]
    rels, rows = {}, {}
    for name, engine in (("plain", DuckDBEngine(adult)), ("kept", CountedRowsEngine(adult))):
        rels[name] = release_on(engine, {**pol, "name": name})
        rows[name] = adult.execute(f"SELECT * FROM {name}").df()
    kinds = dict(adult.execute("SELECT table_name, table_type FROM information_schema.tables "
                               "WHERE table_name IN ('plain', 'kept', 'kept__rows')").fetchall())
    assert kinds == {"plain": "BASE TABLE", "kept": "VIEW", "kept__rows": "BASE TABLE"}
    cols = list(rows["plain"].columns)
    key = lambda f: f[cols].astype(str).sort_values(cols).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(key(rows["kept"]), key(rows["plain"]))
    plain, kept = rels["plain"], rels["kept"]
    assert (kept.records_out, kept.suppressed, kept.plan) == (plain.records_out, plain.suppressed, plain.plan)
    pd.testing.assert_frame_equal(kept.classes, plain.classes)
    pd.testing.assert_frame_equal(kept.checks, plain.checks)
    # one row per kept source combination (a released row may be in several): fewer than the records, at least the
    # distinct released rows, and each repeated as often as it occurs
    n, total, least = adult.execute('SELECT count(*), sum(__w), min(__w) FROM anon_work."kept__rows"').fetchall()[0]
    assert len(rows["plain"].drop_duplicates()) <= n < total == len(rows["plain"]) and least >= 1
