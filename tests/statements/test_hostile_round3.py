"""Regression tests for what the third hostile round found (docs/hostile-round-3.md); each failed on the code
before its fix."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main

POLICY = ("CREATE ANONYMIZED VIEW {name} WITH (method = 'optimal', k = 3, default_role = 'insensitive') "
          "AS SELECT quasi(age, taxonomy => {{'kind': 'interval', 'widths': [10, 20]}}), "
          "quasi(sex, taxonomy => {{'kind': 'top'}}) FROM people")


def people(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE people AS SELECT range AS pid, 20 + range % 40 AS age, "
                "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(300)")


def anon_tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'anon'").fetchall()}


def test_a_dotted_release_name_is_checked_and_compared_under_that_name():
    """F: N02. CHECK "a.b" said its table was missing (the name was read as schema a, table b), and REFRESH compared
    version 2 with nothing ("300 rows added")."""
    con = duckdb.connect()
    people(con)
    anon_sql.execute(con, POLICY.format(name='"a.b"'))
    rows = anon_sql.execute(con, 'CHECK ANONYMIZED VIEW "a.b"')[0].frame
    assert rows["passed"].all()
    anon_sql.execute(con, 'REFRESH ANONYMIZED VIEW "a.b"')
    assert con.execute("SELECT rows_added, rows_removed FROM anon.release_versions WHERE release = 'a.b' "
                       "AND version = 2").fetchall() == [(0, 0)]


def test_a_refused_budget_and_show_budgets_create_no_ledger():
    """F: D01, D02. A refused CREATE PRIVACY BUDGET (ε = 0) and SHOW PRIVACY BUDGETS created the two ledger tables."""
    con = duckdb.connect()
    people(con)
    anon_sql.install(con)
    before = anon_tables(con)
    with pytest.raises(anon_sql.AnonSQLError, match="epsilon > 0"):
        anon_sql.execute(con, "CREATE PRIVACY BUDGET ON people WITH (epsilon = 0, delta = 1e-6, privacy_unit = 'pid')")
    shown = anon_sql.execute(con, "SHOW PRIVACY BUDGETS")[0].frame
    assert len(shown) == 0 and "epsilon_left" in shown.columns
    assert anon_tables(con) == before


def test_huge_contribution_bounds_are_a_policy_error_not_a_bignum():
    """F: D13. Bounds (0, 1e308) were rendered as a 309-digit integer: DuckDB's BIGNUM reached numpy (a raw
    'Not implemented Error'). Now the bound is a DOUBLE and the noise scale is refused by name; nothing is spent."""
    con = duckdb.connect()
    people(con)
    anon_sql.create_budget(con, "people", epsilon=1.0, delta=1e-4, privacy_unit="pid")
    with pytest.raises(anon_sql.PolicyError, match="too small for sensitivity"):
        anon_sql.dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1, delta = 1e-6) "
                               "SUM(age, contribution_bounds_per_group => (0, 1e308)) AS s FROM people")
    assert anon_sql.show_budgets(con)["spent_epsilon"].tolist() == [0.0]


def test_a_binary_policy_file_is_exit_2(tmp_path):
    """F: F03. A policy file of random bytes was a UnicodeDecodeError traceback (exit 1)."""
    for name in ("p.toml", "p.sql"):
        policy = tmp_path / name
        policy.write_bytes(b"\x00\xf9\xfe\x81 name = 1\n")
        res = CliRunner().invoke(main, ["release", str(policy), "--db", str(tmp_path / "x.duckdb")])
        assert res.exit_code == 2, res.output
        assert "is not UTF-8 text (byte 0xf9" in res.output
        assert not (tmp_path / "x.duckdb").exists()


@pytest.mark.parametrize("command", [["run", "{script}"], ["assess", "people", "--quasi", "sex"],
                                     ["check", "r"]])
def test_a_csv_given_as_db_is_refused(tmp_path, command):
    """F: F08. DuckDB 2 opens a CSV path as a database of one view: `run` exited 0 and its CREATE TABLE vanished."""
    csv = tmp_path / "people.csv"
    csv.write_text("pid,sex\n1,F\n2,M\n", encoding="utf-8")
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE z AS SELECT 1 AS x;\n", encoding="utf-8")
    args = [a.format(script=script) for a in command] + ["--db", str(csv)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert "is not a DuckDB database file" in res.output
    assert csv.read_text(encoding="utf-8") == "pid,sex\n1,F\n2,M\n"


@pytest.mark.parametrize("function, options", [("dnoise", "'interval': '10 days'"), ("noise", "'ratio': 0.1")])
def test_a_noise_mask_on_a_text_column_names_the_column(function, options):
    """F: M02. dnoise on a VARCHAR column was DuckDB's 55-line binder error ('+(VARCHAR, INTERVAL)')."""
    con = duckdb.connect()
    people(con)
    before = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    with pytest.raises(anon_sql.StatementError, match=f"attributes.sex.mask: function = '{function}' needs a") as err:
        anon_sql.execute(con, "CREATE ANONYMIZED VIEW m WITH (k = 3, seed = 918273, default_role = 'insensitive') AS SELECT "
                              "quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 20]}), "
                              f"insensitive(sex, mask => {{'function': '{function}', {options}}}) FROM people")
    assert err.value.exit_code == 2
    assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == before


def test_a_dangling_symlink_as_export_target_is_named_as_existing(tmp_path):
    """F: E08. A dangling symlink was reported as having "appeared while writing" (it was there before)."""
    db = str(tmp_path / "r.duckdb")
    with duckdb.connect(db) as con:
        people(con)
        anon_sql.execute(con, POLICY.format(name="r"))
    link = tmp_path / "out.duckdb"
    link.symlink_to(tmp_path / "nowhere.duckdb")
    res = CliRunner().invoke(main, ["export", "r", "--db", db, "--to", str(link)])
    assert res.exit_code == 2 and "already exists" in res.output, res.output
    assert link.is_symlink() and not (tmp_path / "nowhere.duckdb").exists()


def test_a_missing_source_lists_the_users_tables_only():
    """F: R01. A refresh whose source was renamed away listed its own temporary tables (`__anon_previous_rows`) and
    the working views of anon_work among the tables "found"."""
    con = duckdb.connect()
    people(con)
    anon_sql.execute(con, POLICY.format(name="r"))
    con.execute("ALTER TABLE people RENAME TO people_old")
    with pytest.raises(anon_sql.StatementError, match=r"found: \['people_old', 'r'\]"):
        anon_sql.execute(con, "REFRESH ANONYMIZED VIEW r")
