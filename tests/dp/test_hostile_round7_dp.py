"""Hostile round 7, D05: a DP query over a view that samples (or calls random()) read other rows in each pass of
the bounding plan, and a person could reach every group although max_groups_contributed = 2. The plan now reads
one copy of the view's rows."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql

from anon_sql.dp import dp_query


# (a view filtering on random() was the second case; since round 15, M38, a budgeted view may call no function DuckDB
# marks other than CONSISTENT: tests/dp/test_hostile_round15_session.py)
@pytest.mark.parametrize("view", ["SELECT * FROM visits USING SAMPLE 50% (bernoulli)"])
def test_a_sampling_view_keeps_each_person_in_at_most_m_groups(view):
    con = duckdb.connect()
    # 300 people, each with one row in each of 6 groups: bounded to m = 2, the counts sum to at most 600
    con.execute("CREATE TABLE visits AS SELECT range % 300 AS pid, (range // 300) % 6 AS grp FROM range(1800)")
    con.execute(f"CREATE VIEW vs AS {view}")
    anon_sql.execute(con, "CREATE PRIVACY BUDGET ON vs WITH (epsilon = 1000, delta = 1e-4, privacy_unit = 'pid')")
    for _ in range(6):
        answer = dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 100, delta = 1e-5, "
                                       "max_groups_contributed = 2) grp, COUNT(*) AS n FROM vs GROUP BY grp")
        # the old plan answered about 150 per group and pass-dependent rows: up to 900; noise at epsilon 100 is ~0.1
        assert answer["n"].sum() <= 600 + 6, answer
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__anon_dp_rows%'"
                           ).fetchall()[0][0]


def test_a_dp_query_reads_a_view_once():
    """The mechanism D05 needs: every pass of the plan reads the same rows. DuckDB's query log shows the view read by
    exactly one statement per query (its rows kept in a TEMP table), however many passes the plan makes (m = 3: four
    on the old code). (A sequence drawn per row in the view's filter counted the reads until round 15, M38, refused
    such views.)"""
    con = duckdb.connect()
    con.execute("CREATE TABLE visits AS SELECT range % 300 AS pid, (range // 300) % 6 AS grp FROM range(1800)")
    con.execute("CREATE VIEW vs AS SELECT * FROM visits")
    anon_sql.execute(con, "CREATE PRIVACY BUDGET ON vs WITH (epsilon = 1000, delta = 1e-4, privacy_unit = 'pid')")
    con.execute("CALL enable_logging('QueryLog')")
    dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 3) "
                  "grp, COUNT(*) AS n FROM vs GROUP BY grp")
    con.execute("CALL disable_logging()")
    logged = [r[0] for r in con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()]
    assert len(logged) > 3
    reads = [m for m in logged if 'FROM "main"."vs"' in m]     # the temporary copy reads it as "vs" after that
    assert len(reads) == 1 and reads[0].startswith("CREATE TEMPORARY TABLE"), reads
