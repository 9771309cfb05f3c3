"""Related tables with sensitive values (docs/units.md, spec/08-privacy-units.md): a person holds the values of
their rows in the related table, the sensitive-attribute models count the people holding each value, and CHECK,
REFRESH, DROP and EXPORT act on the whole set of released tables.

The oracle is pandas over the raw tables: it groups people by their QI tuple, counts per class the people holding
each value (a person without related rows holding NULL) and decides which classes pass; the release must keep
exactly those people, with their related rows under one pseudonym.
"""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anon_sql
from units_fixtures import KEY, con, tables  # noqa: F401 (con: a fixture)




def flu(con) -> None:
    """Spec 08's flu case split in two tables: people 0–9 (30, M), 100–109 (40, F); their diagnoses in
    ``conditions``: 0–8 flu, 9 flu and a–d, 100–109 one value each. ``tag`` copies the id (insensitive) so a test
    can see who was released."""
    con.execute("""CREATE OR REPLACE TABLE patients AS
        SELECT i AS Id, i AS tag, CASE WHEN i < 100 THEN 30 ELSE 40 END AS age,
               CASE WHEN i < 100 THEN 'M' ELSE 'F' END AS sex
        FROM (SELECT range AS i FROM range(10) UNION ALL SELECT 100 + range FROM range(10))""")
    con.execute("""CREATE OR REPLACE TABLE conditions AS
        SELECT range AS PATIENT, 'flu' AS DESCRIPTION, range AS visit FROM range(10)
        UNION ALL SELECT 9, unnest(['a', 'b', 'c', 'd']), 9
        UNION ALL SELECT 100 + range, 'v' || range, range FROM range(10)""")


def policy(**privacy) -> dict:
    return {"name": "synth", "source": "patients", "privacy_unit": "Id",
            "attributes": {"Id": {"role": "identifier", "action": "pseudonymize"},
                           "tag": {"role": "insensitive"},
                           "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [100]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
            "related": {"conditions": {"source": "conditions", "key": "PATIENT", "default_role": "insensitive",
                                       "attributes": {"DESCRIPTION": {"role": "sensitive"}}}},
            "method": "levels", "method_params": {"levels": {"age": 0, "sex": 0}},
            "privacy": {"k": 2, "l_diversity": {"kind": "distinct", "l": 2}, **privacy}}


def plain_policy(**privacy) -> dict:
    """The same two tables with the diagnoses insensitive (k only): DROP, REFRESH and EXPORT of the set must not
    depend on the related values being sensitive."""
    p = policy(**privacy)
    p["related"]["conditions"]["attributes"] = {}
    p["privacy"].pop("l_diversity")
    p["privacy"]["k"] = 10
    return p


BOTH = pytest.mark.parametrize("make", [policy, plain_policy], ids=["sensitive", "insensitive"])


def test_flu_in_a_related_table_counts_people(con):
    """Class (30, M): every person holds flu, so it fails l = 2 although it shows five distinct values; class
    (40, F) passes. The unit table keeps one row per person, the related table the released people's rows."""
    flu(con)
    rel = anon_sql.release(con, policy(max_suppression=0.5))
    assert rel.info["people"] == {"in": 20, "released": 10, "suppressed": 10}
    assert (rel.records_in, rel.records_out, rel.suppressed) == (20, 10, 10)
    assert rel.info["related"]["conditions"] == {"table": "synth_conditions", "rows_in": 24, "released": 10,
                                                 "suppressed": 14}
    units = con.execute("SELECT * FROM synth").df()
    assert sorted(units["tag"]) == list(range(100, 110)) and "DESCRIPTION" not in units.columns
    related = con.execute("SELECT * FROM synth_conditions").df()
    joined = related.merge(units, left_on="PATIENT", right_on="Id")
    assert len(joined) == 10 and (joined["DESCRIPTION"] == "v" + (joined["tag"] - 100).astype(str)).all()
    assert anon_sql.check(con, "synth")["passed"].all()


def test_flu_in_a_related_table_is_refused_without_suppression(con):
    flu(con)
    before = tables(con)
    with pytest.raises(anon_sql.PrivacyRequirementError):
        anon_sql.release(con, policy())
    assert tables(con) == before


def test_a_search_generalizes_instead(con):
    flu(con)
    p = policy()
    p["method"], p["method_params"] = "exhaustive", {}
    rel = anon_sql.release(con, p)
    assert rel.info["people"]["released"] == 20 and len(rel.classes) == 1
    assert con.execute("SELECT count(*) FROM synth_conditions").fetchall() == [(24,)]


def oracle(people: pd.DataFrame, conditions: pd.DataFrame, k: int, l: int) -> set[int]:
    """The people a level-0 release with k and distinct l-diversity over people keeps (suppression allowed)."""
    held = people[["Id", "age", "sex"]].merge(conditions, left_on="Id", right_on="PATIENT", how="left")
    held["DESCRIPTION"] = held["DESCRIPTION"].fillna("<none>")   # a person without rows holds NULL
    kept = set()
    for _, cls in held.groupby(["age", "sex"]):
        size = cls["Id"].nunique()
        holders = cls.drop_duplicates(["Id", "DESCRIPTION"]).groupby("DESCRIPTION")["Id"].nunique()
        if size >= k and len(holders) >= l and (l < 2 or holders.max() < size):
            kept |= set(cls["Id"])
    return kept


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(people=st.lists(st.tuples(st.integers(30, 31), st.sampled_from("MF"),
                                 st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)),
                       min_size=4, max_size=16),
       l=st.integers(1, 2))
