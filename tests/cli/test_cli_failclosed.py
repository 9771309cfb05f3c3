"""Hostile CLI input, tried as a new user would: every case exits 2 (bad input) with one `error:` line that names the
thing and the fix — no traceback, no raw DuckDB error — and the database is exactly as before (objects and row
counts compared), no stray file is created, nothing anon_sql did not create is replaced."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from test_check_tamper import PATIENTS, levels_policy

RAW = ("Traceback", "Catalog Error", "Binder Error", "IO Error", "Conversion Error", "Parser Error",
       "Invalid Input Error", "internal error")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """patients + a release `rl` + user objects whose names collide with what a release would create."""
    path = tmp_path_factory.mktemp("hostile") / "w.duckdb"
    c = duckdb.connect(str(path))
    anon_sql.install(c)
    c.execute(PATIENTS)
    c.execute("CREATE TABLE empty AS SELECT * FROM patients LIMIT 0")
    c.execute("CREATE TABLE r3 AS SELECT 42 AS mine")                    # a user table named like a release
    c.execute('CREATE TABLE "Users" AS SELECT 1 AS id')                  # differs from `users` only by case
    c.execute("CREATE TABLE rw__assignment AS SELECT 7 AS mine")         # named like a working table: never touched
    c.execute("CREATE SCHEMA anon_work")
    c.execute("CREATE TABLE anon_work.rx__assignment AS SELECT 7 AS mine")   # not the product's: a release `rx`
                                                                            # would replace it
    c.execute("CREATE VIEW young AS SELECT * FROM patients WHERE age < 40")
    c.execute("CREATE TABLE counted AS SELECT age, sex, diag, CASE WHEN name = 'Ann' THEN NULL "
              "WHEN name = 'Bob' THEN -1 ELSE 1 END AS n FROM patients")
    c.execute("CREATE TABLE adult_sample AS SELECT 'not the demo' AS mine")
    anon_sql.release(c, levels_policy())
    anon_sql.load_taxonomy_file(c, _arx(path.parent / "age_h.csv"), "age_h")
    c.close()
    return path


def _arx(path: Path) -> Path:
    path.write_text("".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(30, 60)), encoding="utf-8")
    return path


@pytest.fixture
def work(template, tmp_path):
    shutil.copy(template, tmp_path / "w.duckdb")
    return tmp_path


def snapshot(db: Path) -> dict | None:
    """Every table with its row count, every view with its SQL (None: no file)."""
    if not db.exists():
        return None
    c = duckdb.connect(str(db), read_only=True)
    tables = c.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY 1, 2").fetchall()
    out = {f"{s}.{t}": c.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall()[0][0] for s, t in tables}
    out.update({f"view {s}.{v}": sql for s, v, sql in c.execute(
        "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1, 2").fetchall()})
    c.close()
    return out


def policy_file(work: Path, **changes) -> str:
    pol = levels_policy(changes.pop("name", "rl"))
    pol.update(changes)
    path = work / f"{pol['name']}.toml"
    path.write_text(anon_sql.Policy.from_dict(pol).to_toml())
    return str(path)


def refused(work: Path, args: list[str], *needles: str, code: int = 2, absent: tuple[str, ...] = ()) -> str:
    """Run the CLI; assert the exit code, the message, no raw error, and the database and folder unchanged."""
    db = work / "w.duckdb"
    before, files = snapshot(db), sorted(p.name for p in work.iterdir())
    res = CliRunner().invoke(main, args)
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    text = res.output
    assert text.lower().count("error:") == 1 and not [r for r in RAW if r in text], text
    for needle in needles:
        assert needle in text, text
    for needle in absent:
        assert needle not in text, text
    assert snapshot(db) == before
    assert sorted(p.name for p in work.iterdir()) == files
    return text


def test_missing_and_empty_source(work):
    db = str(work / "w.duckdb")
    refused(work, ["release", policy_file(work, name="r1", source="nope"), "--db", db], "'nope'", "load it first")
    refused(work, ["release", policy_file(work, name="r2", source="empty"), "--db", db], "'empty' is empty")
    refused(work, ["release", policy_file(work, name="r4", source="missing.csv"), "--db", db],
            "'missing.csv' does not exist")


def test_release_exists_says_replace_but_a_user_table_is_never_replaced(work):
    db = str(work / "w.duckdb")
    refused(work, ["release", policy_file(work), "--db", db], "release 'rl' already exists", "--replace")
    for flags in ([], ["--replace"]):
        refused(work, ["release", policy_file(work, name="r3"), "--db", db, *flags],
                "'r3' already exists and is not a release", "never drops", absent=("--replace", "replace=True"))
    refused(work, ["release", policy_file(work, name="users"), "--db", db, "--replace"],
            "'users' differs only by case from the existing table 'Users'")
    refused(work, ["release", policy_file(work, name="rx"), "--db", db, "--replace"], "['rx__assignment']",
            "'anon_work'", absent=("--replace",))
    # the release's own name replaced with --replace: that one is anon_sql's
    assert CliRunner().invoke(main, ["release", policy_file(work), "--db", db, "--replace"]).exit_code == 0


@pytest.mark.parametrize("name", ["patients", "rl__source", "anon_work.rl__source", "rl__classes", "young", "nope"])
def test_export_and_check_refuse_what_is_not_a_release(work, name):
    db = str(work / "w.duckdb")
    refused(work, ["export", name, "--db", db, "--to", str(work / "out.duckdb")], f"{name!r} is not a release",
            "['rl']")
    refused(work, ["export", name, "--db", db, "--to", str(work / "out.parquet")], "is not a release")
    refused(work, ["check", name, "--db", db], "is not a release")


@pytest.mark.parametrize("args", [
    ["check", "rl"], ["export", "rl", "--to", "x.duckdb"], ["report", "rl"], ["taxonomy", "show"],
    ["taxonomy", "build", "z", "--table", "patients", "--column", "age", "--kind", "top"],
    ["sql", "POLICY"], ["sweep", "POLICY", "--param", "k=2,3"],
])
def test_reading_commands_never_create_a_database(work, args):
    missing = work / "typo.duckdb"
    args = [policy_file(work) if a == "POLICY" else str(work / a) if a.endswith(".duckdb") else a for a in args]
    refused(work, [*args, "--db", str(missing)], "'" + str(missing) + "' does not exist")
    assert not missing.exists()


def test_a_failed_release_leaves_no_new_database_file(work):
    missing = work / "new.duckdb"
    refused(work, ["release", policy_file(work, name="r1", source="nope"), "--db", str(missing)], "'nope'")
    assert not missing.exists()


def test_count_column_nulls_and_negatives(work):
    pol = levels_policy("rc")
    del pol["attributes"]["name"]
    path = work / "rc.toml"
    path.write_text(anon_sql.Policy.from_dict({**pol, "source": "counted", "count_column": "n"}).to_toml())
    pol = str(path)
    text = refused(work, ["release", pol, "--db", str(work / "w.duckdb")], "count_column 'n'", "1 NULL",
                   "1 negative")
    assert "WHERE n >= 1" in text


def test_taxonomy_load_refuses_an_existing_name_and_bad_files(work):
    db = str(work / "w.duckdb")
    good = _arx(work / "ages.csv")
    refused(work, ["taxonomy", "load", str(good), "--db", db, "--name", "age_h"], "'age_h' already exists",
            "--replace")
    latin = work / "zip.csv"
    latin.write_bytes("Zürich;Z*;*\nBern;B*;*\n".encode("latin-1"))
    refused(work, ["taxonomy", "load", str(latin), "--db", db], "not UTF-8", "iconv")
    comma = work / "comma.csv"
    comma.write_text("a,x,*\nb,x,*\n")
    refused(work, ["taxonomy", "load", str(comma), "--db", db], "single column", "comma-separated")
    refused(work, ["taxonomy", "show", "nope", "--db", db], "no taxonomy named 'nope'", "['age_h']")
    r = CliRunner().invoke(main, ["taxonomy", "load", str(good), "--db", db, "--name", "age_h", "--replace"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("widths, bad", [("a,b", "'a' is not a number"), ("5,-1", "'-1' is not a positive"),
                                         ("5,,10", "'' is not a number")])
def test_widths_are_checked(work, widths, bad):
    refused(work, ["taxonomy", "build", "w", "--db", str(work / "w.duckdb"), "--table", "patients", "--column",
                   "age", "--kind", "interval", "--widths", widths], bad, "--widths 5,10,20")


def test_taxonomy_build_names_a_missing_table_or_column(work):
    db = str(work / "w.duckdb")
    refused(work, ["taxonomy", "build", "w", "--db", db, "--table", "nope", "--column", "age", "--kind", "top"],
            "'nope' is not a table")
    refused(work, ["taxonomy", "build", "w", "--db", db, "--table", "patients", "--column", "height", "--kind",
                   "top"], "no column 'height'", "'age'")


def test_demo_never_overwrites_a_user_table(work):
    refused(work, ["demo", "--db", str(work / "w.duckdb")], "'adult_sample' that the demo did not create")
    own = work / "demo.duckdb"
    for _ in range(2):   # its own tables it may replace: a second run works
        assert CliRunner().invoke(main, ["demo", "--db", str(own)]).exit_code == 0


def test_release_to_an_existing_file_creates_nothing(work):
    (work / "taken.duckdb").write_bytes(b"mine")
    refused(work, ["release", policy_file(work, name="r9"), "--db", str(work / "w.duckdb"), "--to",
                   str(work / "taken.duckdb")], "already exists", "never overwrites")
    assert (work / "taken.duckdb").read_bytes() == b"mine"


def test_real_processes_exit_2_without_a_traceback(work):
    """The same refusals from a real `anon-sql` process (stderr, exit status), not click's test runner."""
    db = str(work / "w.duckdb")
    before = snapshot(work / "w.duckdb")
    cli = [sys.executable, "-m", "anon_sql.cli"]
    for args, needle in ((["export", "patients", "--db", db, "--to", str(work / "p.duckdb")], "not a release"),
                         (["check", "rl", "--db", str(work / "typo.duckdb")], "does not exist"),
                         (["release", policy_file(work, name="r3"), "--db", db, "--replace"], "never drops")):
        out = subprocess.run(cli + args, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stderr
        errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and needle in errors[0], out.stderr
        assert not [r for r in RAW if r in out.stderr + out.stdout]
    assert snapshot(work / "w.duckdb") == before
    assert not (work / "typo.duckdb").exists() and not (work / "p.duckdb").exists()
    out = subprocess.run(cli + ["check", "rl", "--db", db], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "all checks passed" in out.stdout


@pytest.fixture
def plain(tmp_path):
    """A database file without the anon catalog: a source table and nothing else."""
    db = tmp_path / "plain.duckdb"
    c = duckdb.connect(str(db))
    c.execute(PATIENTS)
    c.close()
    return db


def schemas(db: Path) -> list[str]:
    c = duckdb.connect(str(db), read_only=True)
    out = [r[0] for r in c.execute("SELECT DISTINCT schema_name FROM duckdb_schemas() WHERE database_name = "
                                   "current_database() ORDER BY 1").fetchall()]
    c.close()
    return out


def test_failing_commands_leave_a_database_without_catalog_unchanged(plain):
    """Bad input to `run`, `release` and `taxonomy load` on a database that has no catalog: exit 2, and the
    database is exactly as before — tables, row counts, views and schemas (no catalog installed on the way)."""
    work, db = plain.parent, str(plain)
    before, spaces = snapshot(plain), schemas(plain)
    assert spaces == ["main"]
    scripts = {
        "source.sql": "CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(age), sensitive(diag) FROM nope;",
        "typo.sql": "CREATE ANONYMIZED VIEW r WITH (k = 2, methd = 'optimal') AS SELECT quasi(age), "
                    "sensitive(diag) FROM patients;",
        "unknown.sql": "DROP ANONYMIZED VIEW nope;",
        "syntax.sql": "CREATE ANONYMIZED VIEW r AS SELECT FROM;",
    }
    for name, text in scripts.items():
        (work / name).write_text(text)
        res = CliRunner().invoke(main, ["run", str(work / name), "--db", db])
        assert res.exit_code == 2, (name, res.output)
        assert res.output.lower().count("error:") == 1 and "Traceback" not in res.output, res.output
        assert snapshot(plain) == before and schemas(plain) == spaces, name
    good = anon_sql.Policy.from_dict(levels_policy("rt")).to_toml()
    assert "l_diversity" in good
    for name, text in (("typo", good.replace("l_diversity", "l_diversty")),
                       ("source", anon_sql.Policy.from_dict({**levels_policy("rs"), "source": "nope"}).to_toml())):
        path = work / f"{name}.toml"
        path.write_text(text)
        res = CliRunner().invoke(main, ["release", str(path), "--db", db])
        assert res.exit_code == 2, res.output
        assert snapshot(plain) == before and schemas(plain) == spaces
    comma = work / "comma.csv"
    comma.write_text("a,x,*\nb,x,*\n")
    assert CliRunner().invoke(main, ["taxonomy", "load", str(comma), "--db", db]).exit_code == 2
    assert snapshot(plain) == before and schemas(plain) == spaces


def test_a_refused_release_prints_its_error_alone(plain, monkeypatch):
    """The progress line is held back while a command runs briefly: a release refused after planning and
    verification prints its error and nothing else on stderr; a successful one still shows its stages. (The hold
    is made longer than any run here, so that the test does not depend on the machine's speed.)"""
    from anon_sql.cli.output import ProgressLine

    monkeypatch.setattr(ProgressLine, "HOLD", 3600.0)
    work, db = plain.parent, str(plain)
    strict = levels_policy("rk")
    strict["privacy"]["k"] = 10                     # planning and verification run, then the release is refused
    path = work / "rk.toml"
    path.write_text(anon_sql.Policy.from_dict(strict).to_toml())
    res = CliRunner().invoke(main, ["release", str(path), "--db", db])
    assert res.exit_code == 3, res.output
    assert res.stderr.startswith("error: release 'rk' not created") and res.stderr.count("error:") == 1
    assert "planning" not in res.stderr and "verifying" not in res.stderr, res.stderr
    path = work / "rl.toml"
    path.write_text(anon_sql.Policy.from_dict(levels_policy()).to_toml())
    res = CliRunner().invoke(main, ["release", str(path), "--db", db])
    assert res.exit_code == 0 and "release rl [1/3 planning]" in res.stderr and "error" not in res.stderr


def test_progress_line_fail_erases_itself():
    """On a terminal the progress line is redrawn in place; a failure erases it (after the hold, too)."""
    import io

    from anon_sql.cli.output import ProgressLine

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for times in ([0.0] * 6, [0.0, 0.0, 0.0, 5.0, 5.0, 5.0]):
        out = Tty()
        bar = ProgressLine("release r", ("planning", "verifying"), stream=out, clock=iter(times).__next__)
        bar("planning")
        bar("verifying")
        bar.fail()
        shown = out.getvalue().split("\r")[-1]
        assert shown.strip() == "", out.getvalue()      # what the terminal shows last: an empty line
    held = io.StringIO()
    bar = ProgressLine("release r", ("planning",), stream=held, clock=iter([0.0, 0.0, 0.0]).__next__)
    bar("planning")
    bar.fail()
    assert held.getvalue() == ""
