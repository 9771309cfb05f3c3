"""Mondrian's general view joins the source on the QI tuple (a temp map QI tuple → ec_id, issue 17.3) instead of on
``__row``: the released table must be the one the row-keyed join gives, row for row and in the same order. The
oracle is the row-keyed path itself (the same plan with ``tuple_classes`` taken away), on policies that exercise
every input of the planner: k, distinct l-diversity, t-closeness, suppression, NULLs in numeric and categorical QIs,
insensitive columns, an integer and a DOUBLE count column."""
from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import anon_sql
from anon_sql.methods.local_values import assign_rows, tuple_classes
from anon_sql.methods.mondrian import Mondrian
from conftest import working


def _table(n: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 80, n).astype(float)
    age[rng.random(n) < 0.05] = np.nan
    zip_ = rng.choice(["10115", "10117", "20095", "20097", "80331", "80333"], n).astype(object)
    zip_[rng.random(n) < 0.05] = None
    frame = pd.DataFrame({
        "age": age,
        "zip": zip_,
        "sex": rng.choice(["f", "m"], n),
        "disease": rng.choice(["flu", "cold", "hiv", "cancer", "none"], n),
        "note": rng.choice(["a", "b", "c"], n),
        "n": rng.integers(1, 4, n),
        "w": rng.integers(1, 4, n).astype(float),   # a DOUBLE count column: planned per source row
    })
    # rows equal in every column (the assignment numbers them as one group), in scattered positions
    return pd.concat([frame, frame.iloc[::3], frame.iloc[::7]]).sample(frac=1, random_state=seed)


CASES = {
    "k": ({"k": 5}, None),
    "l": ({"k": 3, "l_diversity": {"kind": "distinct", "l": 2}}, None),
    "t": ({"k": 3, "t_closeness": 0.4}, None),
    "suppression": ({"k": 8, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 3}}, None),
    "count": ({"k": 6}, "n"),
    "double count": ({"k": 6}, "w"),
    # every released column a QI or the sensitive attribute: written from the kept rows grouped, not sorted one by one
    "k, grouped": ({"k": 5}, None),
    "l with suppression, grouped": ({"k": 8, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 3}},
                                    None),
    "t, grouped": ({"k": 3, "t_closeness": 0.4}, None),
}


def _policy(name: str, privacy: dict, count: str | None, grouped: bool = False) -> dict:
    attrs = {"age": {"role": "quasi"}, "zip": {"role": "quasi"}, "sex": {"role": "quasi"},
             "disease": {"role": "sensitive"},
             # dropped columns whose values repeat (not people's ids): said so (docs/units.md)
             "note": {"role": "identifier", "rows_are_people": True} if grouped else {"role": "insensitive"}}
    for c in ("n", "w"):
        if c != count:
            attrs[c] = {"role": "identifier", "rows_are_people": True}
    pol = {"name": name, "source": "t", "method": "mondrian", "attributes": attrs, "privacy": privacy}
    if count:
        pol["count_column"] = count
    return pol


@pytest.mark.parametrize("case", list(CASES))
def test_tuple_join_releases_the_row_keyed_table(case, monkeypatch):
    privacy, count = CASES[case]
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", _table())
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    grouped = case.endswith("grouped")
    new = anon_sql.release(con, _policy("by_tuple", privacy, count, grouped))
    plan_of = Mondrian.plan
    seen = []

    def row_keyed(self, ctx):
        plan = plan_of(self, ctx)
        seen.append(plan.tuple_classes is not None and plan.assignment is None)
        # the row-level path: the assignment numbered row by row in the engine, the general view joined on __row
        return dataclasses.replace(plan, tuple_classes=None, assignment=assign_rows(ctx, plan.tuple_classes))

    monkeypatch.setattr(Mondrian, "plan", row_keyed)
    old = anon_sql.release(con, _policy("by_row", privacy, count, grouped))
    assert seen == [True]
    a = con.execute("SELECT * FROM by_tuple").df()
    b = con.execute("SELECT * FROM by_row").df()
    assert len(a) > 0 and a["ec_id"].nunique() > 1
    pd.testing.assert_frame_equal(a, b)   # same rows, same order
    assert new.records_out == old.records_out and new.passed and old.passed
    for part in ("assignment", "ec_values"):
        x = con.execute(f"SELECT * FROM {working('by_tuple', part)} ORDER BY ALL").df()
        y = con.execute(f"SELECT * FROM {working('by_row', part)} ORDER BY ALL").df()
        pd.testing.assert_frame_equal(x, y)
    # the temp map is gone, the general view joined it (its text names the map, not __row)
    temps = con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
    assert not [t for t in temps if t[0].endswith("__tuples")]
    sql = "\n".join(new.sql)
    # grouped: written from the rows with their counts (the session table of them)
    assert '"by_tuple__tuples"' in sql and ('"by_tuple__rows"' in sql) == grouped
    if case == "double count":
        assert con.execute("SELECT sum(w) FROM by_tuple").fetchone()[0] == pytest.approx(_table()["w"].sum())
    con.close()


