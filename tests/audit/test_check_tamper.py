"""`anon-sql check` / anon_sql.check is tamper-evident: it recompiles every model from the policy stored in
anon.releases and runs it over the released table, reconciling with the recorded counts. No view of the file is
trusted: rewriting a working `<name>__checks` view (or any working view) to always pass changes nothing, and any
edit of the released table that breaks a model, the record counts, the classes or the released columns gives exit 3."""
from __future__ import annotations

import shutil

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from conftest import data_path, load_theta_noise, theta_noise_policy, working
from forgery import db, edit  # noqa: F401  (db is a fixture)

TOP = {"kind": "top"}
PATIENTS = ("CREATE TABLE patients AS SELECT * FROM (VALUES "
            "('Ann', 34, 'F', 'flu'), ('Bob', 35, 'M', 'cold'), ('Cy', 36, 'M', 'flu'), ('Di', 37, 'F', 'cold'), "
            "('Ed', 44, 'M', 'flu'), ('Fa', 45, 'F', 'cold'), ('Gu', 46, 'M', 'asthma'), ('Ho', 47, 'F', 'cold'), "
            "('Ina', 52, 'F', 'flu'), ('Jo', 55, 'M', 'cold'), ('Kai', 57, 'M', 'asthma'), ('Lu', 58, 'F', 'flu')"
            ") t(name, age, sex, diag)")


