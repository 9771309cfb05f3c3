"""Hostile round 15 (docs/hostile-round-15.md), around round 14's M35 fix. M37: an analyst whose process starts in
another time zone was "at the default" (the default came from a fresh database of the same process); M38: functions
a list of names missed (``in_search_path``, ``txid_current``, ``current_transaction_id``, ``current_query_id``);
M41: a budgeted table whose unit is a generated column reading the session. Each answered 1,200 units for 300 people,
charged. Now: DuckDB's own stability marks decide which functions a budgeted view, its macros and the generated
columns it reads may call; TimeZone and Calendar are pinned; a budgeted table's generated columns are checked."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import duckdb
import pytest

import anon_sql
from anon_sql.data.session import unstable_functions
from anon_sql.errors import AnonSQLError

BUDGET = "CREATE PRIVACY BUDGET ON {t} WITH (epsilon = 100, delta = 1e-5, privacy_unit = '{u}')"
QUERY = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5) COUNT(DISTINCT {u}) AS n FROM {t}"


@pytest.fixture
def con(tmp_path):
    c = duckdb.connect(str(tmp_path / "db.duckdb"))
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, g AS grp, TIMESTAMPTZ '2020-01-01 23:30:00+00' + p * "
              "INTERVAL 1 DAY AS ts FROM range(300) a(p), range(6) b(g)")
    yield c
    c.close()


def no_budget(c) -> bool:
    return not c.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = "
                         "'privacy_budgets'").fetchall()[0][0] or not c.execute(
        "SELECT count(*) FROM anon.privacy_budgets").fetchall()[0][0]


@pytest.mark.parametrize("test", ["in_search_path('m', 'main')", "txid_current() % 2 = 1",
                                  "current_transaction_id() % 2 = 1", "current_query_id() % 2 = 1",
                                  "random() < 0.5", "nextval('s') % 2 = 1", "second(now()) % 2 = 0",
                                  "current_date > DATE '2020-01-01'", "age(ts) > INTERVAL 1 DAY"])
def test_m38_a_view_calling_a_function_duckdb_marks_unstable_is_refused(con, test):
    con.execute("CREATE SEQUENCE s")
    con.execute(f"CREATE VIEW v AS SELECT CASE WHEN {test} THEN pid * 10 + grp % 4 ELSE pid END AS pid FROM visits")
    with pytest.raises(AnonSQLError, match="its result is not the same in every session"):
        anon_sql.execute(con, BUDGET.format(t="v", u="pid"))
    assert no_budget(con)


def test_deterministic_functions_and_columns_named_like_unstable_ones_are_accepted(con):
    con.execute("CREATE TABLE people AS SELECT pid, pid % 90 AS age, pid % 7 AS \"random\" FROM visits")
    con.execute("CREATE VIEW v AS SELECT hash(pid) AS pid, year(ts) AS y, strftime(ts, '%d') AS d, age, \"random\" "
                "FROM visits JOIN people USING (pid)")
    anon_sql.execute(con, BUDGET.format(t="v", u="pid"))
    assert anon_sql.execute(con, QUERY.format(t="v", u="pid"))[-1].frame["n"].iloc[0] > 0


def test_every_function_duckdb_marks_volatile_is_unstable():
    c = duckdb.connect()
    volatile = {r[0] for r in c.execute("SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE "
                                        "stability = 'VOLATILE'").fetchall()}
    zoned_only = {"+", "-"}
    assert volatile - zoned_only <= unstable_functions(c)
    assert {"getvariable", "in_search_path", "txid_current", "random", "now"} <= unstable_functions(c)
    assert not {"hash", "lower", "year", "strftime", "date_part"} & unstable_functions(c)


def test_m37_a_process_in_another_time_zone_is_refused_before_the_charge(con, tmp_path):
    con.execute("CREATE VIEW v AS SELECT CASE WHEN strftime(ts, '%H') = '23' THEN pid ELSE pid * 10 + grp END AS pid "
                "FROM visits")
    anon_sql.execute(con, BUDGET.format(t="v", u="pid"))
    con.close()
    script = textwrap.dedent(f"""
        import duckdb, anon_sql
        c = duckdb.connect({str(tmp_path / 'db.duckdb')!r})
        try:
            anon_sql.execute(c, {QUERY.format(t='v', u='pid')!r})
            print("answered")
        except anon_sql.AnonSQLError as err:
            print("refused:", err)
        print("queries:", c.execute("SELECT queries FROM anon.privacy_budgets").fetchall()[0][0])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TZ": "Pacific/Kiritimati"}).stdout
    assert "refused:" in out and "TimeZone = 'Pacific/Kiritimati'" in out, out
    assert "queries: 0" in out, out


