"""Hostile round 11, M21 (docs/hostile-round-11.md, H80, H80c): a budget on a view, and a TEMP table (or TEMP macro)
named like what the view reads: DuckDB binds the view's names when it is read, so the DP query answered over the
TEMP data — 1,800 rows renumbered as 1,800 people, ε = 5 charged where each real person gave six rows. Refused now
before anything is charged; without a shadow the view answers as before."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.0) COUNT(*) AS n FROM v"


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, v AS grp, 20 + p % 50 AS age FROM range(300) a(p), range(6) b(v)")
    c.execute("CREATE MACRO adult(x) AS x >= 0")
    c.execute("CREATE VIEW v AS SELECT * FROM visits WHERE adult(age)")
    anon_sql.execute(c, "CREATE PRIVACY BUDGET ON v WITH (epsilon = 10, delta = 1e-4, privacy_unit = 'pid')")
    yield c
    c.close()


def spent(c) -> list:
    return c.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall()


@pytest.mark.parametrize("shadow, named", [
    ("CREATE TEMP TABLE visits AS SELECT row_number() OVER () AS pid, grp, age FROM main.visits", "TEMP table visits"),
    ("CREATE TEMP VIEW visits AS SELECT row_number() OVER () AS pid, grp, age FROM main.visits", "TEMP view visits"),
    ("CREATE TEMP MACRO adult(x) AS x >= 0 AND random() < 2", "TEMP macro adult"),
], ids=["temp-table", "temp-view", "temp-macro"])
def test_h80_a_dp_query_over_a_view_whose_inputs_a_temp_object_shadows_is_refused(con, shadow, named):
    before = spent(con)
    con.execute(shadow)
    with pytest.raises(AnonSQLError, match=named):
        anon_sql.execute(con, QUERY)
    assert spent(con) == before


def test_without_a_shadow_the_budgeted_view_answers(con):
    anon_sql.execute(con, QUERY)
    assert spent(con)[0][1] == 1


def test_a_view_sqlglot_cannot_read_is_refused(con):
    """`keep` is a keyword to sqlglot: the view's inputs cannot be listed, so any TEMP object of the session may be
    one of them (refused, naming it) and so may a table function or another database's table (round 12, M27:
    refused without one too, before the budget is created)."""
    con.execute("CREATE MACRO keep(x) AS x >= 0")
    con.execute("CREATE VIEW w AS SELECT * FROM visits WHERE keep(age)")
    with pytest.raises(AnonSQLError, match="SQL, which anon_sql cannot read"):
        anon_sql.execute(con, "CREATE PRIVACY BUDGET ON w WITH (epsilon = 10, delta = 1e-4, privacy_unit = 'pid')")
    assert con.execute("SELECT count(*) FROM anon.privacy_budgets WHERE table_name LIKE '%w'").fetchall() == [(0,)]