def levels_policy(name: str = "rl") -> dict:
    return {"name": name, "source": "patients",
            "attributes": {"name": {"role": "identifier"},
                           "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                           "sex": {"role": "quasi", "taxonomy": TOP}, "diag": {"role": "sensitive"}},
            "privacy": {"k": 3, "l_diversity": {"kind": "distinct", "l": 2}},
            "method_params": {"levels": {"age": 1, "sex": 1}}}


def mondrian_policy() -> dict:
    pol = levels_policy("rm")
    pol["method"] = "mondrian"
    pol.pop("method_params")
    return pol


def theta_policy() -> dict:
    return theta_noise_policy("rt")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """One file with the three releases, made once; each test edits its own copy."""
    path = str(tmp_path_factory.mktemp("tamper") / "w.duckdb")
    c = duckdb.connect(path)
    anon_sql.install(c)
    c.execute(PATIENTS)
    load_theta_noise(c)
    for pol in (levels_policy(), mondrian_policy(), theta_policy()):
        anon_sql.release(c, pol)
    c.close()
    return path


def check(db: str) -> dict[str, int]:
    """Exit code of `anon-sql check` for each release in the file."""
    return {name: CliRunner().invoke(main, ["check", name, "--db", db]).exit_code for name in ("rl", "rm", "rt")}


def failed(db: str, name: str) -> set[str]:
    c = duckdb.connect(db, read_only=True)
    frame = anon_sql.check(c, name)
    c.close()
    return set(frame.loc[~frame["passed"], "check"])


def test_untouched_releases_pass_on_a_read_only_reopened_file(db):
    assert check(db) == {"rl": 0, "rm": 0, "rt": 0}
    c = duckdb.connect(db, read_only=True)   # no install: the checks are SQL with the macros the file keeps
    frame = anon_sql.check(c, "rt")
    assert frame["passed"].all()
    assert {"k", "theta__disease", "reconciliation", "max_suppression", "classes", "columns"} <= set(frame["check"])
    c.close()


def test_no_view_is_trusted(db):
    # every working view replaced by garbage (or by "always passes"): the verdict does not move
    edit(db, f"CREATE OR REPLACE VIEW {working('rl', 'checks')} AS SELECT 1 AS ec_id, TRUE AS k_ok, TRUE AS __all_ok",
         f"CREATE OR REPLACE VIEW {working('rl', 'classes')} AS SELECT 1 AS nothing",
         f"CREATE OR REPLACE VIEW {working('rl', 'source')} AS SELECT 1 AS nothing",
         f"CREATE OR REPLACE VIEW {working('rl', 'general')} AS SELECT 1 AS nothing")
    assert check(db)["rl"] == 0


def test_edited_release_with_always_passing_checks_view_exits_3(db):
    # one record moved to a class of its own, and the checks view rewritten to say every class passes
    edit(db, "UPDATE rl SET age = '*' WHERE rowid = (SELECT min(rowid) FROM rl)",
         f"CREATE OR REPLACE VIEW {working('rl', 'checks')} AS "
         "SELECT ec_id, 100 AS k_value, TRUE AS k_ok, TRUE AS __all_ok FROM rl")
    assert check(db)["rl"] == 3
    assert {"k", "classes"} <= failed(db, "rl")


@pytest.mark.parametrize("statement, broken", [
    # a whole class deleted: the rest is still 3-anonymous, but records and classes no longer reconcile
    ("DELETE FROM rl WHERE ec_id = 1", {"reconciliation", "classes", "max_suppression"}),
    # one class's sensitive values overwritten: distinct 2-diversity fails
    ("UPDATE rl SET diag = 'flu' WHERE ec_id = 2", {"l_distinct__diag"}),
    # rows duplicated: more records than were released
    ("INSERT INTO rl SELECT * FROM rl WHERE ec_id = 3", {"reconciliation"}),
    # the dropped identifier added back
    ("ALTER TABLE rl ADD COLUMN name VARCHAR DEFAULT 'Ann'", {"columns"}),
])
def test_every_kind_of_edit_is_caught(db, statement, broken):
    edit(db, statement)
    assert check(db)["rl"] == 3
    assert broken <= failed(db, "rl")


def test_mondrian_and_theta_edits_exit_3(db):
    # Mondrian's class values are an ENUM of the released values: the column retyped to take a new one
    edit(db, "ALTER TABLE rm ALTER age TYPE VARCHAR",
         "UPDATE rm SET age = '[0-99]' WHERE rowid = (SELECT min(rowid) FROM rm)",
         f"CREATE OR REPLACE VIEW {working('rm', 'checks')} AS SELECT 1 AS ec_id, TRUE AS __all_ok",
         # θ: the noise record removed (and the noise mark hidden): the class falls below θ and below k
         "DELETE FROM rt WHERE is_noise",
         f"CREATE OR REPLACE VIEW {working('rt', 'checks')} AS SELECT 1 AS ec_id, TRUE AS __all_ok")
    assert check(db) == {"rl": 0, "rm": 3, "rt": 3}
    assert "k" in failed(db, "rm") and {"theta__disease", "reconciliation"} <= failed(db, "rt")


def rows(db: str, name: str) -> list[dict]:
    """The check rows of ``name`` through the CLI's path (the cached program when there is one)."""
    from anon_sql.audit.recheck import recheck_rows

    c = duckdb.connect(db, read_only=True)
    try:
        return recheck_rows(c, name)
    finally:
        c.close()


def test_a_cached_program_gives_what_compiling_gives_and_follows_every_edit(db, tmp_path, monkeypatch):
    from anon_sql.audit import program as check_program

    monkeypatch.setenv("ANON_SQL_CACHE", "off")
    compiled = {name: rows(db, name) for name in ("rl", "rm", "rt")}
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    c = duckdb.connect(db, read_only=True)
    assert all(check_program.cached_rows(c, name) is None for name in compiled)       # nothing cached yet
    c.close()
    assert {name: rows(db, name) for name in compiled} == compiled                   # compiled and cached
    c = duckdb.connect(db, read_only=True)
    assert {name: check_program.cached_rows(c, name) for name in compiled} == compiled  # read from the cache
    c.close()
    assert len(list((tmp_path / "cache" / "checks").glob("*.json"))) == 3
    # rows edited: the same program runs over them and catches it (as the tests above, with a warm cache)
    edit(db, "UPDATE rl SET diag = 'flu' WHERE ec_id = 2")
    assert not {r["check"]: r["passed"] for r in rows(db, "rl")}["l_distinct__diag"]
    # the stored policy edited (k raised to 5): another program is compiled, and it fails k
    edit(db, "UPDATE anon.releases SET policy_json = replace(policy_json, '\"k\": 3', '\"k\": 5') "
             "WHERE release = 'rm'")
    assert not {r["check"]: r["passed"] for r in rows(db, "rm")}["k"]
    # a column's type changed: compiled again (the columns check still holds: same names)
    edit(db, "ALTER TABLE rt ALTER ec_id TYPE DOUBLE")
    c = duckdb.connect(db, read_only=True)
    assert check_program.cached_rows(c, "rt") is None
    c.close()
    assert {r["check"] for r in rows(db, "rt")} == {r["check"] for r in compiled["rt"]}
    assert len(list((tmp_path / "cache" / "checks").glob("*.json"))) == 3 + 1 + 1


def test_an_unreadable_cache_entry_is_compiled_again(db, tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    first = rows(db, "rl")
    for entry in (tmp_path / "cache" / "checks").glob("*.json"):
        entry.write_text("{not json", encoding="utf-8")
    assert rows(db, "rl") == first
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "a_file"))
    (tmp_path / "a_file").write_text("", encoding="utf-8")             # a cache folder that cannot be made
    assert rows(db, "rl") == first


