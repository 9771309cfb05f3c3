"""Individual risk with sampling weights and household risk (spec/10-sdc.md), against hand-computed cases."""
from __future__ import annotations

import math

import duckdb
import pytest

from anon_sql.errors import PolicyError
from anon_sql.sdc.risk import household_risk, individual_risk


@pytest.fixture()
def con():
    c = duckdb.connect()
    c.execute("""CREATE TABLE s AS SELECT * FROM (VALUES
        (1, 'a', 'x', 10.0, 1), (2, 'a', 'x', 30.0, 1),      -- class (a,x): f = 2, F = 40
        (3, 'b', 'x', 5.0, 2),                               -- f = 1, F = 5
        (4, 'c', NULL, 1.0, 2),                              -- f = 1, F = 1 (= f)
        (5, 'd', 'y', 4.0, 3), (6, 'd', 'y', 4.0, 3), (7, 'd', 'y', 2.0, 3)   -- f = 3, F = 10
        ) v(id, "key one", k2, w, hh)""")
    return c


def by_hand(f, F):
    p = f / F
    if F == f:
        return 1 / f
    if f == 1:
        return p / (1 - p) * math.log(1 / p)
    if f == 2:
        return p / (1 - p) - (p / (1 - p)) ** 2 * math.log(1 / p)
    return p / (f - (1 - p))


EXPECTED = {1: (2, 40), 2: (2, 40), 3: (1, 5), 4: (1, 1), 5: (3, 10), 6: (3, 10), 7: (3, 10)}


def test_individual_risk_matches_the_published_formula(con):
    r = individual_risk(con, "s", ["key one", "k2"], "w", id_column="id")
    got = {row.id: (row.sample_freq, row.pop_freq, row.risk) for row in r.records.itertuples()}
    for i, (f, F) in EXPECTED.items():
        assert got[i][:2] == (f, F)
        assert got[i][2] == pytest.approx(by_hand(f, F), rel=1e-12)
    # the numbers themselves, worked by hand: 0.25·ln 5; p = 0.05: 0.05/0.95 − (0.05/0.95)²·ln 20; 0.3/2.3
    assert got[3][2] == pytest.approx(0.25 * math.log(5))
    assert got[1][2] == pytest.approx(0.05 / 0.95 - (0.05 / 0.95) ** 2 * math.log(20))
    assert got[5][2] == pytest.approx(0.3 / 2.3) and got[4][2] == 1.0
    assert r.measures["risk_expected_reidentifications"] == pytest.approx(sum(g[2] for g in got.values()))
    assert r.measures["risk_max"] == 1.0 and r.measures["risk_records_above_threshold"] == 5


def test_without_weights_risk_is_one_over_f(con):
    r = individual_risk(con, "s", ["key one"])
    assert sorted(r.records["risk"]) == sorted([1 / 2] * 2 + [1.0, 1.0] + [1 / 3] * 3)


def test_household_risk_is_one_minus_product(con):
    r = household_risk(con, "s", ["key one", "k2"], "hh", "w", id_column="id")
    risk = {row.id: row.risk for row in r.records.itertuples()}
    hh = {row.id: row.household_risk for row in r.records.itertuples()}
    assert hh[1] == pytest.approx(1 - (1 - risk[1]) * (1 - risk[2])) and hh[2] == hh[1]
    assert hh[3] == 1.0 == hh[4]                                   # a member with risk 1
    assert hh[5] == pytest.approx(1 - (1 - 0.3 / 2.3) ** 3)
    assert r.measures["households"] == 3


@pytest.mark.parametrize("sql, message", [
    ("UPDATE s SET w = 0.5 WHERE id = 1", r"weights column 'w' has 0 NULL, 0 NaN or infinite and 1 below 1"),
    ("UPDATE s SET w = NULL WHERE id = 1", r"weights column 'w' has 1 NULL, 0 NaN or infinite and 0 below 1"),
])
def test_bad_weights_are_refused(con, sql, message):
    con.execute(sql)
    with pytest.raises(PolicyError, match=message):
        individual_risk(con, "s", ["key one"], "w")


def test_other_bad_arguments(con):
    with pytest.raises(PolicyError, match="is VARCHAR, not a number"):
        individual_risk(con, "s", ["key one"], "k2")
    with pytest.raises(PolicyError, match=r"no column 'nope' in 's'"):
        individual_risk(con, "s", ["nope"])
    with pytest.raises(PolicyError, match="also a key variable"):
        household_risk(con, "s", ["hh"], "hh")
    con.execute("UPDATE s SET hh = NULL WHERE id = 7")
    with pytest.raises(PolicyError, match="NULL in 1 rows"):
        household_risk(con, "s", ["key one"], "hh")
