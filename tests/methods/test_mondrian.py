"""Mondrian local recoding and the shared local values: hand-made partitions, released values against the data
(ranges cover the original values, LCAs are ancestors), pycanon as an independent k / l oracle on Adult, counts,
errors, determinism, and property tests on random tables."""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.methods.local_values import class_values, encode_qi_frame, local_values, parse_range
from anon_sql.methods.mondrian import StatsBuilder, partition
from anon_sql.models import KAnonymity
from anon_sql.data.taxonomy import from_mapping
from conftest import working

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ADULT = DATA / "adult"
QIS = ["age", "sex", "race", "marital-status", "education", "native-country", "workclass"]


def texts(series: pd.Series) -> list:
    """Released values as Python objects (SQL NULL → None)."""
    return [None if pd.isna(v) else v for v in series]


def _partition(frame: pd.DataFrame, quasi, k, taxonomies=None, weights=None):
    cols = encode_qi_frame(frame, quasi, taxonomies or {})
    w = np.ones(len(frame)) if weights is None else np.asarray(weights, dtype=float)
    return partition(cols, [KAnonymity(k)], StatsBuilder(w, {}, {}, {}, False)), cols


# -- hand-made cases ---------------------------------------------------------------------------------------------------
def test_median_splits_on_one_numeric_attribute():
    frame = pd.DataFrame({"age": [8, 3, 5, 1, 7, 2, 6, 4]})
    res, cols = _partition(frame, ["age"], 2)
    assert res.n_partitions == 4 and res.depth == 2
    got = class_values(res.pid, cols).sort_values("age")["age"].tolist()
    assert got == ["[1-2]", "[3-4]", "[5-6]", "[7-8]"]
    # depth-first ids: the partition of the smallest ages comes first
    assert res.pid[frame["age"].to_numpy().argsort()].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_widest_normalized_attribute_is_split_first_and_counts_weigh():
    # x spans 0..100 (width 1), y spans 0..1 over 0..10 (width 0.1): the first cut is on x
    frame = pd.DataFrame({"x": [0, 0, 100, 100], "y": [0, 1, 0, 1]})
    res, cols = _partition(frame, ["x", "y"], 2)
    assert class_values(res.pid, cols)[["x", "y"]].values.tolist() == [["0", "[0-1]"], ["100", "[0-1]"]]
    # a count column weighs rows: one row of 3 records may stand alone at k = 3
    frame = pd.DataFrame({"x": [1, 2, 3, 4]})
    res, _ = _partition(frame, ["x"], 3, weights=[3, 1, 1, 1])
    assert res.n_partitions == 2 and res.pid.tolist() == [0, 1, 1, 1]


def test_categorical_split_follows_the_taxonomy():
    tax = from_mapping("t", {"a1": ["A"], "a2": ["A"], "b1": ["B"], "b2": ["B"]})
    frame = pd.DataFrame({"c": ["a1", "a2", "b1", "b2"] * 2})
    res, cols = _partition(frame, ["c"], 2, {"c": tax})
    vals = class_values(res.pid, cols)["c"].tolist()
    assert sorted(vals) == ["a1", "a2", "b1", "b2"]
    res, cols = _partition(frame, ["c"], 4, {"c": tax})
    assert sorted(class_values(res.pid, cols)["c"].tolist()) == ["A", "B"]


def test_equal_taxonomy_widths_go_to_the_larger_distinct_share():
    # both QIs span their taxonomy's top (width 1); c2 shows 4 of its 6 leaves (share 0.6), c1 2 of 4 (0.33): the
    # split goes to c2 although c1 comes first (before the tie-break, c1 was split and c2 released as "*")
    t1 = from_mapping("t1", {"a": ["A"], "b": ["B"], "c": ["A"], "d": ["B"]})
    t2 = from_mapping("t2", {"p": ["P"], "q": ["P"], "r": ["R"], "s": ["R"], "t": ["T"], "u": ["T"]})
    frame = pd.DataFrame({"c1": ["a", "b"] * 4, "c2": ["p", "q", "r", "s"] * 2})
    res, cols = _partition(frame, ["c1", "c2"], 4, {"c1": t1, "c2": t2})
    vals = class_values(res.pid, cols)
    assert sorted(vals["c2"].tolist()) == ["P", "R"] and vals["c1"].tolist() == ["*", "*"]


