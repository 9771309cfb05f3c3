"""One read of the base counts serves the coverage check, the record count and the lattice search (issue 29.1):
the value counts grouped in Arrow equal an independent pandas count of the source (NULLs, numbers, a count column),
and a search that codes the shared rows chooses, scores and releases exactly what it does when it reads the base
table itself."""
from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.data import base_counts
from anon_sql.policy.model import Policy
from anon_sql.runner import plan as plan_stage
from anon_sql.common.sqlbuild import ident
from sqlglot import exp

from conftest import ADULT_QIS, adult


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(29)
    n = 400
    return pd.DataFrame({
        "age": pd.array(rng.integers(17, 90, n), dtype="Int64"),
        "zip": rng.choice(["1301", "1302", "1410", None], n),
        "sex": rng.choice(["F", "M"], n),
        "n": rng.integers(1, 4, n),
    }).assign(age=lambda d: d["age"].mask(rng.random(n) < 0.05))


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("count_column", [None, "n"])
def test_value_counts_from_the_shared_rows_match_pandas(count_column, share):
    con = duckdb.connect()
    frame = _frame()
    con.register("src_frame", frame)
    con.execute("CREATE TABLE src AS SELECT * FROM src_frame")
    policy = Policy.from_dict({"name": "r", "source": "src", "count_column": count_column,
                               "default_role": "insensitive",
                               "attributes": {q: {"role": "quasi"} for q in ("age", "zip", "sex")},
                               "privacy": {"k": 2}})
    table = exp.Table(this=ident("base"))
    con.execute(base_counts.create_base_table(policy, exp.Table(this=ident("src")), table).sql(dialect="duckdb")
                .replace("TEMPORARY ", ""))
    reader = base_counts.reader(con, policy, table)
    reader.share = share          # True: the rows fetched and grouped in Arrow; False: one GROUPING SETS query
    weight = frame[count_column] if count_column else pd.Series(1, index=frame.index)
    for q in ("age", "zip", "sex"):
        got = reader(q)
        text = frame[q].map(lambda v: None if pd.isna(v) else str(v))
        expected = weight.groupby(text.fillna("<NULL>")).sum()
        shown = dict(zip(got["v"].map(lambda v: "<NULL>" if pd.isna(v) else v), got["n"].astype(int)))
        assert shown == {k: int(v) for k, v in expected.items()}, q
    base_rows = con.execute("SELECT count(*) FROM base").fetchone()[0]
    assert (reader.rows.num_rows if reader.rows is not None else None) == (base_rows if share else None)
    assert base_counts.total(reader, policy) == int(weight.sum())


@pytest.mark.parametrize("max_suppression", [0.0, 0.04])
def test_search_on_shared_rows_is_the_search_on_the_base_table(adult, monkeypatch, max_suppression):
    policy = {"name": "shared_base", "source": "adult", "method": "optimal", "default_role": "insensitive",
              "attributes": {q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in ADULT_QIS},
              "privacy": {"k": 5, "max_suppression": max_suppression}}
    shared = anon_sql.release(adult, policy, replace=True)
    assert shared.info["nodes_evaluated"] > 0
    make = plan_stage.make_context
    seen = []

    def unshared(resolved, *args, **kwargs):
        seen.append(resolved.base_rows is not None)
        return dataclasses.replace(make(resolved, *args, **kwargs), base_rows=None)

    monkeypatch.setattr("anon_sql.runner.run.make_context", unshared)
    alone = anon_sql.release(adult, policy, replace=True)
    assert seen == [True]          # the first release did get the shared rows
    assert shared.plan == alone.plan
    assert shared.info["score"] == alone.info["score"]
    assert shared.info["nodes_evaluated"] == alone.info["nodes_evaluated"]
    assert (shared.records_out, shared.suppressed) == (alone.records_out, alone.suppressed)
    pd.testing.assert_frame_equal(shared.classes.reset_index(drop=True), alone.classes.reset_index(drop=True))
