"""A DuckDB Mondrian release with a privacy unit (issue 24.6): its table written from the source's rows counted per
(QI tuple, other columns) — a session table of groups that the recorded digests read too —, ``__assignment`` read from base counts
that are already one row per (person, QI tuple), and the unit profile read by a distinct count. Against a pandas
oracle over the source's rows through the plan (``__source`` and ``__assignment``): each class's people, a person's
rows all in one class, the released QI values covering every row of the class's people, the released rows the
source rows of the kept people; and the fast profile against the GROUP BY it skips, on hostile units."""
from __future__ import annotations

import re
from collections import Counter

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.errors import SourceError
from anon_sql.data.source import Source
from anon_sql.runner import units as units_mod

K = 3


def _policy(name: str, sensitive: bool = False) -> dict:
    return {"name": name, "source": "t", "method": "mondrian", "privacy_unit": "pid", "seed": 11,
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "pid": {"role": "identifier"},
                           "dx": {"role": "sensitive" if sensitive else "insensitive"},
                           "note": {"role": "insensitive"}},
            "privacy": {"k": K, "max_suppression": 0.5}}


def _table(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    con.execute("CREATE OR REPLACE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR, dx VARCHAR, note VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)


def _covers(released: str, raw) -> bool:
    """A released QI value covers a source value: equal, the top ``*``, a ``[lo-hi]`` range holding it, or a set."""
    if raw is None or (isinstance(raw, float) and pd.isna(raw)):
        return released in (None, "*") or "NULL" in str(released)
    text, value = str(released), str(raw)
    if text in (value, "*"):
        return True
    ranged = re.fullmatch(r"\[(-?[\d.]+)-(-?[\d.]+)\]", text)
    if ranged:
        return float(ranged[1]) <= float(raw) <= float(ranged[2])
    return value in re.split(r"[{},|; ]+", text)


# a person: age, sex and visits of (diagnosis, note); QIs constant per person
persons = st.lists(st.tuples(st.integers(20, 59), st.sampled_from(["F", "M"]),
                             st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]),
                                                st.sampled_from(["x", "y", None])), min_size=1, max_size=5)),
                   min_size=K, max_size=30)


@settings(max_examples=15, deadline=None)
@given(persons, st.booleans())
def test_mondrian_classes_count_people_and_cover_their_rows(people, sensitive):
    """Per class (read from the plan's ``__assignment`` over ``__source``), pandas counts at least k people and
    the release reports those sizes; a person's rows are in one class; the class's released QI values cover the
    QIs of all its people's rows; the released table is exactly those rows with the class's values."""
    rows = [(pid, age, sex, dx, note) for pid, (age, sex, visits) in enumerate(people) for dx, note in visits]
    con = duckdb.connect()
    anon_sql.install(con)
    _table(con, rows)
    try:
        rel = anon_sql.release(con, _policy("mw", sensitive))
    except anon_sql.PrivacyRequirementError as err:
        assert "reconciliation" not in str(err)   # the table always holds the rows of the people counted
        return   # refusals are tested elsewhere
    sql = "\n".join(rel.sql)
    assert "__people" in sql and '"mw__rows"' in sql            # the path under test: people counted from base
    src = con.execute("SELECT s.__unit AS pid, s.age, s.sex, s.dx, s.note, a.ec_id FROM anon_work.mw__source AS s "
                      "JOIN anon_work.mw__assignment AS a USING (__row)").df()
    assert len(src) == len(rows)                               # every source row has one class
    assert (src.groupby("pid")["ec_id"].nunique() == 1).all()  # a person's rows in one class
    values = con.execute("SELECT ec_id, CAST(age AS VARCHAR) AS age, CAST(sex AS VARCHAR) AS sex "
                         "FROM anon_work.mw__ec_values").df().set_index("ec_id")
    people_per_class = src.groupby("ec_id")["pid"].nunique()
    kept = people_per_class[people_per_class >= K].index
    assert set(rel.classes["ec_id"].astype(int)) <= set(kept.astype(int))
    sizes = rel.classes.set_index("ec_id")["__size"].astype(int).to_dict()
    assert sizes == {int(e): int(people_per_class[e]) for e in sizes}
    released_src = src[src["ec_id"].isin(list(sizes))]
    for row in released_src.itertuples():
        v = values.loc[row.ec_id]
        assert _covers(v["age"], row.age) and _covers(v["sex"], row.sex), (v.to_dict(), row)
    out = con.execute("SELECT ec_id, CAST(age AS VARCHAR) AS age, sex, dx, note FROM mw").df()

    def norm(x):
        return None if pd.isna(x) else x
    want = Counter((int(r.ec_id), values.loc[r.ec_id]["age"], values.loc[r.ec_id]["sex"], norm(r.dx), norm(r.note))
                   for r in released_src.itertuples())
    got = Counter((int(r.ec_id), r.age, r.sex, norm(r.dx), norm(r.note)) for r in out.itertuples())
    assert got == want
    released = int(released_src["pid"].nunique())
    assert rel.info["people"] == {"in": len(people), "released": released, "suppressed": len(people) - released}
    assert list(out["ec_id"]) == sorted(out["ec_id"])          # the release order: ec_id first