def test_slicing_check_reads_the_source_through_the_stored_policy(tmp_path):
    path = str(tmp_path / "s.duckdb")
    c = duckdb.connect(path)
    anon_sql.install(c)
    c.execute("CREATE TABLE t2 AS SELECT * FROM read_csv(?)", [str(data_path("examples", "seed001_table2.csv"))])
    anon_sql.release(c, {"name": "sl", "source": "t2", "method": "slicing", "seed": 7,
                         "attributes": {"sex": {"role": "quasi"}, "age": {"role": "quasi"},
                                        "zipcode": {"role": "quasi"}, "diagnosis": {"role": "sensitive"}},
                         "privacy": {"k": 3, "l_diversity": {"kind": "slicing", "l": 2}},
                         "method_params": {"columns": 2, "sensitive_column_size": 1}})
    before = anon_sql.check(c, "sl").set_index("check")
    assert before["passed"].all() and "slicing_l_diversity" in before.index
    # the __source view rewritten (to an empty one): the check does not read it
    c.execute(f"CREATE OR REPLACE VIEW {working('sl', 'source')} AS SELECT * FROM {working('sl', 'source')} LIMIT 0")
    after = anon_sql.check(c, "sl").set_index("check")
    assert after.loc["slicing_l_diversity", "worst_value"] == before.loc["slicing_l_diversity", "worst_value"]
    # every record of a bucket given one diagnosis: p(t, s) reaches 1 > 1/2
    c.execute("UPDATE sl SET diagnosis = 'Flu' WHERE ec_id = 1")
    assert "slicing_l_diversity" in set(anon_sql.check(c, "sl").query("not passed")["check"])
    c.close()


def test_unknown_release_names_what_exists(db):
    c = duckdb.connect(db, read_only=True)
    with pytest.raises(anon_sql.SourceError, match=r"'patients' is not a release .*\['rl', 'rm', 'rt'\]"):
        anon_sql.check(c, "patients")
    with pytest.raises(anon_sql.SourceError, match="not a release"):
        anon_sql.check(c, "rl__checks")
    c.close()


@pytest.fixture(scope="module")
def shared_files(released, tmp_path_factory):
    """The shareable files of the three releases (what `--to` / `export` write), made once."""
    folder = tmp_path_factory.mktemp("shared")
    work = folder / "work.duckdb"
    shutil.copy(released, work)
    c = duckdb.connect(str(work))
    for name in ("rl", "rm", "rt"):
        anon_sql.export(c, name, folder / f"{name}.duckdb")
    c.close()
    return folder


