"""The ``__assignment`` plan table of a Mondrian release with a privacy unit (built one group per person, not one
per distinct row: docs/units.md, Speed): every source row, numbered as the ``__source`` view numbers it (the unit,
then the QIs, then the other columns), is assigned the class its person was released in."""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from test_units import KEY, visits, visits_policy


@pytest.mark.parametrize("order", ["patient_id, age, sex, diagnosis", "diagnosis, sex, patient_id, age"])
def test_every_row_is_assigned_its_persons_class(monkeypatch, order):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    con = duckdb.connect()
    anon_sql.install(con)
    visits(con)
    con.execute(f"CREATE OR REPLACE TABLE visits AS SELECT {order} FROM visits")
    anon_sql.release(con, visits_policy("mondrian"))
    rows = con.execute("""
        WITH numbered AS (SELECT anon_pseudonym(patient_id::VARCHAR) AS pid,
                                 row_number() OVER (ORDER BY patient_id, age, sex, diagnosis) AS __row FROM visits),
             released AS (SELECT DISTINCT patient_id AS pid, ec_id FROM vis)
        SELECT count(*), count(a.ec_id), count(r.ec_id), count(*) FILTER (WHERE a.ec_id IS DISTINCT FROM r.ec_id
                                                                          AND r.ec_id IS NOT NULL)
        FROM numbered n LEFT JOIN anon_work.vis__assignment a USING (__row) LEFT JOIN released r USING (pid)
        """).fetchall()[0]
    total, assigned, released, wrong = rows
    assert total == 603 and assigned == 603 and wrong == 0
    assert released == con.execute("SELECT count(*) FROM vis").fetchall()[0][0] > 500
    con.close()
