"""Hostile round 13 (docs/hostile-round-13.md): two ways around round 12's budgeted-view fixes. M32 (D10): the unit
mapping macro named `normalize`, a function sqlglot knows, was read as that function and not as the owner's macro,
so a TEMP copy of its table split every person. M33 (D11): `FROM 'visits.csv'` was taken for a table, and the path
binds to the folder the query runs in. Both are refused now, before anything is charged."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

BUDGET = "CREATE PRIVACY BUDGET ON v WITH (epsilon = 100, delta = 1e-5, privacy_unit = 'pid')"


@pytest.fixture
def con(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = duckdb.connect(str(tmp_path / "db.duckdb"))
    anon_sql.install(c)
    c.execute("CREATE TABLE visits AS SELECT p AS pid, 'g' || g AS grp, (p * 7 + g * 13) % 100 AS amount "
              "FROM range(300) a(p), range(6) b(g)")
    yield c
    c.close()


def budgets(c) -> int:
    return c.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = "
                     "'privacy_budgets'").fetchall()[0][0] and c.execute(
        "SELECT count(*) FROM anon.privacy_budgets").fetchall()[0][0]


@pytest.mark.parametrize("macro", ["normalize", "left", "Unit_Of"])
def test_m32_a_macro_reading_a_table_is_found_whatever_its_name(con, macro):
    con.execute("CREATE TABLE pmap AS SELECT DISTINCT pid, grp, pid AS unit FROM visits")
    con.execute(f'CREATE MACRO "{macro}"(p, g) AS (SELECT max(unit) FROM pmap WHERE pid = p AND grp = g)')
    con.execute(f'CREATE VIEW v AS SELECT "{macro}"(pid, grp) AS pid, grp, amount FROM visits')
    with pytest.raises(AnonSQLError, match="whose body reads a table"):
        anon_sql.execute(con, BUDGET)
    assert not budgets(con)


def test_m33_a_view_over_a_file_path_is_refused(con, tmp_path):
    con.execute("COPY visits TO 'visits.csv'")
    con.execute("CREATE VIEW v AS SELECT * FROM 'visits.csv'")
    with pytest.raises(AnonSQLError, match="'visits.csv', which is no table or view of this database"):
        anon_sql.execute(con, BUDGET)
    assert not budgets(con)