def test_local_values_numeric_categorical_nulls():
    frame = pd.DataFrame({"n": [1.5, 4.0, 7.0, None, None, 2.0],
                          "c": ["a1", "b1", "a2", None, "x", "x"]})
    tax = from_mapping("t", {"a1": ["A"], "a2": ["A"], "b1": ["B"], "x": ["X"]})
    ec = np.array([1, 1, 2, 3, 3, 4])
    out = local_values(frame, ec, ["n", "c"], {"c": tax})
    assert out["ec_id"].tolist() == [1, 2, 3, 4]
    assert texts(out["n"]) == ["[1.5-4]", "7", None, "2"]
    assert texts(out["c"]) == ["*", "a2", "*", "x"]
    flat = local_values(frame, np.array([1, 1, 1, 2, 2, 2]), ["c"], {})
    assert texts(flat["c"]) == ["*", "*"]
    assert texts(local_values(frame.iloc[[3, 4]], np.array([1, 2]), ["c"], {})["c"]) == [None, "x"]


@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False))
def test_parse_range_round_trip(lo, width):
    hi = lo + width
    label = class_values(np.array([1, 1]), encode_qi_frame(pd.DataFrame({"v": [lo, hi]}), ["v"], {}))["v"][0]
    assert parse_range(label) == (pytest.approx(lo), pytest.approx(hi))
    assert parse_range("*") is None and parse_range(None) is None


# -- releases ----------------------------------------------------------------------------------------------------

def covers(con, name: str, numeric, categorical, taxonomies) -> None:
    """Every record's original values lie in its class's released values (ranges / taxonomy ancestors)."""
    cols = ", ".join(f's."{q}" AS "o_{q}", v."{q}" AS "r_{q}"' for q in [*numeric, *categorical])
    df = con.execute(f'SELECT {cols} FROM {working(name, "source")} s JOIN {working(name, "assignment")} a USING (__row) '
                     f'JOIN {working(name, "ec_values")} v USING (ec_id)').df()
    for q in numeric:
        bounds = df[f"r_{q}"].map(parse_range)
        lo, hi = bounds.map(lambda b: b[0]), bounds.map(lambda b: b[1])
        assert ((df[f"o_{q}"] >= lo - 1e-9) & (df[f"o_{q}"] <= hi + 1e-9)).all(), q
    for q in categorical:
        tax = taxonomies.get(q)
        if tax is None:
            ok = (df[f"r_{q}"] == "*") | (df[f"r_{q}"] == df[f"o_{q}"].astype(str))
        else:
            anc = {leaf: set(row) for leaf, *row in tax.levels.itertuples(index=False)}
            ok = [r in anc[str(o)] | {str(o)} for o, r in zip(df[f"o_{q}"], df[f"r_{q}"])]
        assert all(ok), q


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_mondrian_release_property(data):
    n = data.draw(st.integers(4, 40))
    k = data.draw(st.integers(2, 4))
    rows = data.draw(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["p", "q", "r", "s"]),
                                        st.sampled_from(["u", "v", "w"])), min_size=n, max_size=n))
    if len(rows) < k:
        return
    c = duckdb.connect()
    anon_sql.install(c)
    c.register("rows", pd.DataFrame(rows, columns=["a", "b", "s"]))
    c.execute("CREATE TABLE t AS SELECT * FROM rows")
    tax = {"kind": "mapping", "mapping": {"p": ["pq"], "q": ["pq"], "r": ["rs"], "s": ["rs"]}}
    pol = {"name": "m", "source": "t", "method": "mondrian",
           "attributes": {"a": {"role": "quasi"}, "b": {"role": "quasi", "taxonomy": tax},
                          "s": {"role": "sensitive"}}, "privacy": {"k": k}}
    rel = anon_sql.release(c, pol)
    sizes = c.execute("SELECT count(*) FROM m GROUP BY ec_id").fetchall()
    assert min(s[0] for s in sizes) >= k and sum(s[0] for s in sizes) == len(rows)
    assert rel.records_out == len(rows) and rel.passed
    taxonomy = from_mapping("b", tax["mapping"])
    covers(c, "m", ["a"], ["b"], {"b": taxonomy})
    c.close()


