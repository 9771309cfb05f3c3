"""A DuckDB level release with a privacy unit whose table holds no unit: the checks count people in the base counts
of the kept classes through the row map (``<release>__people``), tied to the table by a per-class reconciliation of
rows (issue 24.6, compiler/release.py ``counts_people_from_base``). Against a pandas oracle that counts people, and
against the release that carries the unit on every row (the path it replaces): the same table, classes and checks;
a people table that disagrees with the table's rows stops the release and leaves the database as it was."""
from __future__ import annotations

from collections import Counter

import duckdb
import pandas as pd
import pytest
import sqlglot
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.common.sqlbuild import render
from anon_sql.compiler import release as release_sql, views
from anon_sql.runner import verify

SEED = 5


def _policy(name: str, l_div: bool = True) -> dict:
    privacy: dict = {"k": 2, "max_suppression": 1.0}
    if l_div:
        privacy["l_diversity"] = {"kind": "distinct", "l": 2}
    return {"name": name, "source": "t", "method": "levels", "privacy_unit": "pid", "seed": SEED,
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "pid": {"role": "identifier"},
                           "dx": {"role": "sensitive"},
                           "note": {"role": "insensitive"}},
            "privacy": privacy, "method_params": {"levels": {"age": 1, "sex": 0}}}


def _table(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    con.execute("CREATE OR REPLACE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR, dx VARCHAR, note VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)


def _statements(rel) -> str:
    return "\n".join(rel.sql)


# a person: age, sex and visits of (diagnosis, note); QIs constant per person
persons = st.lists(st.tuples(st.integers(20, 39), st.sampled_from(["F", "M"]),
                             st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["x", "y", None])),
                                      min_size=1, max_size=4)),
                   min_size=2, max_size=24)


@settings(max_examples=20, deadline=None)
@given(persons)
def test_people_per_class_match_pandas(people):
    """k = 2 and distinct 2-diversity counted in people (docs/units.md), suppression allowed: the kept classes,
    their people and distinct values, the rows released and the people released are pandas' recount of the
    source."""
    rows = [(pid, age, sex, dx, note) for pid, (age, sex, visits) in enumerate(people) for dx, note in visits]
    frame = pd.DataFrame(rows, columns=["pid", "age", "sex", "dx", "note"])
    frame["band"] = (frame["age"] // 10 * 10).map(lambda lo: f"[{lo}-{lo + 9}]")
    per_class = frame.groupby(["band", "sex"]).agg(people=("pid", "nunique"),
                                                   values=("dx", lambda s: s.nunique(dropna=False)))
    # docs/units.md: n_C(v) is the people of C holding v; distinct l = 2 also needs max n_C(v) < |C|
    holders = frame.groupby(["band", "sex", "dx"], dropna=False)["pid"].nunique().groupby(level=[0, 1]).max()
    ok = per_class[(per_class["people"] >= 2) & (per_class["values"] >= 2) & (holders < per_class["people"])]
    kept = frame[pd.MultiIndex.from_frame(frame[["band", "sex"]]).isin(ok.index)]
    con = duckdb.connect()
    anon_sql.install(con)
    _table(con, rows)
    if kept.empty:
        return   # nothing to release: refusals are tested elsewhere
    rel = anon_sql.release(con, _policy("pb"))
    assert "__people" in _statements(rel)                        # the path under test
    classes = rel.classes.assign(age=lambda d: d["age"].astype(str)).set_index(["age", "sex"]).sort_index()
    assert classes["__size"].astype(int).to_dict() == ok["people"].astype(int).sort_index().to_dict()
    assert classes["__distinct__dx"].astype(int).to_dict() == ok["values"].astype(int).sort_index().to_dict()
    out = con.execute("SELECT CAST(age AS VARCHAR) AS age, sex, dx, note FROM pb").df()
    def norm(values):
        return [None if pd.isna(v) else v for v in values]
    assert Counter(zip(out["age"], out["sex"], norm(out["dx"]), norm(out["note"]))) == Counter(
        zip(kept["band"], kept["sex"], norm(kept["dx"]), norm(kept["note"])))
    released = int(kept["pid"].nunique())
    assert rel.info["people"] == {"in": len(people), "released": released, "suppressed": len(people) - released}
    assert "__unit" not in out.columns


@settings(max_examples=10, deadline=None)
@given(persons)
def test_same_release_as_the_unit_on_every_row(people):
    """The release with people counted in the base counts equals the one whose table carries each row's unit until
    the checks have read it: the same rows in the same order, the same classes and check rows."""
    rows = [(pid, age, sex, dx, note) for pid, (age, sex, visits) in enumerate(people) for dx, note in visits]
    con = duckdb.connect()
    anon_sql.install(con)
    _table(con, rows)
    try:
        new = anon_sql.release(con, _policy("a_new"))
    except anon_sql.PrivacyRequirementError as err:
        new = str(err).replace("a_new", "?")
    with pytest.MonkeyPatch.context() as mp:   # the previous path: the unit on every row of the table
        mp.setattr(release_sql, "counts_people_from_base", lambda ci: False)
        mp.setattr(views, "counts_people_from_base", lambda ci: False)
        try:
            old = anon_sql.release(con, _policy("a_old"))
        except anon_sql.PrivacyRequirementError as err:
            old = str(err).replace("a_old", "?")
    if isinstance(new, str) or isinstance(old, str):
        assert new == old
        return
    assert "__people" in _statements(new) and "__people" not in _statements(old)
    got = con.execute("SELECT * FROM a_new ORDER BY rowid").fetchall()
    want = con.execute("SELECT * FROM a_old ORDER BY rowid").fetchall()
    assert got == want
    pd.testing.assert_frame_equal(new.classes.reset_index(drop=True), old.classes.reset_index(drop=True))
    pd.testing.assert_frame_equal(new.checks.reset_index(drop=True), old.checks.reset_index(drop=True))
    assert new.info["people"] == old.info["people"]
    assert (new.records_in, new.records_out, new.suppressed) == (old.records_in, old.records_out, old.suppressed)


def test_rows_apart_from_the_people_counted_stop_the_release(monkeypatch):
    """A people table whose rows disagree with the table's (here one class counted twice) fails the
    reconciliation: nothing is released and the database is as it was."""
    con = duckdb.connect()
    anon_sql.install(con)
    rows = [(p, 20 + p % 2, "F", "ab"[p % 2], "x") for p in range(8) for _ in range(2)]
    _table(con, rows)
    before = con.execute("SELECT table_schema, table_name FROM information_schema.tables ORDER BY ALL").fetchall()
    honest = release_sql.people_query

    def doubled(ci, names):
        q = render(honest(ci, names))
        return sqlglot.parse_one(f"SELECT * REPLACE (__w * (1 + (ec_id = 1)::INT) AS __w) FROM ({q}) AS x",
                                 read="duckdb")

    monkeypatch.setattr(views, "people_query", doubled)
    with pytest.raises(anon_sql.PrivacyRequirementError, match="reconciliation fails for 1 class"):
        anon_sql.release(con, _policy("bad", l_div=False))
    after = con.execute("SELECT table_schema, table_name FROM information_schema.tables ORDER BY ALL").fetchall()
    assert after == before


def test_class_rows_apart_counts_classes_and_rows():
    """The reconciliation query alone: classes missing on either side and classes with other row counts."""
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1), (1), (2), (3)) v(ec_id)")
    con.execute('CREATE TABLE p AS SELECT * FROM (VALUES (1, 2), (2, 3), (4, 1)) v(ec_id, "__w")')
    names = views.ReleaseNames("r", work=None)
    assert verify.class_rows_apart(con, names, sqlglot.exp.to_table("p")) == (3, 4)   # 2: 1 vs 3 rows; 3 and 4 on one side only
    con.execute("DELETE FROM r WHERE ec_id = 3")
    con.execute("INSERT INTO r VALUES (2), (2), (4)")
    con.execute("DELETE FROM p WHERE ec_id = 2")
    con.execute("INSERT INTO p VALUES (2, 3)")
    assert verify.class_rows_apart(con, names, sqlglot.exp.to_table("p")) == (0, 0)


