"""Issue 28.1: ownership by identity, not by name. A user's table that reuses a release's name is never replaced or
dropped — by REFRESH, CREATE OR REPLACE, DROP ANONYMIZED VIEW, or a release with replace (API and CLI) — and the
database is exactly as it was (every table's rows, the catalog included)."""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pytest

import anon_sql
from anon_sql.cli.demo import load_demo_data
from anon_sql.errors import ReleaseExistsError, StatementError
from anon_sql.statements.script import execute

VIEW = """CREATE {replace}ANONYMIZED VIEW adult_k5
WITH (method = 'optimal', seed = 0, k = 5, max_suppression = 0.02, default_role = 'insensitive')
AS SELECT identifier(patient_id), quasi(age, taxonomy => 'adult_age'), quasi(sex, taxonomy => 'adult_sex'),
          quasi(race, taxonomy => 'adult_race'), sensitive(occupation)
FROM adult"""


def state(con) -> dict:
    """Every table of the database (catalog included) with its rows sorted as text, and every table's comment."""
    tables = con.execute("SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE NOT temporary "
                         "ORDER BY ALL").fetchall()
    out = {}
    for schema, table, comment in tables:
        rows = con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()
        out[(schema, table)] = (comment, sorted(map(repr, rows)))
    return out


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "own.duckdb"
    c = duckdb.connect(str(path))
    load_demo_data(c, "adult")
    execute(c, VIEW.format(replace=""))
    yield c
    c.close()


def _users_table(con, how: str) -> None:
    """The user drops the release's table and makes one of their own under its name."""
    if how == "same shape":      # the very rows and columns, copied: a new table all the same
        con.execute("CREATE TABLE keep AS SELECT * FROM adult_k5")
        con.execute("DROP TABLE adult_k5")
        con.execute("CREATE TABLE adult_k5 AS SELECT * FROM keep")
        con.execute("DROP TABLE keep")
    elif how == "other shape":
        con.execute("DROP TABLE adult_k5")
        con.execute("CREATE TABLE adult_k5 AS SELECT 'my notes' AS note, 42 AS n")
    elif how == "added column":  # the release's own table, but the user added data of their own to it
        con.execute("ALTER TABLE adult_k5 ADD COLUMN my_notes VARCHAR DEFAULT 'mine'")


STATEMENTS = ["REFRESH ANONYMIZED VIEW adult_k5", "REFRESH ANONYMIZED VIEW adult_k5 KEEP PLAN",
              VIEW.format(replace="OR REPLACE "), "DROP ANONYMIZED VIEW adult_k5",
              "DROP ANONYMIZED VIEW IF EXISTS adult_k5"]


@pytest.mark.parametrize("how", ["same shape", "other shape", "added column"])
@pytest.mark.parametrize("statement", STATEMENTS, ids=["refresh", "keep-plan", "or-replace", "drop", "drop-if"])
def test_statements_never_touch_a_users_table_of_the_releases_name(db, how, statement):
    _users_table(db, how)
    before = state(db)
    with pytest.raises(StatementError) as err:
        execute(db, statement)
    assert err.value.exit_code == 2
    assert "adult_k5" in str(err.value) and "never replaces or drops" in str(err.value)
    assert state(db) == before


@pytest.mark.parametrize("how", ["same shape", "other shape"])
def test_release_replace_never_touches_a_users_table(db, how):
    row = db.execute("SELECT policy_json FROM anon.releases WHERE release = 'adult_k5'").fetchall()[0][0]
    _users_table(db, how)
    before = state(db)
    with pytest.raises(ReleaseExistsError, match="not the table anon_sql released"):
        anon_sql.release(db, anon_sql.Policy.from_dict(json.loads(row)), replace=True)
    assert state(db) == before