def test_check_on_a_shared_file_recomputes_every_model_and_never_writes_it(shared_files, tmp_path):
    for name in ("rl", "rm", "rt"):
        path = tmp_path / f"{name}.duckdb"
        shutil.copy(shared_files / f"{name}.duckdb", path)
        data = path.read_bytes()
        res = CliRunner().invoke(main, ["check", name, "--db", str(path)])
        assert res.exit_code == 0, res.output
        assert "all checks passed" in res.output and "k " in res.output
        assert path.read_bytes() == data and not path.with_name(path.name + ".wal").exists()
        c = duckdb.connect(str(path), read_only=True)
        frame = anon_sql.check(c, name).set_index("check")
        c.close()
        assert frame["passed"].all()
        assert {"k", "reconciliation", "max_suppression", "classes", "columns"} <= set(frame.index)
    assert "theta__disease" in set(frame.index)          # rt: θ recomputed (noise records kept, unmarked)


@pytest.mark.parametrize("name, statements, broken", [
    ("rl", ["UPDATE rl SET diag = 'flu' WHERE ec_id = 2"], {"l_distinct__diag"}),
    ("rl", ["DELETE FROM rl WHERE ec_id = 1"], {"reconciliation", "classes", "max_suppression"}),
    ("rl", ["ALTER TABLE rl ADD COLUMN name VARCHAR DEFAULT 'Ann'"], {"columns"}),
    # one record moved to a class of its own: below k (a value of its own, the column retyped from its ENUM; or
    # another class's value, which the ENUM holds)
    ("rm", ["ALTER TABLE rm ALTER age TYPE VARCHAR",
            "UPDATE rm SET age = '[0-99]' WHERE rowid = (SELECT min(rowid) FROM rm)"], {"k", "types"}),
    ("rm", ["UPDATE rm SET age = (SELECT age FROM rm WHERE age IS DISTINCT FROM (SELECT age FROM rm WHERE rowid = "
            "(SELECT min(rowid) FROM rm)) ORDER BY rowid LIMIT 1) WHERE rowid = (SELECT min(rowid) FROM rm)"], {"k"}),
    ("rt", ["DELETE FROM rt WHERE rowid = (SELECT min(rowid) FROM rt)"], {"reconciliation"}),
    # the classes table and the metadata's stored checks are never trusted
    ("rl", ["UPDATE rl SET diag = 'flu' WHERE ec_id = 2", "UPDATE rl__classes SET size = 99",
            "UPDATE rl__metadata SET checks = '[]'"], {"l_distinct__diag"}),
])
def test_a_tampered_shared_file_exits_3(shared_files, tmp_path, name, statements, broken):
    path = tmp_path / f"{name}.duckdb"
    shutil.copy(shared_files / f"{name}.duckdb", path)
    edit(str(path), *statements)
    res = CliRunner().invoke(main, ["check", name, "--db", str(path)])
    assert res.exit_code == 3, res.output
    c = duckdb.connect(str(path), read_only=True)
    frame = anon_sql.check(c, name)
    c.close()
    assert broken <= set(frame.loc[~frame["passed"], "check"])


def test_a_shared_file_without_its_metadata_is_not_a_release(shared_files, tmp_path):
    path = tmp_path / "rl.duckdb"
    shutil.copy(shared_files / "rl.duckdb", path)
    edit(str(path), "DROP TABLE rl__metadata")
    res = CliRunner().invoke(main, ["check", "rl", "--db", str(path)])
    assert res.exit_code == 2 and "is not a release" in res.output, res.output


# θ's class 1 made all 'Flu' (θ-sensitivity fails; the counts still reconcile), with a macro edit that would make
# the θ check pass: the check refuses to run over macros that are not the package's (anon_sql.audit.program)
THETA_BROKEN = "UPDATE rt SET disease = 'Flu' WHERE ec_id = 1"


