"""Shared helpers of the check-forgery tests: a writable copy of the module's released file (its own ``released``
fixture), and the edits a file's author could make to it (catalog rows, the plan)."""
from __future__ import annotations

import json
import shutil

import duckdb
import pytest

import anon_sql


@pytest.fixture
def db(released, tmp_path):
    """A copy of the module's ``released`` database file, for one test to forge."""
    path = tmp_path / "w.duckdb"
    shutil.copy(released, path)
    return str(path)


def edit(db: str, *statements: str, params: list | None = None) -> None:
    """Run ``statements`` on the file as its author could, outside anon_sql."""
    c = duckdb.connect(db)
    for s in statements:
        c.execute(s, params) if params else c.execute(s)
    c.close()


def forge_plan(db: str, name: str, change) -> None:
    """Rewrite release ``name``'s recorded plan with ``change`` (a function editing the plan dict in place)."""
    c = duckdb.connect(db)
    plan = json.loads(c.execute("SELECT plan FROM anon.releases WHERE release = ?", [name]).fetchall()[0][0])
    change(plan)
    c.execute("UPDATE anon.releases SET plan = ? WHERE release = ?", [json.dumps(plan), name])
    c.close()


def failing(db: str, name: str) -> set[str]:
    """The checks of release ``name`` that fail, read-only."""
    c = duckdb.connect(db, read_only=True)
    frame = anon_sql.check(c, name)
    c.close()
    return set(frame.query("not passed")["check"])
