"""Issue 28.5: read-only means read-only — SHOW, EXPLAIN, CHECK, assess and export work on read_only=True
connections and read-only files and never install or upgrade the catalog. Issue 28.4: errors name their cause — a
rollback that fails after an I/O error reports the I/O error, and environment failures exit 4."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.demo import load_demo_data
from anon_sql.cli.main import main
from anon_sql.engines.duckdb_engine import DuckDBEngine
from anon_sql.statements.script import execute

VIEW = """CREATE ANONYMIZED VIEW adult_k5
WITH (method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0, 'race': 1}}, seed = 0, k = 5,
      max_suppression = 0.05, default_role = 'insensitive')
AS SELECT identifier(patient_id), quasi(age, taxonomy => 'adult_age'), quasi(sex, taxonomy => 'adult_sex'),
          quasi(race, taxonomy => 'adult_race'), sensitive(occupation)
FROM adult"""
POLICY = {"name": "adult_rel", "source": "adult", "method": "levels", "seed": 0, "default_role": "insensitive",
          "attributes": {"age": {"role": "quasi", "taxonomy": "adult_age"},
                         "sex": {"role": "quasi", "taxonomy": "adult_sex"}, "patient_id": {"role": "identifier"}},
          "privacy": {"k": 5, "max_suppression": 0.05}, "method_params": {"levels": {"age": 2, "sex": 0}}}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ro_file(tmp_path):
    """A database with a release, checkpointed, closed and made read-only (chmod a-w)."""
    path = tmp_path / "ro.duckdb"
    c = duckdb.connect(str(path))
    load_demo_data(c, "adult")
    execute(c, VIEW)
    c.execute("CHECKPOINT")
    c.close()
    os.chmod(path, 0o444)
    yield path
    os.chmod(path, 0o644)


def test_statements_on_a_read_only_connection_and_file(ro_file, tmp_path):
    before = _digest(ro_file)
    con = duckdb.connect(str(ro_file), read_only=True)
    out = tmp_path / "shared.parquet"
    results = execute(con, f"SHOW ANONYMIZED VIEWS; EXPLAIN ANONYMIZED VIEW adult_k5; CHECK ANONYMIZED VIEW adult_k5; "
                           f"EXPORT ANONYMIZED VIEW adult_k5 TO '{out}'")
    assert results[0].frame["name"].tolist() == ["adult_k5"]
    assert "anonymized view adult_k5" in results[1].message
    assert results[2].frame["passed"].all()
    assert out.exists()
    assert anon_sql.check(con, "adult_k5")["passed"].all()
    con.close()
    assert _digest(ro_file) == before and not Path(str(ro_file) + ".wal").exists()


@pytest.mark.parametrize("args", [
    ["check", "adult_k5"], ["export", "adult_k5", "--to", "{tmp}/x.duckdb"],
    ["assess", "adult", "--quasi", "age,sex", "--sensitive", "occupation"]], ids=["check", "export", "assess"])
def test_cli_reads_a_read_only_file(ro_file, tmp_path, args):
    before = _digest(ro_file)
    result = CliRunner().invoke(main, [a.replace("{tmp}", str(tmp_path)) for a in args] + ["--db", str(ro_file)])
    assert result.exit_code == 0, result.output
    assert _digest(ro_file) == before and not Path(str(ro_file) + ".wal").exists()


def test_reads_never_install_the_catalog(tmp_path):
    path = tmp_path / "plain.duckdb"
    c = duckdb.connect(str(path))
    c.execute("CREATE TABLE t AS SELECT 1 AS a")
    [shown] = execute(c, "SHOW ANONYMIZED VIEWS")
    assert shown.frame.empty
    for statement in ("EXPLAIN ANONYMIZED VIEW v", "CHECK ANONYMIZED VIEW v", "DROP ANONYMIZED VIEW IF EXISTS v"):
        try:
            execute(c, statement)
        except anon_sql.AnonSQLError as err:
            assert err.exit_code == 2
    assert c.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name IN ('anon', 'anon_work')"
                     ).fetchall()[0][0] == 0
    c.close()
    ro = duckdb.connect(str(path), read_only=True)
    [shown] = execute(ro, "SHOW ANONYMIZED VIEWS")
    assert shown.frame.empty
    ro.close()


def test_a_failing_rollback_reports_the_io_error(monkeypatch):
    """A full disk aborts DuckDB's transaction; the rollback then fails too ("no transaction is active"): the error
    raised is the I/O error, and the CLI exits 4 naming it."""
    con = duckdb.connect()
    load_demo_data(con, "adult")

    def full_disk(*args, **kwargs):
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")

    def no_transaction(self):
        raise duckdb.TransactionException("TransactionContext Error: cannot rollback - no transaction is active")

    monkeypatch.setattr("anon_sql.runner.run.materialize", full_disk)
    monkeypatch.setattr(DuckDBEngine, "rollback", no_transaction)
    with pytest.raises(duckdb.IOException, match="No space left"):
        anon_sql.release(con, POLICY)
    con.close()


def test_cli_environment_failures_exit_4(monkeypatch, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text(anon_sql.Policy.from_dict(POLICY).to_toml())
    db = tmp_path / "d.duckdb"
    c = duckdb.connect(str(db))
    load_demo_data(c, "adult")
    c.close()

    def full_disk(*args, **kwargs):
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")
    monkeypatch.setattr("anon_sql.runner.run.materialize", full_disk)
    result = CliRunner().invoke(main, ["release", str(policy), "--db", str(db)])
    assert result.exit_code == 4, result.output
    assert "No space left on device" in result.output and "environment" in result.output


def test_a_database_locked_by_another_process_exits_4(tmp_path):
    db = tmp_path / "locked.duckdb"
    duckdb.connect(str(db)).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(60)", str(db)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = CliRunner().invoke(main, ["check", "x", "--db", str(db)])
        assert result.exit_code == 4, result.output
        assert "another process has it open" in result.output
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()      # else the pipe's file is closed by the garbage collector: a ResourceWarning
