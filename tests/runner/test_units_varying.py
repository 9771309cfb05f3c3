"""QIs that vary inside a unit: multi-relational k-anonymity (spec/08 §MR, docs/units.md; Nergiz et al. 2009).

A person's class is their signature, the set of released QI tuples over their rows. The oracle is pandas over the
released table as an attacker reads it: each person's set of (age, sex) values, grouped; every set must be held by at
least k people, the release's classes must be exactly those sets, and the people kept must be those the same
computation keeps on the source generalized in pandas.
"""
from __future__ import annotations

import os

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from units_fixtures import KEY, con  # noqa: F401 (con: a fixture)

LATTICE = ["iab", "exhaustive", "greedy", "optimal"]



def policy(method: str = "levels", k: int = 2, budget: float = 1.0, **changes) -> dict:
    """``pid_copy`` is the unit released as an insensitive column: the oracle's handle on who was kept."""
    p = {"name": "mr", "source": "visits", "privacy_unit": "pid", "method": method,
         "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"},
                        "pid_copy": {"role": "insensitive"},
                        "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [2, 4, 100]}},
                        "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                        "diagnosis": {"role": "insensitive"}},
         "privacy": {"k": k, "max_suppression": budget}}
    p.update(changes)
    return p


def load(con, rows: list[tuple]) -> pd.DataFrame:
    src = pd.DataFrame(rows, columns=["pid", "age", "sex", "diagnosis"])
    src["pid_copy"] = src["pid"]
    con.register("src_df", src)
    con.execute("CREATE OR REPLACE TABLE visits AS SELECT * FROM src_df")
    con.unregister("src_df")
    return src


def signatures(df: pd.DataFrame, unit: str, quasi: list[str]) -> pd.Series:
    """Each unit's signature: the frozenset of its (QI values) tuples."""
    return df.groupby(unit).apply(lambda g: frozenset(map(tuple, g[quasi].astype(str).to_numpy())),
                                  include_groups=False)


def assert_mr_k(con, k: int) -> pd.DataFrame:
    """The attacker's view: every released signature is held by >= k people, and ec_id is exactly the signature."""
    out = con.execute("SELECT * FROM mr").df()
    if out.empty:
        return out
    sig = signatures(out, "pid", ["age", "sex"])
    assert sig.value_counts().min() >= k
    ec = out.groupby("pid")["ec_id"].agg(["nunique", "first"])
    assert (ec["nunique"] == 1).all()                      # a person is in one class
    pairs = pd.DataFrame({"sig": sig, "ec": ec["first"]})
    assert pairs.groupby("sig")["ec"].nunique().max() == 1  # one class per signature
    assert pairs.groupby("ec")["sig"].nunique().max() == 1  # one signature per class
    return out


def test_tuple_wise_count_is_not_enough_golden(con):
    """A holds ages {30, 32}, B {30}, C {32}, D {30}, E {32} (all F), k = 2, level 0. Counting people per tuple,
    (30, F) holds A, B, D and (32, F) A, C, E: both pass. A's signature {30, 32} is hers alone: whoever knows both
    of her visits finds her rows. Multi-relational k suppresses A (1 of 5 people) and keeps B–E."""
    load(con, [(1, 30, "F", "x"), (1, 32, "F", "y"), (2, 30, "F", "x"), (3, 32, "F", "x"), (4, 30, "F", "z"),
               (5, 32, "F", "z")])
    rel = anon_sql.release(con, policy(method_params={"levels": {"age": 0, "sex": 0}}, budget=0.2))
    out = assert_mr_k(con, 2)
    assert sorted(out["pid_copy"]) == [2, 3, 4, 5]
    assert rel.info["people"] == {"in": 5, "released": 4, "suppressed": 1}
    assert rel.records_out == 4 and rel.suppressed == 2
    assert int(rel.metrics["k"]) == 2


def test_without_budget_the_signature_fails_and_nothing_is_created(con):
    load(con, [(1, 30, "F", "x"), (1, 32, "F", "y"), (2, 30, "F", "x"), (3, 32, "F", "x"), (4, 30, "F", "z"),
               (5, 32, "F", "z")])
    before = con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
    with pytest.raises(anon_sql.PrivacyRequirementError, match="1 of 5 people"):
        anon_sql.release(con, policy(method_params={"levels": {"age": 0, "sex": 0}}, budget=0.0))
    assert con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall() == before


@pytest.mark.parametrize("method", LATTICE)
def test_lattice_searches_generalize_signatures(con, method):
    """Each person's ages span two width-2 intervals half of the time: the searches find a node whose signatures
    are shared by k people, which the SQL verifies and the pandas oracle confirms on the released rows."""
    rows = [(i, 30 + (i + v) % 6, "FM"[i % 2], f"d{(i + v) % 3}") for i in range(60) for v in range(2)]
    load(con, rows)
    rel = anon_sql.release(con, policy(method, k=4, budget=0.05))
    out = assert_mr_k(con, 4)
    assert rel.records_in == rel.records_out + rel.suppressed
    assert rel.info["people"]["released"] == out["pid"].nunique()
    assert rel.info["people"]["suppressed"] <= 0.05 * 60


