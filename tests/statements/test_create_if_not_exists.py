"""Hostile round 14, E16: ``CREATE ANONYMIZED VIEW IF NOT EXISTS`` over an existing release failed "already exists".
It is a no-op now when the release exists (nothing written, no version); a user's table of that name is still
refused, and OR REPLACE with IF NOT EXISTS is a syntax error."""
from __future__ import annotations

import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

CREATE = """CREATE {how} ANONYMIZED VIEW {exists} {name} WITH (method = 'levels', k = 5, default_role = 'insensitive',
    method_params = {{'levels': {{'age': 1, 'sex': 0}}}})
AS SELECT identifier(pid), quasi(age, taxonomy => {{'kind': 'interval', 'widths': [10, 20]}}),
          quasi(sex, taxonomy => {{'kind': 'top'}}) FROM pt"""


@pytest.fixture
def con(patients):
    return patients


def versions(c) -> int:
    return c.execute("SELECT count(*) FROM anon.release_versions").fetchall()[0][0]


def test_if_not_exists_creates_once_then_does_nothing(con):
    first = anon_sql.execute(con, CREATE.format(how="", exists="IF NOT EXISTS", name="lv"))[-1]
    assert first.kind == "create" and "version 1" in first.message
    before = con.execute("SELECT * FROM lv ORDER BY ALL").fetchall(), versions(con)
    con.execute("INSERT INTO pt SELECT 1000 + i, 30, 'F', 1000 + i FROM range(10) r(i)")
    again = anon_sql.execute(con, CREATE.format(how="", exists="IF NOT EXISTS", name="lv"))[-1]
    assert "exists: nothing done" in again.message
    assert (con.execute("SELECT * FROM lv ORDER BY ALL").fetchall(), versions(con)) == before


def test_if_not_exists_over_a_users_table_is_refused(con):
    con.execute("CREATE TABLE mine AS SELECT 1 AS x")
    with pytest.raises(AnonSQLError, match="'mine' already exists"):
        anon_sql.execute(con, CREATE.format(how="", exists="IF NOT EXISTS", name="mine"))
    assert con.execute("SELECT * FROM mine").fetchall() == [(1,)]


def test_or_replace_with_if_not_exists_is_a_syntax_error(con):
    with pytest.raises(AnonSQLError, match="OR REPLACE and IF NOT EXISTS contradict each other"):
        anon_sql.execute(con, CREATE.format(how="OR REPLACE", exists="IF NOT EXISTS", name="lv"))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'lv'").fetchall()[0][0]