@pytest.mark.parametrize("unit", ["CASE WHEN coalesce(getvariable('split'), false) THEN pid * 10 + grp % 4 "
                                  "ELSE pid END",
                                  "CASE WHEN strftime(ts, '%H') = '23' THEN pid ELSE pid * 10 + grp END"])
def test_m41_a_budgeted_tables_generated_unit_reading_the_session_is_refused(con, unit):
    con.execute(f"CREATE TABLE t (pid BIGINT, grp BIGINT, ts TIMESTAMPTZ, u BIGINT AS ({unit}))")
    con.execute("INSERT INTO t SELECT pid, grp, ts FROM visits")
    if "getvariable" in unit:
        with pytest.raises(AnonSQLError, match=r"getvariable\(\) in the generated column main.t.u"):
            anon_sql.execute(con, BUDGET.format(t="t", u="u"))
        assert no_budget(con)
        return
    anon_sql.execute(con, BUDGET.format(t="t", u="u"))     # a time zone's text: read in UTC, pinned
    spent = con.execute("SELECT spent_epsilon FROM anon.privacy_budgets").fetchall()
    con.execute("SET TimeZone = 'Pacific/Kiritimati'")
    with pytest.raises(AnonSQLError, match="this session's setting TimeZone = 'Pacific/Kiritimati'"):
        anon_sql.execute(con, QUERY.format(t="t", u="u"))
    assert con.execute("SELECT spent_epsilon FROM anon.privacy_budgets").fetchall() == spent


def test_a_table_of_stored_columns_is_read_in_any_time_zone(con):
    anon_sql.execute(con, BUDGET.format(t="visits", u="pid"))
    con.execute("SET TimeZone = 'Pacific/Kiritimati'")
    assert anon_sql.execute(con, QUERY.format(t="visits", u="pid"))[-1].frame["n"].iloc[0] > 0


def test_a_function_the_reading_process_registers_is_refused(con):
    """A Python UDF is listed by DuckDB as built-in and CONSISTENT, yet the analyst's process defines it: a view over
    one would count whatever that process computes."""
    con.create_function("unit_of", lambda p: p, ["BIGINT"], "BIGINT", side_effects=False)
    con.execute("CREATE VIEW v AS SELECT unit_of(pid) AS pid FROM visits")
    with pytest.raises(AnonSQLError, match=r"unit_of\(\) in view main.v"):
        anon_sql.execute(con, BUDGET.format(t="v", u="pid"))
    assert no_budget(con)


def test_e50_a_dp_query_on_a_read_only_database_is_refused_in_one_line(con, tmp_path):
    anon_sql.execute(con, BUDGET.format(t="visits", u="pid"))
    con.close()
    ro = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    with pytest.raises(AnonSQLError, match="a read-only database cannot record; nothing was answered or charged"):
        anon_sql.execute(ro, QUERY.format(t="visits", u="pid"))
    assert ro.execute("SELECT queries FROM anon.privacy_budgets").fetchall() == [(0,)]
    ro.close()


@pytest.mark.parametrize("where", ["view", "macro", "generated column"])
def test_a_temp_type_named_like_the_owners_type_is_refused(con, where):
    """Hostile round 16: the owner's `CREATE TYPE ukey AS BIGINT` cast in a view, a macro or a generated column; the
    analyst's `CREATE TEMP TYPE ukey AS DOUBLE` binds first, the cast keeps fractions, 300 people become 1,200."""
    con.execute("CREATE TYPE ukey AS BIGINT")
    if where == "view":
        con.execute("CREATE VIEW v AS SELECT ((pid * 10 + grp % 4)::DOUBLE / 10)::ukey AS pid, grp FROM visits")
        target, unit = "v", "pid"
    elif where == "macro":
        con.execute("CREATE MACRO f(p, g) AS CASE WHEN 0.5::ukey = 0.5 THEN p * 10 + g % 4 ELSE p END")
        con.execute("CREATE VIEW v AS SELECT f(pid, grp) AS pid, grp FROM visits")
        target, unit = "v", "pid"
    else:
        con.execute("CREATE TABLE g (pid BIGINT, grp BIGINT, u BIGINT AS (CASE WHEN 0.5::ukey = 0.5 "
                    "THEN pid * 10 + grp % 4 ELSE pid END))")
        con.execute("INSERT INTO g SELECT pid, grp FROM visits")
        target, unit = "g", "u"
    anon_sql.execute(con, BUDGET.format(t=target, u=unit))
    assert con.execute(f"SELECT count(DISTINCT {unit}) FROM {target}").fetchall()[0][0] == 300
    con.execute("CREATE TEMP TYPE ukey AS DOUBLE")
    with pytest.raises(AnonSQLError, match="TEMP type ukey of this session"):
        anon_sql.execute(con, QUERY.format(t=target, u=unit))
    assert con.execute("SELECT queries FROM anon.privacy_budgets").fetchall() == [(0,)]


