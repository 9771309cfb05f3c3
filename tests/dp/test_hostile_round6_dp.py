"""Hostile round 6, D50/D51: a DP query's WHERE, arguments and FROM must read the same rows on every pass of the
bounding plan. `WHERE random() < 0.5` let a unit of 6 groups reach 6 of them with max_groups_contributed = 2 (the
plan reads the rows once per pass, each read drew other rows); USING SAMPLE was silently ignored."""
from __future__ import annotations

import duckdb
import pytest

from anon_sql.dp import create_budget, dp_query, show_budgets
from anon_sql.errors import PolicyError

HEAD = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5, delta = 1e-6, max_groups_contributed = 2) "


@pytest.fixture
def con():
    con = duckdb.connect()
    # 300 people, each with one row in each of 6 groups
    con.execute("CREATE TABLE v AS SELECT p AS pid, 'g' || (r % 6)::VARCHAR AS grp, (p * 7 + r) % 100 AS amount "
                "FROM range(300) t(p), range(6) s(r)")
    create_budget(con, "v", epsilon=100, delta=1e-5, privacy_unit="pid")
    yield con
    con.close()


@pytest.mark.parametrize("where", ["random() < 0.5", "uuid()::VARCHAR < '8'", "gen_random_uuid()::VARCHAR > '4'",
                                   "setseed(0.5) IS NULL", "RANDOM() < 0.9 AND amount > 3"])
def test_a_volatile_where_is_refused_and_nothing_is_charged(con, where):
    with pytest.raises(PolicyError, match="volatile"):
        dp_query(con, HEAD + f"grp, COUNT(*) AS n FROM v WHERE {where} GROUP BY grp")
    assert show_budgets(con).loc[0, "queries"] == 0


def test_a_volatile_argument_is_refused(con):
    with pytest.raises(PolicyError, match="volatile"):
        dp_query(con, HEAD + "grp, SUM(amount * random(), contribution_bounds_per_group => (0, 10)) AS s "
                             "FROM v GROUP BY grp")


def test_a_macro_is_refused_its_body_is_not_checked(con):
    con.execute("CREATE MACRO coin() AS random() < 0.5")
    with pytest.raises(PolicyError, match="coin.*macro"):
        dp_query(con, HEAD + "grp, COUNT(*) AS n FROM v WHERE coin() GROUP BY grp")
    assert show_budgets(con).loc[0, "queries"] == 0


@pytest.mark.parametrize("source", ["v USING SAMPLE 50%", "v TABLESAMPLE BERNOULLI(10)"])
def test_a_sample_is_refused_not_ignored(con, source):
    with pytest.raises(PolicyError, match="SAMPLE"):
        dp_query(con, HEAD + f"grp, COUNT(*) AS n FROM {source} GROUP BY grp")


def test_a_consistent_function_still_answers(con):
    answer = dp_query(con, HEAD + "grp, COUNT(*) AS n FROM v WHERE hash(pid) % 2 = 0 AND abs(amount) >= 0 "
                                  "GROUP BY grp")
    assert set(answer.columns) == {"grp", "n"}
    assert show_budgets(con).loc[0, "queries"] == 1
