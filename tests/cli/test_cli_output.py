"""--json on every command (one shared mechanism), the progress line the methods drive, and sweep grids whose first
parameter is k."""
from __future__ import annotations

import io
import json

from click.testing import CliRunner

from anon_sql.cli.main import main
from anon_sql.cli.output import ProgressLine, rows_text
from anon_sql.common.progress import Progress



def run_json(args: list[str]) -> tuple[int, object]:
    res = CliRunner().invoke(main, args)   # stdout only: messages in JSON mode go to stderr
    return res.exit_code, json.loads(res.stdout) if res.stdout.strip() else None


def test_every_command_writes_one_json_document_to_stdout(seed_db):
    db, policy, tmp = seed_db
    code, data = run_json(["check", "r000", "--db", db, "--json"])
    assert code == 0 and data["passed"] is True and data["checks"] and all(c["passed"] for c in data["checks"])
    code, data = run_json(["release", policy, "--db", db, "--dry-run", "--json"])
    assert code == 0 and data["release"] == "r000" and data["verdict"]["status"] == "pass"
    assert data["records_in"] == data["records_out"] + data["suppressed"]
    code, data = run_json(["sql", policy, "--dialect", "sqlite", "--db", db, "--json"])
    assert code == 0 and data["dialect"] == "sqlite" and data["statements"]
    code, data = run_json(["taxonomy", "show", "--db", db, "--json"])
    assert code == 0 and "taxonomies" in data
    code, data = run_json(["export", "r000", "--db", db, "--to", str(tmp / "r.parquet"), "--json"])
    assert code == 0 and data["wrote"][0].endswith("r.parquet")


def test_every_command_has_the_json_option():
    """Every runnable command, lazy ones and subcommands included, takes the shared --json [FILE]."""
    import click

    def leaves(group: click.Group, path: tuple[str, ...] = ()):
        for name in group.list_commands(None):
            cmd = group.get_command(None, name)
            if isinstance(cmd, click.Group):
                yield from leaves(cmd, (*path, name))
            else:
                yield (*path, name), cmd

    found = dict(leaves(main))
    assert {("shell",), ("assess",), ("run",), ("check",), ("taxonomy", "show")} <= set(found)
    missing = [" ".join(p) for p, cmd in found.items() if "json_target" not in {q.name for q in cmd.params}]
    assert not missing, missing


def test_analyze_json_holds_the_tables_it_printed(seed_db):
    db, _, _ = seed_db
    code, data = run_json(["analyze", "t1", "--db", db, "--quasi", "age,zip", "--json"])
    assert code == 0 and data["attributes"] == ["age", "zip"]
    assert {row["attribute"] for row in data["leakage"]["table"]} == {"age", "zip"}
    assert set(data["leakage"]["suggested_quasi"]) <= {"age", "zip"}


def test_shell_json_gives_every_statement_result(tmp_path):
    res = CliRunner().invoke(main, ["shell", "--db", str(tmp_path / "s.duckdb"), "--json"],
                             input="CREATE TABLE t AS SELECT 1 AS a;\nSELECT a + 1 AS b FROM t;\n")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [e["kind"] for e in data] == ["sql", "sql"] and data[1]["rows"] == [{"b": 2}]


def test_report_json_dash_is_stdout_and_file_is_a_file(seed_db, monkeypatch):
    db, _, tmp = seed_db
    monkeypatch.chdir(tmp)
    code, data = run_json(["report", "r000", "--db", db, "--metrics", "k,ncp", "--json", "-"])
    assert code == 0 and data["release"] == "r000" and not (tmp / "-").exists()
    assert {m["metric"] for m in data["metrics"]} >= {"k", "ncp"} and data["distributions"]
    res = CliRunner().invoke(main, ["report", "r000", "--db", db, "--metrics", "k", "--json", "out.json"])
    assert res.exit_code == 0 and json.loads((tmp / "out.json").read_text())["release"] == "r000"
    assert "checks:" in res.stdout                         # with a file, the text report still goes to stdout


def test_sweep_with_k_first_is_a_grid_and_reports_progress_per_value(seed_db):
    db, policy, _ = seed_db
    res = CliRunner().invoke(main, ["sweep", policy, "--db", db, "--param", "k=3,20",
                                    "--param", "max_suppression=0,0.5", "--metrics", "k,ncp", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["k"], r["max_suppression"]) for r in rows] == [(3, 0), (3, 0.5), (20, 0), (20, 0.5)]
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["k_achieved"] >= r["k"] for r in ok)   # the metric k is k_achieved beside the swept k
    for i in range(1, 5):
        assert f"sweep {i}/4" in res.stderr


