"""Hostile round 20, U05 / U06: a release's table dropped (here renamed away) and a table of the user's created under
its name. ``check`` reached DuckDB's binder (exit 1, "internal error") and export gave its raw Binder Error; now
check fails one ``table`` row naming why (exit 3), export refuses in one line (exit 2) and writes nothing, and the
table put back passes again. Round 22: the same with the check program cached (Y62–Y66b: the cached program ran over
the recreated table and passed), a view put in the table's place (Y29), and a column of the release dropped or
renamed (Y22–Y27: DuckDB's binder error, exit 1)."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import SourceError


POLICY = {"name": "rel", "source": "t", "method": "levels", "method_params": {"levels": {"age": 1}},
          "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 100]}},
                         "dx": {"role": "insensitive"}},
          "privacy": {"k": 2}}


@pytest.fixture(params=["off", "cache"])
def con(monkeypatch, tmp_path, request):
    monkeypatch.setenv("ANON_SQL_CACHE", "off" if request.param == "off" else str(tmp_path / "cache"))
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT 20 + range % 30 AS age, 'd' || (range % 4) AS dx FROM range(200)")
    anon_sql.release(c, POLICY)
    return c


@pytest.mark.parametrize("same_columns", [False, True])
def test_check_and_export_of_a_swapped_table(con, tmp_path, same_columns):
    con.execute("ALTER TABLE rel RENAME TO rel_kept")
    con.execute("CREATE TABLE rel AS SELECT * FROM rel_kept" if same_columns else "CREATE TABLE rel AS SELECT 1 AS x")
    found = anon_sql.check(con, "rel")
    assert list(found["check"]) == ["table"] and not found["passed"].any()
    assert "not the table anon_sql released" in found["message"].iloc[0]
    target = tmp_path / "out.parquet"
    with pytest.raises(SourceError, match="not the table anon_sql released"):
        anon_sql.export(con, "rel", str(target))
    assert not target.exists()
    con.execute("DROP TABLE rel")
    con.execute("ALTER TABLE rel_kept RENAME TO rel")   # the released table back: it passes
    assert anon_sql.check(con, "rel")["passed"].all()


@pytest.mark.parametrize("replacement", ["CREATE VIEW rel AS SELECT * FROM rel_kept",
                                         "CREATE TABLE rel AS SELECT * FROM rel_kept"])
def test_a_view_or_a_copy_in_the_tables_place_fails(con, replacement):
    """Y29 (a view) and Y66 (a copy of the same rows: with the program cached, it passed)."""
    anon_sql.check(con, "rel")   # the program compiled and cached (with the cache on)
    con.execute("ALTER TABLE rel RENAME TO rel_kept")
    con.execute(replacement)
    found = anon_sql.check(con, "rel")
    assert list(found["check"]) == ["table"] and not found["passed"].any(), found


@pytest.mark.parametrize("edit", ["ALTER TABLE rel DROP COLUMN dx", "ALTER TABLE rel RENAME COLUMN age TO years"])
def test_a_released_column_dropped_or_renamed_fails_one_row(con, tmp_path, edit):
    """Y22–Y27: check fails the ``table`` row naming the column; export refuses in one line."""
    con.execute(edit)
    found = anon_sql.check(con, "rel")
    assert list(found["check"]) == ["table"] and "lost column" in found["message"].iloc[0]
    with pytest.raises(SourceError, match="lost column"):
        anon_sql.export(con, "rel", str(tmp_path / "out.parquet"))

