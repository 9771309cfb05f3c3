"""Hostile round 21, W31: ``anon_sql.release`` while the session holds a TEMP table or view named like the release
(its table would be hidden behind it, and the release's SQL read and delete from the user's object) gave DuckDB's raw
errors; now a SourceError (exit 2) naming the TEMP object, the object and the catalog as before. The statements
refused it already (W35)."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import SourceError

POLICY = {"name": "sp", "source": "t", "method": "levels", "method_params": {"levels": {"age": 1}},
          "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 100]}}},
          "privacy": {"k": 2, "max_suppression": 0}}


@pytest.mark.parametrize("kind", ["TABLE", "VIEW"])
def test_a_temp_object_named_like_the_release_is_refused(kind):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 20 + range % 30 AS age FROM range(100)")
    con.execute(f"CREATE TEMP {kind} sp AS SELECT * FROM range(5) r(x)")
    with pytest.raises(SourceError, match="TEMP"):
        anon_sql.release(con, POLICY)
    assert con.execute("SELECT count(*) FROM temp.main.sp").fetchall() == [(5,)]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND table_name = 'sp'"
                       ).fetchall() == [(0,)]
