"""Hostile round 12, M26 (M20a/c/d): an output option still wrote over a file the command reads — the pseudonym
key file or the source CSV of a .sql POLICY (its TOML parse failed and the guard gave up), of a CREATE ANONYMIZED
VIEW in a ``run`` SCRIPT, and the CSV a source view of ``--db`` reads. Each is refused now (exit 2, the message
names the file, its bytes unchanged); and (round 13, M31) an existing file is replaced only when anon_sql wrote it."""
from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main
from anon_sql.cli.output import output_target, remember_output
from anon_sql.errors import TargetError
from test_cli_output_paths import refused   # exit 2 naming it, the file's bytes as before

KEY = "k" * 32
VIEW = """CREATE {replace}ANONYMIZED VIEW pk WITH (k = 5, method = 'levels', seed = 123456789123,
    method_params = {{'levels': {{'age': 0}}}}) AS
SELECT identifier(cid, action => 'pseudonymize', key_file => 'my.key'), quasi(age, taxonomy => {{'kind': 'top'}}),
       identifier(ssn) FROM 'custs.csv'
"""


@pytest.fixture()
def work(tmp_path, monkeypatch):
    """The round's reproduction: ``custs.csv``, ``my.key``, ``db.duckdb`` with a view ``pv`` over ``pats.csv``; the
    SQL policy ``p.sql``, the scripts ``s.sql`` / ``sr.sql`` (CREATE [OR REPLACE] ANONYMIZED VIEW) and ``pv.toml``
    (source = the view)."""
    monkeypatch.chdir(tmp_path)
    with duckdb.connect(str(tmp_path / "db.duckdb")) as c:
        c.execute("COPY (SELECT i AS cid, 20 + 10 * (i % 5) AS age, 'x' || i AS ssn FROM range(200) t(i)) "
                  "TO 'custs.csv'")
        c.execute("COPY (SELECT i AS pid, 20 + 10 * (i % 5) AS age FROM range(200) t(i)) TO 'pats.csv'")
        c.execute("CREATE VIEW pv AS SELECT * FROM read_csv('pats.csv')")
    (tmp_path / "my.key").write_text(KEY, encoding="utf-8")
    (tmp_path / "p.sql").write_text(VIEW.format(replace=""), encoding="utf-8")
    (tmp_path / "s.sql").write_text(VIEW.format(replace="") + ";\n", encoding="utf-8")
    (tmp_path / "sr.sql").write_text(VIEW.format(replace="OR REPLACE ") + ";\n", encoding="utf-8")
    (tmp_path / "pv.toml").write_text('name = "pv_rel"\nsource = "pv"\nmethod = "levels"\n[privacy]\nk = 5\n'
                                      '[attributes.pid]\nrole = "identifier"\n'
                                      '[attributes.age]\nrole = "quasi"\ntaxonomy = {kind = "top"}\n'
                                      '[method_params.levels]\nage = 0\n', encoding="utf-8")
    return tmp_path


DB = ["--db", "db.duckdb"]


@pytest.mark.parametrize("args, guarded", [
    (["release", "p.sql", *DB, "--json", "my.key"], "my.key"),                                     # M20a-1
    (["release", "p.sql", *DB, "--replace", "--json", "custs.csv"], "custs.csv"),                 # M20a-2
    (["run", "s.sql", *DB, "--json", "custs.csv"], "custs.csv"),                                  # M20c-1
    (["run", "sr.sql", *DB, "--json", "my.key"], "my.key"),                                       # M20c-2
    (["release", "pv.toml", *DB, "--json", "pats.csv"], "pats.csv"),                              # M20d
    (["sql", "p.sql", "--json", "my.key"], "my.key"),
], ids=["M20a-1", "M20a-2", "M20c-1", "M20c-2", "M20d", "sql-key"])
def test_an_output_over_a_file_the_command_reads_is_refused(work, args, guarded):
    res = refused(work, args, guarded, says=repr(guarded))
    assert "is the input this command reads" in res.output, res.output    # not only the own-kind rule below


@pytest.mark.parametrize("command", ["run", "shell"])
def test_sql_on_stdin_is_guarded_when_the_json_is_written(work, command):
    """A script on stdin (``run -``) and the piped shell's statements: the files they name are known once they ran.
    The file here is an earlier anon_sql output read back as data, which the rule for earlier outputs alone would
    let a ``--json`` replace."""
    assert CliRunner().invoke(main, ["release", "p.sql", *DB, "--json", "data.json"]).exit_code == 0
    before = (work / "data.json").read_bytes()
    res = CliRunner().invoke(main, [command, *(["-"] if command == "run" else []), *DB, "--json", "data.json"],
                             input="SELECT count(*) AS n\n  FROM read_json('data.json');\n")
    assert res.exit_code == 2 and "a file the SQL run names, 'data.json'" in res.output, res.output
    assert (work / "data.json").read_bytes() == before


def test_a_string_in_any_statement_of_the_script_is_guarded(work):
    """The broad rule: not only the anonymized view's options — any string of the script naming a file, even one
    sqlglot cannot tokenize (an unterminated string at the end) or behind a comment with an apostrophe."""
    (work / "q.sql").write_text("-- don't touch\nSELECT count(*) FROM 'pats.csv';\nSELECT 'unterminated",
                                encoding="utf-8")
    refused(work, ["run", "q.sql", "--json", "pats.csv"], "pats.csv", says="a file the script names, 'pats.csv'")


