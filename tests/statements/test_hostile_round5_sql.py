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
