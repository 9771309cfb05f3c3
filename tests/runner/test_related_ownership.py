"""A related table's target is replaced only when this release wrote it (hostile round 3, docs/hostile-round-3.md).

Before: `CREATE OR REPLACE ANONYMIZED VIEW`, `release --replace` and `REFRESH` dropped any table named
``<release>_<related name>``, a user's own included, with exit 0.
"""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main as cli
from test_units import KEY, two_tables, two_tables_policy

CREATE = ("CREATE OR REPLACE ANONYMIZED VIEW synth WITH (k = 2, max_suppression = 0.34, privacy_unit = 'Id', "
          "related = {'conditions': {'source': 'conditions', 'key': 'PATIENT', 'default_role': 'insensitive'}}) "
          "AS SELECT identifier(Id, action => 'pseudonymize'), quasi(age, taxonomy => {'kind': 'interval', "
          "'widths': [100]}), quasi(sex, taxonomy => {'kind': 'top'}) FROM patients")


@pytest.fixture
def con(monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    c = duckdb.connect()
    anon_sql.install(c)
    two_tables(c)
    yield c
    c.close()


def mine(con) -> list[tuple]:
    return con.execute("SELECT * FROM synth_conditions").fetchall()


@pytest.mark.parametrize("how", ["replace", "or_replace"])
def test_a_users_table_under_the_related_name_is_never_replaced(con, how):
    con.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS x")
    with pytest.raises(anon_sql.AnonSQLError, match="'synth_conditions' exists but is not the table release"):
        if how == "replace":
            anon_sql.release(con, two_tables_policy(), replace=True)
        else:
            anon_sql.execute(con, CREATE)
    assert mine(con) == [("mine",)]
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'synth'").fetchall() == [(0,)]


def test_the_releases_own_related_table_is_replaced_and_refreshed(con):
    anon_sql.release(con, two_tables_policy())
    anon_sql.release(con, two_tables_policy(), replace=True)
    anon_sql.execute(con, CREATE + ";\nREFRESH ANONYMIZED VIEW synth;")
    assert len(mine(con)) == 1


def test_a_related_table_dropped_and_made_again_by_a_user_is_refused_at_refresh(con):
    anon_sql.release(con, two_tables_policy())
    con.execute("DROP TABLE synth_conditions")
    con.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS x")
    with pytest.raises(anon_sql.StatementError, match="anon_sql replaces only what it created") as err:
        anon_sql.execute(con, "REFRESH ANONYMIZED VIEW synth")
    assert err.value.exit_code == 2 and mine(con) == [("mine",)]


def test_cli_release_replace_exit_2_and_the_users_table_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    db = str(tmp_path / "u.duckdb")
    with duckdb.connect(db) as c:
        two_tables(c)
        c.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS x")
    policy = tmp_path / "synth.toml"
    policy.write_text(anon_sql.Policy.from_dict(two_tables_policy()).to_toml(), encoding="utf-8")
    res = CliRunner().invoke(cli, ["release", str(policy), "--db", db, "--replace"])
    assert res.exit_code == 2, res.output
    with duckdb.connect(db, read_only=True) as c:
        assert mine(c) == [("mine",)]