def test_an_output_replaces_only_a_file_anon_sql_wrote(work):
    """Round 13's M31: a JSON data file read through a path the guard cannot see was replaced, as JSON is the
    output's own kind. Now any existing file is replaced only when anon_sql wrote it and it is unchanged since."""
    (work / "out.json").write_text('{"old": true}', encoding="utf-8")     # JSON, but not ours
    res = refused(work, ["release", "p.sql", *DB, "--json", "out.json"], "out.json", says="'out.json'")
    assert "anon_sql did not write" in res.output, res.output
    (work / "out.json").unlink()
    for flags in ([], ["--replace"]):      # written, then replaced: ours
        res = CliRunner().invoke(main, ["release", "p.sql", *DB, *flags, "--json", "out.json"])
        assert res.exit_code == 0, res.output
    assert json.loads((work / "out.json").read_text(encoding="utf-8"))["release"] == "pk"
    with (work / "out.json").open("a", encoding="utf-8") as f:          # changed since: not replaced
        f.write(" ")
    refused(work, ["release", "p.sql", *DB, "--replace", "--json", "out.json"], "out.json", says="changed since")
    (work / "empty.json").write_text("", encoding="utf-8")     # an empty file holds nothing to lose
    assert CliRunner().invoke(main, ["release", "p.sql", *DB, "--replace", "--json", "empty.json"]).exit_code == 0


def test_each_option_refuses_a_file_it_did_not_write_the_history_too(work):
    (work / "page.html").write_text("  <!DOCTYPE HTML>\n<html></html>", encoding="utf-8")
    (work / "sweep.csv").write_text("k,status,records_out\n2,ok,10\n", encoding="utf-8")
    (work / "hist").write_text("SELECT 1\n  + 1;\n.help\n", encoding="utf-8")
    remember_output(work / "hist")                     # a history the shell wrote: written on
    assert output_target("--history", "hist").name == "hist"
    (work / "unfinished").write_text("SELECT 1\n", encoding="utf-8")   # lines of text anon_sql did not write: kept
    for other in ["unfinished", "page.html"]:         # (round 14, M34: a CSV was cut to readline's last 1,000 lines)
        with pytest.raises(TargetError, match=f"--history '{other}' is an existing file anon_sql did not write"):
            output_target("--history", other)
    for option, other in [("--html", "page.html"), ("--csv", "sweep.csv"), ("--csv", "my.key"),
                          ("--json", "page.html"), ("--html", "custs.csv")]:
        with pytest.raises(TargetError, match=f"{option} '{other}' is an existing file anon_sql did not write"):
            output_target(option, other)


def test_a_file_the_guard_cannot_read_is_refused(work, monkeypatch):
    """A file the guard cannot read cannot be shown to be anon_sql's own output: refused (fail closed)."""
    from pathlib import Path

    def unreadable(self, *args, **kwargs):
        raise PermissionError("denied")

    monkeypatch.setattr(Path, "open", unreadable)
    with pytest.raises(TargetError, match="'my.key' is an existing file anon_sql did not write"):
        output_target("--json", "my.key")


def test_m26b_a_file_a_table_macro_of_the_database_reads_is_never_the_output(work):
    """Round 12's M26b: the source view reads a table macro whose body reads a raw JSON file; --json replaced it
    (a JSON document, so of the output's own kind). Macro bodies are read like views' SQL now."""
    import duckdb

    with duckdb.connect(str(work / "db.duckdb")) as c:
        c.execute("COPY (SELECT i AS Id, 20 + 10 * (i % 5) AS age, 'z' || (i % 3) AS zip FROM range(200) t(i)) "
                  "TO 'pats.json' (FORMAT json, ARRAY true)")
        c.execute("CREATE MACRO pats_src() AS TABLE SELECT * FROM read_json('pats.json')")
        c.execute("CREATE VIEW pjv AS SELECT * FROM pats_src()")
    (work / "pj.toml").write_text('name = "pvj"\nsource = "pjv"\nmethod = "levels"\nseed = 55443322110\n'
                                  '[attributes.Id]\nrole = "identifier"\n[attributes.age]\nrole = "quasi"\n'
                                  'taxonomy = { kind = "top" }\n[attributes.zip]\nrole = "insensitive"\n'
                                  '[privacy]\nk = 5\n[method_params]\nlevels = { age = 0 }\n', encoding="utf-8")
    refused(work, ["release", "pj.toml", *DB, "--json", "pats.json"], "pats.json", says="'pats.json'")


@pytest.mark.parametrize("path", ["'pats.js' || 'on'", "'file://{work}/pats.json'"],
                         ids=["concatenated (G16)", "file URL (G1)"])
def test_m31_a_data_file_read_through_a_path_no_text_spells_is_never_the_output(work, path):
    """Round 13's M31: the source view reads a JSON file through a path built when the query runs; no text names
    it, and the own-kind rule let --json replace the raw data. Now it is no output anon_sql wrote: refused."""
    with duckdb.connect(str(work / "db.duckdb")) as c:
        c.execute("COPY (SELECT i AS Id, 20 + 10 * (i % 5) AS age FROM range(200) t(i)) TO 'pats.json' "
                  "(FORMAT json, ARRAY true)")
        c.execute(f"CREATE VIEW pjv AS SELECT * FROM read_json({path.format(work=work)})")
    (work / "pj.toml").write_text('name = "pvj"\nsource = "pjv"\nmethod = "levels"\nseed = 55443322110\n'
                                  '[attributes.Id]\nrole = "identifier"\n[attributes.age]\nrole = "quasi"\n'
                                  'taxonomy = { kind = "top" }\n[privacy]\nk = 5\n[method_params]\n'
                                  'levels = { age = 0 }\n', encoding="utf-8")
    res = refused(work, ["release", "pj.toml", *DB, "--json", "pats.json"], "pats.json", says="'pats.json'")
    assert "anon_sql did not write" in res.output, res.output
