"""Local suppression (sdcMicro's rule: a NULL cell matches any value) against a brute-force pandas oracle on
hypothesis-generated tables; the SQL verifier agrees with the oracle; suppression stays small."""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.sdc.local_suppression import (is_kanonymous_with_wildcards, local_suppression,
                                            wildcard_frequencies)
from anon_sql.sdc.sqlparts import fill, render

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult" / "adult.csv"


def oracle_fk(frame: pd.DataFrame, quasi: list[str]) -> np.ndarray:
    """Each record's number of matching records, pair by pair: equal or NULL on either side, on every QI."""
    blank = pd.isna(frame[quasi]).to_numpy()
    values = np.where(blank, "", frame[quasi].astype(str).to_numpy())  # blanks are matched by the mask below
    n = len(frame)
    fk = np.zeros(n, dtype=int)
    for i in range(n):  # the oracle is allowed to be slow
        match = np.ones(n, dtype=bool)
        for j in range(len(quasi)):
            match &= blank[:, j] | blank[i, j] | (values[:, j] == values[i, j])
        fk[i] = match.sum()
    return fk


def load(con, frame: pd.DataFrame, name: str = "t") -> None:
    con.register("frame", frame)
    con.execute(render(fill("CREATE TABLE __t AS SELECT * FROM frame", tables={"__t": name})))
    con.unregister("frame")


rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 3) | st.none(),
                          st.sampled_from(["x", "y", "z'"])), min_size=1, max_size=30)


@settings(max_examples=60)
@given(data=rows, k=st.integers(2, 4), importance=st.none() | st.tuples(st.integers(0, 3), st.integers(0, 3),
                                                                       st.integers(0, 3)))
def test_result_is_k_anonymous_under_the_wildcard_rule(data, k, importance):
    quasi = ["q a", "q\"b", "c"]
    frame = pd.DataFrame(data, columns=quasi).astype({"q\"b": "Int64"})
    frame["payload"] = np.arange(len(frame))
    con = duckdb.connect()
    load(con, frame)
    weights = None if importance is None else dict(zip(quasi, importance))
    assert is_kanonymous_with_wildcards(con, "t", quasi, k) == bool((oracle_fk(frame, quasi) >= k).all())
    if len(frame) < k:
        with pytest.raises(PrivacyRequirementError):
            local_suppression(con, "t", quasi, k, importance=weights)
        return
    result = local_suppression(con, "t", quasi, k, importance=weights)
    out = con.execute('SELECT * FROM t__suppressed ORDER BY payload').df()
    assert (oracle_fk(out, quasi) >= k).all()
    assert is_kanonymous_with_wildcards(con, "t__suppressed", quasi, k)
    # only cells of the QIs were blanked, the count per QI is exact, nothing else changed
    assert out["payload"].tolist() == list(range(len(frame)))
    for q in quasi:
        src, dst = frame[q], out[q]
        newly = dst.isna() & src.notna()
        assert result.suppressed[q] == int(newly.sum())
        kept = dst.notna()
        assert (dst[kept].astype(object).to_numpy() == src[kept].astype(object).to_numpy()).all()
    if (oracle_fk(frame, quasi) >= k).all():
        assert result.total == 0  # already k-anonymous: nothing suppressed


@settings(max_examples=40)
@given(codes=st.lists(st.tuples(*[st.integers(-1, 2)] * 3), min_size=1, max_size=25),
       counts=st.lists(st.integers(1, 4), min_size=25, max_size=25))
def test_wildcard_frequencies_match_the_oracle(codes, counts):
    codes = np.array(codes)
    counts = np.array(counts[: len(codes)])
    frame = pd.DataFrame(np.repeat(codes, counts, axis=0), columns=["a", "b", "c"]).replace(-1, np.nan)
    expected = oracle_fk(frame, ["a", "b", "c"])
    got = np.repeat(wildcard_frequencies(codes, counts), counts)
    np.testing.assert_array_equal(got, expected)


def test_one_cell_is_enough_when_one_blank_covers_both():
    con = duckdb.connect()
    load(con, pd.DataFrame({"city": ["A", "A", "B", "B"], "job": ["x", "y", "z", "z"]}))
    result = local_suppression(con, "t", ["city", "job"], 2, importance={"city": 2, "job": 1})
    assert result.suppressed == {"city": 0, "job": 1}
    assert con.execute("SELECT COUNT(*) FROM t__suppressed WHERE job IS NULL").fetchall()[0][0] == 1