def test_progress_line_counts_and_eta():
    clock = iter([0.0, 0.0, 1.0, 1.0, 3.0, 3.0, 5.0, 5.0]).__next__
    out = io.StringIO()
    bar = ProgressLine("release r", ("planning", "materializing"), stream=out, clock=clock)
    bar("planning")
    bar(Progress("theta: swaps", done=10, total=110, unit="candidates"))
    bar(Progress("theta: swaps", done=60, total=110, unit="candidates"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("release r [1/2 planning]")
    assert "60/110 candidates (55%)" in lines[-1] and "ETA 2s" in lines[-1]   # 50 per 2 s → 50 left: 2 s


def test_one_table_printer_for_check_rows_and_query_results():
    """cli_output.rows_text prints `check`'s rows (dicts) and, through cli_sql.format_frame, the results of `run` /
    `shell` (a frame's columns and rows): numbers right-aligned, NULL as None, NaN, lists, the middle of a long
    result left out."""
    import pandas as pd

    from anon_sql.cli.sql import format_frame

    assert rows_text([{"check": "k", "worst_value": 2.5, "passed": True},
                      {"check": "l_distinct__diag", "worst_value": None, "passed": False}]).splitlines() == [
        "check            worst_value passed",
        "k                        2.5 True",
        "l_distinct__diag        None False"]
    frame = pd.DataFrame({"i": range(50), "x": [float("nan")] + [i / 2 for i in range(1, 50)],
                          "l": [[1, 2]] * 50})
    text = format_frame(frame, max_rows=10).splitlines()
    assert text[0].split() == ["i", "x", "l"] and len(text) == 1 + 5 + 1 + 5 + 1
    assert text[1].split() == ["0", "NaN", "[1,", "2]"] and text[6].split() == ["...", "...", "..."]
    assert text[-2].split()[:2] == ["49", "24.5"] and text[-1] == "(50 rows)"
    assert format_frame(frame.head(0)).splitlines() == ["i x l", "(0 rows)"]
    assert format_frame(pd.DataFrame({"a": [1], "b": ["x"]})).splitlines() == ["a b", "1 x", "(1 row)"]


def test_counted_words_one_and_many():
    """One helper words every count: singular for exactly 1, the plural otherwise (0, 2, 1.5), irregular plurals
    given, whole floats printed as integers."""
    from anon_sql.common.wording import counted

    assert [counted(n, "row") for n in (0, 1, 2)] == ["0 rows", "1 row", "2 rows"]
    assert [counted(n, "class") for n in (1, 3)] == ["1 class", "3 classes"]
    assert [counted(n, "leaf", "leaves") for n in (1, 2)] == ["1 leaf", "2 leaves"]
    assert [counted(n, "record") for n in (1.0, 2.0, 1.5)] == ["1 record", "2 records", "1.5 records"]
    import numpy as np
    assert counted(np.int64(1), "record") == "1 record" and counted(np.float64(3.0), "record") == "3 records"


def test_cli_output_says_1_row_1_class_1_leaf(tmp_path):
    """Counts of one are singular wherever the CLI prints them: a statement's changed rows, a query's row count,
    an anonymized view of one class (its release line, EXPLAIN and the text report) and a taxonomy of one leaf."""
    db = str(tmp_path / "one.duckdb")
    script = ("CREATE TABLE t AS SELECT * FROM (VALUES (20, 'a'), (21, 'b'), (22, 'c')) v(age, s);\n"
              "INSERT INTO t VALUES (23, 'd');\n"
              "CREATE ANONYMIZED VIEW r WITH (k = 4, method = 'mondrian') AS SELECT quasi(age), insensitive(s) FROM t;\n"
              "SELECT * FROM t WHERE age = 20;\n"
              "EXPLAIN ANONYMIZED VIEW r;\n")
    res = CliRunner().invoke(main, ["run", "--db", db, "-"], input=script)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[:2] == ["3 rows", "1 row"]
    assert "4 records in, 4 released, 0 suppressed, 1 class; plan" in lines[2]
    assert "(1 row)" in lines and "records: 4 in, 4 released, 0 suppressed, 1 class, k = 4" in lines
    res = CliRunner().invoke(main, ["report", "r", "--db", db])
    assert res.exit_code == 0, res.output
    assert "release 'r' (mondrian): 4 records in, 4 released, 0 suppressed, 0 noise, 1 class" in res.output
    assert "1 classes" not in res.output and "1 rows" not in res.output
    (tmp_path / "one.csv").write_text("a;*\n")
    res = CliRunner().invoke(main, ["taxonomy", "load", str(tmp_path / "one.csv"), "--db", db])
    assert res.exit_code == 0 and "1 leaf, levels 0..1" in res.output, res.output