# hostile units for the profile: QIs that may vary inside a person, NULL units and NULL QIs
unit_rows = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.one_of(st.none(), st.integers(20, 23)),
                               st.sampled_from(["F", "M", None])), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(unit_rows)
def test_profile_by_distinct_count_equals_the_group_by(rows):
    """The profile read from base counts keyed on the QIs alone (a distinct count of the unit) gives the people,
    the varying QIs with their counts and the NULL refusal of the per-unit GROUP BY it skips."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    con.execute("CREATE TABLE b AS SELECT age, sex, pid AS __unit, COUNT(*) AS __w FROM t GROUP BY ALL")
    src = Source("t", duckdb_table("t"), ["pid", "age", "sex"], {})
    base = duckdb_table("b")

    def profile(fast: bool):
        try:
            return units_mod.unit_profile(con, "pid", ["age", "sex"], src, base, distinct_tuples=fast)
        except SourceError as err:
            return str(err)

    frame = pd.DataFrame(rows, columns=["pid", "age", "sex"])
    nulls = int(frame["pid"].isna().sum())
    fast, slow = profile(True), profile(False)
    assert fast == slow
    if nulls:
        assert isinstance(fast, str) and f"{nulls} row" in fast
    else:   # pandas: the people, and per QI the people whose rows hold more than one value (NULL one of them)
        known = frame.dropna(subset=["pid"])
        varying = [(q, int((known.groupby("pid")[q].nunique(dropna=False) > 1).sum())) for q in ("age", "sex")]
        assert fast == (known["pid"].nunique(), [(q, n) for q, n in varying if n])


def duckdb_table(name: str):
    from sqlglot import exp
    return exp.Table(this=exp.to_identifier(name))


def test_level_release_counts_people_from_base():
    """A level release with a unit is written the same way (from its groups, its people counted in the base
    counts): its rows are pandas' rows of the kept people."""
    con = duckdb.connect()
    anon_sql.install(con)
    rows = [(p, 20 + p % 7, "FM"[p % 2], "ab"[v % 2], "x") for p in range(30) for v in range(1 + p % 3)]
    _table(con, rows)
    policy = _policy("lv")
    policy.update(method="levels", method_params={"levels": {"age": 1, "sex": 1}})
    rel = anon_sql.release(con, policy)
    sql = "\n".join(rel.sql)
    assert "__people" in sql and '"lv__rows"' in sql
    assert con.execute("SELECT COUNT(*) FROM lv").fetchall()[0][0] == len(rows)
    assert rel.info["people"] == {"in": 30, "released": 30, "suppressed": 0}


if __name__ == "__main__":
    pytest.main([__file__])
