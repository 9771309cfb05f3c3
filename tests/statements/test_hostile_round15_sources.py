"""Hostile round 15 (docs/hostile-round-15.md). M39: REFRESH read a session's TEMP table named like the release's
source (or a related source) and released the session's rows as the next version, recorded as the database's
source. M40: a release made without a statement whose table was renamed lost its version 1 at the next refresh."""
from __future__ import annotations

import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

POLICY = {"name": "lv", "source": "pt", "method": "levels", "default_role": "insensitive",
          "attributes": {"pid": {"role": "identifier"},
                         "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20]}},
                         "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
          "privacy": {"k": 5}, "method_params": {"levels": {"age": 1, "sex": 0}}}


@pytest.fixture
def con(patients):
    return patients


def state(c) -> tuple:
    return (c.execute("SELECT * FROM lv ORDER BY ALL").fetchall(),
            c.execute("SELECT count(*) FROM anon.release_versions").fetchall(),
            c.execute("SELECT records_in FROM anon.releases WHERE release = 'lv'").fetchall())


@pytest.mark.parametrize("statement", ["REFRESH ANONYMIZED VIEW lv", "REFRESH ANONYMIZED VIEW lv KEEP PLAN"])
def test_m39_a_temp_table_named_like_the_source_refuses_the_refresh(con, statement):
    anon_sql.release(con, POLICY)
    before = state(con)
    con.execute("CREATE TEMP TABLE pt AS SELECT * FROM main.pt WHERE age < 40")
    with pytest.raises(AnonSQLError, match="TEMP table pt of this session shadows the database's source 'pt'"):
        anon_sql.execute(con, statement)
    assert state(con) == before
    con.execute("DROP TABLE temp.main.pt")
    anon_sql.execute(con, statement)          # the TEMP copy gone: refreshed from the database's rows
    assert con.execute("SELECT max(version) FROM anon.release_versions").fetchall()[0][0] == 2


def test_m39_a_temp_table_shadowing_what_the_source_view_reads_refuses_the_release(con):
    con.execute("CREATE VIEW pv AS SELECT * FROM pt")
    con.execute("CREATE TEMP TABLE pt AS SELECT * FROM main.pt WHERE age < 40")
    with pytest.raises(AnonSQLError, match="shadows"):
        anon_sql.release(con, {**POLICY, "source": "pv"})
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'lv'").fetchall()[0][0]


def test_a_source_that_is_only_a_temp_table_is_released(con):
    con.execute("CREATE TEMP TABLE only_here AS SELECT * FROM pt")
    rel = anon_sql.release(con, {**POLICY, "source": "only_here"})
    assert rel.records_in == 500


def test_m39_a_temp_table_shadowing_a_related_source_is_refused(con):
    con.execute("CREATE TABLE visits AS SELECT i % 500 AS pid, 'd' || (i % 7) AS dx FROM range(1500) r(i)")
    policy = {**POLICY, "privacy_unit": "pid",
              "related": {"visits": {"source": "visits", "key": "pid", "default_role": "insensitive"}}}
    con.execute("CREATE TEMP TABLE visits AS SELECT pid, 'secret' AS dx FROM main.visits")
    with pytest.raises(AnonSQLError, match="TEMP table visits of this session shadows the database's source 'visits'"):
        anon_sql.release(con, policy)
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'lv%'").fetchall()[0][0]


@pytest.mark.parametrize("gone", ["ALTER TABLE lv RENAME TO lv_nov", "DROP TABLE lv"])
def test_m40_a_refresh_after_the_table_was_renamed_keeps_version_1(con, gone):
    anon_sql.release(con, POLICY)                        # no statement: version 1 lives in anon.releases only
    first = con.execute("SELECT created_at, records_in FROM anon.releases WHERE release = 'lv'").fetchall()[0]
    con.execute(gone)
    con.execute("INSERT INTO pt SELECT 1000 + i, 30, 'F', 1000 + i FROM range(10) r(i)")
    anon_sql.execute(con, "REFRESH ANONYMIZED VIEW lv")
    rows = con.execute("SELECT version, action, records_in, created_at FROM anon.release_versions "
                       "WHERE release = 'lv' ORDER BY version").fetchall()
    assert [(v, a, n) for v, a, n, _ in rows] == [(1, "create", 500), (2, "refresh", 510)]
    assert str(rows[0][3]) == str(first[0])


def test_a_temp_type_under_a_source_view_refuses_the_refresh(con):                          # round 16, E08
    con.execute("CREATE TYPE agetype AS INTEGER")
    con.execute("CREATE VIEW pv AS SELECT pid, age::agetype AS age, sex FROM pt")
    anon_sql.release(con, {**POLICY, "source": "pv"})
    before = state(con)
    con.execute("CREATE TEMP TYPE agetype AS ENUM ('17', '90')")
    with pytest.raises(AnonSQLError, match="TEMP type agetype of this session shadows what the source view main.pv"):
        anon_sql.execute(con, "REFRESH ANONYMIZED VIEW lv")
    assert state(con) == before


@pytest.mark.parametrize("temp, statement", [
    ("__anon_previous_rows", "REFRESH ANONYMIZED VIEW lv"),
    ("lv__base", "REFRESH ANONYMIZED VIEW lv KEEP PLAN"),
    ("LV__kept", "REFRESH ANONYMIZED VIEW lv"),
    ("__anon_previous_classes", "release"),
])
def test_m48_a_users_temp_table_named_like_a_working_table_is_refused_and_kept(con, temp, statement):
    """Hostile round 17, M48: a user's TEMP table named like a release's working table (`<release>__base`,
    `__anon_previous_rows`, …) was replaced and dropped by a refresh that succeeded and by a refused CREATE."""
    anon_sql.release(con, POLICY)
    con.execute(f"CREATE TEMP TABLE \"{temp}\" AS SELECT 'my session result' AS note")
    before = state(con)
    with pytest.raises(AnonSQLError, match=f"TEMP table {temp} of this session has a name anon_sql keeps"):
        if statement == "release":
            anon_sql.release(con, POLICY, replace=True)
        else:
            anon_sql.execute(con, statement)
    assert con.execute(f'SELECT note FROM temp.main."{temp}"').fetchall() == [("my session result",)]
    assert state(con) == before