def test_tuple_classes_refuses_a_tuple_split_across_classes():
    combos = pa.table({"q0": [1.0, 1.0, 2.0, None, None], "q1": ["a", "a", "b", None, None]})
    mapped = tuple_classes(combos, np.array([1, 1, 2, 3, 3]))
    assert mapped.num_rows == 3
    got = {(r["q0"], r["q1"]): r["ec_id"] for r in mapped.to_pylist()}
    assert got == {(1.0, "a"): 1, (2.0, "b"): 2, (None, None): 3}
    assert tuple_classes(combos, np.array([1, 2, 2, 3, 3])) is None     # (1, a) in classes 1 and 2
    assert tuple_classes(combos, np.array([1, 1, 2, 3, 4])) is None     # the NULL tuple in classes 3 and 4


def test_class_values_are_enums_in_text_order():
    """Mondrian's released QIs are ENUMs of the values its classes release (``__ec_values`` as written), listed in
    text order: ordering and comparing them is ordering and comparing their text, NULLs stay NULL, and the released
    values are exactly the class values."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", _table())
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    anon_sql.release(con, _policy("rel", {"k": 5}, None, grouped=True))
    types = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'rel'").fetchall())
    values = working("rel", "ec_values")
    for q in ("age", "zip", "sex"):
        domain = con.execute(f"SELECT enum_range(NULL::{types[q]})").fetchall()[0][0]
        assert types[q].startswith("ENUM") and domain == sorted(domain)
        held = {v for (v,) in con.execute(f"SELECT DISTINCT {q}::VARCHAR FROM {values} WHERE {q} IS NOT NULL")
                .fetchall()}
        assert set(domain) == held
        # every class is released (no suppression budget): the dictionary is exactly the released values
        released = {v for (v,) in con.execute(f"SELECT DISTINCT {q}::VARCHAR FROM rel WHERE {q} IS NOT NULL")
                    .fetchall()}
        assert set(domain) == released
        by_enum = [v for (v,) in con.execute(f"SELECT {q}::VARCHAR FROM rel ORDER BY {q}, rowid").fetchall()]
        by_text = [v for (v,) in con.execute(f"SELECT {q}::VARCHAR FROM rel ORDER BY {q}::VARCHAR, rowid")
                   .fetchall()]
        assert by_enum == by_text
    assert types["disease"] == "VARCHAR"
    assert con.execute("SELECT count(*) FROM rel WHERE age IS NULL").fetchall()[0][0] > 0   # NULLs kept


def test_class_values_stay_text_when_classes_can_be_suppressed():
    """With a suppression budget a class may be deleted after the table is written, and an ENUM's dictionary leaves
    with the table (an export, a shared file): a suppressed class's values must never be in it, so the class values
    stay text."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", _table())
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    anon_sql.release(con, _policy("rel", {"k": 5, "max_suppression": 0.05}, None, grouped=True))
    types = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'rel'").fetchall())
    assert all(types[q] == "VARCHAR" for q in ("zip", "sex")) and not types["age"].startswith("ENUM")
