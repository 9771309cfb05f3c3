"""Mondrian on DuckDB reads the source once (issue 29.2): resolve aggregates it into the base counts, and the
coverage check, the plan, the counted released rows and ``__assignment`` read those. The oracle is the same release
with the base counts switched off (``DuckDBEngine.combination_base = False``: every statement reads the source as
before): same rows in the same order, same assignment, same class values."""
from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from sqlglot import exp

import anon_sql
from anon_sql.engines import DuckDBEngine
from anon_sql.runner import digests
from anon_sql.runner.run import release_on
from conftest import working


class Recorder:
    """The connection, with the text of every statement run through ``execute`` or ``sql`` kept."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        self.statements: list[str] = []

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self.statements.append(str(query))
        return self._con.execute(query, *args, **kwargs)

    def sql(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self.statements.append(str(query))
        return self._con.sql(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _frame(extra: bool, count: bool) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 600
    frame = pd.DataFrame({
        "age": rng.integers(18, 80, n).astype("float64"),
        "city": rng.choice(["Lyon", "Nice", "O'Hara", "Ünïcode", None], n),
        "sex": rng.choice(["f", "m"], n),
        "disease": rng.choice(["flu", "cold", "hiv", None], n),
    })
    frame.loc[::17, "age"] = np.nan
    if extra:
        frame["note"] = rng.choice(["x", "y", "z"], n)
    if count:
        frame["w"] = rng.integers(1, 4, n)
    return frame


def _policy(name: str, extra: bool, count: bool, suppression: float) -> dict:
    attrs: dict = {"age": {"role": "quasi"}, "city": {"role": "quasi"}, "sex": {"role": "quasi"},
                   "disease": {"role": "sensitive"}}
    if extra:
        attrs["note"] = {"role": "insensitive"}
    pol = {"name": name, "source": "t", "method": "mondrian", "attributes": attrs,
           "privacy": {"k": 5, "max_suppression": suppression}}
    if count:
        pol["count_column"] = "w"
    return pol


def _connection(frame: pd.DataFrame) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return con


def _reads_source(text: str) -> bool:
    """A statement that reads the rows of table ``t`` (a view's definition or a DESCRIBE only names it)."""
    for tree in sqlglot.parse(text, read="duckdb"):
        if tree is None or isinstance(tree, exp.Describe) or (
                isinstance(tree, exp.Create) and (tree.args.get("kind") or "").upper() == "VIEW"):
            continue
        if any(t.name == "t" and not t.db for t in tree.find_all(exp.Table)):
            return True
    return False


def test_the_source_is_read_once(monkeypatch):
    # the source digest that check compares with (one more scan) is taken up to DIGEST_MAX_RECORDS only: the large
    # tables this is about do without it
    monkeypatch.setattr(digests, "DIGEST_MAX_RECORDS", 0)
    con = _connection(_frame(extra=False, count=False))
    rec = Recorder(con)
    rel = release_on(DuckDBEngine(rec), _policy("once", False, False, 0.0))
    assert rel.passed and rel.records_out == 600
    reads = [s for s in rec.statements if _reads_source(s)]
    assert len(reads) == 1 and "__base" in reads[0]      # the base counts, nothing else
    assert con.execute("SELECT count(*) FROM anon_work.once__assignment").fetchone()[0] == 600
    con.close()


@pytest.mark.parametrize("extra,count,suppression", [(False, False, 0.0), (False, False, 0.3), (True, False, 0.0),
                                                     (False, True, 0.0), (True, True, 0.2)])
def test_base_counts_release_what_the_source_reads_release(extra, count, suppression, monkeypatch):
    frame = _frame(extra, count)
    con = _connection(frame)
    new = anon_sql.release(con, _policy("by_base", extra, count, suppression))
    monkeypatch.setattr(DuckDBEngine, "combination_base", False)
    old = anon_sql.release(con, _policy("by_source", extra, count, suppression))
    assert "__base" not in "\n".join(old.sql)
    # an insensitive column or a count column: the released rows and the assignment come from the source
    assert ("__base" in "\n".join(new.sql)) == (not extra and not count)
    a = con.execute("SELECT * FROM by_base").df()
    b = con.execute("SELECT * FROM by_source").df()
    assert len(a) > 0 and a["ec_id"].nunique() > 1
    pd.testing.assert_frame_equal(a, b)                       # same rows, same order
    assert (new.records_out, new.suppressed, new.passed) == (old.records_out, old.suppressed, old.passed)
    pd.testing.assert_frame_equal(new.checks, old.checks)
    for part in ("assignment", "ec_values"):
        x = con.execute(f"SELECT * FROM {working('by_base', part)} ORDER BY ALL").df()
        y = con.execute(f"SELECT * FROM {working('by_source', part)} ORDER BY ALL").df()
        pd.testing.assert_frame_equal(x, y)
    temps = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]
    assert not [t for t in temps if t.endswith("__base")]    # the session table went with the release
    con.close()
