"""Hostile round 11, M20 (docs/hostile-round-11.md, H24b, H74a–H74d): an output option wrote over a file the command
reads without naming it as ``--db`` or TABLE — the policy's pseudonym ``key_file`` (every later check failed on all
the pseudonyms), its source CSV (the raw data gone), an ``assess --taxonomy``/``--population`` file. Each is refused
now (exit 2, the file's bytes unchanged), and an output file of the output's own kind is still overwritten."""
from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from test_cli_output_paths import refused   # exit 2 naming it, the file's bytes as before

KEY = "k" * 48


@pytest.fixture()
def work(tmp_path, monkeypatch):
    """``pats.csv`` (the raw source), ``my.key``, a policy ``pk.toml`` over the CSV with a keyed pseudonym, its
    release ``pk`` in ``db.duckdb``, and ``zt.csv`` (an ARX hierarchy for zip)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pats.csv").write_text("pid,age,sex,zip\n" + "".join(
        f"{i},{30 + (i % 4) * 10},{'FM'[i % 2]},{10000 + i % 7}\n" for i in range(120)), encoding="utf-8")
    (tmp_path / "my.key").write_text(KEY, encoding="utf-8")
    (tmp_path / "zt.csv").write_text("".join(f"{10000 + i};1000*;*\n" for i in range(7)), encoding="utf-8")
    policy = {"name": "pk", "source": "pats.csv", "method": "levels",
              "attributes": {"pid": {"role": "identifier", "action": "pseudonymize", "key_file": "my.key"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "zip": {"role": "insensitive"}},
              "privacy": {"k": 5}, "method_params": {"levels": {"age": 0, "sex": 0}}}
    (tmp_path / "pk.json").write_text(json.dumps(policy), encoding="utf-8")
    with duckdb.connect(str(tmp_path / "db.duckdb")) as c:
        anon_sql.install(c)
        anon_sql.release(c, policy)
    return tmp_path


DB = ["--db", "db.duckdb"]


@pytest.mark.parametrize("args, guarded", [
    (["check", "pk", *DB, "--json", "my.key"], "my.key"),                                          # H24b
    (["check", "pk", *DB, "--json", "pats.csv"], "pats.csv"),
    (["report", "pk", *DB, "--html", "my.key"], "my.key"),
    (["release", "pk.json", *DB, "--dry-run", "--json", "pats.csv"], "pats.csv"),                  # H74d
    (["release", "pk.json", *DB, "--dry-run", "--json", "my.key"], "my.key"),
    (["sweep", "pk.json", *DB, "--param", "k=2,5", "--csv", "pats.csv"], "pats.csv"),             # H74c
    (["assess", "pats.csv", "--quasi", "age,sex", "--sensitive", "zip", "--taxonomy", "zip=zt.csv",
      "--json", "zt.csv"], "zt.csv"),                                                                # H74a
    (["assess", "pats.csv", "--quasi", "age,sex", "--population", "pats.csv", "--json", "pats.csv"],
     "pats.csv"),                                                                                    # H74b
], ids=["check-key", "check-source", "report-key", "release-source", "release-key", "sweep-source",
        "assess-taxonomy", "assess-population"])
def test_an_output_over_a_file_the_command_reads_is_refused(work, args, guarded):
    refused(work, args, guarded, says=guarded)


def test_an_earlier_output_is_still_overwritten(work):
    """anon_sql's own earlier output is replaced; since round 13's M31 a JSON file it did not write is not."""
    for _ in range(2):
        res = CliRunner().invoke(main, ["check", "pk", *DB, "--json", "out.json"])
        assert res.exit_code == 0, res.output
    assert json.loads((work / "out.json").read_text(encoding="utf-8"))
    (work / "out.json").write_text("{}", encoding="utf-8")
    assert CliRunner().invoke(main, ["check", "pk", *DB, "--json", "out.json"]).exit_code == 2
    assert (work / "my.key").read_text(encoding="utf-8") == KEY
