"""The DP statements through `anon_sql.execute`, `anon-sql run` and `anon-sql shell`: tables printed, exit codes 2/3,
a budget spent until refused, and the refusal surviving a reopen of the file (the ledger is in the database)."""
from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.statements.script import statement_kind, execute, is_complete, split

VISITS = """CREATE TABLE visits AS
SELECT p AS patient_id, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 18 + (p * 7 + r) % 60 AS age
FROM range(3000) a(p), range(4) b(r) WHERE r <= p % 4"""
BUDGET = "CREATE PRIVACY BUDGET ON visits WITH (epsilon = 1.0, delta = 1e-5, privacy_unit = 'patient_id');\n"
# split across lines on purpose: the shell must wait for the semicolon
QUERY = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3, delta = 1e-6)\n"
         "       sex, COUNT(*) AS n\n  FROM visits GROUP BY sex;\n")


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "clinic.duckdb")
    con = duckdb.connect(path)
    con.execute(VISITS)
    con.close()
    return path


def _ledger(db) -> list[tuple]:
    con = duckdb.connect(db)
    try:
        return con.execute("SELECT epsilon, delta FROM anon.privacy_ledger ORDER BY spent_at").fetchall()
    finally:
        con.close()


def test_classify_and_is_complete_know_the_dp_statements():
    script = BUDGET + QUERY + "show privacy budgets;\ndrop privacy budget on visits"
    assert [statement_kind(s) for s in split(script)] == ["create_budget", "dp_query", "show_budgets", "drop_budget"]
    assert not is_complete(QUERY.split("\n")[0]) and not is_complete(QUERY.rstrip(";\n"))
    assert is_complete(QUERY) and is_complete(BUDGET)
    assert statement_kind(split("SELECT 1 AS differential_privacy")[0]) == "sql"


def test_execute_runs_the_dp_statements_and_returns_tables(db):
    con = duckdb.connect(db)
    results = execute(con, BUDGET + QUERY + "SHOW PRIVACY BUDGETS;")
    assert [r.kind for r in results] == ["create_budget", "dp_query", "show_budgets"]
    answer = results[1].frame
    assert sorted(answer["sex"]) == ["F", "M"]
    truth = dict(con.execute("SELECT sex, count(DISTINCT patient_id) FROM visits GROUP BY sex").fetchall())
    # bounded COUNT(*) (one row per unit by default) is the number of people; noise scale 2/0.3·… is a few units
    for sex, n in zip(answer["sex"], answer["n"]):
        assert abs(n - truth[sex]) < 200
    assert "0.7 of epsilon = 1" in results[1].message and "after 1 query" in results[1].message
    shown = results[2].frame
    assert shown.loc[0, "spent_epsilon"] == pytest.approx(0.3) and shown.loc[0, "queries"] == 1


def test_top_level_api_is_lazy_and_listed():
    for name in ("create_budget", "show_budgets", "drop_budget", "dp_query"):
        assert name in anon_sql.__all__
        assert getattr(anon_sql, name) is getattr(__import__("anon_sql.dp", fromlist=[name]), name)


def test_run_spends_the_budget_until_refused_and_a_reopen_still_refuses(db, tmp_path):
    script = tmp_path / "spend.sql"
    script.write_text(BUDGET + QUERY * 4 + "CREATE TABLE never AS SELECT 1;\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(script), "--db", db])
    assert r.exit_code == 3, r.output
    assert "statement 5" in r.output and "0.1 of epsilon = 1" in r.output and "after 3 queries" in r.output
    assert r.output.count("(2 rows)") == 3
    assert [round(e, 9) for e, _ in _ledger(db)] == [0.3, 0.3, 0.3]
    con = duckdb.connect(db)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'never'").fetchall() == [(0,)]
    con.close()

    again = tmp_path / "again.sql"                 # a new process on the same file: the ledger is still there
    again.write_text(QUERY, encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(again), "--db", db])
    assert r.exit_code == 3 and "after 3 queries" in r.output, r.output
    r = CliRunner().invoke(main, ["run", "-", "--db", db], input="SHOW PRIVACY BUDGETS;")
    assert r.exit_code == 0 and "main.visits" in r.output and "(1 row)" in r.output


def _shell(db: str, text: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "anon_sql.cli", "shell", "--db", db], input=text,
                          capture_output=True, text=True, timeout=300)


def test_shell_piped_spends_until_refused_then_reopened_refuses(db):
    first = _shell(db, BUDGET + QUERY + QUERY + QUERY + QUERY + "SELECT 42 AS never_reached;\n")
    assert first.returncode == 3, first.stderr
    assert first.stdout.count("(2 rows)") == 3 and "never_reached" not in first.stdout
    assert "needs epsilon = 0.3" in first.stderr and "0.1 of epsilon = 1" in first.stderr
    second = _shell(db, "SHOW PRIVACY BUDGETS;\n" + QUERY)
    assert second.returncode == 3, second.stderr
    assert "main.visits" in second.stdout and "after 3 queries" in second.stderr
    assert len(_ledger(db)) == 3


@pytest.mark.parametrize("statement, code, words", [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) COUNT(*) AS n FROM visits;", 3,
     "no privacy budget"),
    (BUDGET + "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0) COUNT(*) AS n FROM visits;", 2, "epsilon"),
    (BUDGET + "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) SUM(age) AS s FROM visits;", 2,
     "contribution_bounds_per_group"),
    (BUDGET + "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM visits a JOIN visits b "
              "ON a.patient_id = b.patient_id;", 2, "supported"),
    ("CREATE PRIVACY BUDGET ON visits WITH (epsilon = 1.0, delta = 0.5, privacy_unit = 'patient_id');", 2,
     "delta"),
    ("BEGIN;\n" + BUDGET, 2, "own transaction"),
])
def test_refusals_carry_their_exit_code_and_change_nothing(db, statement, code, words):
    before = duckdb.connect(db)
    spent = before.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'anon'").fetchall()
    before.close()
    r = CliRunner().invoke(main, ["run", "-", "--db", db], input=statement)
    assert r.exit_code == code, r.output
    assert words in r.output
    con = duckdb.connect(db)
    if "privacy_ledger" in [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'anon'"
                                              ).fetchall()]:
        assert con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall() == [(0,)]
    if not statement.startswith(BUDGET):     # nothing ran before the refusal: not even the catalog schema is left
        assert con.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'anon'").fetchall() == spent
    con.close()


def test_run_answers_a_dp_median_and_refuses_one_without_bounds(db, tmp_path):
    script = tmp_path / "median.sql"
    script.write_text(BUDGET + "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6) sex, "
                      "PERCENTILE_CONT(age, 0.5, contribution_bounds_per_row => (0, 100)) AS median_age "
                      "FROM visits GROUP BY sex;\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(script), "--db", db])
    assert r.exit_code == 0, r.output
    assert "median_age" in r.output and "(2 rows)" in r.output and "0.5 of epsilon = 1" in r.output
    r = CliRunner().invoke(main, ["run", "-", "--db", db], input="SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS "
                           "(epsilon = 0.1) PERCENTILE_CONT(age, 0.5) AS m FROM visits;")
    assert r.exit_code == 2 and "contribution_bounds_per_row" in r.output, r.output
    assert [round(e, 9) for e, _ in _ledger(db)] == [0.5]
