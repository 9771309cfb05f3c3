"""Hostile round 5 (docs/hostile-round-5.md): statement findings, each failing on the code before its fix."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import PolicyError, StatementError
from anon_sql.statements.script import execute


@pytest.mark.parametrize("source", ["read_csv('n.csv')", "read_parquet('n.parquet')", "range(10)"])
def test_a_table_function_as_the_source_is_named_with_the_fix(source):
    """S28: ``FROM read_csv('n.csv')`` was refused as "source must be non-empty text, got ''" (sqlglot's table has no
    name); the message now names the table function and says to quote the path."""
    with pytest.raises(PolicyError, match=r"not a table function; write e\.g\. FROM 'data\.csv'"):
        anon_sql.Policy.from_sql(f"CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(a) FROM {source}")


def test_a_table_function_source_through_a_script_leaves_the_database_as_it_was(tmp_path):
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("CREATE TABLE t AS SELECT range AS a FROM range(20)")
    with pytest.raises(StatementError, match="not a table function") as info:
        execute(con, "CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(a) FROM read_csv('n.csv');")
    assert info.value.exit_code == 2
    assert con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == [("t",)]


def test_a_source_in_an_attached_database_is_named_with_the_fix(tmp_path):
    """S27: ``FROM o.t`` with ``o`` ATTACHed listed the current database's tables without saying why; the message now
    names the attached database and the view to create, and the database is as before."""
    other = duckdb.connect(str(tmp_path / "other.duckdb"))
    other.execute("CREATE TABLE t AS SELECT range AS a FROM range(20)")
    other.close()
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS o")
    with pytest.raises(StatementError, match=r"'o' is an attached database.*CREATE VIEW v AS SELECT \* FROM o\.t"):
        execute(con, "CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(a) FROM o.t;")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'w'").fetchone()[0] == 0
    with pytest.raises(StatementError, match="load it first"):   # an unknown name keeps its message
        execute(con, "CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(a) FROM nosuch;")
