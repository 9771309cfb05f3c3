"""A visits table in a database file: 300 patients, 1–4 rows each, sex constant per patient."""
from __future__ import annotations

import duckdb
import pytest

VISITS = """
CREATE TABLE visits AS
SELECT p AS patient_id, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 18 + (p * 7 + r) % 60 AS age,
       CASE WHEN p % 3 = 0 THEN 'north' ELSE 'south' END AS region
FROM range(300) a(p), range(4) b(r) WHERE r <= p % 4
"""


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "clinic.duckdb"
    con = duckdb.connect(str(path))
    con.execute(VISITS)
    con.close()
    return path


@pytest.fixture
def dcon(db_path):
    con = duckdb.connect(str(db_path))
    yield con
    con.close()
