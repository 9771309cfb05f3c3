"""Hostile round 10's M15 inputs that the released-values record now catches (docs/hostile-round-10.md), each
passing `check` and exported on the code before: raw values put into a column's ENUM dictionary (C09), a column
retyped to hold text (C10), the exact age written into `ec_id` (B18, around round 9's M9 fix), and raw values in an
insensitive column (C11) or a microaggregated one set back (C14): the `contents` row (the rows' hash sum).
"""
from __future__ import annotations

import duckdb
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from test_hostile_round9_values import db, failing  # noqa: F401  (round 9's `lv` over `patients`)


def refused(db: str, tmp_path) -> bool:
    """check exits 3 and export writes nothing."""
    out = tmp_path / "out.duckdb"
    return (CliRunner().invoke(main, ["check", "lv", "--db", db]).exit_code == 3
            and CliRunner().invoke(main, ["export", "lv", "--db", db, "--to", str(out)]).exit_code == 3
            and not out.exists())


def test_c09_raw_values_in_the_enum_dictionary_fail_types(db, tmp_path):
    with duckdb.connect(db) as c:
        labels = [r[0] for r in c.execute("SELECT DISTINCT age::VARCHAR FROM lv ORDER BY 1").fetchall()]
        ssns = [f"{100 + i}-{10 + i}-{1000 + i}" for i in range(20)]
        enum = "ENUM(" + ", ".join("'" + v + "'" for v in [*labels, *ssns]) + ")"
        c.execute(f"ALTER TABLE lv ALTER age TYPE {enum}")   # test-only DDL: the attack itself
        assert c.execute("SELECT count(*) FROM lv").fetchall() == [(200,)]
    assert failing(db) == {"types"}
    assert refused(db, tmp_path)


def test_c10_a_column_retyped_to_text_fails_types(db, tmp_path):
    with duckdb.connect(db) as c:
        c.execute("ALTER TABLE lv ALTER ec_id TYPE VARCHAR")
        c.execute("UPDATE lv SET ec_id = ec_id || ' (Jane Doe, 12 Elm St)' WHERE false")   # room for text now
    # the contents digest reads each row as JSON, where the text "3" is not the number 3: it fails beside types
    assert failing(db) == {"types", "contents"}
    assert refused(db, tmp_path)


def test_b18_the_exact_age_written_into_ec_id_fails(db, tmp_path):
    with duckdb.connect(db) as c:
        # every record of [20-29] is 20 (round 9's C35 case): its class's ec_id now says so
        c.execute("UPDATE lv SET ec_id = 20000 + (sex = 'M')::INT WHERE age = '[20-29]'")
    assert {"values ec_id", "values (age, ec_id, sex)"} <= failing(db)
    assert refused(db, tmp_path)


def test_a_genuine_export_passes_types_and_every_values_row(db, tmp_path):
    out = tmp_path / "lv.duckdb"
    assert CliRunner().invoke(main, ["export", "lv", "--db", db, "--to", str(out)]).exit_code == 0
    with duckdb.connect(str(out), read_only=True) as c:
        frame = anon_sql.check(c, "lv").set_index("check")
    assert frame["passed"].all() and frame.loc["types", "passed"]


def test_c11_c14_raw_values_in_an_insensitive_or_perturbed_column_fail_contents(tmp_path):
    """An insensitive column set to the digits of the raw SSN (C11) and a microaggregated column set back to the raw
    values (C14): neither a QI nor a mask, so only the rows' hash tells."""
    path = str(tmp_path / "c.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        c.execute("CREATE TABLE people AS SELECT i AS pid, 20 + (i % 4) * 10 AS age, (i * 37) % 5000 AS income, "
                  "(i * 7919) % 100000 AS ssn FROM range(300) t(i)")
        anon_sql.execute(c, "CREATE ANONYMIZED VIEW pc WITH (k = 5, seed = 987654321, method = 'levels', "
                         "method_params = {'levels': {'age': 0}}) AS SELECT identifier(pid), identifier(ssn), "
                         "quasi(age, taxonomy => {'kind': 'top'}), insensitive(income, perturb => "
                         "{'kind': 'microaggregation', 'k': 3}) FROM people")
    assert failing(path, "pc") == set()
    with duckdb.connect(path) as c:
        c.execute("UPDATE pc SET income = p.income FROM (SELECT row_number() OVER () AS r, income FROM people) p "
                  "WHERE p.r = pc.rowid + 1")
    assert failing(path, "pc") == {"contents"}
    with duckdb.connect(path) as c:
        c.execute("UPDATE pc SET income = p.ssn FROM (SELECT row_number() OVER () AS r, ssn FROM people) p "
                  "WHERE p.r = pc.rowid + 1")
    assert failing(path, "pc") == {"contents"}


def test_a_record_of_another_duckdb_version_is_not_compared(db):
    import json

    with duckdb.connect(db) as c:
        record = json.loads(c.execute("SELECT released_values FROM anon.releases WHERE release = 'lv'").fetchall()[0][0])
        record["content"]["duckdb"] = "0.0.1"
        c.execute("UPDATE anon.releases SET released_values = ? WHERE release = 'lv'", [json.dumps(record)])
        c.execute("UPDATE lv SET diag = 'x' WHERE rowid = 0")
    with duckdb.connect(db, read_only=True) as c:
        frame = anon_sql.check(c, "lv").set_index("check")
    assert frame.loc["contents", "passed"] and "0.0.1" in frame.loc["contents", "basis"]
