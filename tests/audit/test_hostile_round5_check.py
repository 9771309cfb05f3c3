"""Hostile round 5's minors left to `check` (docs/hostile-round-5.md), each failing on the code before:
C12, a release whose declared policy was removed passed with no ``policy`` row; C02 / C06, check's rows showed
each model's worst value but not what it required nor whether it counted people or rows; C07 / C09, a release with
a privacy unit recorded no source digest, so a changed source went unnoticed and reconciliation stayed unverified.
"""
from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from forgery import db, edit  # noqa: F401  (db is a fixture)

KEY = "units-test-key-0123456789abcdef"
AGE = {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10]}}
VISITS = {"name": "v", "source": "visits", "method": "optimal", "seed": 1, "privacy_unit": "pid",
          "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"}, "age": AGE,
                         "diag": {"role": "sensitive"}},
          "privacy": {"k": 5, "l_diversity": {"kind": "distinct", "l": 2}}}
PLAIN = {"name": "p", "source": "visits", "method": "optimal", "seed": 1,
         "attributes": {"pid": {"role": "identifier", "rows_are_people": True}, "age": AGE,
                        "diag": {"role": "insensitive"}},
         "privacy": {"k": 2}}


def visits() -> pd.DataFrame:
    """200 people × 3 rows; age constant per person, diagnosis varying."""
    rows = [(i % 200, 30 + (i % 200) % 13, "abcd"[(i * 7) % 4]) for i in range(600)]
    return pd.DataFrame(rows, columns=["pid", "age", "diag"])


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("round5") / "w.duckdb")
    mp = pytest.MonkeyPatch()
    mp.setenv("ANON_SQL_KEY", KEY)
    c = duckdb.connect(path)
    frame = visits()
    c.execute("CREATE TABLE visits AS SELECT * FROM frame")
    anon_sql.release(c, VISITS)
    anon_sql.release(c, PLAIN)
    c.close()
    mp.undo()
    return path


def rows(db: str, name: str) -> pd.DataFrame:
    c = duckdb.connect(db, read_only=True)
    try:
        return anon_sql.check(c, name).set_index("check")
    finally:
        c.close()


# -- C12 ------------------------------------------------------------------------------------------------------------
def test_a_removed_declared_policy_fails_a_policy_row(db):
    edit(db, "UPDATE anon.releases SET declared_policy = NULL WHERE release = 'p'")
    frame = rows(db, "p")
    assert not frame.loc["policy", "passed"]
    assert "no declared policy recorded" in frame.loc["policy", "message"]
    result = CliRunner().invoke(main, ["check", "p", "--db", db])
    assert result.exit_code == 3 and "no declared policy recorded" in result.output


def test_a_release_from_before_declared_policies_still_checks_with_an_unverified_policy_row(db):
    # a catalog never upgraded: no declared_policy (nor source_digest) column at all
    edit(db, "ALTER TABLE anon.releases DROP COLUMN declared_policy",
         "ALTER TABLE anon.releases DROP COLUMN source_digest")
    frame = rows(db, "p")
    assert frame["passed"].all()
    assert frame.loc["policy", "basis"].startswith("catalog (unverified): no declared policy recorded")


def test_an_old_release_in_an_upgraded_catalog_is_unverified_not_failed(db):
    # every release of the catalog made before declared policies were kept (the columns added since, NULL)
    edit(db, "UPDATE anon.releases SET declared_policy = NULL, source_digest = NULL")
    frame = rows(db, "p")
    assert frame["passed"].all() and "unverified" in frame.loc["policy", "basis"]


# -- C02 / C06 ------------------------------------------------------------------------------------------------------
def test_check_shows_what_each_model_required_and_what_it_counted(released):
    unit, plain = rows(released, "v"), rows(released, "p")
    assert unit.loc["k", "required"] == "k >= 5, people"
    assert unit.loc["l_distinct__diag", "required"] == "distinct l >= 2 on diag, people"
    assert plain.loc["k", "required"] == "k >= 2, rows"          # the reader sees k = 2, not the 5 they expected
    assert unit.loc["max_suppression", "required"].startswith("suppressed <= ")


def test_a_forged_file_without_its_unit_shows_rows(db):
    for column in ("policy_json", "declared_policy"):
        c = duckdb.connect(db)
        policy = json.loads(c.execute(f"SELECT {column} FROM anon.releases WHERE release = 'v'").fetchall()[0][0])
        policy.pop("privacy_unit")
        c.execute(f"UPDATE anon.releases SET {column} = ? WHERE release = 'v'", [json.dumps(policy)])
        c.close()
    assert rows(db, "v").loc["k", "required"] == "k >= 5, rows"


def test_the_cli_table_and_json_carry_the_requirement(released):
    result = CliRunner().invoke(main, ["check", "v", "--db", released])
    assert result.exit_code == 0, result.output
    header, k_line = result.output.splitlines()[:2]
    assert "required" in header.split() and "k >= 5, people" in k_line
    result = CliRunner().invoke(main, ["check", "v", "--db", released, "--json"])
    assert result.exit_code == 0, result.output
    checks = json.loads(result.output[result.output.index("{\n"):])["checks"]   # (the table is printed first)
    assert next(r for r in checks if r["check"] == "k")["required"] == "k >= 5, people"


# -- C07 / C09 ------------------------------------------------------------------------------------------------------
def test_a_unit_release_records_its_source_digest_in_rows_and_people(released):
    c = duckdb.connect(released, read_only=True)
    digest = json.loads(c.execute("SELECT source_digest FROM anon.releases WHERE release = 'v'").fetchall()[0][0])
    c.close()
    frame = visits()
    assert (digest["records"], digest["rows"], digest["people"], digest["counted"]) == (
        len(frame), len(frame), frame["pid"].nunique(), "rows")
    assert rows(released, "v").loc["reconciliation", "basis"] == "source"


def test_a_changed_source_of_a_unit_release_is_noticed(db):
    edit(db, "UPDATE visits SET diag = 'z' WHERE pid = 7 AND diag = (SELECT min(diag) FROM visits WHERE pid = 7)")
    basis = rows(db, "v").loc["reconciliation", "basis"]
    assert basis.startswith("catalog (unverified)") and "other rows" in basis


def test_a_shared_file_without_a_declared_policy_says_its_policy_is_unverified(released, tmp_path):
    c = duckdb.connect(released, read_only=True)
    path = str(tmp_path / "p.duckdb")
    anon_sql.export(c, "p", path)
    c.close()
    assert rows(path, "p").loc["k", "required"] == "k >= 2, rows"
    edit(path, 'UPDATE "p__metadata" SET declared_policy = NULL')
    frame = rows(path, "p")
    # a shared file cannot tell an old release exported since from an edit: the policy row says it is not verified
    assert frame.loc["policy", "basis"].startswith("catalog (unverified): no declared policy recorded")
