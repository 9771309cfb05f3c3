"""Statistical guarantees of DP queries: interval coverage, partition selection, contribution bounding, an
empirical privacy audit on neighbouring datasets, and agreement with OpenDP computing the measurement directly."""
from __future__ import annotations

import math

import duckdb
import numpy as np
import opendp.prelude as dp
import pytest
import sqlglot
from sqlglot import exp

from anon_sql.dp import create_budget, dp_query
from anon_sql.dp import mechanisms
from anon_sql.dp.query import parse_dp_select
from anon_sql.dp.run import build_sql, plan_budget

dp.enable_features("contrib")


def _groups_table(con, groups: int, people: int) -> None:
    """`groups` groups of `people` units, one row per unit, value v in 0..99."""
    con.execute("CREATE TABLE t AS SELECT g * 1000 + u AS pid, g, (g * 37 + u * 11) % 100 AS v "
                "FROM range(?) a(g), range(?) b(u)", [groups, people])


def test_interval_coverage_is_about_95_percent():
    """1000 groups in one query: each group's interval is an independent trial."""
    con = duckdb.connect()
    _groups_table(con, 1000, 200)
    create_budget(con, "t", epsilon=100.0, delta=1e-6, privacy_unit="pid")
    # ε = 0.8 over 4 parts: count scale 5 (coarse enough that integer noise covers ≈ 95 %, not far more)
    answer = dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.8, delta = 1e-7, intervals = 0.95) "
                           "g, COUNT(*) AS n, SUM(v, contribution_bounds_per_group => (0, 100)) AS s, "
                           "AVG(v, contribution_bounds_per_group => (0, 100)) AS a FROM t GROUP BY g")
    truth = con.execute("SELECT g, count(*) AS n, sum(v) AS s, avg(v) AS a FROM t GROUP BY g").df()
    merged = answer.merge(truth, on="g", suffixes=("", "_true"))
    assert len(merged) >= 990  # 200 people per group, far above the threshold (~80)
    coverage = {c: ((merged[f"{c}_low"] <= merged[f"{c}_true"]) & (merged[f"{c}_true"] <= merged[f"{c}_high"])).mean()
                for c in ("n", "s", "a")}
    # binomial sd over 1000 trials ≈ 0.007: ±0.025 is > 3 sd; discrete Laplace covers a little more than 95 %
    assert 0.925 <= coverage["n"] <= 0.975, coverage
    assert 0.925 <= coverage["s"] <= 0.975, coverage
    assert coverage["a"] >= 0.93, coverage  # the union bound makes AVG's interval conservative
    con.close()


