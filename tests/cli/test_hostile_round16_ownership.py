"""Hostile round 16 (docs/hostile-round-16.md): M45, `anon-sql demo` replaced its `adult_sample` after the user added a
column and rows to it (the table still carried the demo's comment); M46, `anon-sql init` in a database with a user's
schema `anon` replaced the user's macro and altered their `anon.releases`. Both are refused now, exit 2, nothing
changed."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("change", ["ALTER TABLE adult_sample ADD COLUMN note VARCHAR",
                                    "INSERT INTO adult_sample SELECT * REPLACE (patient_id + 100000 AS patient_id) "
                                    "FROM adult_sample LIMIT 5",
                                    "UPDATE adult_sample SET age = age + 1 WHERE patient_id = 1",
                                    "DELETE FROM adult_sample WHERE patient_id = 2"])
def test_m45_the_demo_never_replaces_its_table_once_the_user_changed_it(tmp_path, monkeypatch, change):
    monkeypatch.chdir(tmp_path)
    assert invoke("demo", "--db", "db.duckdb").exit_code == 0
    assert invoke("demo", "--db", "db.duckdb").exit_code == 0          # unchanged: the demo runs again
    with duckdb.connect("db.duckdb") as c:
        c.execute(change)
        before = c.execute("SELECT * FROM adult_sample ORDER BY ALL").fetchall()
    res = invoke("demo", "--db", "db.duckdb")
    assert res.exit_code == 2 and "has changed since the demo loaded it" in res.output, res.output
    with duckdb.connect("db.duckdb", read_only=True) as c:
        assert c.execute("SELECT * FROM adult_sample ORDER BY ALL").fetchall() == before


def test_m46_init_refuses_a_users_schema_anon(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with duckdb.connect("u.duckdb") as c:
        c.execute("CREATE SCHEMA anon; CREATE MACRO anon.capped_sum(x) AS 42; CREATE TABLE anon.releases(x INT); "
                  "INSERT INTO anon.releases VALUES (7)")
    res = invoke("init", "--db", "u.duckdb")
    assert res.exit_code == 2 and "is not anon_sql's catalog" in res.output, res.output
    with duckdb.connect("u.duckdb", read_only=True) as c:
        assert c.execute("SELECT macro_definition FROM duckdb_functions() WHERE function_name = 'capped_sum'"
                         ).fetchall() == [("42",)]
        assert c.execute("SELECT * FROM anon.releases").fetchall() == [(7,)]


def test_an_empty_schema_anon_takes_the_catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with duckdb.connect("e.duckdb") as c:
        c.execute("CREATE SCHEMA anon")
    assert invoke("init", "--db", "e.duckdb").exit_code == 0
    assert invoke("init", "--db", "e.duckdb").exit_code == 0              # its own catalog: idempotent
