"""Privacy units: guarantees that count people, not rows (spec/08-privacy-units.md, docs/units.md).

Golden cases from the spec (visits, flu) and a hypothesis test against a pandas oracle that counts people: the
released unit is pseudonymized (an injective keyed hash), so distinct pseudonyms per class are distinct people.
"""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import anon_sql
from units_fixtures import KEY, con, tables, visits_policy  # noqa: F401 (con: a fixture)
from anon_sql.models import ClassStats, DistinctLDiversity, SensitiveCounts

LEVEL_METHODS = ["levels", "iab", "exhaustive", "greedy", "optimal", "mondrian"]


def visits(con: duckdb.DuckDBPyConnection) -> None:
    """Spec 08, visits: 199 units × 3 rows (age 30 + i % 5, sex by i % 2) + unit 0 (97, F) with 6 rows."""
    con.execute("""CREATE OR REPLACE TABLE visits AS
        SELECT i AS patient_id, 30 + i % 5 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
               'd' || ((i * 7 + v) % 4) AS diagnosis
        FROM range(1, 200) t(i), range(3) s(v)
        UNION ALL SELECT 0, 97, 'F', 'd' || (v % 4) FROM range(6) s(v)""")


def people_per_class(con, release: str) -> pd.Series:
    df = con.execute(f'SELECT * FROM "{release}"').df()
    return df.groupby("ec_id")["patient_id"].nunique()


def test_visits_golden_levels(con):
    """k = 5 at level 0, max_suppression = 0.05: unit 0 (6 rows) suppressed, every class >= 19 people, 597 rows."""
    visits(con)
    rel = anon_sql.release(con, visits_policy())
    assert rel.records_in == 603 and rel.records_out == 597 and rel.suppressed == 6
    assert rel.info["people"] == {"in": 200, "released": 199, "suppressed": 1}
    per_class = people_per_class(con, "vis")
    assert per_class.min() == 19 and len(per_class) == 10
    assert rel.classes["__size"].min() == 19                         # the checks count people too
    assert rel.metrics["k"] == 19
    released = con.execute("SELECT * FROM vis").df()
    assert "__unit" not in released.columns and 97 not in set(released["age"])
    assert released["patient_id"].astype(str).str.len().min() > 10   # a pseudonym, never the raw id
    assert "people (patient_id): 200 in, 199 released, 1 suppressed" in rel.summary()


def test_visits_without_a_budget_names_people(con):
    visits(con)
    before = tables(con)
    with pytest.raises(anon_sql.PrivacyRequirementError, match="k_anonymity|k ") as err:
        anon_sql.release(con, visits_policy(privacy={"k": 5}))
    assert "0.005" in str(err.value)        # 1 of 200 people: the advised budget is a share of people
    assert tables(con) == before


@pytest.mark.parametrize("method", LEVEL_METHODS)
def test_visits_every_level_method_counts_people(con, method):
    """Done-when of issue 24: the visits example releases no class with fewer than 5 people, for every method
    that releases with a unit (pandas oracle over the pseudonymized unit)."""
    visits(con)
    params = {"method_params": {"levels": {"age": 0, "sex": 0}}} if method == "levels" else {}
    rel = anon_sql.release(con, visits_policy(method, **params))
    per_class = people_per_class(con, "vis")
    assert per_class.min() >= 5
    released = con.execute("SELECT * FROM vis").df()
    kept = released["patient_id"].nunique()
    assert rel.info["people"]["released"] == kept
    assert rel.info["people"]["suppressed"] <= 0.05 * 200
    # whole people: every released person keeps all their rows
    rows = released.groupby("patient_id").size()
    assert set(rows.tolist()) <= {3, 6} and rel.records_out == int(rows.sum())


def test_repeated_identifier_is_refused(con):
    """Without privacy_unit, an identifier that repeats is refused (200 values repeat); nothing is created."""
    visits(con)
    policy = visits_policy()
    policy.pop("privacy_unit")
    policy["attributes"]["patient_id"] = {"role": "identifier"}
    before = tables(con)
    with pytest.raises(anon_sql.PolicyError, match=r"identifier 'patient_id'.*200 values.*privacy_unit = "
                                                   r"'patient_id'.*rows_are_people = true"):
        anon_sql.release(con, policy)
    assert tables(con) == before
    # the explicit opt-out: these rows are different people (then rows are counted, as before)
    policy["attributes"]["patient_id"] = {"role": "identifier", "rows_are_people": True}
    rel = anon_sql.release(con, policy)
    assert "people" not in rel.info


