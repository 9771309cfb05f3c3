"""Hostile round 8's related-table findings (docs/hostile-round-8.md), each failing on the code before its fix:

* M1 (C09, N03): the unit's pseudonyms replaced by the raw Id in the unit table and the related table alike passed
  `check` in the working database and in the shared file, and `export` wrote them;
* M5 (N20): C08's file (the raw patient Id beside each condition) passed once the metadata's `related_tables` was
  edited too; N21: duplicated related rows with `released` edited passed without saying the count is the file's own;
* N10: `related <name> rows` compares the row count, and now says so.
"""
from __future__ import annotations

import json

import duckdb
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main as cli
from related_set_fixtures import check, db, shared  # noqa: F401 (db: a fixture)


def checks_of(path: str):
    with duckdb.connect(path, read_only=True) as c:
        return anon_sql.check(c, "synth").set_index("check")


# C09 / N03: every pseudonym replaced by the raw Id (``tag`` copies it), consistently in both tables
RAW_IDS = ["UPDATE synth_conditions r SET PATIENT = s.tag::VARCHAR FROM synth s WHERE r.PATIENT = s.Id",
           "UPDATE synth SET Id = tag::VARCHAR"]


def test_genuine_export_lists_the_related_columns_in_its_policy_and_passes(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out, read_only=True) as c:
        policy, declared = c.execute("SELECT policy, declared_policy FROM synth__metadata").fetchall()[0]
    for text in (policy, declared):
        attributes = json.loads(text)["related"]["conditions"]["attributes"]
        assert attributes == {"PATIENT": {"role": "identifier", "action": "pseudonymize"},
                              "DESCRIPTION": {"role": "insensitive"}, "visit": {"role": "insensitive"}}
    res = check(out)
    assert res.exit_code == 0, res.output
    rows = checks_of(out)
    assert rows["passed"].all() and "policy" not in rows.index   # a policy row appears only when it fails
    assert rows.loc["values conditions.PATIENT", "passed"]
    assert rows.loc["related conditions columns", "required"].startswith(
        "the columns the policy releases: PATIENT, DESCRIPTION, visit")


def test_c09_raw_ids_in_the_working_database_fail_and_export_writes_nothing(db, tmp_path):
    with duckdb.connect(db) as c:
        for statement in RAW_IDS:
            c.execute(statement)
    res = check(db)
    assert res.exit_code == 3, res.output
    assert "values Id" in res.output and "values conditions.PATIENT" in res.output
    out = tmp_path / "s.duckdb"
    res = CliRunner().invoke(cli, ["export", "synth", "--db", db, "--to", str(out)])
    assert res.exit_code == 3 and not out.exists(), res.output


def test_n03_raw_ids_in_the_shared_file_fail(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        for statement in RAW_IDS:
            c.execute(statement)
    res = check(out)
    assert res.exit_code == 3, res.output
    rows = checks_of(out)
    assert not rows.loc["values Id", "passed"] and not rows.loc["values conditions.PATIENT", "passed"]
    assert rows.loc["related conditions", "passed"]     # consistent: only the form gives it away


def test_n20_a_forged_related_tables_record_does_not_pass_an_added_column(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        c.execute(f"ATTACH '{db}' AS src (READ_ONLY)")
        c.execute("CREATE OR REPLACE TABLE synth_conditions AS SELECT s.*, c.PATIENT AS raw_patient "
                  "FROM synth_conditions s JOIN src.main.conditions c USING (visit, DESCRIPTION)")
        c.execute("DETACH src")
        recorded = json.loads(c.execute("SELECT related_tables FROM synth__metadata").fetchall()[0][0])
        recorded["conditions"]["columns"].append(["raw_patient", "BIGINT"])
        recorded["conditions"]["released"] = c.execute("SELECT count(*) FROM synth_conditions").fetchall()[0][0]
        c.execute("UPDATE synth__metadata SET related_tables = ?", [json.dumps(recorded)])
    res = check(out)
    assert res.exit_code == 3, res.output
    assert "related conditions columns" in res.output and "raw_patient" in res.output
    rows = checks_of(out)
    assert "raw_patient" in rows.loc["related conditions columns", "message"]


def test_n21_the_row_count_rests_on_the_metadata_and_says_so(db, tmp_path):
    out = shared(db, tmp_path)
    with duckdb.connect(out) as c:
        c.execute("INSERT INTO synth_conditions SELECT * FROM synth_conditions")
        recorded = json.loads(c.execute("SELECT related_tables FROM synth__metadata").fetchall()[0][0])
        recorded["conditions"]["released"] *= 2
        c.execute("UPDATE synth__metadata SET related_tables = ?", [json.dumps(recorded)])
    rows = checks_of(out)
    assert rows.loc["related conditions rows", "basis"] == "metadata (unverified)"
    assert rows.loc["related conditions columns", "basis"].startswith("policy (names)")
    assert "row count" in rows.loc["related conditions rows", "required"]          # N10


def test_n10_the_rows_check_says_it_compares_the_count(db):
    with duckdb.connect(db, read_only=True) as c:
        n = c.execute("SELECT count(*) FROM synth_conditions").fetchall()[0][0]
    rows = checks_of(db)
    assert rows.loc["related conditions rows", "required"] == f"row count as released ({n})"
    assert rows.loc["related conditions rows", "basis"] == "table"
