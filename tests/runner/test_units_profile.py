"""The privacy unit's profile (distinct units, NULL units, QIs varying inside a unit) read from the release's base
counts, as a DuckDB level release does (issue 24.6: one pass over the rows fewer), equals the profile read from the
source and a pandas recount, on hostile tables (NULL units, NULL QI values, one person with a NULL and a value)."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.data import base_counts
from anon_sql.data.source import resolve_source
from anon_sql.errors import SourceError
from anon_sql.policy.model import Policy
from anon_sql.runner.units import unit_profile
from units_fixtures import con, tables  # noqa: F401 (con: a fixture)

QUASI = ["age", "sex"]


def _policy(sensitive: bool) -> Policy:
    attrs = {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
             "pid": {"role": "identifier"},
             "dx": {"role": "sensitive" if sensitive else "insensitive"}}
    return Policy.from_dict({"name": "p", "source": "t", "method": "levels", "privacy_unit": "pid",
                             "attributes": attrs, "privacy": {"k": 2},
                             "method_params": {"levels": {"age": 0, "sex": 0}}})


def _oracle(frame: pd.DataFrame) -> tuple[int, int, list[tuple[str, int]]]:
    """Units, rows with a NULL unit, and per QI the units holding more than one value (NULL counted as one)."""
    known = frame[frame["pid"].notna()]
    varying = []
    for q in QUASI:
        n = int(known.groupby("pid")[q].apply(lambda s: s.astype(object).where(s.notna(), "<NULL>").nunique()
                                              ).gt(1).sum())
        if n:
            varying.append((q, n))
    return int(known["pid"].nunique()), int(frame["pid"].isna().sum()), varying


rows = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.one_of(st.none(), st.integers(20, 23)),
                          st.sampled_from(["F", "M", None]), st.sampled_from(["a", "b"])), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(rows, st.booleans())
def test_profile_from_base_counts_equals_source_and_pandas(data, sensitive):
    frame = pd.DataFrame(data, columns=["pid", "age", "sex", "dx"]).astype({"pid": "Int64", "age": "Int64"})
    c = duckdb.connect()
    c.execute("CREATE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR, dx VARCHAR)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", data)
    src = resolve_source(c, "t")
    policy = _policy(sensitive)
    table = base_counts.temp_table("p")
    c.execute(base_counts.create_base_table(policy, src.relation, table).sql(dialect="duckdb"))
    units, nulls, varying = _oracle(frame)
    if nulls:
        for base in (None, table):
            with pytest.raises(SourceError, match=f"NULL on {nulls} row"):
                unit_profile(c, "pid", QUASI, src, base)
        return
    assert unit_profile(c, "pid", QUASI, src) == (units, varying)
    assert unit_profile(c, "pid", QUASI, src, table) == (units, varying)


def test_level_release_reads_the_profile_from_its_base_counts(con):  # noqa: F811
    """A level release with a unit groups the source by the unit no more: the profile's GROUP BY reads the base
    counts (the statements that read the source are the base counts and the released rows)."""
    con.execute("CREATE TABLE t AS SELECT i % 40 AS pid, 20 + (i % 40) % 4 AS age, "
                "CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 'd' || (i % 3) AS dx FROM range(400) r(i)")
    con.execute("UPDATE t SET sex = 'F'")
    seen: list[str] = []

    class Spy:
        def __init__(self, c):
            self._c = c

        def execute(self, q, *a, **k):
            seen.append(str(q))
            return self._c.execute(q, *a, **k)

        def __getattr__(self, name):
            return getattr(self._c, name)

    from anon_sql.engines import DuckDBEngine
    from anon_sql.runner.run import release_on

    policy = _policy(False).to_dict()
    policy["privacy"] = {"k": 2}
    rel = release_on(DuckDBEngine(Spy(con)), policy)
    assert rel.info["people"] == {"in": 40, "released": 40, "suppressed": 0}
    profile = [s for s in seen if '"__null"' in s]
    assert len(profile) == 1 and '"p__base"' in profile[0] and 'FROM "t"' not in profile[0]


@pytest.mark.parametrize("unit, missing", [
    ("CASE WHEN i < 3 THEN NULL ELSE i % 10 END", "NULL on 3 rows"),
    ("CASE WHEN i < 3 THEN 'nan'::DOUBLE ELSE (i % 10)::DOUBLE END", "NULL or NaN on 3 rows"),  # round 12, U01
])
@pytest.mark.parametrize("sensitive", [False, True])
def test_null_or_nan_units_refused_by_a_level_release_leave_nothing(con, unit, missing, sensitive):  # noqa: F811
    con.execute(f"CREATE TABLE t AS SELECT {unit} AS pid, 20 AS age, 'F' AS sex, 'a' AS dx FROM range(50) r(i)")
    before = tables(con)
    with pytest.raises(SourceError, match=f"'pid' of 't' is {missing}"):
        anon_sql.release(con, _policy(sensitive).to_dict())
    assert tables(con) == before
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall() == [(0,)]
