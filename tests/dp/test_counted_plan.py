"""The counted bounding plan (GROUP BY, max_groups_contributed ≤ 3): kept rows summed per (unit, group) with no
per-unit collision check, and a count of the pairs the cut implies instead. Oracles: a pandas recomputation of the
bounded per-group statistics before noise (DuckDB supplies only each row's hash), the checked plan, and hash
collisions forced by hashing the unit alone."""
from __future__ import annotations

from dataclasses import replace

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from sqlglot import exp

from anon_sql.dp import run
from anon_sql.dp.query import parse_dp_select
from anon_sql.dp.run import bounded_statistics, build_sql

QUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-10, max_groups_contributed = 1, "
         "max_rows_contributed = 3) region, k2, COUNT(*) AS n, COUNT(amount) AS c, "
         "SUM(amount, contribution_bounds_per_group => (0, 100)) AS s, "
         "AVG(amount, contribution_bounds_per_group => (10, 50)) AS a FROM events WHERE amount > 5 GROUP BY region, k2")
EXPECTED = "__dp_expected_pairs"


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE events AS SELECT CASE WHEN i % 97 = 0 THEN NULL ELSE i % 1000 END AS person, "
              "CASE WHEN i % 13 = 0 THEN NULL ELSE 'r' || (hash(i) % 7) END AS region, i % 3 AS k2, "
              "CASE WHEN i % 11 = 0 THEN NULL ELSE (hash(i * 7) % 200)::DOUBLE END AS amount, "
              "i % 7 = 0 AS few FROM range(20000) t(i)")
    yield c
    c.close()


def _query(m: int, where: str = "amount > 5"):
    return replace(parse_dp_select(QUERY.replace("amount > 5", where)), max_groups_contributed=m)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype({c: "float64" for c in frame.columns[2:]})
    return frame.sort_values(list(frame.columns[:2]), ignore_index=True, na_position="first")


def _pandas_oracle(con, m: int, salt: int, where: str) -> tuple[pd.DataFrame, int]:
    """The bounded statistics recomputed in pandas from the rows and DuckDB's hash of (unit, groups, salt): each
    unit keeps the groups of its m smallest distinct hashes; and Σ_units min(m, distinct hashes)."""
    rows = con.execute(f"SELECT person, region, k2, amount, hash(person, region, k2, {salt}) AS h FROM events "
                       f"WHERE ({where}) AND person IS NOT NULL").df()
    rows["h"] = rows["h"].astype("uint64")
    ranks = rows[["person", "h"]].drop_duplicates().sort_values(["person", "h"])
    ranks["rank"] = ranks.groupby("person").cumcount()
    kept = rows.merge(ranks[ranks["rank"] < m], on=["person", "h"])
    pairs = kept.groupby(["person", "region", "k2"], dropna=False).agg(
        rows=("amount", "size"), values=("amount", "count"), total=("amount", "sum"), mean=("amount", "mean"),
        any_value=("amount", lambda v: v.notna().any())).reset_index()
    pairs["total"] = pairs["total"].where(pairs["any_value"], 0.0)
    pairs["s"] = pairs["total"].clip(0, 100)
    pairs["a"] = pairs["mean"].clip(10, 50) - 30
    out = pairs.groupby(["region", "k2"], dropna=False).agg(
        __dp_units=("person", "size"), __dp_c0=("rows", lambda v: np.minimum(v, 3).sum()),
        __dp_c1=("values", lambda v: np.minimum(v, 3).sum()), __dp_s2=("s", "sum"),
        __dp_s3=("a", "sum"), __dp_n3=("a", "count")).reset_index()
    out = out.rename(columns={"region": "__dp_g0", "k2": "__dp_g1"})
    return out, int(ranks.groupby("person").size().clip(upper=m).sum())


