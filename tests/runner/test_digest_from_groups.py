"""The digests a release records (``released_values``: each QI's values with their rows, and the ``contents`` of
every row) are read from the session table of groups with their counts that the table was written from, not from
the table's every row (issue 24.6). They must be the table's own digests, bit for bit: on hypothesis data through
every DuckDB path that writes from groups (level plans with and without a privacy unit, Mondrian with a unit), with
suppression, NULLs and repeated rows; and a table of groups whose counts do not add up to the table is not used."""
from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings, strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.runner.digests import noise_flag_of, released_values_digest

people = st.lists(st.tuples(st.integers(20, 69), st.sampled_from(["F", "M", None]),
                            st.lists(st.sampled_from(["flu", "Flu", "cold", None, "a,b"]), min_size=1, max_size=4)),
                  min_size=4, max_size=40)


def _policy(method: str, unit: bool) -> dict:
    attrs = {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 50]}},
             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
             "dx": {"role": "insensitive"},
             "pid": {"role": "identifier"}}
    policy = {"name": "rel", "source": "t", "method": method, "seed": 5, "attributes": attrs,
              "privacy": {"k": 3, "max_suppression": 0.5}}
    if unit:
        policy["privacy_unit"] = "pid"
    else:   # one row a person: the visits' rows are the records
        attrs["pid"]["rows_are_people"] = True
    if method == "levels":
        policy["method_params"] = {"levels": {"age": 1, "sex": 0}}
    return policy


@settings(max_examples=12, deadline=None)
@given(people, st.sampled_from([("mondrian", True), ("levels", True), ("levels", False)]))
def test_recorded_digests_are_the_tables_own(persons, case):
    method, unit = case
    rows = [(pid, age, sex, dx) for pid, (age, sex, visits) in enumerate(persons) for dx in visits]
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR, dx VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    policy = _policy(method, unit)
    try:
        rel = anon_sql.release(con, policy)
    except anon_sql.PrivacyRequirementError:
        return
    assert '"rel__rows"' in "\n".join(rel.sql)     # written from its groups: the path under test
    recorded = rel.info["released_values"]
    again = released_values_digest(con, exp.Table(this=exp.to_identifier("rel")), ["age", "sex"],
                                   noise_flag_of(rel.policy))
    assert recorded == again
    assert anon_sql.check(con, "rel")["passed"].all()


def test_groups_that_do_not_add_up_are_not_read():
    """A table of groups whose counts are not the table's rows (here one row short) leaves the digests to the
    table itself."""
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES ('a', 1), ('a', 1), ('b', 2)) v(q, ec_id)")
    con.execute("CREATE TABLE g AS SELECT * FROM (VALUES ('a', 1, 2), ('b', 2, 2)) v(q, ec_id, __w)")
    con.execute("CREATE TABLE ok AS SELECT * FROM (VALUES ('a', 1, 2), ('b', 2, 1)) v(q, ec_id, __w)")
    table = exp.Table(this=exp.to_identifier("r"))
    own = released_values_digest(con, table, ["q"])
    assert released_values_digest(con, table, ["q"], counted=exp.Table(this=exp.to_identifier("g"))) == own
    assert released_values_digest(con, table, ["q"], counted=exp.Table(this=exp.to_identifier("ok"))) == own
    con.execute("UPDATE ok SET q = 'c' WHERE q = 'b'")   # the same counts, other rows: a digest of other rows
    assert released_values_digest(con, table, ["q"], counted=exp.Table(this=exp.to_identifier("ok"))) != own


if __name__ == "__main__":
    pytest.main([__file__])
