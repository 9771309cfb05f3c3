"""The one-group-per-unit plan (max_groups_contributed = 1: a GROUP BY unit over a row hash, no window) bounds
exactly like the general plan (a window keeping each unit's m smallest-hash groups) run with m = 1: same per-group
statistics before noise, on data with NULL units, NULL groups, two group columns and every aggregate kind."""
from __future__ import annotations

from dataclasses import replace

import duckdb
import pandas as pd
import pytest
from sqlglot import exp

from anon_sql.dp.query import parse_dp_select
from anon_sql.dp.run import build_sql

QUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-10, max_groups_contributed = 1, "
         "max_rows_contributed = 3) region, k2, COUNT(*) AS n, COUNT(amount) AS c, "
         "SUM(amount, contribution_bounds_per_group => (0, 100)) AS s, "
         "AVG(amount, contribution_bounds_per_group => (10, 50)) AS a FROM events WHERE amount > 5 GROUP BY region, k2")


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE events AS SELECT CASE WHEN i % 97 = 0 THEN NULL ELSE i % 1000 END AS person, "
              "CASE WHEN i % 13 = 0 THEN NULL ELSE 'r' || (hash(i) % 7) END AS region, i % 3 AS k2, "
              "CASE WHEN i % 11 = 0 THEN NULL ELSE (hash(i * 7) % 200)::DOUBLE END AS amount FROM range(20000) t(i)")
    yield c
    c.close()


def _frame(con, sql: str) -> pd.DataFrame:
    frame = con.execute(sql).df()
    return frame.sort_values(list(frame.columns[:2]), ignore_index=True, na_position="first")


@pytest.mark.parametrize("salt", [1, 42, 2 ** 61])
def test_one_group_plan_equals_the_window_plan_at_m_1(con, salt):
    q = parse_dp_select(QUERY)
    fast = build_sql(q, exp.table_("events"), "person", salt)
    assert not list(fast.find_all(exp.Window))
    general = build_sql(replace(q, max_groups_contributed=2), exp.table_("events"), "person", salt)
    for node in general.find_all(exp.LTE):     # the window plan, keeping one group per unit
        node.set("expression", exp.convert(1))
    a, b = _frame(con, fast.sql(dialect="duckdb")), _frame(con, general.sql(dialect="duckdb"))
    pd.testing.assert_frame_equal(a, b)
    # and the bound holds: each unit is in exactly one released group (units counted once over all groups)
    units = con.execute("SELECT count(DISTINCT person) FROM events WHERE amount > 5").fetchall()[0][0]
    assert a["__dp_units"].sum() == units
