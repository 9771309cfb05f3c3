"""What the privacy-unit tests share: the pseudonym key and a connection with the catalog installed under it, and
the tables of the database (to show a refused release left it as it was)."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql

KEY = "units-test-key-0123456789abcdef"


@pytest.fixture
def con(monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    c = duckdb.connect()
    anon_sql.install(c)
    yield c
    c.close()


def tables(con) -> list[tuple]:
    return sorted(con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall())
