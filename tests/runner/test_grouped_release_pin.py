"""The two grouped releases of a DuckDB level plan with a privacy unit — counted groups written ``__w`` times (no
unit in the table) and groups with their units' lists (metrics that read people from the table) — built by one
grouping builder (mends 12): both write the same rows in the same order, bit-identical to the release pinned on the
code before (golden digest of every row in table order)."""
from __future__ import annotations

import hashlib

import duckdb
import pytest

import anon_sql

GOLDEN = "03686dee08ad16bf"   # sha256 prefix of repr(rows in rowid order), computed on 9530c20's two builders


def _policy(metrics: bool) -> dict:
    policy = {"name": "rel", "source": "t", "method": "levels", "privacy_unit": "pid", "seed": 11,
              "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "pid": {"role": "identifier"}, "dx": {"role": "sensitive"},
                             "note": {"role": "insensitive"}},
              "privacy": {"k": 2, "max_suppression": 1.0}, "method_params": {"levels": {"age": 1, "sex": 0}}}
    if metrics:
        policy["metrics"] = {"compute": "all"}
    return policy


@pytest.mark.parametrize("metrics, marker", [(False, 'UNNEST(RANGE(0, "__w"))'), (True, 'AS "__units"')])
def test_grouped_releases_unchanged(metrics, marker):
    con = duckdb.connect(config={"threads": 1})
    anon_sql.install(con)
    con.execute("CREATE TABLE t AS SELECT i % 300 AS pid, 20 + (i % 300) % 25 AS age, "
                "CASE WHEN (i % 300) % 3 = 0 THEN 'F' ELSE 'M' END AS sex, "
                "CASE WHEN i % 7 = 0 THEN NULL ELSE 'd' || (hash(i) % 5) END AS dx, "
                "CASE WHEN i % 5 = 0 THEN NULL ELSE 'n' || (i % 4) END AS note FROM range(3000) t(i)")
    rel = anon_sql.release(con, _policy(metrics))
    table = [s for s in rel.sql if s.startswith('CREATE TABLE "rel"')]
    assert len(table) == 1 and marker in table[0]   # the path under test
    rows = con.execute("SELECT * FROM rel ORDER BY rowid").fetchall()
    assert len(rows) == 3000
    assert hashlib.sha256(repr(rows).encode()).hexdigest()[:16] == GOLDEN