def test_cli_release_replace_exits_2_and_changes_nothing(tmp_path):
    path = tmp_path / "cli.duckdb"
    c = duckdb.connect(str(path))
    load_demo_data(c, "adult")
    execute(c, VIEW.format(replace=""))
    policy = tmp_path / "p.toml"
    policy.write_text(anon_sql.Policy.from_dict(json.loads(c.execute(
        "SELECT policy_json FROM anon.releases WHERE release = 'adult_k5'").fetchall()[0][0])).to_toml())
    _users_table(c, "other shape")
    before = state(c)
    c.close()
    done = subprocess.run([sys.executable, "-m", "anon_sql.cli", "release", str(policy), "--db", str(path),
                           "--replace"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "adult_k5" in done.stderr and "not the table anon_sql released" in done.stderr
    c = duckdb.connect(str(path))
    assert state(c) == before
    c.close()


def test_a_users_plan_table_in_anon_work_is_never_replaced(tmp_path):
    c = duckdb.connect()
    load_demo_data(c, "adult")
    execute(c, VIEW.format(replace="").replace("'optimal'", "'mondrian'"))
    c.execute('DROP TABLE anon_work."adult_k5__assignment"')
    c.execute('CREATE TABLE anon_work."adult_k5__assignment" AS SELECT 1 AS mine')
    before = state(c)
    for statement in ("REFRESH ANONYMIZED VIEW adult_k5", "DROP ANONYMIZED VIEW adult_k5"):
        with pytest.raises(StatementError, match="adult_k5__assignment") as err:
            execute(c, statement)
        assert err.value.exit_code == 2
        assert state(c) == before


def test_the_releases_own_table_is_still_replaced_refreshed_and_dropped_after_a_reopen(db, tmp_path):
    db.close()
    c = duckdb.connect(str(tmp_path / "own.duckdb"))
    [res] = execute(c, "REFRESH ANONYMIZED VIEW adult_k5")
    assert res.value.info["version"]["version"] == 2
    execute(c, VIEW.format(replace="OR REPLACE "))
    # the marker is a comment with a random token, recorded with the shape in anon.owned_objects
    marker = c.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'adult_k5'").fetchall()[0][0]
    assert marker == c.execute("SELECT marker FROM anon.owned_objects WHERE release = 'adult_k5' "
                               "AND object = 'adult_k5'").fetchall()[0][0]
    execute(c, "DROP ANONYMIZED VIEW adult_k5")
    assert c.execute("SELECT count(*) FROM anon.owned_objects").fetchall()[0][0] == 0
    assert c.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult_k5'").fetchall()[0][0] == 0
    c.close()


def test_a_dropped_and_reused_name_is_the_users(db):
    execute(db, "DROP ANONYMIZED VIEW adult_k5")
    db.execute("CREATE TABLE adult_k5 AS SELECT 1 AS mine")
    before = state(db)
    for statement in STATEMENTS[:3]:
        with pytest.raises(StatementError) as err:
            execute(db, statement)
        assert err.value.exit_code == 2
        assert state(db) == before


@pytest.mark.parametrize("edit", [
    "ALTER TABLE adult_k5 RENAME TO mine; CREATE VIEW adult_k5 AS SELECT * FROM mine",   # a view under the name
    "COMMENT ON TABLE adult_k5 IS 'my table now'",                                        # the marker replaced
    "ALTER TABLE adult_k5 ALTER ec_id TYPE DOUBLE",                                       # a column's type changed
], ids=["view", "comment", "type"])
def test_more_ways_a_table_stops_being_the_releases(db, edit):
    db.execute(edit)
    before = state(db)
    for statement in ("REFRESH ANONYMIZED VIEW adult_k5", VIEW.format(replace="OR REPLACE ")):
        with pytest.raises(StatementError) as err:
            execute(db, statement)
        assert err.value.exit_code == 2 and "adult_k5" in str(err.value)
        assert state(db) == before


def test_rows_edited_in_place_are_still_the_releases_table(db):
    """Identity is the marker and the shape: an UPDATE of the release's own rows (which check reports as
    tampering) does not make it the user's table, so a refresh replaces it with a verified version."""
    db.execute("UPDATE adult_k5 SET occupation = 'x'")
    [res] = execute(db, "REFRESH ANONYMIZED VIEW adult_k5")
    assert res.value.info["version"]["version"] == 2
    assert db.execute("SELECT count(*) FROM adult_k5 WHERE occupation = 'x'").fetchall()[0][0] == 0
