"""Issue 28.8: `check` derives what it verifies from the policy and the released table, never from a catalog field
that the author of a shared or edited file could forge. Each test breaks a release so that it no longer meets its
policy, forges the catalog field that would have hidden it (in a copy of the file), and shows the check still fails
(exit 3). On the code before this, each forgery made the broken release pass.

What `check` reads from `anon.releases`, and what it does with it now:
- ``policy_json``: the policy itself, what the release is checked against (its models, its released columns);
- ``plan.noise_flag``: ignored; the flag is the policy's θ ``method_params.noise_flag``;
- ``noise``: counted in the table through that flag (θ without a flag: the recorded number; other methods: 0);
- ``plan.slicing_check`` (a whole-table model's layout): a missing layout fails the model, the layout's QIs are
  ignored (the policy's QIs), and its column groups must hold each QI and the sensitive attribute once;
- ``classes``, ``suppressed``: compared with what the table gives (a forged value can only fail the check);
- ``records_in``: not derivable from the released table (the suppressed records are gone): recounted from the
  source when it is there (``basis`` "source"), else reported as the catalog's number, unverified.
"""
from __future__ import annotations


import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from conftest import data_path, load_theta_noise, theta_noise_policy
from test_check_tamper import PATIENTS, levels_policy
from forgery import db, edit, failing, forge_plan  # noqa: F401  (db is a fixture)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("forged") / "w.duckdb")
    c = duckdb.connect(path)
    c.execute(PATIENTS)
    load_theta_noise(c)
    c.execute("CREATE TABLE t2 AS SELECT * FROM read_csv(?)", [str(data_path("examples", "seed001_table2.csv"))])
    anon_sql.release(c, levels_policy())
    anon_sql.release(c, theta_noise_policy("rt"))
    anon_sql.release(c, {"name": "sl", "source": "t2", "method": "slicing", "seed": 7,
                         "attributes": {"sex": {"role": "quasi"}, "age": {"role": "quasi"},
                                        "zipcode": {"role": "quasi"}, "diagnosis": {"role": "sensitive"}},
                         "privacy": {"k": 3, "l_diversity": {"kind": "slicing", "l": 2}},
                         "method_params": {"columns": 2, "sensitive_column_size": 1}})
    c.close()
    return path


def exit_code(db: str, name: str) -> int:
    return CliRunner().invoke(main, ["check", name, "--db", db]).exit_code


def test_untouched_releases_pass(db):
    assert {n: exit_code(db, n) for n in ("rl", "rt", "sl")} == {"rl": 0, "rt": 0, "sl": 0}


def test_an_identifier_put_back_is_caught_whatever_the_plan_calls_it(db):
    """The identifier `name` added back to the release; the plan forged to call it the noise flag."""
    edit(db, "ALTER TABLE rl ADD COLUMN name VARCHAR", "UPDATE rl SET name = 'Ann'")
    forge_plan(db, "rl", lambda plan: plan.update(noise_flag="name"))
    assert exit_code(db, "rl") == 3
    assert "columns" in failing(db, "rl")


def test_rows_removed_are_caught_whatever_noise_count_is_recorded(db):
    """A record deleted from a class that keeps k = 3 and l = 2 (suppression beyond max_suppression = 0); the
    recorded noise forged to -1 so that the recorded counts reconcile again."""
    c = duckdb.connect(db)
    ec = c.execute("SELECT ec_id FROM rl GROUP BY ec_id HAVING count(*) >= 4 AND count(DISTINCT diag) >= 2 "
                   "ORDER BY ec_id LIMIT 1").fetchall()[0][0]
    victim = c.execute("SELECT diag FROM rl WHERE ec_id = ? GROUP BY diag ORDER BY count(*) DESC, diag LIMIT 1",
                       [ec]).fetchall()[0][0]
    c.execute("DELETE FROM rl WHERE rowid = (SELECT min(rowid) FROM rl WHERE ec_id = ? AND diag = ?)", [ec, victim])
    c.execute("UPDATE anon.releases SET noise = -1 WHERE release = 'rl'")
    c.close()
    assert exit_code(db, "rl") == 3
    assert {"reconciliation", "max_suppression"} & failing(db, "rl")


def test_theta_noise_is_counted_through_the_policys_flag(db):
    """θ: a real record deleted, one more record flagged as noise in the catalog's count only."""
    c = duckdb.connect(db)
    c.execute("DELETE FROM rt WHERE rowid = (SELECT min(rowid) FROM rt WHERE NOT is_noise)")
    c.execute("UPDATE anon.releases SET noise = noise - 1 WHERE release = 'rt'")
    c.close()
    assert exit_code(db, "rt") == 3
    assert "reconciliation" in failing(db, "rt")


def test_a_whole_table_model_without_its_layout_fails(db):
    """Slicing's l-diversity broken (one diagnosis for a whole bucket), and the plan's layout deleted so that the
    whole-table model had nothing to run on."""
    edit(db, "UPDATE sl SET diagnosis = 'Flu' WHERE ec_id = 1")
    forge_plan(db, "sl", lambda plan: plan.pop("slicing_check"))
    assert exit_code(db, "sl") == 3
    assert "slicing_l_diversity" in failing(db, "sl")


def test_a_layout_whose_groups_leave_out_the_sensitive_attribute_fails(db):
    forge_plan(db, "sl", lambda plan: plan["slicing_check"].update(columns=[["sex", "age", "zipcode"]]))
    assert exit_code(db, "sl") == 3
    assert "slicing_l_diversity" in failing(db, "sl")