def test_the_least_important_qi_is_suppressed_first():
    con = duckdb.connect()
    load(con, pd.DataFrame({"city": ["A", "B", "C", "D"], "job": ["x", "x", "y", "y"]}))
    result = local_suppression(con, "t", ["city", "job"], 2, importance={"city": 1, "job": 5})
    assert result.suppressed["job"] == 0 and result.suppressed["city"] >= 2
    assert result.order == ["city", "job"]


def test_adult_five_qis_k5_is_verified_in_sql():
    if not ADULT.exists():
        pytest.skip(f"shared data {ADULT} not present")
    con = duckdb.connect()
    con.execute(render(fill("CREATE TABLE adult AS SELECT * FROM read_csv(__p, delim = ';')",
                            values={"__p": str(ADULT)})))
    quasi = ["sex", "age", "race", "marital-status", "education"]
    weights = {"sex": 5, "age": 4, "education": 3, "marital-status": 2, "race": 1}
    result = local_suppression(con, "adult", quasi, 5, importance=weights)
    assert is_kanonymous_with_wildcards(con, "adult__suppressed", quasi, 5)
    assert not is_kanonymous_with_wildcards(con, "adult", quasi, 5)
    frame = con.execute('SELECT * FROM adult').df()
    unsafe_records = int((oracle_fk_fast(frame, quasi) < 5).sum())
    # minimal-ish: fewer cells than one per record that started unsafe, times the QIs
    assert 0 < result.total < unsafe_records * len(quasi)
    assert result.suppressed["sex"] <= min(result.suppressed[q] for q in quasi if q != "sex") + 1


def oracle_fk_fast(frame: pd.DataFrame, quasi: list[str]) -> np.ndarray:
    """Plain class sizes (no NULLs in Adult's source, so the wildcard rule reduces to equality)."""
    assert not frame[quasi].isna().any().any()
    return frame.groupby(quasi)[quasi[0]].transform("size").to_numpy()


@pytest.mark.parametrize("k,quasi,importance,match", [
    (1, ["a"], None, "k = 1 must be an integer >= 2"),
    (2, [], None, "needs quasi-identifiers"),
    (2, ["nope"], None, "no column 'nope'"),
    (2, ["a"], {"b": 1}, "'b' is not a quasi-identifier"),
    (2, ["a"], {"a": "high"}, "must be a number"),
])
def test_bad_parameters_are_refused(k, quasi, importance, match):
    con = duckdb.connect()
    load(con, pd.DataFrame({"a": ["x", "y"], "b": [1, 2]}))
    with pytest.raises(PolicyError, match=match):
        local_suppression(con, "t", quasi, k, importance=importance)


def test_the_result_does_not_depend_on_the_rows_physical_order():
    """Ties in the heuristic (unsafe combinations of equal count that coincide once blanked) follow the order of the
    combinations; that order is the codes' now, not the GROUP BY's hash-table order, which followed the rows' order
    and DuckDB's threads (CI saw two releases of one policy suppress 1095 and 1096 cells)."""
    if not ADULT.exists():
        pytest.skip(f"shared data {ADULT} not present")
    quasi = ["age", "sex", "race", "education", "marital-status"]
    results = []
    for order in ("", "ORDER BY hash(age, education, rowid)", "ORDER BY rowid DESC"):
        con = duckdb.connect()
        con.execute(render(fill("CREATE TABLE src AS SELECT * FROM read_csv(__p, delim = ';')",
                                values={"__p": str(ADULT)})))
        con.execute(f"CREATE TABLE adult AS SELECT * FROM src {order}")
        result = local_suppression(con, "adult", quasi, 5)
        table = con.execute("SELECT * FROM adult__suppressed").df()
        results.append((result.suppressed, table.sort_values(list(table.columns), na_position="first")
                        .reset_index(drop=True)))
    for suppressed, table in results[1:]:
        assert suppressed == results[0][0]
        pd.testing.assert_frame_equal(table, results[0][1])
