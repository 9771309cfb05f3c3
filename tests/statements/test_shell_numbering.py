"""Hostile round 4, SH2: piped `shell` input runs piece by piece, and every piece was numbered from 1 — each error
said "statement 1 (line 1 …)" and a binary line on input line 3 was reported at line 1. Statements and lines are now
numbered over the whole input, as `run` numbers a script. Each test fails on the code before."""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from anon_sql.cli.main import main


def shell(text: str, tmp_path) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["shell", "--db", str(tmp_path / "s.duckdb")], input=text)
    return r.exit_code, r.output


def test_an_error_names_the_statement_and_line_of_the_whole_input(tmp_path):
    code, out = shell("SELECT 1;\n\nSELECT 2; SELECT\n  nosuch;\n", tmp_path)
    assert code == 2
    assert "statement 3 (line 3, column 11)" in out
    assert "(at line 4, column 3 of the script)" in out


def test_a_syntax_error_after_a_dot_command_counts_its_line(tmp_path):
    code, out = shell("SELECT 1;\n.help\nSELECT\n 3 +;\n", tmp_path)
    assert code == 2 and "statement 2 (line 3, column 1)" in out and "(at line 4, column 4 of the script)" in out


def test_the_same_script_through_run_and_shell_names_the_same_place(tmp_path):
    text = "SELECT 1;\nSELECT 2;\nSELECT 3 FROM nosuch;\n"
    script = tmp_path / "s.sql"
    script.write_text(text)
    ran = CliRunner().invoke(main, ["run", str(script), "--db", str(tmp_path / "r.duckdb")])
    code, out = shell(text, tmp_path)
    assert ran.exit_code == code == 2
    assert "statement 3 (line 3, column 1)" in ran.output and "statement 3 (line 3, column 1)" in out


def test_a_binary_line_is_reported_at_its_input_line(tmp_path):
    """Through a real pipe (bytes that are not UTF-8 reach the shell as they would from `cat file |`)."""
    proc = subprocess.run([sys.executable, "-m", "anon_sql.cli", "shell", "--db", str(tmp_path / "b.duckdb")],
                          input=b"SELECT 1;\nSELECT 2;\n\xff\xfe SELECT 3;\n", capture_output=True, timeout=120)
    assert proc.returncode == 2
    assert "at line 3, column 1" in proc.stderr.decode()
