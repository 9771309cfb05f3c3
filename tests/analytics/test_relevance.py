"""KTFS feature relevance (spec/04 §1): Pima golden case (seed 003's Table 5), SU limits, redundancy, δ selection."""
from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pytest

from anon_sql.analytics.relevance import feature_relevance
from anon_sql.errors import PolicyError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PIMA = ["preg", "plas", "pres", "skin", "insu", "mass", "pedi", "age"]
# seed 003, Table 5 "Kendal Tau" column (|τ_b| with the class, truncated to 4 decimals; insu/pres labels fixed)
TAU = {"plas": 0.3905, "mass": 0.2536, "age": 0.2573, "preg": 0.1703, "pedi": 0.1433, "pres": 0.1192,
       "skin": 0.0762, "insu": 0.0585}
# Table 5 "sbfs" column = |Spearman's rho| (four decimals)
RHO = {"plas": 0.4758, "mass": 0.3097, "age": 0.3090}


@pytest.fixture(scope="module")
def pima():
    con = duckdb.connect()
    con.execute("CREATE TABLE pima AS SELECT * FROM read_csv(?, header = false, names = ?)",
                [str(DATA / "pima" / "pima-indians-diabetes.data.csv"), PIMA + ["class"]])
    yield con
    con.close()


def _trunc4(x: float) -> float:
    return math.floor(x * 10_000) / 10_000


def test_pima_table5_golden(pima):
    df = feature_relevance(pima, "pima", PIMA, "class", delta=0.2)
    assert list(df.columns) == ["attribute", "su", "kendall_tau", "spearman", "redundant_with",
                                "selected_for_anonymization"]
    by = df.set_index("attribute")
    for attr, tau in TAU.items():
        assert _trunc4(by.loc[attr, "kendall_tau"]) == tau
    for attr, rho in RHO.items():
        assert round(by.loc[attr, "spearman"], 4) == rho
    assert set(df.loc[df["selected_for_anonymization"], "attribute"]) == {"preg", "pedi", "pres", "skin", "insu"}
    assert df["redundant_with"].isna().all()  # no pair of Pima features reaches |τ_b| >= 0.8
    assert df["su"].is_monotonic_decreasing  # spec step 2: sorted by relevance
    assert df["attribute"].iloc[0] == "plas"
    assert ((df["su"] > 0) & (df["su"] < 1)).all()


def test_spearman_score_and_vulnerable(pima):
    df = feature_relevance(pima, "pima", PIMA, "class", delta=0.2, score="spearman", vulnerable=["age"])
    chosen = set(df.loc[df["selected_for_anonymization"], "attribute"])
    assert chosen == {"preg", "pedi", "pres", "skin", "insu", "age"}  # |ρ| of the first five < 0.2; age forced


def test_redundancy_keeps_the_most_relevant(pima):
    pima.execute("CREATE OR REPLACE TEMP VIEW pima2 AS SELECT *, plas * 2 + 1 AS plas_scaled, -preg AS preg_neg "
                 "FROM pima")
    df = feature_relevance(pima, "pima2", ["preg_neg", "plas_scaled", "plas", "preg", "mass"], "class")
    by = df.set_index("attribute")
    # identical SU (a monotone copy): the first one listed is kept, its copy is redundant with it
    assert by.loc["plas", "redundant_with"] == "plas_scaled"
    assert by.loc["plas_scaled", "redundant_with"] is None
    # τ_b = -1 is redundancy too; equal-frequency bins of -preg differ at ties, so SU decides which one stays
    assert by.loc["preg_neg", "redundant_with"] == "preg" and by.loc["preg", "redundant_with"] is None
    assert by.loc["preg_neg", "su"] < by.loc["preg", "su"]
    assert not by.loc["preg_neg", "selected_for_anonymization"]  # eliminated from FS, so not selected
    assert by.loc["preg", "selected_for_anonymization"]  # |τ_b| 0.1703 < δ
    assert by.loc["mass", "redundant_with"] is None
    forced = feature_relevance(pima, "pima2", ["preg", "preg_neg"], "class", vulnerable=["preg_neg"])
    assert forced.set_index("attribute")["selected_for_anonymization"].all()  # identity-vulnerable wins


def test_su_limits_on_hand_made_data():
    con = duckdb.connect()
    con.execute("""CREATE TABLE t AS SELECT i % 2 AS y, i % 2 AS same, (i // 2) % 5 AS indep,
                   CASE WHEN i % 2 = 0 THEN 'no' ELSE 'yes' END AS label, i * 1.5 AS v, i * 1.5 AS v_copy
                   FROM range(1000) r(i)""")
    df = feature_relevance(con, "t", ["indep", "same", "label"], "y").set_index("attribute")
    assert df.loc["same", "su"] == pytest.approx(1.0)
    assert df.loc["label", "su"] == pytest.approx(1.0)  # a categorical recoding of the target
    assert df.loc["indep", "su"] == pytest.approx(0.0, abs=1e-12)
    assert df.loc["indep", "kendall_tau"] == pytest.approx(0.0, abs=1e-12)
    assert df.loc["same", "kendall_tau"] == pytest.approx(1.0)
    # a numeric target with many values: both sides binned the same way, SU stays 1
    df = feature_relevance(con, "t", ["v_copy", "indep"], "v").set_index("attribute")
    assert df.loc["v_copy", "su"] == pytest.approx(1.0)
    assert df.loc["indep", "su"] < 0.1


def test_nulls_and_constant_column():
    con = duckdb.connect()
    rng = np.random.default_rng(0)
    con.register("src", {"x": rng.normal(size=200), "y": rng.integers(0, 2, size=200)})
    con.execute("""CREATE TABLE t AS SELECT CASE WHEN x > 1.5 THEN NULL ELSE x END AS x, y,
                   CASE WHEN y = 1 THEN NULL ELSE 'a' END AS s, 3 AS c FROM src""")
    df = feature_relevance(con, "t", ["x", "s", "c"], "y").set_index("attribute")
    assert df.loc["s", "su"] == pytest.approx(1.0)  # NULL is a category of its own: s determines y
    assert np.isnan(df.loc["c", "kendall_tau"])  # undefined for a constant column ...
    assert df.loc["c", "selected_for_anonymization"]  # ... and counted as score 0
    assert 0 <= df.loc["x", "kendall_tau"] < 0.2


def test_errors(pima):
    with pytest.raises(PolicyError, match=r"'glucose'.*available columns: preg, plas"):
        feature_relevance(pima, "pima", ["glucose"], "class")
    with pytest.raises(PolicyError, match="target 'class' is also listed"):
        feature_relevance(pima, "pima", ["plas", "class"], "class")
    with pytest.raises(PolicyError, match="delta"):
        feature_relevance(pima, "pima", ["plas"], "class", delta=1.5)
    with pytest.raises(PolicyError, match="unknown target"):
        feature_relevance(pima, "pima", ["plas"], "outcome")
