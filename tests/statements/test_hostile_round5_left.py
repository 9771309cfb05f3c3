"""Hostile round 5's minors left to statements and the catalog (docs/hostile-round-5.md), each failing on the code
before: R19, a quoted name in another case than the release's is found by every statement (DuckDB resolves quoted
names case-insensitively); R11 / R14, ``REFRESH … KEEP PLAN`` keeps the search trace of the version that made the
plan (it deleted version 1's 96 rows)."""
from __future__ import annotations

import duckdb
import pytest

from anon_sql.statements.script import execute
from test_statements import db, view_sql  # noqa: F401  (db: the packaged Adult sample as table `adult`)


@pytest.fixture
def named(db):  # noqa: F811
    execute(db, view_sql(name="adult_demo"))
    return db


@pytest.mark.parametrize("statement", ['REFRESH ANONYMIZED VIEW "main"."ADULT_DEMO"',
                                       'REFRESH ANONYMIZED VIEW "ADULT_DEMO" KEEP PLAN',
                                       'CHECK ANONYMIZED VIEW "main"."Adult_Demo"',
                                       'EXPLAIN ANONYMIZED VIEW "ADULT_DEMO"'])
def test_a_quoted_name_in_another_case_is_found(named, statement):
    results = execute(named, statement)
    assert results[-1].kind == statement.split()[0].lower()
    assert named.execute("SELECT count(*) FROM anon.releases WHERE release = 'adult_demo'").fetchall()[0][0] == 1


def test_export_finds_a_quoted_name_in_another_case(named, tmp_path):
    out = tmp_path / "o.parquet"
    execute(named, f"EXPORT ANONYMIZED VIEW \"main\".\"ADULT_DEMO\" TO '{out}'")
    released = named.execute("SELECT count(*) FROM adult_demo").fetchall()[0][0]
    assert duckdb.sql(f"SELECT count(*) FROM '{out}'").fetchall()[0][0] == released


def test_drop_finds_a_quoted_name_in_another_case(named):
    execute(named, 'DROP ANONYMIZED VIEW "main"."ADULT_DEMO"')
    assert named.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult_demo'").fetchall()[0][0] == 0
    assert named.execute("SELECT count(*) FROM anon.releases WHERE release = 'adult_demo'").fetchall()[0][0] == 0


def _trace(con) -> list[tuple]:
    return con.execute("SELECT version, step, node, event FROM anon.search_trace WHERE release = 'adult_demo' "
                       "ORDER BY version, step, node, event").fetchall()


def test_keep_plan_keeps_the_search_trace_of_the_version_that_searched(named):
    first = _trace(named)
    assert len(first) > 10 and {v for v, *_ in first} == {1}
    named.execute("UPDATE adult SET age = NULL WHERE rowid IN (1, 2, 3)")
    execute(named, "REFRESH ANONYMIZED VIEW adult_demo KEEP PLAN")
    assert _trace(named) == first                          # version 2 searched nothing; version 1's search stays
    execute(named, "REFRESH ANONYMIZED VIEW adult_demo")   # version 3 searches again: both searches kept
    after = _trace(named)
    assert [r for r in after if r[0] == 1] == first
    assert {v for v, *_ in after} == {1, 3}
    assert len([r for r in after if r[0] == 3]) > 10


def test_a_release_made_before_versions_keeps_its_trace_on_the_first_refresh(db):  # noqa: F811
    execute(db, view_sql(name="adult_demo"))
    # as a catalog from before the version column: the trace unnumbered, no version rows
    db.execute("UPDATE anon.search_trace SET version = NULL")
    db.execute("DELETE FROM anon.release_versions")
    first = [(None, *r[1:]) for r in _trace(db)]
    assert first
    execute(db, "REFRESH ANONYMIZED VIEW adult_demo KEEP PLAN")
    assert _trace(db) == [(1, *r[1:]) for r in first]
