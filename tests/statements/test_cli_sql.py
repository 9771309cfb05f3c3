"""`anon-sql run` and `anon-sql shell` as a user runs them: exit codes, tables, a real terminal with history."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main
from anon_sql.cli.demo import load_demo_data
from test_statements import view_sql


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "c.duckdb")
    c = duckdb.connect(path)
    load_demo_data(c, "adult")
    c.close()
    return path


def _run(args, **kw):
    return CliRunner().invoke(main, args, **kw)


def test_run_a_script_prints_tables_and_messages(db, tmp_path):
    script = tmp_path / "s.sql"
    script.write_text(f"{view_sql()};\nSELECT sex, count(*) AS n FROM adult_k5 GROUP BY sex ORDER BY sex;\n"
                      "SHOW ANONYMIZED VIEWS;\nCHECK ANONYMIZED VIEW adult_k5;\n", encoding="utf-8")
    r = _run(["run", str(script), "--db", db])
    assert r.exit_code == 0, r.output
    expected = duckdb.connect(db).execute("SELECT sex, count(*) FROM adult_k5 GROUP BY sex ORDER BY sex").fetchall()
    lines = r.output.splitlines()
    assert "anonymized view adult_k5 version 1 (create)" in lines[0]
    for sex, n in expected:
        assert any(line.split() == [sex, str(n)] for line in lines)
    assert "(2 rows)" in r.output and "all checks passed" in r.output


@pytest.mark.parametrize("body, code, where", [
    ("SELECT 1;\nSELECT * FROM no_such_table;", 2, "statement 2 (line 2, column 1)"),
    ("SELECT 1;\nREFRESH ANONYMIZED VIEW nope;", 2, "statement 2 (line 2, column 1)"),
    ("SELECT 1;\n" + view_sql(k=2999, method="levels") + ";", 3, "statement 2 (line 2, column 1)"),
])
def test_run_exit_codes(db, tmp_path, body, code, where):
    script = tmp_path / "bad.sql"
    script.write_text(body + "\nCREATE TABLE never AS SELECT 1;", encoding="utf-8")
    r = _run(["run", str(script), "--db", db])
    assert r.exit_code == code, r.output
    assert where in r.output
    assert duckdb.connect(db).execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'never'"
                                      ).fetchall()[0][0] == 0


def test_run_reads_stdin(db):
    r = _run(["run", "-", "--db", db], input="SELECT 6 * 7 AS answer;")
    assert r.exit_code == 0 and "42" in r.output


def test_shell_with_piped_input_runs_statements_across_lines(db):
    r = _run(["shell", "--db", db], input=f"{view_sql()};\nSELECT count(*)\n  AS n FROM adult_k5;\n.help\n"
                                           "SHOW ANONYMIZED VIEWS;\n")
    assert r.exit_code == 0, r.output
    n = duckdb.connect(db).execute("SELECT count(*) FROM adult_k5").fetchall()[0][0]
    assert f"\n{n:>4}\n" in r.output or f" {n}\n" in r.output
    assert "REFRESH ANONYMIZED VIEW" in r.output      # .help
    r = _run(["shell", "--db", db], input="SELECT 1;\nDROP ANONYMIZED VIEW missing;\nSELECT 2;\n")
    assert r.exit_code == 2 and "statement 2 (line 2" in r.output   # numbered over the input (round 4, SH2)


def read_until(fd: int, marker: bytes, seen: bytearray, limit: float = 120.0) -> None:
    """Read the terminal until ``marker`` appears in what was seen (a guard against hanging, not a timing test)."""
    end = time.monotonic() + limit
    while marker not in seen:
        if time.monotonic() > end:
            raise AssertionError(f"{marker!r} never appeared; the terminal showed {bytes(seen)!r}")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:
                break


@pytest.mark.skipif(sys.platform == "win32", reason="pty is POSIX")
def test_shell_in_a_real_terminal_keeps_history(db, tmp_path):
    import pty

    history = tmp_path / "history"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "anon_sql.cli", "shell", "--db", db, "--history", str(history)],
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, b"anon> ", seen)
        os.write(master, b"SELECT 40 + 2\r")
        read_until(master, b"...> ", seen)              # continuation prompt: the statement is not finished
        os.write(master, b"  AS answer;\r")
        read_until(master, b"(1 row)", seen)
        del seen[:]
        os.write(master, b"\x1b[A\x1b[A\r")              # Up, Up: the first line of the statement, from history
        read_until(master, b"...> ", seen)
        os.write(master, b"AS again;\r")
        read_until(master, b"(1 row)", seen)
        assert b"again" in seen and b"42" in seen
        os.write(master, b".quit\r")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert "SELECT 40 + 2" in history.read_text(encoding="utf-8")


def test_run_json_gives_one_entry_per_statement(tmp_path):
    import json

    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t AS SELECT 1 AS a UNION ALL SELECT 2;\nSELECT a, a * 2 AS b FROM t ORDER BY a;\n",
                      encoding="utf-8")
    res = CliRunner().invoke(main, ["run", str(script), "--db", str(tmp_path / "w.duckdb"), "--json", "-"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [e["kind"] for e in out] == ["sql", "sql"]
    assert out[1]["rows"] == [{"a": 1, "b": 2}, {"a": 2, "b": 4}]
