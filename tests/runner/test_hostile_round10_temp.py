"""Hostile round 10's M12 (docs/hostile-round-10.md): the product looked a name up in the database and then ran SQL
that DuckDB binds to the session's TEMP object of that name first. A DP query over a TEMP view renumbering the unit
was answered and charged to the budgeted table (A08, A08b); DROP ANONYMIZED VIEW dropped the user's TEMP table and
left the release outside the catalog (O10, O13); CHECK vouched for a TEMP copy (A01); the `masks` row re-derived
masks from a TEMP "source" crafted to cover edited values (B10). Each is refused now, with nothing changed or
charged; each test fails on the code before.
"""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import AnonSQLError, SourceError
from related_set_fixtures import db  # noqa: F401  (the related set `synth`)

VISITS = """CREATE TABLE visits AS SELECT p AS pid, v AS grp, 20 + p % 50 AS age, 10.0 AS amount
  FROM range(300) a(p), range(6) b(v)"""
LV = """CREATE ANONYMIZED VIEW lv WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0}}) AS
  SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}), identifier(card) FROM people"""


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute(VISITS)
    anon_sql.execute(c, "CREATE PRIVACY BUDGET ON visits WITH (epsilon = 100, delta = 1e-4, privacy_unit = 'pid')")
    c.execute("CREATE TABLE people AS SELECT i AS pid, 30 + (i % 3) * 10 AS age, '4111' || lpad(i::VARCHAR, 12, '0') AS card "
              "FROM range(60) t(i)")
    yield c
    c.close()


def spent(c) -> list:
    return c.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall()


@pytest.mark.parametrize("shadow, query_from", [
    ("CREATE TEMP VIEW visits AS SELECT row_number() OVER () AS pid, grp, age, amount FROM main.visits", "visits"),
    ("CREATE TEMP TABLE visits AS SELECT row_number() OVER () AS pid, grp, age, amount FROM main.visits",
     "main.visits")])
def test_a08_a_dp_query_under_a_temp_shadow_is_refused_before_charging(con, shadow, query_from):
    before = spent(con)
    con.execute(shadow)
    with pytest.raises(AnonSQLError, match="TEMP"):
        anon_sql.execute(con, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5, delta = 1e-6) COUNT(*) AS n "
                              f"FROM {query_from}")
    assert spent(con) == before
    assert con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall()[0][0] == 0


def test_o10_drop_with_a_temp_table_of_the_name_is_refused_and_keeps_both(con):
    anon_sql.execute(con, LV)
    con.execute("CREATE TEMP TABLE lv AS SELECT 'mine' AS note")
    with pytest.raises(AnonSQLError, match="TEMP table lv"):
        anon_sql.execute(con, "DROP ANONYMIZED VIEW lv")
    assert con.execute("SELECT note FROM temp.main.lv").fetchall() == [("mine",)]
    assert con.execute("SELECT count(*) FROM memory.main.lv").fetchall() == [(60,)]
    assert con.execute("SELECT count(*) FROM anon.releases WHERE release = 'lv'").fetchall() == [(1,)]
    with pytest.raises(AnonSQLError, match="TEMP table lv"):
        anon_sql.execute(con, "REFRESH ANONYMIZED VIEW lv")
    with pytest.raises(AnonSQLError, match="TEMP table lv"):   # A01: check would read the TEMP copy
        anon_sql.check(con, "lv")


def test_o13_a_temp_table_named_like_a_related_table_stops_the_drop(db):  # noqa: F811
    with duckdb.connect(db) as c:
        c.execute("CREATE TEMP TABLE synth_conditions AS SELECT 1 AS mine")
        with pytest.raises(AnonSQLError, match="TEMP table synth_conditions"):
            anon_sql.execute(c, "DROP ANONYMIZED VIEW synth")
        assert c.execute("SELECT mine FROM temp.main.synth_conditions").fetchall() == [(1,)]
        assert c.execute("SELECT count(*) FROM anon.releases WHERE release = 'synth'").fetchall() == [(1,)]


def test_b10_masks_are_never_re_derived_from_a_temp_source(con):
    anon_sql.execute(con, "CREATE ANONYMIZED VIEW cm WITH (k = 5, method = 'levels', method_params = {'levels': "
                          "{'age': 0}}) AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}), "
                          "insensitive(card, mask => {'function': 'partial', 'keep_start': 2, 'pad': 'XXXX', "
                          "'keep_end': 2}) FROM people")
    assert anon_sql.check(con, "cm")["passed"].all()
    con.execute("UPDATE cm SET card = substr(card, 1, 2) || 'XXXX' || '00'")
    con.execute("CREATE TEMP TABLE people AS SELECT pid, age, substr(card, 1, 2) || '000000000000' || '00' AS card "
                "FROM main.people")
    frame = anon_sql.check(con, "cm").set_index("check")
    assert not frame.loc["masks card", "passed"] and "TEMP table people" in frame.loc["masks card", "message"]