def test_null_units_are_refused_with_their_count(con):
    visits(con)
    con.execute("UPDATE visits SET patient_id = NULL WHERE patient_id IN (3, 4)")
    before = tables(con)
    with pytest.raises(anon_sql.SourceError, match="NULL on 6 rows"):
        anon_sql.release(con, visits_policy())
    assert tables(con) == before


def test_varying_quasi_identifier_is_refused_by_name(con):
    """Mondrian releases one QI tuple per person: a varying QI is refused there, naming the methods that generalize
    signatures (levels and the lattice searches release it: tests/runner/test_units_varying.py)."""
    visits(con)
    con.execute("UPDATE visits SET age = age + 1 WHERE rowid IN "
                "(SELECT min(rowid) FROM visits WHERE patient_id IN (5, 6) GROUP BY patient_id)")
    with pytest.raises(anon_sql.PolicyError, match="quasi-identifier 'age' varies within 2 units"):
        anon_sql.release(con, visits_policy("mondrian"))


def test_unit_must_be_an_identifier():
    policy = visits_policy()
    policy["attributes"]["patient_id"] = {"role": "insensitive"}
    with pytest.raises(anon_sql.PolicyError, match="role = \"identifier\""):
        anon_sql.Policy.from_dict(policy)


def test_unlisted_unit_is_dropped(con):
    visits(con)
    policy = visits_policy()
    del policy["attributes"]["patient_id"]
    anon_sql.release(con, policy)
    assert "patient_id" not in con.execute("SELECT * FROM vis").df().columns


@pytest.mark.parametrize("method", ["theta", "slicing", "upa"])
def test_methods_that_do_not_count_people_refuse_naming_those_that_do(con, method):
    visits(con)
    before = tables(con)
    with pytest.raises(anon_sql.PolicyError, match="methods that count people: .*levels.*optimal"):
        anon_sql.release(con, visits_policy(method))
    assert tables(con) == before


def test_policy_round_trips_with_units():
    policy = anon_sql.Policy.from_dict(visits_policy(attributes={
        "patient_id": {"role": "identifier"}, "name": {"role": "identifier", "rows_are_people": True},
        "age": {"role": "quasi", "taxonomy": "adult_age"}, "sex": {"role": "quasi"},
        "diagnosis": {"role": "sensitive"}}))
    assert policy.privacy_unit == "patient_id"
    assert anon_sql.Policy.from_toml(policy.to_toml()) == policy
    assert anon_sql.Policy.from_sql(policy.to_sql()) == policy
    assert anon_sql.Policy.from_dict(policy.to_dict()) == policy
    assert "privacy_unit = 'patient_id'" in policy.to_sql()
    assert 'privacy_unit = "patient_id"' in policy.to_toml()


def flu(con) -> None:
    """Spec 08, flu: units 0–8 hold only 'flu', unit 9 holds flu, a, b, c, d (30, M); units 100–109 one distinct
    value each (40, F)."""
    con.execute("""CREATE OR REPLACE TABLE flu AS
        SELECT u AS pid, 30 AS age, 'M' AS sex, 'flu' AS diag FROM range(0, 9) t(u)
        UNION ALL SELECT 9, 30, 'M', d FROM (VALUES ('flu'), ('a'), ('b'), ('c'), ('d')) v(d)
        UNION ALL SELECT u, 40, 'F', 'v' || u FROM range(100, 110) t(u)""")


