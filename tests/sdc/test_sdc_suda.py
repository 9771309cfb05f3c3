"""SUDA2 (spec/10-sdc.md): sdcMicro's golden case, a brute-force enumeration oracle on random tables, Adult."""
from __future__ import annotations

import time
from collections import Counter
from itertools import combinations
from math import factorial
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from anon_sql.errors import PolicyError, SourceError
from anon_sql.sdc.suda import suda2

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ADULT_KEYS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def frame_con(frame: pd.DataFrame, name: str = "t"):
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM frame')    # test fixture: fixed name
    return con


def brute_force(rows: list[tuple], m: int):
    """Every record × every non-empty subset: unique there and on no proper subset ⇒ an MSU (independent of the
    level-wise code: counts by Counter, every proper subset checked, not only the immediate ones)."""
    def unique(r, s):
        key = tuple(rows[r][i] for i in s)
        return counts[s][key] == 1
    subsets = [s for k in range(1, m + 1) for s in combinations(range(m), k)]
    counts = {s: Counter(tuple(row[i] for i in s) for row in rows) for s in subsets}
    msus = {r: [s for s in subsets if unique(r, s) and not any(unique(r, t) for k in range(1, len(s))
                                                              for t in combinations(s, k))]
            for r in range(len(rows))}
    score = [sum(factorial(m - len(s)) for s in msus[r]) for r in range(len(rows))]
    per_size = [sum(len(s) == k for r in msus for s in msus[r]) for k in range(1, m + 1)]
    total = sum(score)
    contrib = [sum(factorial(m - len(s)) for r in msus for s in msus[r] if v in s) / total * 100 if total else 0.0
               for v in range(m)]
    return score, per_size, contrib


def test_sdcmicro_golden_case():
    con = frame_con(pd.DataFrame({"a": [2, 1, 1], "b": [0, 3, 0], "c": [0, 6, 0]}))
    r = suda2(con, "t", ["a", "b", "c"], keep_msus=True)
    assert {s: list(v) for s, v in r.msus.items()} == {("a",): [0], ("b",): [1], ("c",): [1],
                                                       ("a", "b"): [2], ("a", "c"): [2]}
    assert list(r.records["suda_score"]) == [2, 4, 2]
    assert list(r.contributions["contribution"]) == [50.0, 37.5, 37.5]
    assert [r.measures[f"suda_msus_size_{k}"] for k in (1, 2, 3)] == [3, 2, 0]


@settings(max_examples=60)
@given(data=st.data(), m=st.integers(1, 4), n=st.integers(1, 14))
def test_against_brute_force(data, m, n):
    rows = [tuple(data.draw(st.one_of(st.none(), st.integers(0, 2))) for _ in range(m)) for _ in range(n)]
    frame = pd.DataFrame(rows, columns=[f"k{i}" for i in range(m)], dtype="Int64")
    r = suda2(frame_con(frame), "t", list(frame.columns))
    score, per_size, contrib = brute_force(rows, m)
    assert list(r.records["suda_score"]) == score
    assert [r.measures[f"suda_msus_size_{k}"] for k in range(1, m + 1)] == per_size
    assert np.allclose(r.contributions["contribution"], contrib)
    full = Counter(rows)
    u, p = sum(v == 1 for v in full.values()), sum(v == 2 for v in full.values())
    assert (r.measures["suda_uniques"], r.measures["suda_pairs"]) == (u, p)
    dis = r.records["dis_suda_score"].to_numpy()
    assert ((dis > 0) == (np.array(score) > 0)).all() and (dis <= 1).all()


def test_dis_suda_formula_by_hand():
    # records: 3 uniques on all keys, 1 pair: U = 3, P = 1, M = 2, f = 0.1
    con = frame_con(pd.DataFrame({"a": [1, 2, 3, 4, 4], "b": [1, 1, 5, 2, 2]}))
    r = suda2(con, "t", ["a", "b"], dis_fraction=0.1)
    score = r.records["suda_score"].to_numpy()
    assert list(score) == [1, 1, 2, 0, 0]     # MSUs {a} for rows 0-2 (1! each), and {b} for row 2
    q = 1 + (8 - 2) / 20
    a = sum(1 / s ** q for s in score if s > 0)
    dis = 3 * 0.1 / (3 * 0.1 + 1 * 0.9)
    expected = [1 / (1 + (3 / dis - 3) / (s ** q * a)) if s else 0.0 for s in score]
    assert np.allclose(r.records["dis_suda_score"], expected)


def test_bad_arguments_are_refused():
    con = frame_con(pd.DataFrame({"a": [1, 2], "b": [1, 1]}))
    with pytest.raises(PolicyError, match=r"no column 'zz' in 't'; its columns are 'a', 'b'"):
        suda2(con, "t", ["a", "zz"])
    with pytest.raises(PolicyError, match="dis_fraction"):
        suda2(con, "t", ["a"], dis_fraction=1.5)
    with pytest.raises(PolicyError, match="at least one key"):
        suda2(con, "t", [])
    with pytest.raises(SourceError, match="no table or view 'nope'"):
        suda2(con, "nope", ["a"])
    con.execute("CREATE TABLE e (a INT)")
    with pytest.raises(SourceError, match="has no rows"):
        suda2(con, "e", ["a"])


def test_adult_eight_keys_is_fast_and_consistent():
    con = duckdb.connect()
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true)",
                [str(DATA / "adult" / "adult.csv")])
    start = time.perf_counter()
    r = suda2(con, "adult", ADULT_KEYS)
    assert time.perf_counter() - start < 30
    assert sum(r.measures[f"suda_msus_size_{k}"] for k in range(1, 9)) == r.records["msu_count"].sum()
    # a record has an MSU exactly when it is unique on all 8 keys
    assert r.measures["suda_records_at_risk"] == r.measures["suda_uniques"]
    assert len(r.records) == 30162 and 0 < r.measures["suda_dis_max"] <= 1
