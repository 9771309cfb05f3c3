"""Fixtures of the statement tests."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql


@pytest.fixture
def patients():
    """An in-memory database with the catalog and `pt`: 500 people (pid, age 20–69, sex F/M, zip = pid)."""
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE pt AS SELECT i AS pid, 20 + i % 50 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END "
              "AS sex, i AS zip FROM range(500) r(i)")
    yield c
    c.close()