@settings(max_examples=8, deadline=None)
@given(persons)
def test_mondrian_people_from_the_base_counts(people):
    """Mondrian with a unit counts people from the base counts resolve made (one row per person and combination):
    its plan, its classes and its checks (``<release>__people``), and writes its table from groups with no unit per
    row — the same release as without base counts (the unit on every row until the checks have read it): rows and
    order, classes, people, plan; and the base counts are gone afterwards."""
    from anon_sql.engines import DuckDBEngine

    rows = [(pid, age, sex, dx, note) for pid, (age, sex, visits) in enumerate(people) for dx, note in visits]
    con = duckdb.connect()
    anon_sql.install(con)
    _table(con, rows)

    def mondrian(name: str):
        policy = _policy(name, l_div=False)
        policy.update(method="mondrian", method_params={})
        try:
            return anon_sql.release(con, policy)
        except anon_sql.PrivacyRequirementError as err:
            return str(err).replace(name, "?")

    new = mondrian("m_new")
    with pytest.MonkeyPatch.context() as mp:   # no base counts for a method planning on combinations
        mp.setattr(DuckDBEngine, "combination_base", False)
        old = mondrian("m_old")
    if isinstance(new, str) or isinstance(old, str):
        assert new == old
        return
    assert "__people" in _statements(new) and "__people" not in _statements(old)   # no unit in the new table
    assert (con.execute("SELECT * FROM m_new ORDER BY rowid").fetchall()
            == con.execute("SELECT * FROM m_old ORDER BY rowid").fetchall())
    pd.testing.assert_frame_equal(new.classes.reset_index(drop=True), old.classes.reset_index(drop=True))
    assert new.info["people"] == old.info["people"] and new.plan == old.plan
    assignment = 'SELECT * FROM anon_work."{}__assignment" ORDER BY ALL'   # row key → class, from the base counts
    assert con.execute(assignment.format("m_new")).fetchall() == con.execute(assignment.format("m_old")).fetchall()
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '%__base'").fetchall()[0][0]