@pytest.mark.parametrize("statement, named, undo", [
    ("CREATE OR REPLACE MACRO anon.theta_threshold(m, mu) AS -1.0", "redefined anon.theta_threshold", None),
    # a macro of main named like a built-in shadows it, inside the anon macros too (theta_variance_counts: pow)
    ("CREATE OR REPLACE MACRO main.pow(a, b) AS -1e9", "shadowing a built-in function main.pow",
     "DROP MACRO main.pow"),
    ("DROP MACRO anon.capped_sum", "missing anon.capped_sum", None),
    ("CREATE MACRO anon.extra(x) AS x", "not this package's anon.extra", "DROP MACRO anon.extra"),
])
@pytest.mark.parametrize("cache", ["off", "warm"])
def test_a_tampered_macro_fails_the_check_and_is_named(db, tmp_path, monkeypatch, statement, named, undo, cache):
    monkeypatch.setenv("ANON_SQL_CACHE", "off" if cache == "off" else str(tmp_path / "cache"))
    assert check(db) == {"rl": 0, "rm": 0, "rt": 0}                  # (warm: every program now cached)
    edit(db, THETA_BROKEN, statement)
    res = CliRunner().invoke(main, ["check", "rt", "--db", db])
    assert res.exit_code == 3 and named in res.output and "anon_sql.install" in res.output, res.output
    c = duckdb.connect(db, read_only=True)
    with pytest.raises(anon_sql.PrivacyRequirementError, match=named):
        anon_sql.check(c, "rt")
    c.close()
    # reinstalling the macros (what the message says) brings back the honest verdict: θ fails
    c = duckdb.connect(db)
    if undo:
        c.execute(undo)
    anon_sql.install(c)
    c.close()
    assert "theta__disease" in failed(db, "rt") and check(db) == {"rl": 0, "rm": 0, "rt": 3}


def test_untampered_macros_pass_through_the_cached_and_the_compiled_program(db, tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_CACHE", "off")
    assert check(db) == {"rl": 0, "rm": 0, "rt": 0}
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    assert check(db) == {"rl": 0, "rm": 0, "rt": 0}                  # compiled and cached
    assert len(list((tmp_path / "cache" / "macros").glob("*.json"))) == 1
    assert check(db) == {"rl": 0, "rm": 0, "rt": 0}                  # from the cache


def test_a_shared_file_checks_with_the_package_macros_whatever_it_holds(shared_files, tmp_path):
    # a shared file is checked on a private connection: a shadowing macro in the file is not what its SQL calls
    path = tmp_path / "rt.duckdb"
    shutil.copy(shared_files / "rt.duckdb", path)
    edit(str(path), "CREATE MACRO main.pow(a, b) AS -1e9")
    res = CliRunner().invoke(main, ["check", "rt", "--db", str(path)])
    # the models pass (their SQL does not call the file's macro); since hostile round 8 (N09) the macro itself is
    # something export never writes, so `file contents` fails naming it, and nothing else does
    assert res.exit_code == 3 and "FAILED: ['file contents']" in res.output and "macro main.pow" in res.output
    edit(str(path), THETA_BROKEN)
    res = CliRunner().invoke(main, ["check", "rt", "--db", str(path)])
    assert res.exit_code == 3 and "theta__disease" in res.output, res.output


@pytest.mark.parametrize("policy", [levels_policy(), mondrian_policy()], ids=["levels", "mondrian"])
def test_an_unedited_shared_file_open_in_this_process_passes(tmp_path, policy):
    """A shared file this process holds open (read-write: it cannot be attached again) is checked from a copy of its
    table; the copy keeps each column's type, so the generalized columns' ENUMs pass the ``types`` check (they came
    back as VARCHAR through Arrow and failed it)."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute(PATIENTS)
    anon_sql.release(con, policy)
    enums = [c for c, t in con.execute(f"SELECT column_name, data_type FROM duckdb_columns() "
                                        f"WHERE table_name = '{policy['name']}'").fetchall() if t.startswith("ENUM")]
    assert enums == ["age", "sex"]
    path = tmp_path / "shared.duckdb"
    anon_sql.export(con, policy["name"], str(path))
    shared = duckdb.connect(str(path))
    try:
        frame = anon_sql.check(shared, policy["name"])
    finally:
        shared.close()
    assert frame["passed"].all(), frame.loc[~frame["passed"], ["check", "message"]].to_dict("records")
