"""Contribution bounding as build_sql plans it (a GROUP BY unit for the cut, a semi-join, sums per (unit, hash))
gives the same per-group statistics as the textbook plan written here as the oracle: every (unit, group) pair
aggregated, a window keeping each unit's m smallest-hash groups. Data with NULL units, NULL groups and values, two
group columns and every aggregate kind; m = 1, 2, 3, 4."""
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

# The window plan (the product's plan before 2026-11-27), kept as an independent oracle.
ORACLE = """
WITH r AS (SELECT person AS u, region AS g0, k2 AS g1, amount AS v FROM events WHERE amount > 5 AND person IS NOT NULL),
pairs AS (SELECT u, g0, g1, count(*) AS n_rows, count(v) AS n_values, sum(v) AS total, avg(v) AS mean FROM r
          GROUP BY u, g0, g1 QUALIFY row_number() OVER (PARTITION BY u ORDER BY hash(u, g0, g1, $salt)) <= $m)
SELECT g0 AS __dp_g0, g1 AS __dp_g1, count(*) AS __dp_units,
       coalesce(sum(least(n_rows, 3)), 0) AS __dp_c0, coalesce(sum(least(n_values, 3)), 0) AS __dp_c1,
       coalesce(sum(greatest(least(coalesce(total, 0), 100), 0)), 0) AS __dp_s2,
       coalesce(sum(greatest(least(mean, 50), 10) - 30), 0) AS __dp_s3, count(mean) AS __dp_n3
FROM pairs GROUP BY g0, g1
"""


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE events AS SELECT CASE WHEN i % 97 = 0 THEN NULL ELSE i % 1000 END AS person, "
              "CASE WHEN i % 13 = 0 THEN NULL ELSE 'r' || (hash(i) % 7) END AS region, i % 3 AS k2, "
              "CASE WHEN i % 11 = 0 THEN NULL ELSE (hash(i * 7) % 200)::DOUBLE END AS amount FROM range(20000) t(i)")
    yield c
    c.close()


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype({c: "float64" for c in frame.columns[2:]})
    return frame.sort_values(list(frame.columns[:2]), ignore_index=True, na_position="first")


@pytest.mark.parametrize("groups", [1, 2, 3, 4])   # 2–3: the iterated cut; 4: the sorted distinct list
@pytest.mark.parametrize("salt", [1, 42, 2 ** 61])
def test_plan_equals_the_window_plan(con, groups, salt):
    q = replace(parse_dp_select(QUERY), max_groups_contributed=groups)
    plan = build_sql(q, exp.table_("events"), "person", salt)
    assert not list(plan.find_all(exp.Window))
    got = _sorted(con.execute(plan.sql(dialect="duckdb")).df())
    expected = _sorted(con.execute(ORACLE, {"salt": salt, "m": groups}).df())
    pd.testing.assert_frame_equal(got, expected)
    # the bound: each unit is in min(its groups, m) released groups
    rows = con.execute("SELECT person, region, k2 FROM events WHERE amount > 5 AND person IS NOT NULL").df()
    per_unit = rows.drop_duplicates().groupby("person").size()
    assert got["__dp_units"].sum() == per_unit.clip(upper=groups).sum()


@pytest.mark.parametrize("groups", [1, 2, 3, 5])
def test_units_with_few_groups_keep_all_of_them(groups):
    """2–3 rows per unit over 6 groups: the bound binds for some units only; a pandas count is the oracle."""
    c = duckdb.connect()
    c.execute("CREATE TABLE events AS SELECT i % 5000 AS person, 'r' || (hash(i) % 3) AS region, i % 2 AS k2, "
              "1.0 AS amount FROM range(12000) t(i)")
    q = replace(parse_dp_select("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-10) region, k2, "
                                "COUNT(*) AS n FROM events GROUP BY region, k2"), max_groups_contributed=groups)
    got = c.execute(build_sql(q, exp.table_("events"), "person", 3).sql(dialect="duckdb")).df()
    rows = c.execute("SELECT person, region, k2 FROM events").df()
    assert got["__dp_units"].sum() == rows.drop_duplicates().groupby("person").size().clip(upper=groups).sum()