def test_a_one_person_group_almost_never_appears():
    """2000 groups held by one person (with 200 rows each) next to big groups: at δ = 1e-6 none is released."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT u AS pid, 'big' || (u % 3) AS g FROM range(3000) a(u) "
                "UNION ALL SELECT 100000 + u, 'alone' || u FROM range(2000) a(u), range(200) b(r)")
    create_budget(con, "t", epsilon=100.0, delta=1e-5, privacy_unit="pid")
    answer = dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                           "max_rows_contributed = 200) g, COUNT(*) AS n FROM t GROUP BY g")
    assert sorted(answer["g"]) == ["big0", "big1", "big2"]
    con.close()


def test_one_person_with_200_rows_moves_a_count_by_at_most_the_bound():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT u AS pid, u % 2 AS g FROM range(100) a(u)")
    con.execute("CREATE TABLE t2 AS SELECT * FROM t UNION ALL SELECT 999, r % 2 FROM range(200) a(r)")
    for bound, text in ((1, "COUNT(*)"), (5, "COUNT(*, contribution_bounds_per_group => (0, 5))")):
        for groups in (1, 2):
            q = parse_dp_select(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                                f"max_groups_contributed = {groups}) g, {text} AS n FROM t GROUP BY g")
            before = con.execute(build_sql(q, exp.to_table("t"), "pid", 1).sql("duckdb")).df()
            after = con.execute(build_sql(q, exp.to_table("t2"), "pid", 1).sql("duckdb")).df()
            moved = (after.set_index("__dp_g0")["__dp_c0"] - before.set_index("__dp_g0")["__dp_c0"]).abs()
            assert moved.sum() == groups * bound and moved.max() == bound
    # end to end, with ε so large that the discrete Laplace noise is 0: the person adds exactly one row
    create_budget(con, "t2", epsilon=1e6, delta=1e-5, privacy_unit="pid")
    answer = dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e5) COUNT(*) AS n FROM t2")
    assert answer["n"].tolist() == [101]
    con.close()


def test_empirical_audit_of_count_on_neighbouring_datasets():
    """D and D' differ in one unit (with 200 rows). The query's own SQL gives the bounded counts, the query's plan
    its sensitivity and ε; OpenDP draws 200,000 answers for each; ε is estimated from the histograms."""
    con = duckdb.connect()
    con.execute("CREATE TABLE d AS SELECT u AS pid FROM range(500) a(u)")
    con.execute("CREATE TABLE d2 AS SELECT * FROM d UNION ALL SELECT 999 FROM range(200)")
    q = parse_dp_select("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM d")
    _, _, parts = plan_budget(q)
    (part, epsilon), = parts
    counts = [con.execute(build_sql(q, exp.to_table(name), "pid", 1).sql("duckdb")).fetchone()[1] for name in
              ("d", "d2")]
    assert counts == [500, 501]
    draws = 200_000
    x = np.array(mechanisms.noisy_counts([counts[0]] * draws, 1, epsilon).values)
    y = np.array(mechanisms.noisy_counts([counts[1]] * draws, 1, epsilon).values)
    values = np.arange(min(x.min(), y.min()), max(x.max(), y.max()) + 1)
    px = np.array([(x == v).sum() for v in values])
    py = np.array([(y == v).sum() for v in values])
    enough = (px >= 2000) & (py >= 2000)
    assert enough.sum() >= 4
    estimated = np.abs(np.log(px[enough] / py[enough])).max()
    assert estimated <= 1.1 * epsilon
    assert estimated >= 0.8 * epsilon  # the audit can tell: the noise is not far larger than needed
    con.close()


def test_agreement_with_opendp_computing_the_measurement_directly():
    con = duckdb.connect()
    _groups_table(con, 20, 200)
    create_budget(con, "t", epsilon=100.0, delta=1e-6, privacy_unit="pid")
    text = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 3, delta = 1e-7, max_groups_contributed = 2, "
            "intervals = 0.9) g, COUNT(*) AS n, SUM(v, contribution_bounds_per_group => (-10, 50)) AS s FROM t GROUP BY g")
    answer = dp_query(con, text)
    share = 3 / 3  # selection, COUNT(*), SUM
    # SUM: one unit adds ≤ 50 to ≤ 2 groups: L1 = 100, scale = 100/ε; OpenDP's Laplace on a float vector
    direct = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float),
                               scale=100 / share)
    assert direct.map(100.0) == pytest.approx(share)
    half = (answer["s_high"] - answer["s_low"]) / 2
    assert half.tolist() == pytest.approx([dp.laplacian_scale_to_accuracy(100 / share, 0.1)] * len(answer))
    assert half.iloc[0] == pytest.approx(100 / share * math.log(1 / 0.1))  # spec: b·ln(1/α)
    # COUNT(*): discrete Laplace with scale 2/ε
    count_half = (answer["n_high"] - answer["n_low"]) / 2
    assert count_half.iloc[0] == pytest.approx(dp.discrete_laplacian_scale_to_accuracy(2 / share, 0.1))
    # partition selection: OpenDP's laplace threshold on (L0, L1, L∞) = (2, 2, 1) gives the δ asked, not more —
    # at threshold − 1, as OpenDP 0.16's map leaves out the mass at the threshold (opendp#2922; round 12, M29)
    selected = mechanisms.select_partitions({"a": 10}, 2, share, 1e-7)

    def threshold_map(threshold: int) -> tuple[float, float]:
        return dp.m.make_laplace_threshold(dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T="i64")),
                                           dp.l01inf_distance(dp.absolute_distance(T="i64")), scale=2 / share,
                                           threshold=threshold).map((2, 2, 1))

    eps, delta = threshold_map(selected.threshold - 1)
    assert eps == pytest.approx(share) and delta <= 1e-7 and selected.delta == delta
    assert threshold_map(selected.threshold - 2)[1] > 1e-7  # the smallest threshold that meets δ
    con.close()
