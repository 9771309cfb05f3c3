"""A level release on DuckDB may group its plain released columns with its base counts in the same pass
(``<release>__carry``, data/base_counts.py ``create_carried_tables``) and group its released rows from those counts
instead of a second pass over the source (issue 29.2). That is a physical choice: the released table, its order, the
digests the release records and ``check`` must be exactly those of the release without it, and the carried table
must never outlive the release. Whether to carry is read from a seeded sample (``carry_probe``, ``worth_carrying``),
whose counting is checked against pandas and whose decision against golden cases."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.common.sqlbuild import render
from anon_sql.compiler.release import carry_candidates
from anon_sql.data import base_counts
from anon_sql.policy.model import Policy


def _carried(rel) -> bool:
    """The release's statements made and read the carried counts."""
    return '"rel__carry"' in "\n".join(rel.sql)


def _all_tables(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """Every table but the catalog's (which records the refused attempt, as it records every one)."""
    return con.execute("SELECT database_name, schema_name, table_name, estimated_size FROM duckdb_tables() "
                       "WHERE schema_name <> 'anon' ORDER BY ALL").fetchall()


def _temp_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY 1").fetchall()]


@pytest.fixture
def always_carry(monkeypatch):
    """The probe reads every row and decides on any number of them: carrying happens whenever it groups the rows
    four to one."""
    monkeypatch.setattr(base_counts, "CARRY_SAMPLE_PERCENT", 100)
    monkeypatch.setattr(base_counts, "CARRY_MIN_SAMPLED", 1)


@pytest.fixture
def never_carry(monkeypatch):
    monkeypatch.setattr(base_counts, "CARRY_MIN_SAMPLED", 10 ** 12)


# -- the decision --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampled, distinct, singles, percent, expected", [
    (10_000, 10, 0, 1, False),           # below CARRY_MIN_SAMPLED: a small source, nothing to save
    (118_784, 19_182, 1_213, 1, True),   # Adult resampled to 10M (measured): 19,182 + 10M x 1.0 % <= 2.97M
    (100_000, 100_000, 100_000, 1, False),   # near-unique rows: every sampled tuple seen once
    (100_000, 20_000, 30_000, 1, False),     # 20k + 10M x 30 % = 3.02M > 2.5M
    (100_000, 20_000, 20_000, 1, True),      # 20k + 10M x 20 % = 2.02M <= 2.5M
    (40, 10, 0, 100, True),                  # the whole source read: 10 tuples for 40 rows
    (40, 11, 0, 100, False),                 # 11 > 40 / 4
])
def test_worth_carrying(sampled, distinct, singles, percent, expected):
    assert base_counts.worth_carrying(sampled, distinct, singles, percent=percent, min_sampled=16_384
                                      if percent == 1 else 1) is expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 3), st.sampled_from([1.5, None])),
                min_size=0, max_size=60))
def test_probe_counts_the_sampled_tuples(rows):
    """Sampling everything, the probe's (rows, distinct tuples, tuples seen once) are pandas' over the rows, NULLs
    being values."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x VARCHAR, y INTEGER, z DOUBLE)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    probe = base_counts.carry_probe(exp.to_table("t"), ["x", "y", "z"], seed=3)
    probe.find(exp.TableSample).set("percent", exp.Literal.number(100))
    sampled, distinct, singles = con.execute(render(probe)).fetchall()[0]
    sizes = pd.DataFrame(rows, columns=["x", "y", "z"], dtype=object).value_counts(dropna=False)
    assert (sampled, distinct, singles) == (len(rows), len(sizes), int((sizes == 1).sum()))


def test_candidates_are_plain_insensitive_columns():
    """Only columns released as they are: no mask, no perturbation, no identifier, not a key of the base counts,
    and none with a count column or a privacy unit."""
    attrs = {"age": {"role": "quasi"}, "sex": {"role": "quasi"}, "dx": {"role": "sensitive"},
             "zip": {"role": "insensitive"}, "city": {"role": "insensitive"},
             "phone": {"role": "insensitive",
                       "mask": {"function": "partial", "keep_start": 2, "pad": "X", "keep_end": 0}},
             "pid": {"role": "identifier"}}
    policy = Policy.from_dict({"name": "r", "source": "t", "method": "levels", "attributes": attrs,
                               "privacy": {"k": 2}})
    columns = ["pid", "age", "sex", "dx", "zip", "city", "phone"]
    assert carry_candidates(policy, columns) == ["zip", "city"]
    assert carry_candidates(policy.replace(privacy_unit="pid"), columns) == []
    assert carry_candidates(policy.replace(count_column="n"), columns + ["n"]) == []


# -- the release ---------------------------------------------------------------------------------------------------
def _source(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    con.execute("CREATE OR REPLACE TABLE t (age INTEGER, sex VARCHAR, dx VARCHAR, grade VARCHAR, note VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)


def _policy(method: str = "levels", **privacy) -> dict:
    attrs = {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 50]}},
             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
             "dx": {"role": "sensitive"},
             "grade": {"role": "insensitive"},
             "note": {"role": "insensitive"}}
    policy = {"name": "rel", "source": "t", "method": method, "seed": 11, "attributes": attrs,
              "privacy": {"k": 3, "max_suppression": 0.3, **privacy}}
    if method == "levels":
        policy["method_params"] = {"levels": {"age": 1, "sex": 0}}
    return policy


def _released(monkeypatch, rows: list[tuple], carry: bool, policy: dict) -> tuple[list, dict, list, list[str]]:
    """The released table in its order, the digests recorded, check's rows, and whether it was carried."""
    with monkeypatch.context() as m:
        if carry:
            m.setattr(base_counts, "CARRY_SAMPLE_PERCENT", 100)
            m.setattr(base_counts, "CARRY_MIN_SAMPLED", 1)
        else:
            m.setattr(base_counts, "CARRY_MIN_SAMPLED", 10 ** 12)
        con = duckdb.connect()
        anon_sql.install(con)
        _source(con, rows)
        rel = anon_sql.release(con, policy)
        table = con.execute("SELECT * FROM rel ORDER BY rowid").fetchall()
        digests = {k: rel.info.get(k) for k in ("released_values", "contents")}
        checked = anon_sql.check(con, "rel")
        assert checked["passed"].all()
        assert not [t for t in _temp_tables(con) if t.startswith("rel__")]
        rows_checked = checked.astype(object).where(checked.notna(), None).to_dict("records")   # NaN != NaN
        return table, digests, rows_checked, _carried(rel)


