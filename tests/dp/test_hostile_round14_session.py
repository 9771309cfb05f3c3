"""Hostile round 14 (docs/hostile-round-14.md), M35: a budgeted view (or a macro it calls) that reads the session —
``getvariable`` after ``SET VARIABLE``, ``current_setting``, a TIMESTAMPTZ's text after ``SET TimeZone`` — let the
analyst split each of 300 people into ~4 units while the budget was charged as for people. Such a view is refused at
CREATE PRIVACY BUDGET, and a session whose settings differ from DuckDB's defaults (other than tuning) is refused
before a query on a budgeted view is charged."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.data.session import changed_settings
from anon_sql.errors import AnonSQLError

BUDGET = "CREATE PRIVACY BUDGET ON v WITH (epsilon = 100, delta = 1e-5, privacy_unit = 'pid')"
QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5) COUNT(DISTINCT pid) AS n FROM v"


@pytest.fixture
def con(tmp_path):
    c = duckdb.connect(str(tmp_path / "db.duckdb"))
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, 'g' || g AS grp, (p * 7 + g * 13) % 100 AS amount, "
              "TIMESTAMPTZ '2020-01-01 00:30:00+00' + p * INTERVAL 1 HOUR AS ts FROM range(300) a(p), range(6) b(g)")
    yield c
    c.close()


def spent(c) -> tuple:
    return c.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets WHERE dropped_at IS NULL").fetchall()


def no_budget(c) -> bool:
    exists = c.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = "
                       "'privacy_budgets'").fetchall()[0][0]
    return not exists or not c.execute("SELECT count(*) FROM anon.privacy_budgets").fetchall()[0][0]


@pytest.mark.parametrize("unit", [
    "CASE WHEN coalesce(getvariable('split'), false) THEN pid * 10 + (hash(grp) % 6)::BIGINT ELSE pid END",   # V01
    """CASE WHEN coalesce("GetVariable"('split'), false) THEN pid * 10 ELSE pid END""",                       # quoted
    "CASE WHEN current_setting('TimeZone') = 'UTC' THEN pid * 10 + (hash(grp) % 6)::BIGINT ELSE pid END",  # V02
    "CASE WHEN current_query() LIKE '%split%' THEN pid * 10 ELSE pid END",
])
def test_a_view_reading_the_session_is_refused_before_any_budget(con, unit):
    con.execute(f"CREATE VIEW v AS SELECT {unit} AS pid, grp, amount FROM visits")
    with pytest.raises(AnonSQLError, match="its result is not the same in every session"):
        anon_sql.execute(con, BUDGET)
    assert no_budget(con)


def test_a_macro_the_view_calls_that_reads_a_variable_is_refused(con):                                    # V11
    con.execute("CREATE MACRO inner_sp(p, g) AS CASE WHEN coalesce(getvariable('sp'), false) "
                "THEN p * 10 + (hash(g) % 6)::BIGINT ELSE p END")
    con.execute("CREATE MACRO sp(p, g) AS inner_sp(p, g)")          # reached through a second macro
    con.execute("CREATE VIEW v AS SELECT sp(pid, grp) AS pid, amount FROM visits")
    with pytest.raises(AnonSQLError, match=r"getvariable\(\) in the macro inner_sp"):
        anon_sql.execute(con, BUDGET)
    assert no_budget(con)


def test_a_session_function_named_in_a_string_is_no_call(con):
    con.execute("CREATE VIEW v AS SELECT pid, 'getvariable' AS note, amount FROM visits")
    anon_sql.execute(con, BUDGET)
    assert anon_sql.execute(con, QUERY)[-1].frame["n"].iloc[0] > 0


def test_a_changed_setting_is_refused_before_the_charge_and_reset_answers(con):                       # V02b
    con.execute("CREATE VIEW v AS SELECT CAST(ts AS VARCHAR) AS ts_text, pid, amount FROM visits")
    anon_sql.execute(con, BUDGET)
    before = spent(con)
    for statement in ["SET TimeZone = 'Asia/Tokyo'", "SET GLOBAL TimeZone = 'America/Lima'",
                      "SET integer_division = true", "SET default_collation = 'nocase'"]:
        con.execute(statement)
        name = statement.split()[-3]
        with pytest.raises(AnonSQLError, match=f"this session's setting {name} = "):
            anon_sql.execute(con, QUERY)
        assert spent(con) == before, statement        # nothing charged
        con.execute(f"RESET {name}")
        if "GLOBAL" in statement:
            con.execute(f"RESET GLOBAL {name}")
    con.execute("SET threads = 1")                     # tuning: answered as before
    anon_sql.execute(con, QUERY)
    assert spent(con)[0][1] == before[0][1] + 1


def test_a_budget_on_a_table_does_not_depend_on_settings(con):
    anon_sql.execute(con, BUDGET.replace(" v ", " visits "))
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    assert anon_sql.execute(con, QUERY.replace("FROM v", "FROM visits"))[-1].frame["n"].iloc[0] > 0


@pytest.mark.parametrize("statement", [
    "SET TimeZone = 'Asia/Tokyo'", "SET Calendar = 'japanese'", "SET default_collation = 'nocase'",
    "SET integer_division = true", "SET default_order = 'DESC'", "SET default_null_order = 'NULLS_FIRST'",
    "SET preserve_insertion_order = false", "SET ieee_floating_point_ops = false",
    "SET order_by_non_integer_literal = true", "SET scalar_subquery_error_on_multiple_rows = false",
])
def test_settings_that_change_what_a_query_returns_are_not_tuning(statement):
    c = duckdb.connect()
    name = statement.split()[1]
    if not c.execute("SELECT count(*) FROM duckdb_settings() WHERE name = ?", [name]).fetchall()[0][0]:
        pytest.skip(f"this DuckDB has no setting {name}")
    assert changed_settings(c) == []
    c.execute(statement)
    assert name in [s.split(" = ")[0] for s in changed_settings(c)]
