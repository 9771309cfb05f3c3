"""A database file holding release ``synth`` of the flu tables with its related table ``synth_conditions``, its
export and its check through the CLI: shared by the hostile rounds' related-set tests (rounds 7 and 8)."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main as cli
from test_units_related import flu, plain_policy
from units_fixtures import KEY


@pytest.fixture
def db(tmp_path, monkeypatch):
    """The database file (``ANON_SQL_KEY`` set for the test)."""
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    path = str(tmp_path / "u.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        flu(c)
        anon_sql.release(c, plain_policy(max_suppression=0.5))
    return path


def shared(db: str, tmp_path) -> str:
    """``anon-sql export synth`` of ``db`` to a new ``s.duckdb``; its path."""
    out = str(tmp_path / "s.duckdb")
    res = CliRunner().invoke(cli, ["export", "synth", "--db", db, "--to", out])
    assert res.exit_code == 0, res.output
    return out


def check(path: str):
    """``anon-sql check synth`` of ``path`` (a click result: exit code and output)."""
    return CliRunner().invoke(cli, ["check", "synth", "--db", path])
