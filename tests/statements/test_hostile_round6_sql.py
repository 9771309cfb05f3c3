"""Hostile round 6, S38/S43: a SQL policy's SELECT clauses that were dropped silently. `... FROM visits WHERE age > 35`
released every age (30-42), and `FROM o.main.visits` (o ATTACHed) released the current database's main.visits."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import StatementError

HEAD = "CREATE ANONYMIZED VIEW r1 WITH (method = 'mondrian', k = 5, default_role = 'insensitive') AS SELECT quasi(age), sensitive(grp) FROM "


@pytest.fixture
def con(tmp_path):
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("CREATE TABLE visits AS SELECT p AS pid, 'g' || (r % 6)::VARCHAR AS grp, 30 + (p % 13) AS age "
                "FROM range(300) t(p), range(6) s(r)")
    yield con
    con.close()


def _objects(con):
    return con.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


@pytest.mark.parametrize("tail, clause", [("visits WHERE age > 35", "WHERE"), ("visits LIMIT 10", "LIMIT"),
                                          ("visits ORDER BY age", "ORDER"), ("visits USING SAMPLE 10%", "SAMPLE"),
                                          ("visits v JOIN visits w ON v.pid = w.pid", "JOINS"),
                                          ("visits GROUP BY age, grp", "GROUP")])
def test_a_clause_the_policy_cannot_apply_is_refused_not_dropped(con, tail, clause):
    before = _objects(con)
    with pytest.raises(StatementError, match=f"found: {clause}.*CREATE VIEW") as info:
        anon_sql.execute(con, HEAD + tail)
    assert info.value.exit_code == 2
    assert _objects(con) == before


def test_a_filter_through_a_view_releases_only_its_rows(con):
    anon_sql.execute(con, "CREATE VIEW older AS SELECT * FROM visits WHERE age > 35; " + HEAD + "older")
    assert con.execute("SELECT count(*) FROM r1").fetchone()[0] == con.execute(
        "SELECT count(*) FROM visits WHERE age > 35").fetchone()[0]


def test_another_databases_table_is_refused_not_read_from_the_current_one(con, tmp_path):
    other = duckdb.connect(str(tmp_path / "o.duckdb"))
    other.execute("CREATE TABLE visits AS SELECT 1 AS pid, 'x' AS grp, 99 AS age")
    other.close()
    con.execute(f"ATTACH '{tmp_path / 'o.duckdb'}' AS o (READ_ONLY)")
    with pytest.raises(StatementError, match=r"FROM o\.main\.visits.*CREATE VIEW"):
        anon_sql.execute(con, HEAD + "o.main.visits")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'r1'").fetchone()[0] == 0