def test_l_diversity_counts_people_per_signature(con):
    """Per signature class, a value's count is the people holding it: each class of 2 people where both hold the
    same single value fails distinct 2-diversity and is suppressed."""
    rows = [(1, 30, "F", "flu"), (1, 32, "F", "flu"), (2, 30, "F", "flu"), (2, 32, "F", "flu"),
            (3, 40, "F", "a"), (3, 42, "F", "a"), (4, 40, "F", "b"), (4, 42, "F", "b")]
    load(con, rows)
    privacy = {"k": 2, "max_suppression": 0.5, "l_diversity": {"kind": "distinct", "l": 2}}
    attrs = policy()["attributes"]
    attrs["diagnosis"] = {"role": "sensitive"}
    anon_sql.release(con, policy(method_params={"levels": {"age": 0, "sex": 0}}, privacy=privacy, attributes=attrs))
    out = assert_mr_k(con, 2)
    assert sorted(out["pid_copy"].unique()) == [3, 4]


@pytest.mark.parametrize("method", ["mondrian"])
def test_methods_without_signatures_refuse_naming_those_with(con, method):
    load(con, [(1, 30, "F", "x"), (1, 32, "F", "y"), (2, 30, "F", "x"), (2, 32, "F", "x")])
    before = con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
    with pytest.raises(anon_sql.PolicyError, match=r"varies within 2 units.*levels.*optimal"):
        anon_sql.release(con, policy(method))
    assert con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall() == before


def test_group_rules_are_refused_with_varying_quasi(con):
    load(con, [(1, 30, "F", "x"), (1, 32, "F", "y"), (2, 30, "F", "x"), (2, 32, "F", "x")])
    privacy = {"k": 2, "requirements": [{"quasi": ["age"], "k": 2}]}
    with pytest.raises(anon_sql.PolicyError, match="requirements"):
        anon_sql.release(con, policy(privacy=privacy))


def oracle_kept(src: pd.DataFrame, width: int, k: int) -> set[int]:
    """The people a level release keeps: signatures over (age // width bucket, sex) held by >= k people."""
    g = src.assign(age=(src["age"] // width).astype(str))
    sig = signatures(g, "pid", ["age", "sex"])
    counts = sig.map(sig.value_counts())
    return set(counts[counts >= k].index)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1)), min_size=1, max_size=3),
                min_size=1, max_size=25),
       st.integers(1, 3), st.sampled_from([0, 1]))
def test_random_varying_data_against_a_pandas_oracle(people, k, level):
    """Random people, each with 1–3 rows of (age code, sex): at the given age level (width 1 or 2) the kept people are
    exactly those whose pandas-computed signature is shared by >= k people, and the release passes the attacker's
    check."""
    os.environ["ANON_SQL_KEY"] = KEY
    con = duckdb.connect()
    anon_sql.install(con)
    rows = [(pid, 30 + a, "FM"[s], "d") for pid, visits in enumerate(people) for a, s in visits]
    src = load(con, rows)
    if k > len(people):
        with pytest.raises(anon_sql.PolicyError, match="larger than the"):
            anon_sql.release(con, policy(k=k))
        return
    p = policy(k=k, method_params={"levels": {"age": level, "sex": 0}})
    p["attributes"]["age"]["taxonomy"] = {"kind": "interval", "widths": [2, 4, 100]}
    rel = anon_sql.release(con, p)
    out = assert_mr_k(con, k)
    expected = oracle_kept(src, 2 if level else 1, k)
    assert set(out["pid_copy"].unique() if len(out) else []) == expected
    assert rel.records_out == int(src["pid"].isin(expected).sum())
    assert rel.info["people"]["released"] == len(expected)


def test_check_of_a_signature_release_passes_and_says_what_it_could_not_recount(con):
    """The released table holds no unit, so `check` cannot rebuild people's signatures: its classes figure is the
    catalog's (basis unverified, naming both counts) while every model is rechecked over the table; a non-varying
    unit release keeps the recounted classes check."""
    load(con, [(1, 30, "F", "x"), (1, 32, "F", "y"), (2, 30, "F", "x"), (3, 32, "F", "x"), (4, 30, "F", "z"),
               (5, 32, "F", "z"), (6, 30, "F", "y"), (6, 32, "F", "x"), (7, 30, "F", "x"), (7, 32, "F", "y")])
    rel = anon_sql.release(con, policy(method_params={"levels": {"age": 0, "sex": 0}}, budget=0.0))
    checked = anon_sql.check(con, "mr").set_index("check")
    assert checked["passed"].all()
    assert checked.loc["classes", "basis"].startswith("catalog (unverified): 3 classes of people's signatures")
    assert len(rel.classes) == 3 and checked.loc["k", "basis"] == "table"
    con.execute("DELETE FROM mr WHERE pid_copy = 2")              # a person removed after the release: caught
    assert not anon_sql.check(con, "mr").set_index("check").loc["reconciliation", "passed"]
