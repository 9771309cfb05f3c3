"""Hostile round 13, R6: a user's index on a released table vanished at REFRESH (DuckDB drops a table's indexes
with it). A refresh or replace now creates each of them again in its transaction, or, when the new rows cannot hold
one (a UNIQUE index they break), refuses with everything as it was."""
from __future__ import annotations

import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

CREATE = """CREATE {replace} ANONYMIZED VIEW lv WITH (method = 'levels', k = 5, default_role = 'insensitive',
    method_params = {{'levels': {{'age': 1, 'sex': 0}}}})
AS SELECT identifier(pid), quasi(age, taxonomy => {{'kind': 'interval', 'widths': [10, 20]}}),
          quasi(sex, taxonomy => {{'kind': 'top'}}), insensitive(zip) FROM pt"""


@pytest.fixture
def con(patients):
    """`pt` and its release `lv` (version 1)."""
    anon_sql.execute(patients, CREATE.format(replace=""))
    return patients


def indexes(c) -> list:
    return c.execute("SELECT index_name, is_unique FROM duckdb_indexes() ORDER BY 1").fetchall()


@pytest.mark.parametrize("statement", ["REFRESH ANONYMIZED VIEW lv KEEP PLAN", "REFRESH ANONYMIZED VIEW lv",
                                       CREATE.format(replace="OR REPLACE")])
def test_a_users_index_is_kept_across_a_new_version(con, statement):
    con.execute('CREATE INDEX "Lv Zip" ON lv(zip)')
    con.execute("CREATE UNIQUE INDEX lv_u ON lv(zip)")
    con.execute("INSERT INTO pt SELECT 1000 + i, 20 + i % 50, 'F', 1000 + i FROM range(20) r(i)")
    anon_sql.execute(con, statement)
    assert con.execute("SELECT max(version) FROM anon.release_versions WHERE release = 'lv'").fetchall()[0][0] == 2
    assert indexes(con) == [("Lv Zip", False), ("lv_u", True)]
    assert con.execute("SELECT count(*) FROM lv").fetchall()[0][0] == 520


def test_an_index_the_new_rows_break_refuses_the_refresh_and_keeps_everything(con):
    con.execute("CREATE UNIQUE INDEX lv_u ON lv(zip)")
    con.execute("INSERT INTO pt SELECT 1000 + i, 20 + i % 50, 'F', 7 FROM range(20) r(i)")   # zip 7 repeats
    before = con.execute("SELECT * FROM lv ORDER BY ALL").fetchall()
    with pytest.raises(AnonSQLError, match="index 'lv_u' on 'lv' cannot be created on the new rows"):
        anon_sql.execute(con, "REFRESH ANONYMIZED VIEW lv KEEP PLAN")
    assert con.execute("SELECT * FROM lv ORDER BY ALL").fetchall() == before
    assert indexes(con) == [("lv_u", True)]
    assert con.execute("SELECT max(version) FROM anon.release_versions WHERE release = 'lv'").fetchall()[0][0] == 1