def test_random_related_values_against_a_pandas_oracle(con, people, l):
    frame = pd.DataFrame([(i, i, age, sex) for i, (age, sex, _) in enumerate(people)],
                         columns=["Id", "tag", "age", "sex"])
    conditions = pd.DataFrame([(i, d) for i, (_, _, ds) in enumerate(people) for d in ds],
                              columns=["PATIENT", "DESCRIPTION"]).astype({"PATIENT": "int64", "DESCRIPTION": object})
    con.register("people_frame", frame)     # (a Python name is shadowed by a table of the same name)
    con.register("conditions_frame", conditions)
    con.execute("CREATE OR REPLACE TABLE patients AS SELECT * FROM people_frame")
    con.execute("CREATE OR REPLACE TABLE conditions AS SELECT PATIENT, DESCRIPTION::VARCHAR AS DESCRIPTION "
                "FROM conditions_frame")
    con.execute("DROP TABLE IF EXISTS synth")
    con.execute("DROP TABLE IF EXISTS synth_conditions")
    con.execute("DELETE FROM anon.releases")
    p = policy(max_suppression=1.0)
    p["privacy"]["l_diversity"]["l"] = l
    expected = oracle(frame, conditions, 2, l)
    try:
        anon_sql.release(con, p, replace=True)
    except anon_sql.PrivacyRequirementError:
        assert not expected   # nothing can be kept: refused
        return
    units = con.execute("SELECT Id, tag FROM synth").df()
    assert set(units["tag"]) == expected and len(units) == len(expected)
    released = con.execute("SELECT PATIENT, DESCRIPTION FROM synth_conditions").df().merge(
        units, left_on="PATIENT", right_on="Id", how="left")
    assert released["tag"].notna().all()   # every related row belongs to a released person, by the same pseudonym
    got = sorted(zip(released["tag"], released["DESCRIPTION"]))
    want = sorted((int(i), d) for i, d in zip(conditions["PATIENT"], conditions["DESCRIPTION"]) if i in expected)
    assert got == want
    assert anon_sql.check(con, "synth")["passed"].all()


@BOTH
def test_check_finds_a_related_row_of_no_released_person(con, make):
    flu(con)
    anon_sql.release(con, make(max_suppression=0.5))
    con.execute("INSERT INTO synth_conditions VALUES ('not-a-pseudonym', 'flu', 1)")
    checks = anon_sql.check(con, "synth").set_index("check")
    assert not checks.loc["related conditions", "passed"]
    assert checks.loc["related conditions", "failing_records"] == 1


def test_check_reads_the_values_through_the_pseudonym(con):
    """Editing the released related table so that every person of the class holds 'v0' fails l-diversity in
    ``check``: the model reads the related rows, not the values recorded at release time."""
    flu(con)
    anon_sql.release(con, policy(max_suppression=0.5))
    assert anon_sql.check(con, "synth")["passed"].all()
    con.execute("UPDATE synth_conditions SET DESCRIPTION = 'v0'")
    checks = anon_sql.check(con, "synth").set_index("check")
    assert not checks.loc["l_distinct__DESCRIPTION", "passed"]


@BOTH
def test_drop_removes_the_related_tables(con, make):
    flu(con)
    anon_sql.release(con, make(max_suppression=0.5))
    anon_sql.execute(con, "DROP ANONYMIZED VIEW synth")
    names = {t for _, t in tables(con)}
    assert not {"synth", "synth_conditions"} & names and {"patients", "conditions"} <= names


