"""One way a frame reaches a table (``common.sqlbuild.create_from_frame``): the engine's ``put_frame`` (a table the
release remembers, so a refused release drops it) and the SDC modules' ``store_frame`` (a TEMP table) give the
frame's rows, and neither leaves its scratch view registered, also when the CREATE fails."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from anon_sql.common.sqlbuild import create_from_frame
from anon_sql.engines.duckdb_engine import DuckDBEngine
from anon_sql.sdc.sqlparts import store_frame

FRAME = pd.DataFrame({"a b": [1, 2, 3], 'q"x': ["x", None, "z"]})


def scratch_views(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]


def test_put_frame_and_store_frame_give_the_frames_rows():
    con = duckdb.connect()
    engine = DuckDBEngine(con)
    table = engine.put_frame(FRAME, "w 1")
    assert engine.created == ["w 1"] and table.name == "w 1"
    store_frame(con, "t 2", FRAME)
    for name in ('"w 1"', '"t 2"'):
        got = con.execute(f"SELECT * FROM {name} ORDER BY 1").df()
        pd.testing.assert_frame_equal(got, FRAME, check_dtype=False)
    assert con.execute("SELECT temporary FROM duckdb_tables() WHERE table_name = 't 2'").fetchall() == [(True,)]
    assert scratch_views(con) == []


def test_the_scratch_view_is_unregistered_when_the_create_fails():
    con = duckdb.connect()

    def failing(view):
        assert len(con.execute(f"SELECT * FROM {view.sql(dialect='duckdb')}").fetchall()) == 3   # readable here
        raise duckdb.CatalogException("no")

    with pytest.raises(duckdb.CatalogException):
        create_from_frame(con, FRAME, "__scratch", failing)
    assert scratch_views(con) == []
    with pytest.raises(duckdb.CatalogException):
        con.execute('SELECT * FROM "__scratch"')