def flu_policy(method: str, **privacy) -> dict:
    return {"name": "fl", "source": "flu", "privacy_unit": "pid", "method": method,
            "attributes": {"pid": {"role": "identifier", "action": "pseudonymize"},
                           "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [100]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}, "diag": {"role": "sensitive"}},
            "privacy": {"k": 2, "l_diversity": {"kind": "distinct", "l": 2}, **privacy}}


def test_flu_golden_sql_check(con):
    """Distinct 2-diversity over units: (30, M) fails (every unit holds 'flu'), (40, F) passes."""
    flu(con)
    before = tables(con)
    with pytest.raises(anon_sql.PrivacyRequirementError,
                       match=r"l_distinct__diag fails for 1 class \(10 people\).*10 of 20 people"):
        anon_sql.release(con, flu_policy("levels"))
    assert tables(con) == before
    rel = anon_sql.release(con, flu_policy("levels", max_suppression=0.5))
    assert rel.info["people"] == {"in": 20, "released": 10, "suppressed": 10}
    released = con.execute("SELECT age, sex, count(*) AS n FROM fl GROUP BY ALL").fetchall()
    assert released == [(40, "F", 10)]


def test_flu_golden_numpy_check():
    """The numpy check the searches use: counts are people holding a value, sizes are people."""
    # class 0 = (30, M): 10 people; flu held by 10, a–d by 1 each. class 1 = (40, F): 10 values held by 1 each
    cls = [0] * 5 + [1] * 10
    cnt = [10, 1, 1, 1, 1] + [1] * 10
    sc = SensitiveCounts(pd.Series(cls).to_numpy(), pd.Series(range(15)).to_numpy(), pd.Series(cnt, dtype=float)
                         .to_numpy(), 15)
    stats = ClassStats(pd.Series([10.0, 10.0]).to_numpy(), {"diag": sc})
    assert DistinctLDiversity("diag", 2).check(stats).tolist() == [False, True]
    assert DistinctLDiversity("diag", 1).check(stats).tolist() == [True, True]


@pytest.mark.parametrize("method", ["iab", "exhaustive", "greedy", "optimal", "mondrian"])
def test_flu_searches_agree_with_the_sql(con, method):
    """A search never releases (30, M) ungeneralized with l = 2: its lattice counts people like the SQL checks."""
    flu(con)
    anon_sql.release(con, flu_policy(method, max_suppression=0.5))
    df = con.execute("SELECT * FROM fl").df()
    for _, g in df.groupby("ec_id"):
        held = g.groupby("diag")["pid"].nunique()
        assert g["diag"].nunique() >= 2 and held.max() < g["pid"].nunique()


@settings(max_examples=12)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(1, 4)), min_size=1, max_size=40),
       st.integers(1, 4))
def test_random_multirow_data_against_a_pandas_oracle(people, k):
    """Random people (age code, sex, number of rows): level 0, suppression allowed; every released class has
    >= k distinct people, and the kept people are exactly those whose class has >= k people."""
    import os

    os.environ["ANON_SQL_KEY"] = KEY
    con = duckdb.connect()
    anon_sql.install(con)
    rows = [(pid, 30 + a, "FM"[s], f"d{r}") for pid, (a, s, n) in enumerate(people) for r in range(n)]
    src = pd.DataFrame(rows, columns=["patient_id", "age", "sex", "diagnosis"])
    con.register("src_df", src)
    con.execute("CREATE TABLE visits AS SELECT * FROM src_df")
    units = src["patient_id"].nunique()
    if k > units:
        with pytest.raises(anon_sql.PolicyError, match="larger than the"):
            anon_sql.release(con, visits_policy(privacy={"k": k, "max_suppression": 1.0}))
        return
    per = src.groupby(["age", "sex"])["patient_id"].nunique()
    big = per[per >= k].index
    expected = src[src.set_index(["age", "sex"]).index.isin(big)]
    rel = anon_sql.release(con, visits_policy(privacy={"k": k, "max_suppression": 1.0}))
    out = con.execute("SELECT * FROM vis").df()
    assert len(out) == len(expected) == rel.records_out
    assert out.empty or out.groupby("ec_id")["patient_id"].nunique().min() >= k
    assert rel.info["people"]["released"] == expected["patient_id"].nunique()
    assert rel.records_in == rel.records_out + rel.suppressed


def test_cli_refuses_with_exit_2_and_leaves_the_file_unchanged(tmp_path):
    """`anon-sql release` of the repeated identifier and of NULL units: exit 2, one error line, database as before."""
    from click.testing import CliRunner

    from anon_sql.cli.main import main

    db = tmp_path / "w.duckdb"
    c = duckdb.connect(str(db))
    anon_sql.install(c)
    visits(c)
    c.execute("CREATE TABLE visits_null AS SELECT * REPLACE (CASE WHEN patient_id = 7 THEN NULL ELSE patient_id END "
              "AS patient_id) FROM visits")
    before = tables(c)
    c.close()
    policy = visits_policy()
    policy.pop("privacy_unit")
    policy["attributes"]["patient_id"] = {"role": "identifier"}
    no_unit = tmp_path / "no_unit.toml"
    no_unit.write_text(anon_sql.Policy.from_dict(policy).to_toml(), encoding="utf-8")
    nulls = tmp_path / "nulls.toml"
    nulls.write_text(anon_sql.Policy.from_dict(visits_policy(source="visits_null")).to_toml(), encoding="utf-8")
    for path, message in ((no_unit, "200 values occur on several rows"), (nulls, "NULL on 3 rows")):
        res = CliRunner().invoke(main, ["release", str(path), "--db", str(db)], env={"ANON_SQL_KEY": KEY})
        assert res.exit_code == 2, res.output
        assert message in res.output and "Traceback" not in res.output
    c = duckdb.connect(str(db))
    assert tables(c) == before
    c.close()