@BOTH
def test_drop_and_refresh_never_touch_a_users_table_of_that_name(con, make):
    flu(con)
    anon_sql.release(con, make(max_suppression=0.5))
    released = con.execute("SELECT * FROM synth ORDER BY ALL").fetchall()
    con.execute("DROP TABLE synth_conditions")
    con.execute("CREATE TABLE synth_conditions AS SELECT 'mine' AS note")
    for statement in ("DROP ANONYMIZED VIEW synth", "REFRESH ANONYMIZED VIEW synth"):
        with pytest.raises(anon_sql.AnonSQLError, match="synth_conditions"):
            anon_sql.execute(con, statement)
        assert con.execute("SELECT * FROM synth_conditions").fetchall() == [("mine",)]
    assert con.execute("SELECT * FROM synth ORDER BY ALL").fetchall() == released


def test_refresh_rederives_the_related_tables(con):
    flu(con)
    statement = anon_sql.Policy.from_dict(policy(max_suppression=0.5)).to_sql()
    assert "related" in statement
    anon_sql.execute(con, statement)
    assert con.execute("SELECT count(*) FROM synth_conditions").fetchall() == [(10,)]
    con.execute("INSERT INTO conditions VALUES (100, 'late', 100)")
    anon_sql.execute(con, "REFRESH ANONYMIZED VIEW synth")
    assert con.execute("SELECT count(*) FROM synth_conditions WHERE DESCRIPTION = 'late'").fetchall() == [(1,)]
    assert anon_sql.check(con, "synth")["passed"].all()


@pytest.mark.parametrize("suffix", [".duckdb", ".parquet"])
@BOTH
def test_export_writes_the_related_tables(con, tmp_path, suffix, make):
    flu(con)
    anon_sql.release(con, make(max_suppression=0.5))
    files = anon_sql.export(con, "synth", tmp_path / f"out{suffix}")
    released = con.execute("SELECT * FROM synth_conditions ORDER BY ALL").df()
    if suffix == ".parquet":
        assert str(tmp_path / "out.conditions.parquet") in files
        got = duckdb.sql(f"SELECT * FROM '{tmp_path / 'out.conditions.parquet'}' ORDER BY ALL").df()
    else:
        shared = duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True)
        got = shared.execute("SELECT * FROM synth_conditions ORDER BY ALL").df()
        assert {r[0] for r in shared.execute("SHOW TABLES").fetchall()} == {
            "synth", "synth__classes", "synth__metadata", "synth_conditions"}
        assert anon_sql.check(shared, "synth")["passed"].all()   # the shared file is checked with its related table
        shared.close()
    pd.testing.assert_frame_equal(got, released)


@pytest.mark.parametrize("change, error", [
    (lambda p: p["attributes"].update(Id={"role": "identifier"}), "privacy_unit 'Id' is dropped"),
    (lambda p: p["attributes"].update(DESCRIPTION={"role": "insensitive"}), "also columns of 'patients'"),
    (lambda p: p["related"]["conditions"]["attributes"].update(visit={"role": "quasi"}), "quasi-identifiers live"),
])
def test_refusals_leave_the_database_unchanged(con, change, error):
    flu(con)
    if "also columns" in error:
        con.execute("ALTER TABLE patients ADD COLUMN DESCRIPTION VARCHAR")
    p = policy(max_suppression=0.5)
    change(p)
    before = tables(con)
    with pytest.raises(anon_sql.AnonSQLError, match=error):
        anon_sql.release(con, p)
    assert tables(con) == before


def test_report_reads_the_set(con):
    """The report of a stored release re-runs the checks over the set (the related values through the pseudonym)
    and lists the related tables; its metrics read the unit table."""
    from anon_sql.publish.report import build_report as build

    flu(con)
    anon_sql.release(con, policy(max_suppression=0.5))
    report = build(con, "synth")
    assert report["verdict"]["status"] == "pass"
    assert {"l_distinct__DESCRIPTION", "related conditions"} <= {c["check"] for c in report["checks"]}
    assert report["related"] == [{"name": "conditions", "table": "synth_conditions", "rows": 10}]
    assert (report["records_in"], report["records_out"], report["suppressed"]) == (20, 10, 10)


def test_cli_check_runs_the_related_checks(tmp_path, monkeypatch):
    """`anon-sql check` (whose cached program skips recompiling) still verifies the related tables: a row of no
    released person fails it with exit 3."""
    from click.testing import CliRunner

    from anon_sql.cli.main import main

    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    db = str(tmp_path / "u.duckdb")
    c = duckdb.connect(db)
    anon_sql.install(c)
    flu(c)
    anon_sql.release(c, policy(max_suppression=0.5))
    c.close()
    assert CliRunner().invoke(main, ["check", "synth", "--db", db]).exit_code == 0
    c = duckdb.connect(db)
    c.execute("INSERT INTO synth_conditions VALUES ('not-a-pseudonym', 'flu', 1)")
    c.close()
    result = CliRunner().invoke(main, ["check", "synth", "--db", db])
    assert result.exit_code == 3 and "related conditions" in result.output