@pytest.mark.parametrize("name, types, result, view", [
    ("greatest", ["BIGINT", "BIGINT"], "BIGINT", "SELECT greatest(pid, grp - 10) AS pid, grp FROM visits"),
    ("hash", ["BIGINT"], "UBIGINT",
     "SELECT CASE WHEN hash(grp) = grp * 10 + 1 THEN pid * 10 + grp % 4 ELSE pid END AS pid, grp FROM visits"),
])
def test_a_udf_overloading_a_builtin_is_refused(con, name, types, result, view):
    """Hostile round 16: a Python UDF registered under a built-in's name adds an overload that wins for its argument
    types; DuckDB lists it as built-in and CONSISTENT. The view is refused, and so is any DP query of that process
    (its own SQL calls hash)."""
    con.execute(f"CREATE VIEW v AS {view}")
    anon_sql.execute(con, BUDGET.format(t="v", u="pid"))
    anon_sql.execute(con, BUDGET.format(t="visits", u="pid"))
    udf = (lambda a, b: a * 10 + 1) if len(types) == 2 else (lambda a: a * 10 + 1)
    con.create_function(name, udf, types, result)
    with pytest.raises(AnonSQLError, match=f"registered its own form of DuckDB's {name}"):
        anon_sql.execute(con, QUERY.format(t="v", u="pid"))
    with pytest.raises(AnonSQLError, match=f"registered its own form of DuckDB's {name}"):
        anon_sql.execute(con, QUERY.format(t="visits", u="pid"))
    assert con.execute("SELECT sum(queries) FROM anon.privacy_budgets").fetchall() == [(0,)]


def test_m49_a_dp_query_on_a_table_refuses_a_changed_sort_order_and_bounds_groups(con):
    """Hostile round 17, M49: the cut of a person's groups (m > 3) sorted with the session's default_order; after
    `SET default_order = 'DESC'` each person kept 9 of 12 groups for m = 4, charged as for 4. The query is refused
    under a changed setting, and the sort order is written out in the SQL."""
    from anon_sql.dp import dp_query

    con.execute("CREATE TABLE twelve AS SELECT p AS pid, g AS grp FROM range(300) a(p), range(12) b(g)")
    anon_sql.execute(con, BUDGET.format(t="twelve", u="pid"))
    q = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 50, delta = 1e-6, max_groups_contributed = 4) "
         "grp, COUNT(*) AS n FROM twelve GROUP BY grp")
    con.execute("SET default_order = 'DESC'")
    with pytest.raises(AnonSQLError, match="this session's setting default_order = 'DESC'"):
        dp_query(con, q)
    assert con.execute("SELECT queries FROM anon.privacy_budgets").fetchall() == [(0,)]
    con.execute("RESET default_order")
    answer = dp_query(con, q)
    assert answer["n"].sum() <= 300 * 4 * 1.1, answer        # about 1,200: 4 groups a person (noise at ε 50 ~ 1)


def test_the_group_cut_writes_its_sort_order(con):
    """The cut for m > 3 sorts each person's hashes with list_sort: the order is written out, not the session's."""
    from anon_sql.dp import dp_query

    con.execute("CREATE TABLE twelve AS SELECT p AS pid, g AS grp FROM range(300) a(p), range(12) b(g)")
    anon_sql.execute(con, BUDGET.format(t="twelve", u="pid"))
    con.execute("CALL enable_logging('QueryLog')")
    dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 50, delta = 1e-6, max_groups_contributed = 5) "
                  "grp, COUNT(*) AS n FROM twelve GROUP BY grp")
    con.execute("CALL disable_logging()")
    logged = [r[0] for r in con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()]
    sorts = [m for m in logged if "LIST_SORT(" in m.upper()]
    assert sorts and all("'ASC', 'NULLS LAST'" in m for m in sorts), sorts
