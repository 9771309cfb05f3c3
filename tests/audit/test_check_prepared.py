"""The check program a release prepares from what it recorded (issue 29.1: nothing read back) is the one `check`
finds in the cache, named by the same digest as the catalog row and the table's columns give."""
from __future__ import annotations

import duckdb

import anon_sql
from anon_sql.audit import program as check_program
from anon_sql.audit import recheck as audit
from anon_sql.catalog.read import table_columns
from conftest import load_seed000, seed000_policy


def test_the_recorded_facts_name_the_program_check_finds(tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    compiled = []
    real = audit.build_models
    monkeypatch.setattr(audit, "build_models", lambda *a: compiled.append(a) or real(*a))
    con = duckdb.connect(str(tmp_path / "a.duckdb"))
    anon_sql.install(con)
    load_seed000(con)
    policy = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    rel = anon_sql.release(con, policy)
    row, described = audit.require_recorded(con, rel.name), table_columns(con, rel.name)
    for key in ("plan", "policy_json", "declared_policy", "source_digest"):
        assert rel.recorded[key] == row[key], key
    assert [tuple(c) for c in rel.recorded["columns"]] == described
    assert (check_program.program_digest(rel.name, rel.recorded, [tuple(c) for c in rel.recorded["columns"]])
            == check_program.program_digest(rel.name, row, described))
    assert check_program.cached_rows(con, rel.name) is not None     # check runs the cached program
    again = anon_sql.release(con, policy, replace=True)              # same policy: found, not compiled again
    assert len(compiled) == 1 and again.recorded["plan"] == rel.recorded["plan"]
    assert all(anon_sql.check(con, rel.name)["passed"])


def test_a_changed_table_is_not_checked_with_the_prepared_program(tmp_path, monkeypatch):
    """The columns in the digest are the table's as the release wrote them: a column added afterwards names
    another program (compiled afresh by check, which then reports the extra column)."""
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    con = duckdb.connect(str(tmp_path / "a.duckdb"))
    anon_sql.install(con)
    load_seed000(con)
    rel = anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}))
    con.execute(f'ALTER TABLE "{rel.name}" ADD COLUMN extra INTEGER')
    assert check_program.cached_rows(con, rel.name) is None
    result = anon_sql.check(con, rel.name)
    assert not result.set_index("check").loc["columns", "passed"]
