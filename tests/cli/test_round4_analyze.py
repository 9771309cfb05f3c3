"""Hostile round 4, Z04b: `analyze '"Ünï cödé"'` (a table name quoted as SQL quotes it, as the statements take it)
was an unknown table; the unquoted name worked. Fails on the code before."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "z.duckdb")
    c = duckdb.connect(path)
    c.execute('CREATE TABLE "Ünï cödé" AS SELECT range % 7 AS a, range % 3 AS b FROM range(100)')
    c.execute('CREATE TABLE "say ""hi""" AS SELECT range % 2 AS a FROM range(10)')
    c.execute('CREATE TABLE """lit""" AS SELECT range % 4 AS z FROM range(10)')   # a name with the quotes in it
    c.close()
    return path


@pytest.mark.parametrize("name, column", [('"Ünï cödé"', "a"), ("Ünï cödé", "a"), ('"say ""hi"""', "a"),
                                          ('"lit"', "z")])
def test_a_quoted_table_name_is_found(db, name, column):
    r = CliRunner().invoke(main, ["analyze", name, "--db", db])
    assert r.exit_code == 0, r.output
    assert f"\n{column:>9}" in r.output or f" {column} " in r.output


def test_a_quoted_name_works_with_detect(db):
    assert CliRunner().invoke(main, ["analyze", '"Ünï cödé"', "--db", db, "--detect"]).exit_code == 0
