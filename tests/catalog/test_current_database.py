"""The catalog is the current database's: after ``USE other`` (another attached database), catalog statements read
``other``, so another database's catalog must not count as installed (session 14 noticed: they failed with DuckDB's
raw "schema anon does not exist"). They now say there is no such release, and a release made there installs its
own catalog; the first database's releases are untouched and found again after ``USE`` back."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import AnonSQLError

LV = ("CREATE ANONYMIZED VIEW lv WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0}}) AS "
      "SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'top'}) FROM p")


@pytest.fixture
def two(tmp_path):
    first, second = str(tmp_path / "first.duckdb"), str(tmp_path / "second.duckdb")
    c = duckdb.connect(first)
    anon_sql.install(c)
    c.execute("CREATE TABLE p AS SELECT i AS pid, 20 + i % 40 AS age FROM range(300) t(i)")
    anon_sql.execute(c, LV)
    c.execute("ATTACH ? AS other", [second])
    c.execute("USE other")
    yield c, first, second
    c.close()


@pytest.mark.parametrize("statement", ["CHECK ANONYMIZED VIEW lv", "DROP ANONYMIZED VIEW lv",
                                       "REFRESH ANONYMIZED VIEW lv", "EXPLAIN ANONYMIZED VIEW lv"])
def test_after_use_other_a_release_of_the_first_database_is_not_found_there(two, statement):
    c, first, _ = two
    with pytest.raises(AnonSQLError, match="no anonymized view named 'lv'"):
        anon_sql.execute(c, statement)
    assert anon_sql.execute(c, "SHOW ANONYMIZED VIEWS")[0].frame.empty
    c.execute("USE first")
    assert anon_sql.check(c, "lv")["passed"].all()   # untouched


def test_after_use_other_a_release_installs_the_catalog_of_other(two):
    """A release in ``other`` gets ``other``'s own catalog. Its name may not be one the first database's objects
    hold (the name claim counts every attached database: refused, nothing created)."""
    c, _, second = two
    c.execute("CREATE TABLE p AS SELECT i AS pid, 30 + i % 20 AS age FROM range(200) t(i)")
    with pytest.raises(AnonSQLError, match="'lv' already exists"):
        anon_sql.execute(c, LV)
    assert c.execute("SELECT count(*) FROM duckdb_schemas() WHERE database_name = 'other' AND schema_name = 'anon'"
                     ).fetchall() == [(0,)]
    anon_sql.execute(c, LV.replace("VIEW lv", "VIEW lv2"))
    assert c.execute("SELECT release FROM other.anon.releases").fetchall() == [("lv2",)]
    assert c.execute("SELECT release FROM first.anon.releases").fetchall() == [("lv",)]
    assert anon_sql.check(c, "lv2")["passed"].all()
    c.execute("USE first")
    c.execute("DETACH other")
    c.close()
    assert CliRunner().invoke(main, ["check", "lv2", "--db", second]).exit_code == 0
