"""Findings of hostile round 4 (docs/hostile-round-4.md) that were fixed, each failing on the code before.

U15 (major): a related table that is the unit table itself, or any related table carrying a column named like a
unit-table quasi-identifier, released that column raw beside the person's pseudonym: a join undid the unit table's
generalization while `CHECK` passed. U07: two related names that differ only by case ended in DuckDB's
"Catalog Error". R02: a refresh after the user renamed the released table failed with DuckDB's "unfinished result".
"""
from __future__ import annotations

import duckdb
import pytest

import anon_sql
from units_fixtures import KEY, con, tables  # noqa: F401  (con is a fixture)

QIS = ("identifier(pid, action => 'pseudonymize'), quasi(age, taxonomy => {'kind': 'interval', "
       "'widths': [10, 100]}), quasi(sex, taxonomy => {'kind': 'top'})")


def people(con) -> None:
    con.execute("CREATE TABLE patients AS SELECT i AS pid, 20 + i % 50 AS age, "
                "CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(60) t(i)")
    con.execute("CREATE TABLE visits AS SELECT i % 60 AS pid, 20 + i % 50 AS age, 'x' || (i % 3) AS note "
                "FROM range(180) t(i)")


def create(related: str) -> str:
    return (f"CREATE ANONYMIZED VIEW syn WITH (method = 'optimal', k = 10, privacy_unit = 'pid', default_role = 'insensitive', "
            f"related = {{{related}}}) AS SELECT {QIS} FROM patients")


def raw_ages_beside_pseudonyms(con) -> int:
    """How many released people a join of the released tables gives their exact age (the oracle: the raw table)."""
    return con.execute("SELECT count(*) FROM syn s JOIN syn_me m USING (pid) WHERE m.age::VARCHAR <> s.age::VARCHAR"
                       ).fetchall()[0][0]


def test_the_unit_table_as_its_own_related_table_is_refused(con):
    people(con)
    before = tables(con)
    with pytest.raises(anon_sql.StatementError, match=r"\[related.me\] source 'patients' is the unit table itself"):
        anon_sql.execute(con, create("'me': {'source': 'patients', 'key': 'pid', 'default_role': 'insensitive'}"))
    assert tables(con) == before


@pytest.mark.parametrize("role", ["'default_role': 'insensitive'",
                                  "'default_role': 'insensitive', 'attributes': {'age': {'role': 'identifier', "
                                  "'action': 'pseudonymize'}}"])
def test_a_related_column_named_like_a_quasi_identifier_is_refused(con, role):
    people(con)
    con.execute("CREATE VIEW pv AS SELECT * FROM patients")    # the unit table again, under another name
    before = tables(con)
    with pytest.raises(anon_sql.StatementError, match=r"\[related.me\] would release column\(s\) \['age', 'sex'\]"):
        anon_sql.execute(con, create(f"'me': {{'source': 'pv', 'key': 'pid', {role}}}"))
    assert tables(con) == before


def test_a_related_quasi_identifier_column_that_is_dropped_is_released_without_it(con):
    people(con)
    anon_sql.execute(con, create("'me': {'source': 'visits', 'key': 'pid', 'default_role': 'insensitive', "
                                 "'attributes': {'age': {'role': 'identifier'}}}"))
    assert [r[0] for r in con.execute("DESCRIBE syn_me").fetchall()] == ["pid", "note"]
    released = con.execute("SELECT DISTINCT age FROM syn").fetchall()
    assert len(released) < con.execute("SELECT count(DISTINCT age) FROM patients").fetchall()[0][0]


def test_two_related_names_differing_by_case_are_refused_up_front(con):
    people(con)
    before = tables(con)
    spec = "{'source': 'visits', 'key': 'pid', 'default_role': 'insensitive', 'attributes': {'age': {'role': 'identifier'}}}"
    with pytest.raises(anon_sql.StatementError, match="would both be released as table 'syn_V'"):
        anon_sql.execute(con, create(f"'v': {spec}, 'V': {spec}"))
    assert tables(con) == before


def test_refresh_after_the_user_renamed_the_released_table(con):
    people(con)
    anon_sql.execute(con, f"CREATE ANONYMIZED VIEW syn WITH (method = 'optimal', k = 10, privacy_unit = 'pid', default_role = "
                          f"'insensitive') AS SELECT {QIS} FROM patients")
    kept = con.execute("SELECT * FROM syn ORDER BY ALL").fetchall()
    con.execute("ALTER TABLE syn RENAME TO mine")
    anon_sql.execute(con, "REFRESH ANONYMIZED VIEW syn KEEP PLAN")
    assert con.execute("SELECT * FROM mine ORDER BY ALL").fetchall() == kept      # the user's copy untouched
    assert con.execute("SELECT * FROM syn ORDER BY ALL").fetchall() == kept       # same data, same plan
    assert con.execute("SELECT max(version) FROM anon.release_versions WHERE release = 'syn'").fetchall() == [(2,)]


