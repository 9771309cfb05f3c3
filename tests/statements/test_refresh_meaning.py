"""Issue 28.3: plans that mean what they meant. A version records a digest of every taxonomy it used; KEEP PLAN
refuses (exit 3, naming the taxonomy, nothing changed) when a taxonomy was rebuilt since, and ``plan_changed`` is
true whenever released values could mean something else."""
from __future__ import annotations

import json

import duckdb
import pytest

import anon_sql
from anon_sql.api import build_taxonomy_from_column
from anon_sql.cli.demo import load_demo_data
from anon_sql.errors import StatementError
from anon_sql.statements.script import execute

VIEW = """CREATE ANONYMIZED VIEW ages_k5
WITH (method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0}}, seed = 0, k = 5, max_suppression = 0.05,
      default_role = 'insensitive')
AS SELECT identifier(patient_id), quasi(age, taxonomy => 'ages'), quasi(sex, taxonomy => 'adult_sex'),
          sensitive(occupation)
FROM adult"""


def _everything(con) -> dict:
    out = {}
    for schema, table in con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary "
                                     "ORDER BY ALL").fetchall():
        out[(schema, table)] = sorted(map(repr, con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()))
    return out


@pytest.fixture
def db():
    c = duckdb.connect()
    load_demo_data(c, "adult")
    anon_sql.install(c)
    build_taxonomy_from_column(c, "ages", "adult", "age", {"kind": "interval", "widths": [5, 10]})
    execute(c, VIEW)
    yield c
    c.close()


def _bands(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT DISTINCT age FROM ages_k5").fetchall()}


def test_keep_plan_refuses_when_the_taxonomy_was_rebuilt(db):
    old_bands = _bands(db)
    assert "[15-19]" in old_bands or "[20-24]" in old_bands     # width-5 bands at level 1
    # the taxonomy is rebuilt with other bands under the same name (`anon-sql taxonomy build ages --replace`)
    build_taxonomy_from_column(db, "ages", "adult", "age", {"kind": "interval", "widths": [7, 14]},
                                        replace=True)
    db.execute("INSERT INTO adult SELECT * REPLACE (patient_id + 100000 AS patient_id) FROM adult LIMIT 50")
    before = {k: v for k, v in _everything(db).items() if k != ("anon", "releases")}
    with pytest.raises(StatementError) as err:
        execute(db, "REFRESH ANONYMIZED VIEW ages_k5 KEEP PLAN")
    assert err.value.exit_code == 3
    assert "'ages'" in str(err.value) and "age (taxonomy 'ages')" in str(err.value)
    assert "sex" not in str(err.value).split("KEEP PLAN:")[1].split("is not")[0]   # only the rebuilt one is named
    after = _everything(db)
    # nothing changed but the log row of the refusal (status 'failed'), as for every refused release
    assert {k: v for k, v in after.items() if k != ("anon", "releases")} == before
    assert _bands(db) == old_bands
    assert db.execute("SELECT count(*) FROM anon.releases WHERE release = 'ages_k5' AND status = 'released'"
                      ).fetchall()[0][0] == 1


def test_plain_refresh_after_a_rebuild_says_the_plan_changed(db):
    build_taxonomy_from_column(db, "ages", "adult", "age", {"kind": "interval", "widths": [7, 14]},
                                        replace=True)
    [res] = execute(db, "REFRESH ANONYMIZED VIEW ages_k5")
    assert res.value.plan == {"age": 1, "sex": 0}       # the same level numbers ...
    v = db.execute("SELECT version, plan_changed, taxonomy_digests FROM anon.release_versions "
                   "WHERE release = 'ages_k5' ORDER BY version").fetchall()
    assert [r[0] for r in v] == [1, 2]
    assert v[1][1] is True                              # ... which now mean other bands
    assert json.loads(v[0][2])["age"] != json.loads(v[1][2])["age"]
    assert json.loads(v[0][2])["sex"] == json.loads(v[1][2])["sex"]


def test_keep_plan_with_unchanged_taxonomies_still_works_and_plan_unchanged(db):
    db.execute("INSERT INTO adult SELECT * REPLACE (patient_id + 100000 AS patient_id) FROM adult LIMIT 50")
    [res] = execute(db, "REFRESH ANONYMIZED VIEW ages_k5 KEEP PLAN")
    assert res.value.info["version"]["plan_changed"] is False
    [res] = execute(db, "REFRESH ANONYMIZED VIEW ages_k5")
    assert res.value.info["version"]["plan_changed"] is False


def test_keep_plan_refuses_a_version_without_digests(db):
    """A version recorded before digests existed cannot prove what its levels meant: refused, exit 3."""
    db.execute("UPDATE anon.release_versions SET taxonomy_digests = NULL")
    db.execute("UPDATE anon.releases SET taxonomy_digests = NULL")
    with pytest.raises(StatementError, match="no digest recorded") as err:
        execute(db, "REFRESH ANONYMIZED VIEW ages_k5 KEEP PLAN")
    assert err.value.exit_code == 3


@pytest.mark.parametrize("forged", ["not json", "[1, 2]", '{"age": 3}'])
def test_keep_plan_refuses_unreadable_digests(db, forged):
    """An edited catalog proves nothing about what the levels meant: exit 3, never a raw JSON error."""
    db.execute("UPDATE anon.release_versions SET taxonomy_digests = ?", [forged])
    with pytest.raises(StatementError, match="no digest recorded") as err:
        execute(db, "REFRESH ANONYMIZED VIEW ages_k5 KEEP PLAN")
    assert err.value.exit_code == 3
    [res] = execute(db, "REFRESH ANONYMIZED VIEW ages_k5")          # planning again is fine, and says so
    assert res.value.info["version"]["plan_changed"] is True


def test_keep_plan_names_the_rebuilt_taxonomy_even_when_the_new_bands_fail_k(db):
    """Hostile round 13, T8: bands rebuilt so that a class falls below k were reported as the data's fault ("the
    stored plan no longer meets the policy on the current data"); the taxonomy is named first."""
    build_taxonomy_from_column(db, "ages", "adult", "age", {"kind": "interval", "widths": [1, 1]}, replace=True)
    db.execute("DELETE FROM adult WHERE patient_id % 10 <> 0")    # 300 rows: single years leave classes below k
    with pytest.raises(StatementError) as err:
        execute(db, "REFRESH ANONYMIZED VIEW ages_k5 KEEP PLAN")
    assert err.value.exit_code == 3
    assert "age (taxonomy 'ages') is not the one the stored plan was made with" in str(err.value), str(err.value)
