"""Hostile round 12, M27 (docs/hostile-round-12.md, D01, D02, D04): a budgeted view read its people through a table
macro, ``query_table('visits')`` or an attached database's alias, each bound when the query runs; a TEMP ``visits``
(or a re-attached alias) renumbered every row as a person, and ε = 5 was charged for 1,800 "people" out of 300. A
budgeted view may now read only this database's tables and views by name: such a view is refused when its budget
is created, and when it is redefined so after, at the query, before anything is charged."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5) COUNT(*) AS n FROM v"
BUDGET = "CREATE PRIVACY BUDGET ON v WITH (epsilon = 100, delta = 1e-5, privacy_unit = 'pid')"
RENUMBERED = "SELECT row_number() OVER () AS pid, grp, amount FROM real.visits"


@pytest.fixture
def con(tmp_path):
    c = duckdb.connect(str(tmp_path / "db.duckdb"))
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, 'g' || g AS grp, (p * 7 + g * 13) % 100 AS amount "
              "FROM range(300) a(p), range(6) b(g)")
    c.execute("ATTACH ? AS o", [str(tmp_path / "o.duckdb")])
    c.execute("CREATE TABLE o.visits AS SELECT * FROM visits")
    c.execute("CREATE MACRO src() AS TABLE SELECT * FROM visits")
    c.execute("CREATE SCHEMA s2")
    c.execute("CREATE TABLE s2.visits AS SELECT * FROM visits")
    yield c
    c.close()


def ledger(c) -> list:
    """The budgets with their spending (none before the first budget creates the ledger's tables)."""
    if not c.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = "
                     "'privacy_budgets'").fetchall()[0][0]:
        return []
    return c.execute("SELECT table_name, spent_epsilon, queries FROM anon.privacy_budgets ORDER BY ALL").fetchall()


VIEWS = {"table macro (D01)": ("SELECT * FROM src()", "table function SRC()"),
         "query_table (D02)": ("SELECT * FROM query_table('visits')", "table function QUERY_TABLE"),
         "attached alias (D04)": ("SELECT * FROM o.visits", "another database's table o.visits"),
         "nested": ("SELECT * FROM inner_v", "table function QUERY_TABLE")}


@pytest.mark.parametrize("case", list(VIEWS))
def test_m27_a_budget_on_a_view_that_reads_beyond_the_databases_tables_is_refused(con, case):
    sql, named = VIEWS[case]
    con.execute("CREATE VIEW inner_v AS SELECT * FROM query_table('visits')")
    con.execute(f"CREATE VIEW v AS {sql}")
    with pytest.raises(AnonSQLError, match=named):
        anon_sql.execute(con, BUDGET)
    assert ledger(con) == []


@pytest.mark.parametrize("case", ["table macro (D01)", "query_table (D02)", "attached alias (D04)"])
def test_m27_a_view_redefined_after_its_budget_is_refused_at_the_query_and_nothing_is_charged(con, case):
    con.execute("CREATE VIEW v AS SELECT * FROM visits")
    anon_sql.execute(con, BUDGET)
    assert anon_sql.execute(con, QUERY)[-1].frame.shape[0] == 1
    before = ledger(con)
    con.execute(f"CREATE OR REPLACE VIEW v AS {VIEWS[case][0]}")
    with pytest.raises(AnonSQLError, match=VIEWS[case][1]):
        anon_sql.execute(con, QUERY)
    assert ledger(con) == before


def test_d04_the_attack_itself_answers_nothing(con, tmp_path):
    """Round 12's D04 end to end: the owner's view over the attached file, and a session that re-attaches the alias
    to a renumbered in-memory copy. Refused; the ledger is as before."""
    con.execute("DETACH o")
    con.execute("ATTACH ? AS real (READ_ONLY)", [str(tmp_path / "o.duckdb")])
    con.execute("ATTACH ':memory:' AS o")
    con.execute(f"CREATE TABLE o.visits AS {RENUMBERED}")
    con.execute("CREATE VIEW v AS SELECT * FROM o.visits")
    with pytest.raises(AnonSQLError, match="another database"):
        anon_sql.execute(con, BUDGET)
    assert ledger(con) == []


@pytest.mark.parametrize("sql", ["SELECT * FROM visits WHERE amount > 3",
                                 "WITH x AS (SELECT * FROM visits) SELECT * FROM x",
                                 "SELECT * FROM s2.visits", "SELECT * FROM memory.main.visits"])
def test_a_view_over_this_databases_tables_answers_as_before(con, sql):
    con.execute(f"CREATE VIEW v AS {sql.replace('memory.main', con.execute('SELECT current_database()').fetchall()[0][0] + '.main')}")
    anon_sql.execute(con, BUDGET)
    assert anon_sql.execute(con, QUERY)[-1].frame.shape[0] == 1
    assert ledger(con)[0][2] == 1