def test_a_join_of_the_released_tables_gives_no_raw_quasi_identifier(con):
    """The oracle of the major: with the fix no release leaves ``syn_me``; before it, every released person's exact
    age was one join away."""
    people(con)
    try:
        anon_sql.execute(con, create("'me': {'source': 'patients', 'key': 'pid', 'default_role': 'insensitive'}"))
    except anon_sql.StatementError:
        pass
    names = [t for _, t in tables(con)]
    assert "syn_me" not in names or raw_ages_beside_pseudonyms(con) == 0


def test_safepub_with_a_privacy_unit_is_refused(con):
    """V03 (major): SafePub sampled rows one by one under a privacy unit, releasing one or two of a person's three
    rows while recording epsilon as if per person; now refused before anything is created."""
    people(con)
    before = tables(con)
    with pytest.raises(anon_sql.StatementError, match="per row, not per person of privacy_unit 'pid'"):
        anon_sql.execute(con, "CREATE ANONYMIZED VIEW dp WITH (method = 'levels', method_params = {'levels': "
                              "{'age': 1}}, seed = 8812734512, privacy_unit = 'pid', default_role = 'insensitive', "
                              "k = 2, differential_privacy = {'epsilon': 1.0, 'delta': 1e-4}) AS SELECT "
                              "identifier(pid), quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 100]}), "
                              "insensitive(note) FROM visits")
    assert tables(con) == before


def test_analyze_of_an_unknown_table_lists_the_users_tables_only(con):
    """Z04: the list named the catalog's tables (releases, equivalence_classes, …) and the working views."""
    people(con)
    anon_sql.execute(con, f"CREATE ANONYMIZED VIEW syn WITH (method = 'optimal', k = 10, privacy_unit = 'pid', "
                          f"default_role = 'insensitive') AS SELECT {QIS} FROM patients")
    with pytest.raises(anon_sql.AnonSQLError) as err:
        anon_sql.leakage(con, "nosuch", ["age"])     # the lookup `analyze` (--leakage, --detect) goes through
    listed = str(err.value).split("in this database: ")[1]
    assert sorted(listed.split(", ")) == ["patients", "syn", "visits"]


def test_a_related_column_named_like_a_dropped_identifier_is_refused(con):
    """U17: the unit table drops ``name``; a related table's ``name`` column, insensitive by default_role, released
    every person's name beside their pseudonym."""
    people(con)
    con.execute("ALTER TABLE patients ADD COLUMN name VARCHAR DEFAULT 'someone'")
    con.execute("ALTER TABLE visits ADD COLUMN name VARCHAR DEFAULT 'someone'")
    before = tables(con)
    spec = "'source': 'visits', 'key': 'pid', 'default_role': 'insensitive', 'attributes': {'age': {'role': 'identifier'}}"
    policy = (f"CREATE ANONYMIZED VIEW syn WITH (method = 'optimal', k = 10, privacy_unit = 'pid', default_role = "
              f"'insensitive', related = {{'v': {{{spec}}}}}) AS SELECT {QIS}, identifier(name) FROM patients")
    with pytest.raises(anon_sql.StatementError, match=r"\[related.v\] would release column\(s\) \['name'\]"):
        anon_sql.execute(con, policy)
    assert tables(con) == before
    anon_sql.execute(con, policy.replace("{'age': {'role': 'identifier'}}",
                                         "{'age': {'role': 'identifier'}, 'name': {'role': 'identifier'}}"))
    assert [r[0] for r in con.execute("DESCRIBE syn_v").fetchall()] == ["pid", "note"]


def test_a_privacy_unit_spelled_in_another_case_is_refused_with_the_columns_name(con):
    """S01: `privacy_unit = 'PID'` for column `pid` is refused (names are case-sensitive) and the message now says
    which column was meant; nothing is created."""
    people(con)
    before = tables(con)
    with pytest.raises(anon_sql.AnonSQLError, match=r"did you mean 'PID' → 'pid'\?") as info:
        anon_sql.execute(con, create("").replace("privacy_unit = 'pid'", "privacy_unit = 'PID'")
                         .replace(", related = {}", ""))
    assert info.value.exit_code == 2
    assert tables(con) == before
