"""Issue 13.4: nothing a release persists depends on the session that made it. After releases from a table, from a
registered DataFrame and with pseudonymized identifiers, a plain ``duckdb`` process (no anon_sql imported) opens the
file and reads every table and view without an error."""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb

import anon_sql
from conftest import load_seed000, seed000_policy

READ_ALL = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
objs = con.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "
                   "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()
errors = {}
for schema, name in objs:
    try:
        con.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchall()
    except duckdb.Error as err:
        errors[f"{schema}.{name}"] = str(err).splitlines()[0]
print(json.dumps({"objects": sorted(f"{s}.{n}" for s, n in objs), "errors": errors}))
"""


def read_every_object(path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", READ_ALL, path], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_reopened_file_has_nothing_broken(tmp_path, monkeypatch):
    db = str(tmp_path / "work.duckdb")
    con = duckdb.connect(db)
    load_seed000(con)
    levels = {"method_params": {"levels": {"zip": 1, "age": 1}}}
    anon_sql.release(con, seed000_policy(name="from_table", **levels))
    frame = con.execute("SELECT * FROM t1").df()
    anon_sql.release(con, {**seed000_policy(name="from_frame", **levels), "source": "ignored"}, source=frame)
    monkeypatch.setenv("ANON_SQL_KEY", "a-very-secret-key-0123456789")
    pol = seed000_policy(name="pseudonymized", **levels)
    pol["attributes"]["row"] = {"role": "identifier", "action": "pseudonymize"}
    anon_sql.release(con, pol)
    mondrian = seed000_policy(name="local", method="mondrian")
    anon_sql.release(con, mondrian)
    con.close()
    found = read_every_object(db)
    assert found["errors"] == {}
    names = set(found["objects"])
    assert {"main.from_table", "main.from_frame", "main.pseudonymized", "main.local"} <= names
    assert "main.from_table__source" in names and "main.from_table__checks" in names   # kept: they read a table
    assert not {"main.from_frame__source", "main.pseudonymized__source"} & names      # session-bound: dropped
    assert not {"main.from_frame__classes", "main.pseudonymized__classes"} & names
    assert {"main.from_table__classes", "main.local__classes"} <= names
