"""Hostile round 10, M13: an output option (``--json FILE``, ``--html``, ``--csv``, the shell's history) never writes
over the ``--db`` database, its ``.wal``, an input of the command, or any existing DuckDB / Parquet file — exit 2,
every byte of the database as before — while a JSON / HTML / CSV file of the output's kind is still overwritten."""
from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import TargetError
from anon_sql.policy.model import coerce_policy
from test_check_tamper import PATIENTS, levels_policy


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """patients and a release `lv` in a database file, a policy file and the release's shared file `lv.duckdb`."""
    folder = tmp_path_factory.mktemp("outpaths")
    c = duckdb.connect(str(folder / "db.duckdb"))
    anon_sql.install(c)
    c.execute(PATIENTS)
    anon_sql.release(c, levels_policy("lv"))
    c.close()
    (folder / "lv.toml").write_text(coerce_policy(levels_policy("lv")).to_toml(), encoding="utf-8")
    assert CliRunner().invoke(main, ["export", "lv", "--db", str(folder / "db.duckdb"),
                                     "--to", str(folder / "lv.duckdb")]).exit_code == 0
    return folder


@pytest.fixture()
def work(template, tmp_path, monkeypatch):
    for f in ("db.duckdb", "lv.toml", "lv.duckdb"):
        shutil.copy(template / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(work, args, guarded="db.duckdb", says="--json"):
    """Run ``args``: exit 2, one error naming the option, and the guarded file's bytes unchanged."""
    before = (work / guarded).read_bytes()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and says in res.output and "Traceback" not in res.output, res.output
    assert (work / guarded).read_bytes() == before
    return res


DB = ["--db", "db.duckdb"]


@pytest.mark.parametrize("args, option", [
    (["check", "lv", *DB, "--json", "db.duckdb"], "--json"),                                    # AS10
    (["assess", "patients", *DB, "--quasi", "age,sex", "--json", "db.duckdb"], "--json"),       # AS10b
    (["assess", "patients", *DB, "--quasi", "age,sex", "--html", "db.duckdb"], "--html"),
    (["report", "lv", *DB, "--html", "db.duckdb"], "--html"),                                   # AS10c
    (["report", "lv", *DB, "--json", "db.duckdb"], "--json"),
    (["export", "lv", *DB, "--to", "x.duckdb", "--json", "db.duckdb"], "--json"),               # AS10d
    (["taxonomy", "show", *DB, "--json", "db.duckdb"], "--json"),                               # AS10f
    (["check", "lv", *DB, "--json", "./db.duckdb"], "--json"),                                  # AS10g
    (["check", "lv", *DB, "--json", "sub/../db.duckdb"], "--json"),
    (["check", "lv", *DB, "--json", "db.duckdb.wal"], "--json"),                                # its WAL
    (["sweep", "lv.toml", *DB, "--param", "k=2,3", "--csv", "db.duckdb"], "--csv"),             # SW1
], ids=["AS10", "AS10b", "assess-html", "AS10c", "report-json", "AS10d", "AS10f", "AS10g", "dotdot", "wal", "SW1"])
def test_an_output_over_the_database_is_refused(work, args, option):
    (work / "sub").mkdir()
    res = refused(work, args, says=option)
    assert "db.duckdb" in res.output and "another file" in res.output
    assert not (work / "x.duckdb").exists() and not (work / "db.duckdb.wal").exists()


def test_run_script_json_over_the_database_is_refused(work):                                    # AS10e
    (work / "s.sql").write_text("CREATE TABLE t AS SELECT 1 AS x;", encoding="utf-8")
    refused(work, ["run", "s.sql", *DB, "--json", "db.duckdb"])
    assert duckdb.connect(str(work / "db.duckdb")).execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'").fetchall() == [(0,)]   # nothing ran


def test_a_symlink_to_the_database_is_refused(work):
    (work / "link.json").symlink_to(work / "db.duckdb")
    refused(work, ["check", "lv", *DB, "--json", "link.json"])


def test_a_dangling_symlink_is_not_written_through(work):
    """Hostile round 21, W47b: ``--json`` given a link to a file that does not exist wrote that file elsewhere."""
    (work / "elsewhere").mkdir()
    (work / "dangling.json").symlink_to(work / "elsewhere" / "made.json")
    refused(work, ["check", "lv", *DB, "--json", "dangling.json"])
    assert not (work / "elsewhere" / "made.json").exists() and (work / "dangling.json").is_symlink()


@pytest.mark.parametrize("option", ["--json", "--html"])
def test_a_loop_of_symlinks_is_refused_in_one_line(work, option):
    """Hostile round 22, Y36 / Y36b: a RuntimeError traceback (exit 1) from following the links."""
    (work / "loop1.out").symlink_to(work / "loop2.out")
    (work / "loop2.out").symlink_to(work / "loop1.out")
    args = ["check", "lv", *DB, "--json", "loop1.out"] if option == "--json" else \
        ["report", "lv", *DB, "--html", "loop1.out"]
    refused(work, args, says=option)


def test_a_shared_duckdb_file_or_a_parquet_file_is_refused(work):                               # AS10h
    refused(work, ["check", "lv", *DB, "--json", "lv.duckdb"], guarded="lv.duckdb")
    assert CliRunner().invoke(main, ["export", "lv", *DB, "--to", "lv.parquet"]).exit_code == 0
    refused(work, ["report", "lv", *DB, "--html", "lv.parquet"], guarded="lv.parquet", says="--html")


def test_the_policy_file_is_an_input(work):                                                     # AS10i
    refused(work, ["release", "lv.toml", *DB, "--dry-run", "--json", "lv.toml"], guarded="lv.toml")


def test_json_over_the_export_target_is_refused_before_the_export(work):
    res = CliRunner().invoke(main, ["export", "lv", *DB, "--to", "new.duckdb", "--json", "new.duckdb"])
    assert res.exit_code == 2 and "--to 'new.duckdb'" in res.output, res.output
    assert not (work / "new.duckdb").exists()


def test_json_over_a_database_the_command_made_is_refused_when_written(work):
    (work / "s.sql").write_text("ATTACH 'made.duckdb' AS m; CREATE TABLE m.t AS SELECT 1 AS x; DETACH m;",
                                encoding="utf-8")
    res = CliRunner().invoke(main, ["run", "s.sql", *DB, "--json", "made.duckdb"])
    assert res.exit_code == 2 and "existing DuckDB database" in res.output, res.output
    assert duckdb.connect(str(work / "made.duckdb")).execute("SELECT x FROM t").fetchall() == [(1,)]


def test_earlier_outputs_are_still_overwritten(work):
    """Each option replaces the file it wrote before (twice each); until round 13 a file of the output's kind that
    anon_sql did not write was replaced too (M31: a JSON data file)."""
    for _ in range(2):
        assert CliRunner().invoke(main, ["check", "lv", *DB, "--json", "out.json"]).exit_code == 0
        assert json.loads((work / "out.json").read_text())["passed"] is True
        assert CliRunner().invoke(main, ["report", "lv", *DB, "--html", "out.html"]).exit_code == 0
        assert "<html" in (work / "out.html").read_text().lower()
        res = CliRunner().invoke(main, ["sweep", "lv.toml", *DB, "--param", "k=2,3", "--csv", "out.csv"])
        assert res.exit_code == 0, res.output
        assert (work / "out.csv").read_text().startswith("k")


def test_the_shell_history_is_never_the_database(work, monkeypatch):                            # SH03
    from anon_sql.cli.output import remember_output
    from anon_sql.cli.sql import shell_history_file

    monkeypatch.delenv("ANON_SQL_HISTORY", raising=False)
    with pytest.raises(TargetError, match="--history 'db.duckdb' is the database"):
        shell_history_file("db.duckdb", "db.duckdb")
    with pytest.raises(TargetError, match="existing DuckDB database"):
        shell_history_file("lv.duckdb", None)
    monkeypatch.setenv("ANON_SQL_HISTORY", str(work / "db.duckdb"))
    with pytest.raises(TargetError, match=r"\$ANON_SQL_HISTORY"):
        shell_history_file(None, "./db.duckdb")
    (work / "h.txt").write_text("SELECT 1;\n", encoding="utf-8")
    with pytest.raises(TargetError, match="--history 'h.txt' is an existing file anon_sql did not write"):
        shell_history_file("h.txt", "db.duckdb")                # lines of text are no proof (round 14, M34)
    remember_output(work / "h.txt")                              # as the shell records its history at exit
    assert shell_history_file("h.txt", "db.duckdb").name == "h.txt"


def test_the_shell_keeps_a_history_file_that_became_a_database(work, capsys):
    from anon_sql.cli.sql import save_shell_history

    class Readline:
        written = []

        def write_history_file(self, file):
            self.written.append(file)
    before = (work / "lv.duckdb").read_bytes()
    save_shell_history(Readline(), work / "lv.duckdb")
    assert Readline.written == [] and (work / "lv.duckdb").read_bytes() == before
    assert "not written" in capsys.readouterr().err
    (work / "h2.txt").unlink(missing_ok=True)
    save_shell_history(Readline(), work / "h2.txt")          # a new history: written (and recorded as anon_sql's)
    assert Readline.written == [work / "h2.txt"]


def test_output_target_is_the_path_as_given(work):
    from anon_sql.cli.output import output_target

    assert output_target("--json", "~/x.json").is_absolute()
    with pytest.raises(TargetError, match="folder"):
        output_target("--json", str(work))


def test_json_over_a_database_the_command_would_create_is_refused(work):
    res = CliRunner().invoke(main, ["init", "--db", "new.duckdb", "--json", "new.duckdb"])
    assert res.exit_code == 2 and "--db 'new.duckdb'" in res.output, res.output
    assert not (work / "new.duckdb").exists()


def test_an_interactive_shell_refuses_the_database_as_its_history(work):                        # SH03, end to end
    import os
    import pty
    import subprocess
    import sys

    before = (work / "db.duckdb").read_bytes()
    master, slave = pty.openpty()          # stdin a terminal: the shell is interactive and keeps a history
    try:
        proc = subprocess.Popen([sys.executable, "-m", "anon_sql.cli", "shell", "--db", "db.duckdb", "--history",
                                 "db.duckdb"], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=work, env={**os.environ, "TERM": "dumb"})
        os.close(slave)
        os.write(master, b"SELECT 42;\n.quit\n")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    assert proc.returncode == 2, (out, err)
    assert b"--history 'db.duckdb' is the database" in err
    assert (work / "db.duckdb").read_bytes() == before


def test_an_input_file_of_the_command_is_never_its_json(work):                                  # AS10i's cause
    (work / "s.sql").write_text("SELECT 1 AS x;", encoding="utf-8")
    refused(work, ["run", "s.sql", *DB, "--json", "s.sql"], guarded="s.sql")
    (work / "t.csv").write_text("a;*\nb;*\n", encoding="utf-8")
    refused(work, ["taxonomy", "load", "t.csv", *DB, "--json", "./t.csv"], guarded="t.csv")
    duckdb.connect(str(work / "db.duckdb")).execute("COPY patients TO 'p.csv'").close()
    refused(work, ["assess", "p.csv", "--quasi", "age,sex", "--json", "p.csv"], guarded="p.csv")
    refused(work, ["analyze", "p.csv", "--json", "p.csv"], guarded="p.csv")