visit = st.tuples(st.integers(20, 69), st.sampled_from(["F", "M", None]), st.sampled_from(["flu", "cold", None]),
                  st.sampled_from(["A", "B", None]), st.sampled_from(["x", "y"]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(visit, min_size=6, max_size=80), st.sampled_from(["levels", "optimal"]))
def test_carried_release_is_the_same_release(monkeypatch, rows, method):
    """Carried or not, the same table in the same order, the same recorded digests, the same check; whenever the
    rows group four to one the carried counts were used (and dropped)."""
    policy = _policy(method)
    try:
        plain = _released(monkeypatch, rows, False, policy)
    except anon_sql.PrivacyRequirementError:
        with pytest.raises(anon_sql.PrivacyRequirementError):
            _released(monkeypatch, rows, True, policy)
        return
    carried = _released(monkeypatch, rows, True, policy)
    assert carried[:3] == plain[:3]
    assert not plain[3]
    groups = len(set((r[0], r[1], r[2], r[3], r[4]) for r in rows))
    assert carried[3] == (groups <= len(rows) / 4)


def test_large_grouped_source_is_carried(monkeypatch):
    """The sample as it runs (1 % of the vectors, seeded: ~47k of 4M rows, well above CARRY_MIN_SAMPLED) on rows
    of 100 tuples: carried, and the release is the uncarried one."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE t AS SELECT (20 + i % 50)::INTEGER AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END "
                "AS sex, CASE WHEN i % 3 = 0 THEN 'flu' ELSE 'cold' END AS dx, CASE WHEN i % 7 = 0 THEN 'A' ELSE 'B' "
                "END AS grade, 'x' AS note FROM range(4000000) r(i)")
    rel = anon_sql.release(con, _policy())
    assert _carried(rel)
    carried = con.execute("SELECT sex, age, dx, grade, note, ec_id, count(*) FROM rel GROUP BY ALL ORDER BY ALL"
                          ).fetchall()
    with monkeypatch.context() as m:
        m.setattr(base_counts, "CARRY_MIN_SAMPLED", 10 ** 12)
        plain = anon_sql.release(con, _policy(), replace=True)
    assert not _carried(plain)
    assert con.execute("SELECT sex, age, dx, grade, note, ec_id, count(*) FROM rel GROUP BY ALL ORDER BY ALL"
                       ).fetchall() == carried
    assert not [t for t in _temp_tables(con) if t.startswith("rel__")]


def test_refused_release_leaves_no_carried_table(always_carry):
    """A release refused for suppression (its advice runs a trial release that makes the counts again) leaves the
    database and the session as they were."""
    con = duckdb.connect()
    anon_sql.install(con)
    _source(con, [(20 + i % 3, "F", "flu", "A", "x") for i in range(40)] + [(69, "M", "cold", "B", "y")])
    before, tables = _temp_tables(con), _all_tables(con)
    with pytest.raises(anon_sql.PrivacyRequirementError, match="max_suppression = 0.0244"):
        anon_sql.release(con, _policy(max_suppression=0.0))
    assert _temp_tables(con) == before
    assert _all_tables(con) == tables
    rel = anon_sql.release(con, _policy())   # and the same release with its budget goes through, carried
    assert _carried(rel)
    assert _temp_tables(con) == before


def test_never_carry_fixture_keeps_the_second_pass(never_carry):
    con = duckdb.connect()
    anon_sql.install(con)
    _source(con, [(20 + i % 3, "F", "flu", "A", "x") for i in range(40)])
    rel = anon_sql.release(con, _policy())
    assert not _carried(rel)