@pytest.mark.parametrize("where", ["amount > 5", "few"])   # "few": 2–3 rows per unit, the bound binds for some
@pytest.mark.parametrize("groups", [1, 2, 3])
@pytest.mark.parametrize("salt", [1, 2 ** 61])
def test_counted_plan_is_the_pandas_recomputation(con, groups, salt, where):
    q = _query(groups, where)
    plan = build_sql(q, exp.table_("events"), "person", salt, counted=True)
    assert not list(plan.find_all(exp.Window)) and not list(plan.find_all(exp.Having))
    got = con.execute(plan.sql(dialect="duckdb")).df()
    expected, pairs = _pandas_oracle(con, groups, salt, where)
    assert got[EXPECTED].nunique() == 1 and int(got[EXPECTED].iloc[0]) == pairs == got["__dp_units"].sum()
    pd.testing.assert_frame_equal(_sorted(got.drop(columns=EXPECTED)), _sorted(expected), check_dtype=False)
    checked = con.execute(build_sql(q, exp.table_("events"), "person", salt).sql(dialect="duckdb")).df()
    pd.testing.assert_frame_equal(_sorted(bounded_statistics(con, q, exp.table_("events"), "person", salt)),
                                  _sorted(checked))


def test_larger_bounds_and_no_group_by_keep_the_checked_plan(con):
    for q in (_query(4), parse_dp_select("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n "
                                         "FROM events")):
        assert build_sql(q, exp.table_("events"), "person", 5, counted=True) == \
            build_sql(q, exp.table_("events"), "person", 5)


def _colliding(plan: exp.Select, salt: int) -> str:
    """The plan with every row hashed on (unit, salt) alone: all of a unit's groups collide."""
    text = plan.sql(dialect="duckdb")
    assert text.count(f'HASH("person", region, k2, {salt})') >= 2
    return text.replace(f'HASH("person", region, k2, {salt})', f'HASH("person", {salt})')


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_a_collision_makes_the_count_differ(con, groups):
    """With collisions the counted plan keeps more pairs than its cut implies; the checked plan drops the colliding
    buckets, so no unit is in more than m groups there (pandas count per unit)."""
    q = _query(groups)
    counted = con.execute(_colliding(build_sql(q, exp.table_("events"), "person", 9, counted=True), 9)).df()
    assert counted["__dp_units"].sum() > counted[EXPECTED].iloc[0]
    rows = con.execute("SELECT person, region, k2 FROM events WHERE amount > 5 AND person IS NOT NULL").df()
    distinct = rows.drop_duplicates()
    checked = con.execute(_colliding(build_sql(q, exp.table_("events"), "person", 9), 9)).df()
    # every unit's groups share one hash: only units with a single group survive the check
    assert checked["__dp_units"].sum() == int((distinct.groupby("person").size() == 1).sum())


def test_bounded_statistics_falls_back_on_a_collision(con, monkeypatch):
    """bounded_statistics answers with the checked plan when the count differs, and with the counted plan when not."""
    q, salt = _query(1), 9
    original = run.build_sql
    calls = []

    def colliding_build_sql(*args, counted=False):
        calls.append(counted)
        return sqlglot.parse_one(_colliding(original(*args, counted=counted), salt), read="duckdb")
    monkeypatch.setattr(run, "build_sql", colliding_build_sql)
    got = bounded_statistics(con, q, exp.table_("events"), "person", salt)
    assert calls == [True, False]
    checked = con.execute(_colliding(original(q, exp.table_("events"), "person", salt), salt)).df()
    pd.testing.assert_frame_equal(_sorted(got), _sorted(checked))
    monkeypatch.setattr(run, "build_sql", original)
    calls.clear()
    fast = bounded_statistics(con, q, exp.table_("events"), "person", salt)
    assert EXPECTED not in fast.columns and len(fast.columns) == len(checked.columns)


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_counted_quantile_codes_are_the_checked_ones(con, groups):
    """Without a collision the counted plan keeps the checked plan's pairs: PERCENTILE_CONT's code counts agree."""
    from anon_sql.dp.run import build_quantile_sql
    q = replace(parse_dp_select(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-10, max_rows_contributed = 2) region, "
        "PERCENTILE_CONT(amount, 0.5, contribution_bounds_per_row => (0, 200)) AS q FROM events GROUP BY region"),
        max_groups_contributed=groups)
    a = q.aggregates[0]

    def codes(counted):
        frame = con.execute(build_quantile_sql(q, a, exp.table_("events"), "person", 11, counted)
                            .sql(dialect="duckdb")).df()
        return frame.sort_values(list(frame.columns), ignore_index=True, na_position="first")
    counted, checked = codes(True), codes(False)
    assert counted["__dp_n"].sum() > 0
    pd.testing.assert_frame_equal(counted, checked)
