"""Hostile round 16, M47: `CHECK ANONYMIZED VIEW` with the release's check program already compiled (the cache) read
a session's TEMP copy named like the release and passed while the stored table had lost 17 rows. The compiled path
refuses a TEMP shadow as the compiling one does."""
from __future__ import annotations

import pytest

import anon_sql
from anon_sql.errors import AnonSQLError

POLICY = {"name": "lv", "source": "pt", "method": "levels", "default_role": "insensitive",
          "attributes": {"pid": {"role": "identifier"},
                         "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20]}},
                         "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
          "privacy": {"k": 5}, "method_params": {"levels": {"age": 1, "sex": 0}}}


def test_m47_a_compiled_check_refuses_a_temp_copy_of_the_release(patients, tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    con = patients
    anon_sql.release(con, POLICY)                       # caches the check program
    assert list((tmp_path / "cache").rglob("*.json"))
    anon_sql.execute(con, "CHECK ANONYMIZED VIEW lv")   # the compiled program, all passing
    con.execute("CREATE TEMP TABLE lv AS SELECT * FROM memory.main.lv")     # (main.lv is the TEMP one now)
    con.execute("DELETE FROM memory.main.lv WHERE age IN (SELECT age FROM memory.main.lv LIMIT 1)")
    with pytest.raises(AnonSQLError, match="TEMP table lv of this session shadows"):
        anon_sql.execute(con, "CHECK ANONYMIZED VIEW lv")
    con.execute("DROP TABLE temp.main.lv")
    with pytest.raises(AnonSQLError, match="contents"):      # the stored table, as it is: failing (exit 3)
        anon_sql.execute(con, "CHECK ANONYMIZED VIEW lv")