def test_compiled_sqlite_script_counts_people_and_drops_the_unit(con):
    """The same release as SQL for another engine (SQLite): classes count people, the unit column leaves last."""
    import sqlite3

    visits(con)
    policy = visits_policy()
    policy["attributes"]["patient_id"] = {"role": "identifier"}
    script = anon_sql.compile(anon_sql.Policy.from_dict(policy), con=con, dialect="sqlite")
    assert script[-1] == 'ALTER TABLE "vis" DROP COLUMN "__unit"'
    lite = sqlite3.connect(":memory:")
    con.execute("SELECT * FROM visits").df().to_sql("visits", lite, index=False)
    for statement in script:
        lite.execute(statement)
    assert [r[1] for r in lite.execute('PRAGMA table_info("vis")')] == ["age", "sex", "diagnosis", "ec_id"]
    assert lite.execute('SELECT count(*) FROM "vis" WHERE age = 97').fetchall() == [(0,)]
    assert lite.execute('SELECT count(*) FROM "vis"').fetchall() == [(597,)]


def test_assess_counts_people(con):
    """assess(..., privacy_unit=): class sizes are people (pandas oracle), α is the people holding a value over the
    class's people; NULL units and varying QIs are refused as by a release."""
    visits(con)
    flu(con)
    a = anon_sql.assess(con, "visits", ["age", "sex"], privacy_unit="patient_id")
    src = con.execute("SELECT * FROM visits").df()
    people = src.groupby(["age", "sex"])["patient_id"].nunique()
    assert a.measures["records"] == src["patient_id"].nunique() == 200
    assert a.measures["k"] == people.min() == 1 and a.measures["classes"] == len(people)
    rows = anon_sql.assess(con, "flu", ["age", "sex"], ["diag"])
    units = anon_sql.assess(con, "flu", ["age", "sex"], ["diag"], privacy_unit="pid")
    assert rows.measures["alpha"] == pytest.approx(10 / 14) and units.measures["alpha"] == 1.0
    assert units.measures["records"] == 20 and units.measures["k"] == 10
    con.execute("UPDATE flu SET pid = NULL WHERE pid = 9")
    with pytest.raises(anon_sql.SourceError, match="NULL on 5 rows"):
        anon_sql.assess(con, "flu", ["age", "sex"], ["diag"], privacy_unit="pid")


