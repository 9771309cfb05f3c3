"""Hostile round 10, M18: `anon-sql demo --db FILE` replaces only its own release `adult_demo` (the demo's policy over
its marked `adult_sample` table); a user's release of that name, with its versions, is refused and kept (DM1)."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main

USERS = ("CREATE ANONYMIZED VIEW adult_demo WITH (method = 'optimal', k = 3, default_role = 'insensitive') "
         "AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 20]}), "
         "quasi(sex, taxonomy => {'kind': 'top'}) FROM patients")


def state(path) -> tuple:
    """The release's table, its catalog rows and its version rows."""
    c = duckdb.connect(str(path), read_only=True)
    try:
        return (c.execute("SELECT * FROM adult_demo ORDER BY ALL").fetchall(),
                c.execute("SELECT release, source, policy_json, status FROM anon.releases ORDER BY ALL").fetchall(),
                c.execute("SELECT * FROM anon.release_versions ORDER BY ALL").fetchall(),
                c.execute("SELECT table_name FROM duckdb_tables() ORDER BY ALL").fetchall())
    finally:
        c.close()


def test_demo_refuses_a_users_release_named_like_its_own(tmp_path):                            # DM1
    db = tmp_path / "db.duckdb"
    c = duckdb.connect(str(db))
    c.execute("CREATE TABLE patients AS SELECT range AS pid, 20 + range % 40 AS age, "
              "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(300)")
    anon_sql.execute(c, USERS)
    anon_sql.execute(c, "REFRESH ANONYMIZED VIEW adult_demo")
    assert c.execute("SELECT count(*) FROM anon.release_versions WHERE release = 'adult_demo'").fetchall()[0][0] >= 1
    c.close()
    before = state(db)
    res = CliRunner().invoke(main, ["demo", "--db", str(db)])
    assert res.exit_code == 2, res.output
    assert "release named 'adult_demo' that the demo did not make" in res.output and "another --db" in res.output
    assert "DROP ANONYMIZED VIEW adult_demo" in res.output and "Traceback" not in res.output
    assert state(db) == before


def test_demo_refuses_its_name_over_its_own_table_under_another_policy(tmp_path):
    db = tmp_path / "db.duckdb"
    assert CliRunner().invoke(main, ["demo", "--db", str(db)]).exit_code == 0
    c = duckdb.connect(str(db))    # the user's own release of the demo's table, under the demo's name
    anon_sql.execute(c, "CREATE OR REPLACE ANONYMIZED VIEW adult_demo WITH (k = 2, default_role = 'insensitive') "
                        "AS SELECT quasi(sex, taxonomy => {'kind': 'top'}) FROM adult_sample")
    c.close()
    before = state(db)
    assert CliRunner().invoke(main, ["demo", "--db", str(db)]).exit_code == 2
    assert state(db) == before


@pytest.mark.parametrize("runs", [2])
def test_demo_runs_again_on_its_own_database(tmp_path, runs):
    db = tmp_path / "db.duckdb"
    for _ in range(runs):
        res = CliRunner().invoke(main, ["demo", "--db", str(db)])
        assert res.exit_code == 0 and "VERIFIED" in res.output, res.output
