"""Hostile round 17's minors (docs/hostile-round-17.md): X08, a REFRESH on a read-only database gave DuckDB's raw
error (exit 4); D12, a huge max_groups_contributed reached OpenDP and gave a traceback (exit 1). Both are one line,
exit 2, before anything runs."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

POLICY = {"name": "lv", "source": "pt", "method": "levels", "default_role": "insensitive",
          "attributes": {"pid": {"role": "identifier"},
                         "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20]}},
                         "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
          "privacy": {"k": 5}, "method_params": {"levels": {"age": 1, "sex": 0}}}


@pytest.mark.parametrize("statement", ["REFRESH ANONYMIZED VIEW lv", "DROP ANONYMIZED VIEW lv",
                                       "CREATE OR REPLACE ANONYMIZED VIEW lv WITH (method = 'levels', k = 5, "
                                       "default_role = 'insensitive', method_params = {'levels': {'age': 1}}) "
                                       "AS SELECT quasi(age, taxonomy => {'kind': 'interval', 'widths': [10]}) "
                                       "FROM pt"])
def test_x08_a_writing_statement_on_a_read_only_database_is_one_line(tmp_path, statement):
    with duckdb.connect(str(tmp_path / "db.duckdb")) as c:
        anon_sql.install(c)
        c.execute("CREATE TABLE pt AS SELECT i AS pid, 20 + i % 50 AS age, 'F' AS sex FROM range(500) r(i)")
        anon_sql.release(c, POLICY)
    before = (tmp_path / "db.duckdb").read_bytes()
    with duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True) as ro:
        with pytest.raises(AnonSQLError, match="writes to the database, which is open read-only") as err:
            anon_sql.execute(ro, statement)
        assert err.value.exit_code == 2
    assert (tmp_path / "db.duckdb").read_bytes() == before


@pytest.mark.parametrize("option", ["max_groups_contributed", "max_rows_contributed"])
def test_d12_a_contribution_bound_beyond_the_limit_is_refused(patients, option):
    anon_sql.execute(patients, "CREATE PRIVACY BUDGET ON pt WITH (epsilon = 10, delta = 1e-4, privacy_unit = 'pid')")
    with pytest.raises(AnonSQLError, match=f"option {option} = 1000000000000: must be between 1 and 100,000") as err:
        anon_sql.execute(patients, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, {option} = 1000000000000) "
                                   "COUNT(*) AS n FROM pt")
    assert err.value.exit_code == 2
    assert patients.execute("SELECT queries FROM anon.privacy_budgets").fetchall() == [(0,)]
