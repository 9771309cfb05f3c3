"""The compiler's SQL is real in other dialects: it parses back, and SQLite runs it to the same released rows."""
from __future__ import annotations

import sqlite3

import pandas as pd
import pytest
import sqlglot

import anon_sql
from conftest import adult_policy, data_path

LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 2, "occupation": 1}


def _policy():
    return adult_policy(LEVELS, max_suppression=0.05, l_diversity={"kind": "distinct", "l": 2})


@pytest.mark.parametrize("dialect", ["spark", "postgres", "trino", "duckdb"])
def test_statements_parse_back_in_dialect(dialect):
    stmts = anon_sql.compile(_policy(), dialect=dialect)
    # DuckDB adds its working schema, the temp base-count table (create, then drop) that the release reads and the
    # temp table of the released rows with their counts, which the checks read, and those rows cut into pieces,
    # which the table is written from (created, then dropped)
    assert len(stmts) == (11 if dialect == "duckdb" else 5)
    assert stmts[0].startswith("CREATE SCHEMA") == (dialect == "duckdb")
    for s in stmts:
        tree = sqlglot.parse_one(s, read=dialect)
        assert tree is not None and tree.sql(dialect=dialect)


@pytest.mark.parametrize("dialect", ["postgres", "trino"])
def test_non_portable_model_refused_for_other_dialects(dialect):
    pol = _policy()
    pol["privacy"]["l_diversity"] = {"kind": "entropy", "l": 1.5}
    with pytest.raises(anon_sql.PolicyError, match="no portable SQL form"):
        anon_sql.compile(pol, dialect=dialect)


def test_spark_sql_calls_the_kernels_as_its_udfs():
    """Spark's SQL has the count lists (sorted collect_list) and spells a kernel call as the session's UDF."""
    pol = _policy()
    pol["privacy"]["l_diversity"] = {"kind": "entropy", "l": 1.5}
    text = "\n".join(anon_sql.compile(pol, dialect="spark")).upper()
    assert "ANON_ENTROPY_COUNTS(" in text and "ANON.ENTROPY_COUNTS" not in text and "COLLECT_LIST(" in text


def test_sqlite_rendering_gives_the_duckdb_release(con):
    adult = pd.read_csv(data_path("adult", "adult.csv"), sep=";").head(8000)
    lite = sqlite3.connect(":memory:")
    adult.to_sql("adult", lite, index=False)
    for stmt in anon_sql.compile(_policy(), dialect="sqlite"):
        lite.execute(stmt)
    from_sqlite = pd.read_sql('SELECT * FROM "adult_rel"', lite)
    con.register("adult_df", adult)
    con.execute("CREATE TABLE adult AS SELECT * FROM adult_df")
    rel = anon_sql.release(con, _policy())
    from_duckdb = con.execute("SELECT * FROM adult_rel").df()
    assert len(from_sqlite) == len(from_duckdb) == rel.records_out > 0
    cols = list(from_duckdb.columns)
    a = from_sqlite[cols].astype(str).sort_values(cols).reset_index(drop=True)
    b = from_duckdb[cols].astype(str).sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_compile_duckdb_runs_to_the_same_table_as_release(con):
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';')", [str(data_path("adult", "adult.csv"))])
    for stmt in anon_sql.compile(_policy(), dialect="duckdb"):
        con.execute(stmt)
    compiled = con.execute("SELECT * FROM adult_rel").df()
    con.execute("DROP TABLE adult_rel")
    # the script keeps its TEMP adult_rel__rows for its checks view; a release of that name in the same session
    # refuses while it is there (a reserved name: hostile round 17, M48), so it goes first
    con.execute("DROP TABLE temp.main.adult_rel__rows")
    anon_sql.release(con, _policy())
    pd.testing.assert_frame_equal(compiled, con.execute("SELECT * FROM adult_rel").df())


def test_class_level_quasi_reads_the_typed_row_values_field():
    """A plan releasing values per row (``AssignmentPlan.row_values``, slicing's buckets) has no QI constant per
    class; the same class values keyed by class do. The decision is the typed field, never ``plan.info``."""
    from anon_sql.compiler.views import CompileInput, class_level_quasi
    from anon_sql.methods import AssignmentPlan
    from anon_sql.policy.model import Policy

    policy = Policy.from_dict({"name": "t", "source": "t", "method": "mondrian",
                               "attributes": {"age": {"role": "quasi"}, "sex": {"role": "quasi"}},
                               "privacy": {"k": 2}})
    assignment = pd.DataFrame({"__row": [1, 2], "ec_id": [1, 1]})
    values = pd.DataFrame({"ec_id": [1], "age": ["[20-30]"]})
    per_class = AssignmentPlan(assignment, values)
    assert class_level_quasi(CompileInput(policy, "t", ["age", "sex"], per_class, {}, [])) == ["age"]
    per_row = AssignmentPlan(assignment, values.assign(__row=[1]), row_values=True)
    assert class_level_quasi(CompileInput(policy, "t", ["age", "sex"], per_row, {}, [])) == []
    # a stray report key does not decide anything
    reported = AssignmentPlan(assignment, values, info={"row_values": True})
    assert class_level_quasi(CompileInput(policy, "t", ["age", "sex"], reported, {}, [])) == ["age"]


def test_a_warm_release_reuses_its_compiled_sql_only_for_the_same_inputs(con, tmp_path):
    """A level plan's statements are compiled once per plan shape (issue 17.1): the same policy and plan give the
    same text, and changing what the SQL is built from — a stored taxonomy's content, the levels — gives new SQL
    and the release that follows from it."""
    con.execute("CREATE TABLE t AS SELECT x, s FROM (VALUES ('a'), ('b'), ('c'), ('d')) v(x), range(2) r(s)")
    first = {"a": "ab", "b": "ab", "c": "cd", "d": "cd"}
    anon_sql.store_taxonomy(con, anon_sql.Taxonomy("tx", pd.DataFrame({"l0": list(first), "l1": list(first.values())})))
    pol = {"name": "warm", "source": "t", "method": "levels", "attributes": {"x": {"role": "quasi", "taxonomy": "tx"},
           "s": {"role": "insensitive"}}, "privacy": {"k": 2}, "method_params": {"levels": {"x": 1}}}
    a = anon_sql.release(con, pol)
    b = anon_sql.release(con, pol, replace=True)
    assert b.sql == a.sql and b.sql is not a.sql            # the texts are the release's own list
    assert sorted(con.execute("SELECT x FROM warm").fetchall()) == [("ab",)] * 4 + [("cd",)] * 4
    second = {"a": "ac", "b": "bd", "c": "ac", "d": "bd"}     # same name, new content
    con.execute("DELETE FROM anon.taxonomy_nodes WHERE taxonomy = 'tx'")
    con.execute("DELETE FROM anon.taxonomies WHERE name = 'tx'")
    anon_sql.store_taxonomy(con, anon_sql.Taxonomy("tx", pd.DataFrame({"l0": list(second),
                                                                        "l1": list(second.values())})))
    c = anon_sql.release(con, pol, replace=True)
    assert c.sql != a.sql
    assert sorted(con.execute("SELECT x FROM warm").fetchall()) == [("ac",)] * 4 + [("bd",)] * 4
    pol["method_params"]["levels"] = {"x": 0}                  # another plan: the values themselves
    d = anon_sql.release(con, pol, replace=True)
    assert d.sql != c.sql and {r[0] for r in con.execute("SELECT x FROM warm").fetchall()} == set("abcd")
