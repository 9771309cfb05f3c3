"""End-to-end releases at a level vector: seed 000 worked example, Adult with pycanon as oracle, catalog rows."""
from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

import anon_sql
from conftest import adult_policy, load_adult, load_seed000, seed000_policy

ADULT_LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
                "workclass": 2, "occupation": 1}


def test_seed000_level_vector_reproduces_table5(con):
    """Spec 01 §4: levels {zip: 1, age: 1, alcohol: 0} keep 21 distinct rows and satisfy <{zip, age, AC}, 3>."""
    load_seed000(con)
    rel = anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}))
    assert rel.plan == {"zip": 1, "age": 1, "alcohol": 0}
    assert rel.records_in == 60 and rel.records_out == 60 and rel.suppressed == 0
    released = con.execute("SELECT * FROM r000").df()
    data_cols = [c for c in released.columns if c not in ("ec_id",)]
    assert len(released[data_cols].drop_duplicates()) == 21
    assert "row" not in released.columns  # identifier dropped
    sizes = released.groupby(["zip", "age", "alcohol"], observed=True)["n"].sum()
    assert sizes.min() >= 3
    assert set(released["zip"]) <= {"5200*", "5300*", "5400*"}
    assert set(released["age"]) <= {"[20-34]", "[35-44]", "[45-64]", "[65-85]"}


def test_seed000_root_fails_with_clear_message_and_creates_nothing(con):
    load_seed000(con)
    with pytest.raises(anon_sql.PrivacyRequirementError) as err:
        anon_sql.release(con, seed000_policy())
    msg = str(err.value)
    assert "k fails" in msg and "max_suppression" in msg
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert not any(t.startswith("r000") for t in tables)
    status = con.execute("SELECT status FROM anon.releases WHERE release = 'r000'").fetchall()
    assert status == [("failed",)]


def test_suppression_within_budget_reconciles(con):
    load_seed000(con)
    rel = anon_sql.release(con, seed000_policy(privacy={"k": 3, "max_suppression": 0.5}))
    assert rel.suppressed > 0
    released = con.execute("SELECT sum(n) FROM r000").fetchall()[0][0]
    assert released + rel.suppressed == 60
    assert rel.passed


def test_adult_release_is_k_anonymous_and_l_diverse_by_pycanon(con):
    pycanon_anonymity = pytest.importorskip("pycanon.anonymity")
    load_adult(con)
    rel = anon_sql.release(con, adult_policy(ADULT_LEVELS, max_suppression=0.05,
                                             l_diversity={"kind": "distinct", "l": 2}))
    df = con.execute("SELECT * FROM adult_rel").df()
    qi = list(ADULT_LEVELS)
    assert pycanon_anonymity.k_anonymity(df, qi) >= 5
    assert pycanon_anonymity.l_diversity(df, qi, ["salary-class"]) >= 2
    assert rel.records_in == 30162 == rel.records_out + rel.suppressed
    # catalog rows
    row = con.execute("SELECT records_in, records_out, suppressed, k_achieved, classes, status, generated_sql "
                      "FROM anon.releases WHERE release = 'adult_rel'").fetchall()[0]
    assert row[:3] == (30162, rel.records_out, rel.suppressed) and row[3] >= 5 and row[5] == "released"
    assert "CREATE TABLE" in row[6]
    ecs = con.execute("SELECT count(*), sum(size), min(size) FROM anon.equivalence_classes "
                      "WHERE release = 'adult_rel'").fetchall()[0]
    assert ecs == (rel.metrics["classes"], rel.records_out, rel.metrics["k"])
    sample = json.loads(con.execute("SELECT qi_values FROM anon.equivalence_classes WHERE release = 'adult_rel' "
                                    "LIMIT 1").fetchall()[0][0])
    assert set(sample) == set(qi)
    metrics = dict(con.execute("SELECT metric, value FROM anon.metrics WHERE release = 'adult_rel'").fetchall())
    assert metrics["k"] >= 5


def test_check_reruns_on_reopened_file(tmp_path):
    db = str(tmp_path / "clinic.duckdb")
    c = duckdb.connect(db)
    anon_sql.install(c)
    load_seed000(c)
    pol = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}, privacy={
        "k": 3, "l_diversity": {"kind": "entropy", "l": 1.0}, "simpson": {"diversity": 1.0},
        "t_closeness": 1.0})
    pol["attributes"]["genetic_risk"] = {"role": "sensitive"}
    anon_sql.release(c, pol)
    c.close()
    fresh = duckdb.connect(db)  # no anon_sql.install: the macros persist in the file
    assert anon_sql.check(fresh, "r000")["passed"].all()


def test_count_column_merges_identical_released_rows(con):
    load_seed000(con)
    anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 5, "age": 1, "alcohol": 1}},
                                         default_role=None,
                                         attributes={"row": {"role": "identifier"},
                                                     "sex": {"role": "insensitive"},
                                                     # dropped columns that repeat (not people's ids): said so
                                                     "weight": {"role": "identifier", "rows_are_people": True},
                                                     "race": {"role": "identifier", "rows_are_people": True},
                                                     "genetic_risk": {"role": "identifier", "rows_are_people": True},
                                                     "zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                                                     "age": {"role": "quasi", "taxonomy": {"kind": "top"}},
                                                     "alcohol": {"role": "quasi", "taxonomy": {"kind": "top"}}}))
    df = con.execute("SELECT sex, n FROM r000 ORDER BY sex").df()
    assert df["sex"].tolist() == ["F", "M"]
    assert int(df["n"].sum()) == 60


def test_source_is_never_modified(con):
    load_seed000(con)
    before = con.execute("SELECT * FROM t1 ORDER BY row").df()
    anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}))
    with pytest.raises(anon_sql.PrivacyRequirementError):
        anon_sql.release(con, seed000_policy(name="r2", privacy={"k": 50}))
    pd.testing.assert_frame_equal(before, con.execute("SELECT * FROM t1 ORDER BY row").df())


def test_same_seed_same_release_bytes(con):
    load_seed000(con)
    pol = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    anon_sql.release(con, pol)
    first = con.execute("SELECT * FROM r000").df()
    anon_sql.release(con, pol, replace=True)
    pd.testing.assert_frame_equal(first, con.execute("SELECT * FROM r000").df())


def test_dry_run_creates_nothing(con):
    load_seed000(con)
    rel = anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}), dry_run=True)
    assert not rel.materialized and rel.passed
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'r000%'").fetchall() == [(0,)]


def test_pseudonymized_identifier_uses_key_and_never_stores_it(con, monkeypatch):
    load_seed000(con)
    key = "a-very-secret-key-0123456789"
    monkeypatch.setenv("ANON_SQL_KEY", key)
    pol = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    pol["attributes"]["row"] = {"role": "identifier", "action": "pseudonymize"}
    anon_sql.release(con, pol)
    rows = con.execute("SELECT row FROM r000").df()["row"]
    assert rows.str.len().eq(64).all()  # hex HMAC-SHA256
    sql = con.execute("SELECT generated_sql, policy_json FROM anon.releases WHERE release = 'r000'").fetchall()[0]
    assert key not in sql[0] and key not in sql[1]
    monkeypatch.delenv("ANON_SQL_KEY")
    with pytest.raises(anon_sql.PolicyError, match="ANON_SQL_KEY"):
        anon_sql.release(con, pol, replace=True)