def test_cli_assess_privacy_unit(tmp_path):
    from click.testing import CliRunner

    from anon_sql.cli.main import main

    db = tmp_path / "a.duckdb"
    c = duckdb.connect(str(db))
    visits(c)
    c.close()
    res = CliRunner().invoke(main, ["assess", "visits", "--quasi", "age,sex", "--privacy-unit", "patient_id",
                                    "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    assert '"records": 200' in res.output.replace("200.0", "200")
    assert '"privacy_unit": "patient_id"' in res.output
    # the text says the counts are people (hostile round 4, A01: it printed "records: 200" for 600 rows)
    text = CliRunner().invoke(main, ["assess", "visits", "--quasi", "age,sex", "--privacy-unit", "patient_id",
                                     "--db", str(db)])
    assert text.exit_code == 0, text.output
    assert "counted in people (privacy_unit 'patient_id')" in text.output.splitlines()[0]
    assert "  people (patient_id): 200" in text.output and "  records:" not in text.output


def test_unit_name_with_quotes_and_non_ascii(con):
    """A unit column named with quotes and non-ASCII characters is quoted by sqlglot everywhere it goes."""
    visits(con)
    con.execute('ALTER TABLE visits RENAME COLUMN patient_id TO "pa\'t""ïd"')
    unit = 'pa\'t"ïd'
    policy = visits_policy(privacy_unit=unit)
    policy["attributes"] = {unit if k == "patient_id" else k: v for k, v in policy["attributes"].items()}
    rel = anon_sql.release(con, policy)
    assert rel.info["people"] == {"in": 200, "released": 199, "suppressed": 1}
    assert anon_sql.Policy.from_sql(rel.policy.to_sql()) == rel.policy


def two_tables(con) -> None:
    """Spec 08, two tables: units A, B, C; conditions A {x, y}, B {x}, C none."""
    con.execute("CREATE OR REPLACE TABLE patients AS SELECT * FROM (VALUES ('A', 90, 'F'), ('B', 30, 'M'), "
                "('C', 30, 'M')) t(Id, age, sex)")
    con.execute("CREATE OR REPLACE TABLE conditions AS SELECT * FROM (VALUES ('A', 'x'), ('A', 'y'), ('B', 'x')) "
                "t(PATIENT, DESCRIPTION)")


def two_tables_policy(**changes) -> dict:
    policy = {"name": "synth", "source": "patients", "privacy_unit": "Id",
              "attributes": {"Id": {"role": "identifier", "action": "pseudonymize"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
              "related": {"conditions": {"source": "conditions", "key": "PATIENT", "default_role": "insensitive"}},
              "privacy": {"k": 2, "max_suppression": 0.34}}
    policy.update(changes)
    return policy


def test_two_tables_golden(con):
    """Suppressing A removes A's row in the unit table and both of its condition rows; B's pseudonym is the same in
    both released tables; rows reconcile per table."""
    two_tables(con)
    rel = anon_sql.release(con, two_tables_policy())
    assert rel.info["people"] == {"in": 3, "released": 2, "suppressed": 1}
    assert rel.info["related"]["conditions"] == {"table": "synth_conditions", "rows_in": 3, "released": 1,
                                                 "suppressed": 2}
    units = con.execute("SELECT * FROM synth").df()
    conditions = con.execute("SELECT * FROM synth_conditions").df()
    assert list(conditions.columns) == ["PATIENT", "DESCRIPTION"] and conditions["DESCRIPTION"].tolist() == ["x"]
    assert set(conditions["PATIENT"]) <= set(units["Id"]) and len(units) == 2
    assert not {"A", "B", "C"} & (set(units["Id"]) | set(conditions["PATIENT"]))   # pseudonyms only
    assert "related 'conditions' → 'synth_conditions': 3 rows in, 1 released, 2 of suppressed people" in rel.summary()
    policy = anon_sql.Policy.from_dict(two_tables_policy())
    assert anon_sql.Policy.from_toml(policy.to_toml()) == policy and anon_sql.Policy.from_sql(policy.to_sql()) == policy


def test_two_tables_dropped_unit_drops_the_key_everywhere(con):
    two_tables(con)
    policy = two_tables_policy()
    policy["attributes"]["Id"] = {"role": "identifier"}
    anon_sql.release(con, policy)
    assert list(con.execute("SELECT * FROM synth_conditions").df().columns) == ["DESCRIPTION"]
    assert "Id" not in con.execute("SELECT * FROM synth").df().columns


@pytest.mark.parametrize("setup, change, error", [
    ("INSERT INTO conditions VALUES ('Z', 'x'), (NULL, 'y')", {}, r"'conditions' holds 2 rows whose key 'PATIENT'"),
    ("CREATE OR REPLACE TABLE conditions AS SELECT 1 AS PATIENT, 'x' AS DESCRIPTION", {},
     "key 'PATIENT' of 'conditions' is INTEGER, but privacy_unit 'Id'"),
    ("", {"related": {"conditions": {"source": "conditions", "key": "PATIENT"}}}, r"column\(s\) \['DESCRIPTION'\]"),
    ("", {"related": {"conditions": {"source": "conditions", "key": "nope", "default_role": "insensitive"}}},
     "key 'nope' is not a column"),
    ("", {"related": {"c": {"source": "conditions", "key": "PATIENT",
                            "attributes": {"DESCRIPTION": {"role": "quasi"}}}}}, "quasi-identifiers live in the unit"),
    ("", {"privacy_unit": None, "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "top"}},
                                                "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                                                "Id": {"role": "identifier", "rows_are_people": True}}},
     "needs privacy_unit"),
    ("CREATE TABLE synth_conditions AS SELECT 1 AS mine", {}, "'synth_conditions' already exists"),
])
def test_two_tables_refusals_leave_the_database_unchanged(con, setup, change, error):
    two_tables(con)
    if setup:
        con.execute(setup)
    before = tables(con)
    counts = {t: con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall() for s, t in before}
    with pytest.raises(anon_sql.AnonSQLError, match=error):
        anon_sql.release(con, {k: v for k, v in two_tables_policy(**change).items() if v is not None})
    assert tables(con) == before
    assert counts == {t: con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall() for s, t in before}


def test_related_source_that_is_a_release_is_refused(con):
    two_tables(con)
    anon_sql.release(con, two_tables_policy())
    policy = two_tables_policy(name="again")
    policy["related"] = {"c": {"source": "synth_conditions", "key": "PATIENT", "default_role": "insensitive"}}
    with pytest.raises(anon_sql.PolicyError, match="is a release's output"):
        anon_sql.release(con, policy)
