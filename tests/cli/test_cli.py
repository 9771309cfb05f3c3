"""The CLI as a user runs it: exit codes 0 / 2 / 3, demo, release, sql, check, export, taxonomy."""
from __future__ import annotations

import duckdb
import pandas as pd
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from conftest import data_path, load_seed000, seed000_policy


def _db_with_seed000(tmp_path):
    db = str(tmp_path / "c.duckdb")
    c = duckdb.connect(db)
    load_seed000(c)
    c.close()
    return db


def _policy_file(tmp_path, **kw):
    p = anon_sql.Policy.from_dict(seed000_policy(**kw))
    path = tmp_path / "p.toml"
    path.write_text(p.to_toml())
    return str(path)


def test_demo_prints_a_verified_release():
    res = CliRunner().invoke(main, ["demo"])
    assert res.exit_code == 0, res.output
    assert "VERIFIED" in res.output and "checks" in res.output


def test_release_check_export_round(tmp_path):
    db = _db_with_seed000(tmp_path)
    pol = _policy_file(tmp_path, method_params={"levels": {"zip": 1, "age": 1}})
    r = CliRunner().invoke(main, ["release", pol, "--db", db, "--explain"])
    assert r.exit_code == 0, r.output
    assert "CREATE TABLE" in r.output
    assert CliRunner().invoke(main, ["release", pol, "--db", db]).exit_code == 2  # exists: bad input
    r = CliRunner().invoke(main, ["release", pol, "--db", db, "--replace"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["check", "r000", "--db", db])
    assert r.exit_code == 0 and "all checks passed" in r.output
    out = tmp_path / "out.parquet"
    assert CliRunner().invoke(main, ["export", "r000", "--db", db, "--to", str(out)]).exit_code == 0
    released = pd.read_parquet(out)
    assert len(released) == 21 and "row" not in released.columns
    assert len(pd.read_parquet(tmp_path / "out.classes.parquet")) == 11
    dd = tmp_path / "out.duckdb"
    assert CliRunner().invoke(main, ["export", "r000", "--db", db, "--to", str(dd)]).exit_code == 0
    e = duckdb.connect(str(dd))
    tables = sorted(r[0] for r in e.execute("SELECT table_name FROM information_schema.tables").fetchall())
    assert tables == ["r000", "r000__classes", "r000__metadata"]  # no source rows, no catalog of the source


def test_check_exits_3_when_a_release_is_tampered_with(tmp_path):
    db = _db_with_seed000(tmp_path)
    pol = _policy_file(tmp_path, method_params={"levels": {"zip": 1, "age": 1}})
    assert CliRunner().invoke(main, ["release", pol, "--db", db]).exit_code == 0
    c = duckdb.connect(db)
    c.execute("DELETE FROM r000 WHERE ec_id = 1 AND rowid IN (SELECT min(rowid) FROM r000 WHERE ec_id = 1)")
    c.execute("UPDATE r000 SET n = 1 WHERE ec_id = 1")
    c.close()
    r = CliRunner().invoke(main, ["check", "r000", "--db", db])
    assert r.exit_code == 3


def test_privacy_failure_exits_3_and_usage_exits_2(tmp_path):
    db = _db_with_seed000(tmp_path)
    pol = _policy_file(tmp_path)
    r = CliRunner().invoke(main, ["release", pol, "--db", db])
    assert r.exit_code == 3 and "max_suppression" in r.output
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "r"\nsource = "t1"\n[privacy]\nk = 0\n')
    assert CliRunner().invoke(main, ["release", str(bad), "--db", db]).exit_code == 2
    assert CliRunner().invoke(main, ["release"]).exit_code == 2


def test_sql_command_dialects(tmp_path):
    pol = tmp_path / "p.toml"
    p = anon_sql.Policy.from_dict({"name": "r", "source": "t", "attributes": {
        "a": {"role": "quasi", "taxonomy": {"kind": "mapping", "mapping": {"x": ["*"], "y": ["*"]}}},
        "s": {"role": "sensitive"}}, "privacy": {"k": 2}, "method_params": {"levels": {"a": 1}}})
    pol.write_text(p.to_toml())
    r = CliRunner().invoke(main, ["sql", str(pol), "--dialect", "spark"])
    assert r.exit_code == 0 and "CREATE OR REPLACE VIEW `r__source`" in r.output


def test_taxonomy_commands(tmp_path):
    db = _db_with_seed000(tmp_path)
    r = CliRunner().invoke(main, ["taxonomy", "load", str(data_path("adult", "adult_hierarchy_age.csv")),
                                  "--db", db, "--name", "age"])
    assert r.exit_code == 0 and "levels 0..4" in r.output
    r = CliRunner().invoke(main, ["taxonomy", "build", "zipmask", "--db", db, "--table", "t1", "--column", "zip",
                                  "--kind", "mask"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["taxonomy", "show", "zipmask", "--db", db])
    assert "52003;5200*;520**;52***;5****;*****" in r.output
    r = CliRunner().invoke(main, ["taxonomy", "show", "--db", db])
    assert r.output.split() == ["age", "zipmask"]
