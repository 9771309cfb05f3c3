"""Hostile round 7's related-table findings (docs/hostile-round-7.md), each failing on the code before its fix:

* C08 / C04: `check` of a shared file passed a related table rebuilt with the raw unit key (or an added column);
* C05: every related row duplicated passed; C03: a table added to a shared file passed;
* E03 / E04: a related name starting with ``_`` released ``<release>__classes``, and export then crashed;
* X05: OR REPLACE with another related set left the old related table behind, unowned;
* X07: a user's table carrying the related table's fixed comment was replaced by REFRESH.
"""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from test_units_related import flu, plain_policy
from related_set_fixtures import check, db, shared  # noqa: F401 (db: a fixture)
from units_fixtures import KEY


def test_untouched_shared_set_passes(db, tmp_path):
    res = check(shared(db, tmp_path))
    assert res.exit_code == 0, res.output
    assert "related conditions columns" in res.output and "file contents" in res.output


def test_c08_related_table_rebuilt_with_the_raw_unit_key_fails(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        c.execute(f"ATTACH '{db}' AS src (READ_ONLY)")
        c.execute("CREATE OR REPLACE TABLE synth_conditions AS SELECT s.*, c.PATIENT AS raw_patient "
                  "FROM synth_conditions s JOIN src.main.conditions c USING (visit, DESCRIPTION)")
    res = check(out)
    assert res.exit_code == 3, res.output
    assert "related conditions columns" in res.output and "raw_patient" in res.output


@pytest.mark.parametrize("edit", ["ALTER TABLE synth_conditions ADD COLUMN Id BIGINT",
                                  "ALTER TABLE synth_conditions ALTER visit TYPE VARCHAR",
                                  "ALTER TABLE synth_conditions DROP COLUMN visit"],
                         ids=["added", "retyped", "removed"])
def test_c04_a_changed_related_column_fails_in_the_file_and_in_the_database(db, tmp_path, edit):
    out = shared(db, tmp_path)
    for path in (out, db):
        with duckdb.connect(path) as c:
            c.execute(edit)
        res = check(path)
        assert res.exit_code == 3, (path, res.output)
        assert "related conditions columns" in res.output


def test_c05_duplicated_related_rows_fail(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        c.execute("INSERT INTO synth_conditions SELECT * FROM synth_conditions")
    res = check(out)
    assert res.exit_code == 3 and "related conditions rows" in res.output, res.output


def test_c03_a_table_added_to_a_shared_file_fails(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        c.execute("CREATE TABLE raw_patients AS SELECT 1 AS Id")
        c.execute("CREATE VIEW peek AS SELECT 1 AS x")
    res = check(out)
    assert res.exit_code == 3, res.output
    assert "file contents" in res.output and "raw_patients" in res.output and "peek" in res.output


def test_a_release_without_recorded_related_shapes_fails_those_checks(db):
    """A catalog row whose related_tables was removed (or a release made before it was kept) is not vouched for."""
    with duckdb.connect(db) as c:
        c.execute("UPDATE anon.releases SET related_tables = NULL WHERE release = 'synth'")
        checks = anon_sql.check(c, "synth").set_index("check")
    assert not checks.loc["related conditions columns", "passed"]
    assert not checks.loc["related conditions rows", "passed"]
    assert checks.loc["related conditions", "passed"]


@pytest.mark.parametrize("name", ["_classes", "_metadata", "_units", "_"])
def test_e03_a_related_name_starting_with_underscore_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    p = plain_policy(max_suppression=0.5)
    p["related"] = {name: p["related"]["conditions"]}
    with duckdb.connect() as c:
        anon_sql.install(c)
        flu(c)
        before = c.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        with pytest.raises(anon_sql.PolicyError, match="may not be empty or start with '_'"):
            anon_sql.release(c, p)
        assert c.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == before


def _tables(c) -> set[str]:
    return {r[0] for r in c.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}


def test_x05_replace_with_another_related_set_drops_the_old_table(db):
    with duckdb.connect(db) as c:
        c.execute("CREATE TABLE meds AS SELECT PATIENT, 'aspirin' AS drug FROM conditions")
        p = plain_policy(max_suppression=0.5)
        p["related"] = {"meds": {"source": "meds", "key": "PATIENT", "default_role": "insensitive"}}
        anon_sql.release(c, p, replace=True)
        assert "synth_meds" in _tables(c) and "synth_conditions" not in _tables(c)
        owned = {r[0] for r in c.execute("SELECT object FROM anon.owned_objects WHERE release = 'synth'").fetchall()}
        assert {"synth", "synth_meds"} <= owned
        anon_sql.execute(c, "DROP ANONYMIZED VIEW synth")
        assert not {"synth", "synth_meds", "synth_conditions"} & _tables(c)


def test_x05_a_users_table_under_the_old_related_name_is_never_dropped(db):
    with duckdb.connect(db) as c:
        c.execute("DROP TABLE synth_conditions")
        c.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS x")
        c.execute("CREATE TABLE meds AS SELECT PATIENT, 'aspirin' AS drug FROM conditions")
        p = plain_policy(max_suppression=0.5)
        p["related"] = {"meds": {"source": "meds", "key": "PATIENT", "default_role": "insensitive"}}
        with pytest.raises(anon_sql.PolicyError, match="never drops what it did not create"):
            anon_sql.release(c, p, replace=True)
        assert c.execute("SELECT * FROM synth_conditions").fetchall() == [("mine",)]
        assert "synth_meds" not in _tables(c)


def test_x07_a_users_table_carrying_the_fixed_comment_is_never_replaced(db):
    with duckdb.connect(db) as c:
        c.execute("DROP TABLE synth_conditions")
        c.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS x")
        c.execute("COMMENT ON TABLE synth_conditions IS 'anon_sql related table ''conditions'' of release ''synth'''")
        with pytest.raises(anon_sql.AnonSQLError, match="replaces only what it created"):
            anon_sql.execute(c, "REFRESH ANONYMIZED VIEW synth")
        with pytest.raises(anon_sql.AnonSQLError, match="never drops a table it did not write"):
            anon_sql.execute(c, "DROP ANONYMIZED VIEW synth")
        assert c.execute("SELECT * FROM synth_conditions").fetchall() == [("mine",)]


def test_x07_related_tables_are_recorded_and_refresh_keeps_them_owned(db):
    with duckdb.connect(db) as c:
        marker = c.execute("SELECT marker FROM anon.owned_objects WHERE object = 'synth_conditions'").fetchall()
        comment = c.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'synth_conditions'").fetchall()
        assert marker and marker == comment and marker[0][0].startswith("anon_sql release ")
        anon_sql.execute(c, "REFRESH ANONYMIZED VIEW synth")
        anon_sql.execute(c, "DROP ANONYMIZED VIEW synth")
        assert not {"synth", "synth_conditions"} & _tables(c)