def test_the_wildcard_model_checks_the_policys_quasi_identifiers(tmp_path):
    """A wildcard k-anonymity release whose layout is forged to list one QI: the check still uses every QI."""
    from anon_sql.models.wildcard_k import WildcardKAnonymity

    c = duckdb.connect()
    c.execute("CREATE TABLE r AS SELECT * FROM (VALUES ('a', 'x'), ('a', 'y'), ('b', 'x'), ('b', 'y')) t(p, q)")
    model = WildcardKAnonymity(2, ["p", "q"])
    from sqlglot import exp

    forged = {"kind": "wildcard", "quasi": ["p"], "k": 2}
    row = model.table_check(c, exp.Table(this=exp.to_identifier("r")), None, None, forged, None)
    assert row["passed"] is False          # every (p, q) combination is unique: k = 1 < 2 over both QIs
    c.close()


def basis(db: str, name: str) -> dict[str, str]:
    c = duckdb.connect(db, read_only=True)
    frame = anon_sql.check(c, name).set_index("check")
    c.close()
    return frame["basis"].to_dict()


def test_records_in_is_verified_against_the_source_when_it_is_there(db):
    """The source recounts to the recorded records_in: the two checks that read it say so; every other row rests on
    the table."""
    got = basis(db, "rl")
    assert got["reconciliation"] == got["max_suppression"] == "source"
    assert {v for k, v in got.items() if k not in ("reconciliation", "max_suppression")} == {"table"}


def test_records_in_forged_to_hide_suppression_is_reported_unverified(db):
    """A record deleted from a class and records_in and suppressed forged so that the counts reconcile: the
    model checks still pass (the class keeps k and l), so the figure stands on the catalog's word, and check says
    so: the source counts another number."""
    c = duckdb.connect(db)
    ec = c.execute("SELECT ec_id FROM rl GROUP BY ec_id HAVING count(*) >= 4 AND count(DISTINCT diag) >= 3 "
                   "ORDER BY ec_id LIMIT 1").fetchall()[0][0]
    c.execute("DELETE FROM rl WHERE rowid = (SELECT min(rowid) FROM rl WHERE ec_id = ?)", [ec])
    records_in = c.execute("SELECT records_in FROM anon.releases WHERE release = 'rl'").fetchall()[0][0]
    c.execute("UPDATE anon.releases SET records_in = records_in - 1 WHERE release = 'rl'")
    c.close()
    # the counts agree with each other, and the models still pass; the record's QI values are gone from their
    # recorded digest (round 9, M9), so check fails on those rows alone
    assert exit_code(db, "rl") == 3
    c = duckdb.connect(db, read_only=True)
    frame = anon_sql.check(c, "rl")
    c.close()
    assert all(c.startswith("values ") or c == "contents" for c in frame.loc[~frame["passed"], "check"])
    assert not frame.loc[~frame["passed"]].empty
    got = basis(db, "rl")
    assert got["max_suppression"] == got["reconciliation"] == (
        f"catalog (unverified): the source counts {records_in} records now")


def test_records_in_without_the_source_is_reported_unverified(db):
    edit(db, "DROP TABLE patients")
    got = basis(db, "rl")
    assert got["reconciliation"] == got["max_suppression"] == "catalog (unverified)"
    result = CliRunner().invoke(main, ["check", "rl", "--db", db])
    assert result.exit_code == 0 and "catalog (unverified)" in result.output


def test_a_shared_file_reports_records_in_unverified(released, tmp_path):
    """A shared file holds no source: its records_in is the metadata's number, never called verified."""
    c = duckdb.connect(released, read_only=True)
    path = str(tmp_path / "rl.duckdb")
    anon_sql.export(c, "rl", path)
    c.close()
    got = basis(path, "rl")
    assert got["reconciliation"] == got["max_suppression"] == "catalog (unverified)"


@pytest.mark.parametrize("groups", [[["sex", "age"], ["zipcode", "ec_id"], ["diagnosis"]],
                                    [["sex", "age", "zipcode", "name"], ["diagnosis"]]])
def test_a_layout_grouping_columns_the_table_does_not_release_fails(db, groups):
    """The class id, or an identifier the table does not hold, put into a column group."""
    forge_plan(db, "sl", lambda plan: plan["slicing_check"].update(columns=groups))
    assert exit_code(db, "sl") == 3
    assert "slicing_l_diversity" in failing(db, "sl")


def test_the_wildcard_model_reads_no_qi_from_its_layout():
    """The wildcard k model checks its own QIs (the declared policy's: tests/audit/test_check_declared.py), whatever
    the layout names; built without QIs (a release recorded before the declared policy was kept) it fails, saying
    so, where the model once read its QIs from the layout."""
    from sqlglot import exp

    from anon_sql.models.wildcard_k import WildcardKAnonymity

    c = duckdb.connect()
    c.execute("CREATE TABLE r AS SELECT * FROM (VALUES ('a', 'x', 's'), ('a', '*', 's'), ('*', 'y', 't'), "
              "('b', 'y', 't')) t(p, q, d)")
    table = exp.Table(this=exp.to_identifier("r"))
    for forged in (["d"], [], ["p", "d"]):
        layout = {"kind": "wildcard", "quasi": forged, "k": 2}
        # every record matches 2 (itself and one partner with a '*' or an equal cell) over both QIs
        assert WildcardKAnonymity(2, ["p", "q"]).table_check(c, table, None, None, layout, None)["passed"], forged
        row = WildcardKAnonymity(2, []).table_check(c, table, None, None, layout, None)
        assert row["passed"] is False and "release it again" in row["message"], forged
    c.close()
