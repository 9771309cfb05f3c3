"""Refreshable releases: REFRESH [KEEP PLAN], the version history and what each version changed (pandas oracle)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import anon_sql
from anon_sql.errors import StatementError
from anon_sql.statements.script import execute
from test_statements import db, view_sql  # noqa: F401  (db: the packaged Adult sample as table `adult`)


def _release(con, name="adult_k5") -> pd.DataFrame:
    return con.execute(f'SELECT * EXCLUDE (ec_id) FROM "{name}"').df()


def _classes(con, name="adult_k5") -> pd.DataFrame:
    return con.execute("SELECT qi_values, size FROM anon.equivalence_classes WHERE release = ?", [name]).df()


def _versions(con, name="adult_k5") -> pd.DataFrame:
    return con.execute("SELECT * FROM anon.release_versions WHERE release = ? ORDER BY version", [name]).df()


def _multiset_minus(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """How many rows of a are not matched by a row of b (rows compared as text), by pandas."""
    a, b = a.astype(str), b[a.columns].astype(str)
    ca = a.value_counts().rename("na")
    cb = b.value_counts().rename("nb")
    both = pd.concat([ca, cb], axis=1).fillna(0)
    return int((both["na"] - both["nb"]).clip(lower=0).sum())


def _class_changes(old: pd.DataFrame, new: pd.DataFrame) -> tuple[int, int, int]:
    o, n = old.set_index("qi_values")["size"], new.set_index("qi_values")["size"]
    added = len(set(n.index) - set(o.index))
    removed = len(set(o.index) - set(n.index))
    common = sorted(set(n.index) & set(o.index))
    resized = int((n[common] != o[common]).sum())
    return added, removed, resized


def test_keep_plan_reapplies_the_plan_and_records_what_changed(db):
    [created] = execute(db, view_sql())
    plan = created.value.plan
    old_rows, old_classes = _release(db), _classes(db)
    # 300 new records (copies of sampled ones with new ids) and 100 removed ones
    db.execute("INSERT INTO adult SELECT * REPLACE (patient_id + 100000 AS patient_id) FROM adult "
               "USING SAMPLE reservoir(300 ROWS) REPEATABLE (7)")
    db.execute("DELETE FROM adult WHERE patient_id % 30 = 0")
    records = db.execute("SELECT count(*) FROM adult").fetchall()[0][0]
    [res] = execute(db, "REFRESH ANONYMIZED VIEW adult_k5 KEEP PLAN")
    rel = res.value
    assert rel.plan == plan and rel.records_in == records
    new_rows, new_classes = _release(db), _classes(db)
    v = _versions(db)
    assert v["version"].tolist() == [1, 2] and v["action"].tolist() == ["create", "refresh keep plan"]
    last = v.iloc[-1]
    assert json.loads(last["plan"]) == plan and not last["plan_changed"]
    assert last["records_in"] == records and last["records_out"] == rel.records_out
    assert last["rows_added"] == _multiset_minus(new_rows, old_rows) > 0
    assert last["rows_removed"] == _multiset_minus(old_rows, new_rows) > 0
    assert (last["classes_added"], last["classes_removed"], last["classes_resized"]) == \
        _class_changes(old_classes, new_classes)
    assert last["classes_resized"] > 0
    # the declared policy is what a later default REFRESH runs (method optimal, not the levels it was re-applied with)
    assert json.loads(last["policy_json"])["method"] == "optimal"
    assert "refresh keep plan" in res.message and "rows added" in res.message
    execute(db, "CHECK ANONYMIZED VIEW adult_k5")


def test_keep_plan_fails_closed_when_the_new_data_breaks_the_plan(db):
    execute(db, view_sql())
    before_rows, before_versions = _release(db), _versions(db)
    before_release = db.execute("SELECT plan, records_in FROM anon.releases WHERE release = 'adult_k5' "
                                "AND status = 'released'").fetchall()
    db.execute("DELETE FROM adult WHERE patient_id % 10 <> 0")   # 300 records: classes shrink far below k
    with pytest.raises(StatementError) as err:
        execute(db, "REFRESH ANONYMIZED VIEW adult_k5 KEEP PLAN")
    assert err.value.exit_code == 3
    assert "no longer meets the policy" in str(err.value) and "current version is kept" in str(err.value)
    pd.testing.assert_frame_equal(_release(db), before_rows)
    pd.testing.assert_frame_equal(_versions(db), before_versions)
    assert db.execute("SELECT plan, records_in FROM anon.releases WHERE release = 'adult_k5' "
                      "AND status = 'released'").fetchall() == before_release
    assert db.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__anon_previous%'"
                      ).fetchall()[0][0] == 0
    # planning again finds a coarser plan; the version says the plan changed
    [res] = execute(db, "REFRESH ANONYMIZED VIEW adult_k5")
    last = _versions(db).iloc[-1]
    assert last["action"] == "refresh" and last["plan_changed"]
    old_plan = json.loads(before_release[0][0])
    assert sum(res.value.plan.values()) > sum(old_plan.values())


def test_keep_plan_is_refused_for_a_record_assignment(db):
    execute(db, view_sql(method="mondrian"))
    before = _release(db)
    with pytest.raises(StatementError) as err:
        execute(db, "REFRESH ANONYMIZED VIEW adult_k5 KEEP PLAN")
    assert err.value.exit_code == 2 and "mondrian" in str(err.value) and "without KEEP PLAN" in str(err.value)
    pd.testing.assert_frame_equal(_release(db), before)
    execute(db, "REFRESH ANONYMIZED VIEW adult_k5")
    assert _versions(db)["action"].tolist() == ["create", "refresh"]


def test_refresh_on_unchanged_data_changes_nothing(db):
    execute(db, view_sql())
    [res] = execute(db, "REFRESH ANONYMIZED VIEW adult_k5")
    last = _versions(db).iloc[-1]
    assert (last["version"], last["plan_changed"]) == (2, False)
    assert last[["rows_added", "rows_removed", "classes_added", "classes_removed", "classes_resized"]].sum() == 0


def test_python_api_refresh_of_a_release_made_without_statements(db):
    policy = anon_sql.Policy.from_sql(view_sql()).replace(method="levels",
                                                          method_params={"levels": {"race": 1}})
    anon_sql.release(db, policy)
    db.execute("DROP TABLE anon.release_versions")     # a catalog installed before the version history existed
    [explained] = execute(db, "EXPLAIN ANONYMIZED VIEW adult_k5")
    assert "none recorded yet" in explained.message and '"race": 1' in explained.message
    db.execute("INSERT INTO adult SELECT * REPLACE (patient_id + 100000 AS patient_id) FROM adult LIMIT 50")
    rel = anon_sql.refresh(db, "adult_k5", keep_plan=True)
    assert rel.records_in == 3050
    v = _versions(db)
    assert v["version"].tolist() == [1, 2] and v["action"].tolist() == ["create", "refresh keep plan"]
    assert v["records_in"].tolist() == [3000, 3050]
    with pytest.raises(anon_sql.UnknownViewError):
        anon_sql.refresh(db, "nope")


def test_or_replace_with_another_shape_still_records_what_changed(db):
    execute(db, view_sql())
    rows = db.execute("SELECT count(*) FROM adult_k5").fetchall()[0][0]
    db.execute("CREATE TABLE other AS SELECT patient_id AS pid, age AS years FROM adult")
    execute(db, "CREATE OR REPLACE ANONYMIZED VIEW adult_k5 WITH (k = 5, method = 'levels', max_suppression = 0.02,"
                " method_params = {'levels': {'years': 1}}) "
                "AS SELECT identifier(pid), quasi(years, taxonomy => 'adult_age') FROM other")
    last = _versions(db).iloc[-1]
    new_rows = db.execute("SELECT count(*) FROM adult_k5").fetchall()[0][0]
    assert (last["action"], last["rows_added"], last["rows_removed"]) == ("replace", new_rows, rows)


def test_stored_policy_keeps_the_attribute_order(seed_db):
    """The catalog's policy JSON keeps attributes in the policy's order (QI order breaks ties in the searches, so a
    refresh must see the same order)."""
    import duckdb

    from anon_sql.policy.model import Policy

    db, path, _ = seed_db
    declared = list(Policy.from_toml(path).attributes)
    assert declared != sorted(declared)            # the fixture's order is not alphabetical: the test can fail
    con = duckdb.connect(db, read_only=True)
    stored = con.execute("SELECT policy_json FROM anon.releases WHERE release = 'r000'").fetchall()[0][0]
    stored_order = list(Policy.from_dict(json.loads(stored)).attributes)   # the effective policy: every column
    assert [a for a in stored_order if a in declared] == declared
