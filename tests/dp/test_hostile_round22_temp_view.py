"""Hostile round 22, Y46: a DP budget or query over a TEMP view of the session was refused as "table vv not found:
create it first" — it exists; now the refusal says it is a TEMP object and what a budget belongs to (exit 2)."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql


@pytest.mark.parametrize("statement", [
    "CREATE PRIVACY BUDGET ON vv WITH (epsilon = 1.0, delta = 1e-5, privacy_unit = 'pid')",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6) COUNT(*) AS n FROM vv"])
def test_a_temp_view_is_named_as_such(statement):
    c = duckdb.connect()
    c.execute("CREATE TABLE v AS SELECT range % 30 AS pid FROM range(300)")
    c.execute("CREATE TEMP VIEW vv AS SELECT * FROM v")
    with pytest.raises(anon_sql.AnonSQLError, match="TEMP table or view of this session") as err:
        anon_sql.execute(c, statement)
    assert getattr(err.value, "exit_code", 2) == 2