def test_mondrian_count_column_and_determinism(con):
    con.execute("CREATE TABLE t1 AS SELECT * FROM read_csv(?)", [str(DATA / "examples" / "seed000_table1.csv")])
    pol = {"name": "mc", "source": "t1", "method": "mondrian", "count_column": "n", "default_role": "insensitive",
           "attributes": {"row": {"role": "identifier"}, "age": {"role": "quasi"}, "zip": {"role": "quasi"},
                          "genetic_risk": {"role": "sensitive"}}, "privacy": {"k": 5}}
    rel = anon_sql.release(con, pol)
    sizes = con.execute("SELECT sum(n) FROM mc GROUP BY ec_id").fetchall()
    assert min(s[0] for s in sizes) >= 5 and sum(s[0] for s in sizes) == rel.records_in == 60
    anon_sql.release(con, {**pol, "name": "mc2"})
    a = con.execute("SELECT * FROM mc ORDER BY ALL").df()
    b = con.execute("SELECT * FROM mc2 ORDER BY ALL").df()
    pd.testing.assert_frame_equal(a, b)
    assert rel.plan["partitions"] == len(sizes) and rel.plan["depth"] >= 1


def test_mondrian_errors(con):
    con.execute("CREATE TABLE t AS SELECT i AS a, 'x' AS s FROM range(10) r(i)")
    pol = {"name": "me", "source": "t", "method": "mondrian",
           "attributes": {"a": {"role": "quasi"}, "s": {"role": "sensitive"}}, "privacy": {"k": 2}}
    with pytest.raises(PolicyError, match=r"unknown key `.*` in \[method_params\]"):
        anon_sql.release(con, {**pol, "method_params": {"depth": 3}})
    with pytest.raises(PolicyError, match="categorical_width must be one of"):
        anon_sql.release(con, {**pol, "method_params": {"categorical_width": "wide"}})
    with pytest.raises(PrivacyRequirementError, match="whole table.*distinct l-diversity"):
        anon_sql.release(con, {**pol, "privacy": {"k": 2, "l_diversity": {"kind": "distinct", "l": 2}}})


# -- Adult, pycanon as the independent oracle ------------------------------------------------------------------------

def adult_mondrian(name: str, **privacy) -> dict:
    attrs = {q: {"role": "quasi"} for q in QIS}
    for q in QIS[1:]:
        attrs[q]["taxonomy"] = str(ADULT / f"adult_hierarchy_{q}.csv")
    attrs["occupation"] = {"role": "sensitive"}
    return {"name": name, "source": "adult", "method": "mondrian", "default_role": "insensitive",
            "attributes": attrs, "privacy": privacy}


def test_mondrian_adult_k10_pycanon(adult):
    anonymity = pytest.importorskip("pycanon.anonymity")
    rel = anon_sql.release(adult, adult_mondrian("am10", k=10))
    df = adult.execute("SELECT * FROM am10").df()
    assert anonymity.k_anonymity(df, QIS) >= 10
    assert df.groupby("ec_id").size().min() >= 10 and len(df) == 30162
    assert rel.plan["partitions"] == df["ec_id"].nunique() and rel.plan["depth"] > 5
    from anon_sql.data.taxonomy import from_arx_csv

    taxonomies = {q: from_arx_csv(ADULT / f"adult_hierarchy_{q}.csv", q) for q in QIS[1:]}
    covers(adult, "am10", ["age"], QIS[1:], taxonomies)


@pytest.mark.parametrize("width", ["distinct", "mixed"])
def test_mondrian_adult_categorical_widths(adult, width):
    anonymity = pytest.importorskip("pycanon.anonymity")
    pol = adult_mondrian(f"am_{width}", k=10)
    pol["method_params"] = {"categorical_width": width}
    rel = anon_sql.release(adult, pol)
    df = adult.execute(f"SELECT * FROM am_{width}").df()
    assert anonymity.k_anonymity(df, QIS) >= 10 and rel.plan["categorical_width"] == width


def test_mondrian_adult_distinct_l2_pycanon(adult):
    anonymity = pytest.importorskip("pycanon.anonymity")
    anon_sql.release(adult, adult_mondrian("am_l2", k=10, l_diversity={"kind": "distinct", "l": 2}))
    df = adult.execute("SELECT * FROM am_l2").df()
    assert anonymity.k_anonymity(df, QIS) >= 10
    assert anonymity.l_diversity(df, QIS, ["occupation"]) >= 2
    assert df.groupby("ec_id")["occupation"].nunique().min() >= 2
