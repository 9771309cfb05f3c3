"""What the privacy-unit tests share (DuckDB's in tests/runner, Spark's in tests/engines/test_spark_units.py): the
pseudonym key and a connection with the catalog installed under it, the tables of the database (to show a refused
release left it as it was), and the policy of spec 08's visits example."""
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


def visits_policy(method: str = "levels", **changes) -> dict:
    """Spec 08's visits policy: one person per ``patient_id`` (pseudonymized), k = 5 people within 5 % suppression;
    a method's level-0 defaults (``levels`` leaves every quasi-identifier at level 0)."""
    policy = {"name": "vis", "source": "visits", "privacy_unit": "patient_id", "method": method,
              "attributes": {"patient_id": {"role": "identifier", "action": "pseudonymize"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "diagnosis": {"role": "insensitive"}},
              "privacy": {"k": 5, "max_suppression": 0.05}}
    policy.update(changes)
    return policy
