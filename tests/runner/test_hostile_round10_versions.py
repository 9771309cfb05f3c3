"""Hostile round 10's M16 (docs/hostile-round-10.md): replacing a release that has a version history through the
API (`replace=True`) or `anon-sql release --replace` recorded no version, and the next REFRESH re-ran the policy it
had replaced (V01, V01b: a replacement generalizing `sex` under k = 10 was refreshed back to F/M under k = 5). Each
test fails on the code before.
"""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main

LV = """CREATE ANONYMIZED VIEW lv WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0}})
  AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 100]}),
  quasi(sex, taxonomy => {'kind': 'top'}) FROM patients"""
LV10 = """name = "lv"
source = "patients"
method = "levels"
[method_params.levels]
age = 1
sex = 1
[attributes.pid]
role = "identifier"
[attributes.age]
role = "quasi"
taxonomy = { kind = "interval", widths = [10, 100] }
[attributes.sex]
role = "quasi"
taxonomy = { kind = "top" }
[privacy]
k = 10
"""


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "v.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        c.execute("CREATE TABLE patients AS SELECT i AS pid, 20 + (i % 60) AS age, CASE WHEN i % 2 = 0 THEN 'F' "
                  "ELSE 'M' END AS sex FROM range(200) t(i)")
        anon_sql.execute(c, LV)
    (tmp_path / "lv10.toml").write_text(LV10)
    return path


def versions(c) -> list:
    return c.execute("SELECT version, action FROM anon.release_versions WHERE release = 'lv' ORDER BY 1").fetchall()


def test_v01b_an_api_replacement_is_a_version_and_refresh_keeps_it(db, tmp_path):
    with duckdb.connect(db) as c:
        anon_sql.release(c, anon_sql.Policy.from_toml(str(tmp_path / "lv10.toml")), replace=True)
        assert versions(c) == [(1, "create"), (2, "replace")]
        anon_sql.execute(c, "REFRESH ANONYMIZED VIEW lv")
        assert versions(c) == [(1, "create"), (2, "replace"), (3, "refresh")]
        assert c.execute("SELECT DISTINCT sex FROM lv").fetchall() == [("*",)]
        assert c.execute("SELECT k_achieved >= 10 FROM anon.releases WHERE release = 'lv'").fetchall() == [(True,)]


def test_v01_the_cli_replacement_is_a_version(db, tmp_path):
    result = CliRunner().invoke(main, ["release", str(tmp_path / "lv10.toml"), "--db", db, "--replace"])
    assert result.exit_code == 0, result.output
    with duckdb.connect(db) as c:
        assert versions(c) == [(1, "create"), (2, "replace")]
        row = c.execute("SELECT rows_added, rows_removed FROM anon.release_versions WHERE version = 2").fetchall()
        assert row[0][0] > 0 and row[0][1] > 0     # compared with version 1 (sex F/M → *)


def test_a_release_without_history_stays_without_one(tmp_path):
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE patients AS SELECT i AS pid, 20 + (i % 60) AS age, 'F' AS sex FROM range(100) t(i)")
    (tmp_path / "lv10.toml").write_text(LV10)
    policy = anon_sql.Policy.from_toml(str(tmp_path / "lv10.toml"))
    anon_sql.release(c, policy)
    anon_sql.release(c, policy, replace=True)
    assert versions(c) == []
