"""Hostile round 14 (docs/hostile-round-14.md), M34: ``anon-sql shell --history big.csv`` read a user's 3,001-line
CSV as its history and at ``.quit`` readline wrote back its last 1,000 lines (header and 2,002 rows gone). The
history now follows every output's rule: an existing file is written only when anon_sql wrote it and it is unchanged
since; the default history is a file in anon_sql's own state folder (the old ``~/.anon_sql_history`` is only read)."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from anon_sql.cli.output import remember_output
from anon_sql.cli.sql import shell_history_file
from anon_sql.errors import TargetError
from test_cli_sql import read_until   # reads a terminal until a marker (no timing)


def shell_on_a_terminal(folder, *args: str, typed: bytes = b"SELECT 42;\n.quit\n", env=None):
    """``anon-sql shell`` with a terminal as stdin (interactive: it keeps a history); (exit code, stderr)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "anon_sql.cli", "shell", *args], stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder,
                                env={**os.environ, "TERM": "dumb", **(env or {})})
        os.close(slave)
        os.write(master, typed)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    return proc.returncode, err.decode()


def test_m34_a_users_csv_given_as_history_is_refused_and_kept(tmp_path):                             # O13
    big = tmp_path / "big.csv"
    big.write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(3000)), encoding="utf-8")
    before = big.read_bytes()
    code, err = shell_on_a_terminal(tmp_path, "--history", "big.csv")
    assert code == 2, err
    assert "--history 'big.csv' is an existing file anon_sql did not write" in err
    assert big.read_bytes() == before


def test_a_key_file_given_as_history_gains_no_line(tmp_path):                                         # O14
    key = tmp_path / "my.key"
    key.write_text("9f" * 32 + "\n", encoding="utf-8")
    code, err = shell_on_a_terminal(tmp_path, "--history", "my.key")
    assert code == 2 and key.read_text(encoding="utf-8") == "9f" * 32 + "\n", err


def typed_in_a_session(folder, history: str | None, *lines: bytes, env: dict | None = None) -> int:
    """A real terminal session (stdin, stdout and stderr the pty, as a user's): each line typed at the prompt
    (``history`` None: the default history)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "anon_sql.cli", "shell", *(["--history", history] if history else [])],
                            cwd=folder, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            env={**os.environ, **(env or {})})
    os.close(slave)
    seen = bytearray()
    try:
        for line in lines:
            read_until(master, b"anon> ", seen)
            del seen[:]
            os.write(master, line + b"\r")
        read_until(master, b"anon> ", seen)
        os.write(master, b".quit\r")
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_the_shells_own_history_is_written_on_across_sessions(tmp_path):
    assert typed_in_a_session(tmp_path, "h", b"SELECT 40 + 2;") == 0
    assert "SELECT 40 + 2;" in (tmp_path / "h").read_text(encoding="utf-8")
    assert typed_in_a_session(tmp_path, "h", b"SELECT 7;") == 0
    lines = (tmp_path / "h").read_text(encoding="utf-8").splitlines()
    assert "SELECT 40 + 2;" in lines and "SELECT 7;" in lines
    with (tmp_path / "h").open("a", encoding="utf-8") as f:     # changed by someone else since: kept as it is
        f.write("my own line\n")
    code, err = shell_on_a_terminal(tmp_path, "--history", "h")
    assert code == 2 and "changed since" in err
    assert (tmp_path / "h").read_text(encoding="utf-8").endswith("my own line\n")


def test_the_default_history_is_anon_sqls_own_file_and_the_old_one_is_only_read(tmp_path, monkeypatch):
    """The default history lives in anon_sql's state folder; ``~/.anon_sql_history`` of earlier versions is read to
    start it and never written (round 15, M36: a symlink there was adopted; round 16, H06: a CSV moved there was cut
    to its last 1,000 lines)."""
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANON_SQL_STATE_DIR", str(state))
    monkeypatch.delenv("ANON_SQL_HISTORY", raising=False)
    assert shell_history_file(None, None) == state / "history"
    legacy = home / ".anon_sql_history"
    legacy.write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(3000)), encoding="utf-8")
    before = legacy.read_bytes()
    assert typed_in_a_session(tmp_path, None, b"SELECT 5;",
                              env={"HOME": str(home), "ANON_SQL_STATE_DIR": str(state)}) == 0
    assert legacy.read_bytes() == before                                  # never written
    lines = (state / "history").read_text(encoding="utf-8").splitlines()
    assert lines[-1] == ".quit" and "SELECT 5;" in lines and "2999,20993" in lines   # started from the old lines


def test_a_recorded_history_given_through_the_environment_is_used(tmp_path, monkeypatch):
    history = tmp_path / "hist"
    history.write_text("SELECT 1;\n", encoding="utf-8")
    monkeypatch.setenv("ANON_SQL_HISTORY", str(history))
    with pytest.raises(TargetError, match=r"\$ANON_SQL_HISTORY .* anon_sql did not write"):
        shell_history_file(None, None)
    remember_output(history)
    assert shell_history_file(None, None) == history


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_m36_a_default_history_linked_to_a_users_file_is_never_recorded(tmp_path, monkeypatch, link):
    """Hostile round 15, M36: ``~/.anon_sql_history`` a symlink to the user's CSV was adopted, the CSV recorded as
    anon_sql's output, and the next ``--json data.csv`` replaced it. The old path is only read now."""
    from click.testing import CliRunner

    from anon_sql.cli.main import main

    home = tmp_path / "home"
    home.mkdir()
    data = tmp_path / "data.csv"
    data.write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(3000)), encoding="utf-8")
    before = data.read_bytes()
    (home / ".anon_sql_history").symlink_to(data) if link == "symlink" else os.link(data, home / ".anon_sql_history")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ANON_SQL_HISTORY", raising=False)
    assert shell_history_file(None, None).name == "history"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.csv").write_text("age,sex\n" + "".join(f"{20 + i % 9},{'FM'[i % 2]}\n" for i in range(60)))
    res = CliRunner().invoke(main, ["assess", "p.csv", "--quasi", "age,sex", "--json", "data.csv"])
    assert res.exit_code == 2 and "'data.csv' is an existing file anon_sql did not write" in res.output, res.output
    assert data.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_as_history_is_refused_without_blocking(tmp_path):                                 # round 15, H07
    os.mkfifo(tmp_path / "ff")
    with pytest.raises(TargetError, match="is not a regular file"):
        shell_history_file(str(tmp_path / "ff"), None)


def test_two_shells_on_one_history_keep_both_sessions_lines(tmp_path):                          # round 15, H09
    assert typed_in_a_session(tmp_path, "h", b"SELECT 0;") == 0            # the history is anon_sql's
    shells = []
    for typed in (b"SELECT 11;", b"SELECT 22;"):
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "anon_sql.cli", "shell", "--history", "h"], cwd=tmp_path,
                                stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        seen = bytearray()
        read_until(master, b"anon> ", seen)
        del seen[:]
        os.write(master, typed + b"\r")
        read_until(master, b"anon> ", seen)
        shells.append((proc, master))
    try:
        for proc, master in shells:                   # both open at once; the first leaves, then the second
            os.write(master, b".quit\r")
            assert proc.wait(timeout=60) == 0
    finally:
        for proc, master in shells:
            if proc.poll() is None:
                proc.kill()
            os.close(master)
    lines = (tmp_path / "h").read_text(encoding="utf-8").splitlines()
    assert {"SELECT 0;", "SELECT 11;", "SELECT 22;"} <= set(lines), lines
