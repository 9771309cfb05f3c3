"""Hostile round 14's output minors (docs/hostile-round-14.md): O07, ``--json F`` and ``--html F`` in one command
wrote the HTML and replaced it with the JSON without a word; O11, ``--json`` to a FIFO hung in the guard, which
opened the FIFO to read its magic bytes."""
from __future__ import annotations

import os
import threading

import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = "".join(f"{20 + i % 40},{'FM'[i % 2]},{i % 7}\n" for i in range(200))
    (tmp_path / "p.csv").write_text("age,sex,zip\n" + rows, encoding="utf-8")
    return tmp_path


def test_o07_json_and_html_naming_one_file_are_refused(folder):
    res = CliRunner().invoke(main, ["assess", "p.csv", "--quasi", "age,sex", "--json", "same.out", "--html",
                                    "./same.out"])
    assert res.exit_code == 2, res.output
    assert "--json 'same.out' and --html './same.out' are the same file" in res.output
    assert not (folder / "same.out").exists()
    res = CliRunner().invoke(main, ["assess", "p.csv", "--quasi", "age,sex", "--json", "a.json", "--html", "a.html"])
    assert res.exit_code == 0, res.output
    assert (folder / "a.json").read_text().lstrip().startswith("{") and "<html" in (folder / "a.html").read_text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_o11_json_to_a_fifo_with_a_reader_is_written_without_hanging(folder):
    os.mkfifo(folder / "ff")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append((folder / "ff").read_bytes()), daemon=True)
    reader.start()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(CliRunner().invoke(
        main, ["assess", "p.csv", "--quasi", "age,sex", "--json", "ff"])), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert done, "the command hung on the FIFO"
    assert done[0].exit_code == 0, done[0].output
    reader.join(timeout=10)
    assert got and got[0].lstrip().startswith(b"{")
