"""Hostile round 9's M9 (docs/hostile-round-9.md): `check` never looked at what a released quasi-identifier holds,
so raw values put back where every record of a class had one raw value kept k and the class count, passed, and
`export` wrote them (C33, C34, C35). The release now records a digest of each QI's values with their rows (and of
their combinations); `check` recomputes it. Each test below fails on the code before the fix.
"""
from __future__ import annotations

import hashlib
import json

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from sqlglot import exp

import anon_sql
from anon_sql.cli.main import main
from anon_sql.runner.digests import released_values_digest

# every age of 20-29 is 20 (the class [20-29] has one raw value), as in round 9's `patients`
PATIENTS = """CREATE TABLE patients AS SELECT i AS pid, CASE WHEN i % 5 = 0 THEN 20 ELSE 30 + (i % 50) END AS age,
  CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 'd' || (i % 4) AS diag FROM range(200) t(i)"""
LV = """CREATE ANONYMIZED VIEW lv WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0}})
  AS SELECT identifier(pid), quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 100]}),
  quasi(sex, taxonomy => {'kind': 'top'}), sensitive(diag) FROM patients"""


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "w.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        c.execute(PATIENTS)
        anon_sql.execute(c, LV)
    return path


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def failing(path, name="lv") -> set[str]:
    with duckdb.connect(str(path), read_only=True) as c:
        frame = anon_sql.check(c, name)
    return set(frame.loc[~frame["passed"], "check"])


def put_back_raw_age(c) -> int:
    """C35's edit: the column retyped to text and the class's one raw age put back in all its rows."""
    c.execute("ALTER TABLE lv ALTER age TYPE VARCHAR")
    return c.execute("UPDATE lv SET age = '20' WHERE age = '[20-29]'").fetchall()[0][0]


def test_a_genuine_release_passes_and_its_digest_is_the_values_with_their_rows(db):
    """The recorded digest is recomputed independently (pandas counts + hashlib) from the released table."""
    assert cli("check", "lv", "--db", db).exit_code == 0
    with duckdb.connect(db, read_only=True) as c:
        recorded = json.loads(c.execute("SELECT released_values FROM anon.releases WHERE release = 'lv'")
                              .fetchall()[0][0])
        frame = c.execute("SELECT age::VARCHAR AS age, ec_id::VARCHAR AS ec_id, sex::VARCHAR AS sex FROM lv").df()
    assert set(recorded["columns"]) == {"age", "ec_id", "sex"}

    def text(v) -> str:
        return "NULL" if pd.isna(v) else f"{len(v)}:{v}"

    def digest(counts: pd.Series) -> str:
        items = sorted(f"{''.join(map(text, k if isinstance(k, tuple) else (k,)))}\x1f{n}" for k, n in counts.items())
        return hashlib.sha256("\x1e".join(items).encode()).hexdigest()

    assert recorded["columns"]["age"] == digest(frame.groupby("age", dropna=False).size())
    assert recorded["columns"]["sex"] == digest(frame.groupby("sex", dropna=False).size())
    assert recorded["together"] == digest(frame.groupby(["age", "ec_id", "sex"], dropna=False).size())
    assert {"values age", "values sex", "values ec_id", "values (age, ec_id, sex)", "types"} <= set(
        anon_sql.check(duckdb.connect(db), "lv")["check"])


def test_c35_raw_ages_put_back_fail_check_and_export_writes_nothing(db, tmp_path):
    with duckdb.connect(db) as c:
        assert put_back_raw_age(c) == 40
    result = cli("check", "lv", "--db", db)
    assert result.exit_code == 3 and "values age" in result.output
    assert failing(db) == {"values age", "values (age, ec_id, sex)", "types", "contents"}
    out = tmp_path / "c35.duckdb"
    assert cli("export", "lv", "--db", db, "--to", out).exit_code == 3
    assert not out.exists()


def test_c33_the_same_edit_in_a_shared_file_fails_its_check(db, tmp_path):
    out = tmp_path / "lv.duckdb"
    assert cli("export", "lv", "--db", db, "--to", out).exit_code == 0
    assert failing(out) == set()
    with duckdb.connect(str(out)) as c:
        put_back_raw_age(c)
    result = cli("check", "lv", "--db", out)
    assert result.exit_code == 3 and "values age" in result.output


def test_c34_an_enum_holding_the_raw_value_and_the_classes_table_edited_to_match(db, tmp_path):
    out = tmp_path / "lv.duckdb"
    assert cli("export", "lv", "--db", db, "--to", out).exit_code == 0
    with duckdb.connect(str(out)) as c:
        c.execute("CREATE TYPE ages AS ENUM ('20', '[30-39]', '[40-49]', '[50-59]', '[60-69]', '[70-79]')")
        c.execute("ALTER TABLE lv ALTER age TYPE VARCHAR")
        c.execute("UPDATE lv SET age = '20' WHERE age = '[20-29]'")
        c.execute("ALTER TABLE lv ALTER age TYPE ages")
        c.execute("UPDATE lv__classes SET qi_values = replace(qi_values::VARCHAR, '[20-29]', '20')")
    assert "values age" in failing(out)


def test_values_changed_in_some_rows_or_swapped_between_classes_fail(db):
    """Two edits that keep some counts: one record of a class moved to another class's age (its class shrinks, the
    other grows), and the sex of two classes of equal size swapped (every column keeps its values and rows; their
    combinations do not)."""
    with duckdb.connect(db) as c:
        c.execute("CREATE TABLE keep AS SELECT * FROM lv")
        c.execute("UPDATE lv SET age = '[30-39]' WHERE rowid = (SELECT min(rowid) FROM lv WHERE age = '[20-29]')")
    assert "values age" in failing(db)
    with duckdb.connect(db) as c:
        c.execute("DELETE FROM lv")
        c.execute("INSERT INTO lv SELECT * FROM keep")
        c.execute("DROP TABLE keep")
        sizes = c.execute("SELECT age, sex, count(*) FROM lv GROUP BY ALL ORDER BY ALL").fetchall()
    assert failing(db) == set()
    by_size: dict = {}
    for age, sex, n in sizes:
        by_size.setdefault(n, []).append((age, sex))
    (a_age, a_sex), (b_age, b_sex) = next(
        (x, y) for group in by_size.values() for x in group for y in group if x[0] != y[0] and x[1] != y[1])
    with duckdb.connect(db) as c:
        c.execute("UPDATE lv SET sex = CASE WHEN age = ? THEN ? ELSE ? END WHERE (age = ? AND sex = ?) OR "
                  "(age = ? AND sex = ?)", [a_age, b_sex, a_sex, a_age, a_sex, b_age, b_sex])
    assert failing(db) == {"values (age, ec_id, sex)", "contents"}


def test_a_missing_or_forged_digest_fails(db):
    """A digest the catalog does not hold (removed, or a release made before it was recorded) fails: release again."""
    with duckdb.connect(db) as c:
        c.execute("UPDATE anon.releases SET released_values = NULL WHERE release = 'lv'")
    assert failing(db) == {"values age", "values sex", "values ec_id", "values (age, ec_id, sex)", "types", "contents"}
    with duckdb.connect(db) as c:
        c.execute("UPDATE anon.releases SET released_values = '[1, 2]' WHERE release = 'lv'")
    result = cli("check", "lv", "--db", db)
    assert result.exit_code == 3 and "release it again" in result.output


def test_null_is_its_own_value_and_no_value_spells_the_separators():
    """NULL differs from the text 'NULL'; a value holding the separators does not spell two values."""
    c = duckdb.connect()
    table = exp.Table(this=exp.to_identifier("t"))
    c.execute("CREATE TABLE t (q VARCHAR)")
    c.execute("INSERT INTO t VALUES (NULL)")
    as_null = released_values_digest(c, table, ["q"])
    c.execute("UPDATE t SET q = 'NULL'")
    assert released_values_digest(c, table, ["q"]) != as_null
    c.execute("DELETE FROM t")
    c.execute("INSERT INTO t VALUES ('a'), ('b')")
    two = released_values_digest(c, table, ["q"])
    c.execute("DELETE FROM t")
    c.execute("INSERT INTO t VALUES ('a' || chr(31) || '1' || chr(30) || '1:b')")
    assert released_values_digest(c, table, ["q"]) != two
    assert released_values_digest(c, table, ["absent"]) is None


def test_columns_named_like_the_digests_own_names_and_any_policy_order():
    """A table whose QIs are named q0, q1 and n (the digest query's own aliases), digested in either order: the same
    digests (a shared file's policy lists its attributes sorted; the working catalog in the declared order)."""
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT (i % 3)::VARCHAR AS q1, (i % 2) AS q0, (i % 5) AS n FROM range(30) r(i)")
    table = exp.Table(this=exp.to_identifier("t"))
    forward = released_values_digest(c, table, ["q1", "q0", "n"])
    assert forward == released_values_digest(c, table, ["n", "q0", "q1"])
    frame = c.execute("SELECT q1, q0::VARCHAR AS q0, n::VARCHAR AS n FROM t").df()
    counts = frame.groupby(["n", "q0", "q1"]).size()
    items = sorted("".join(f"{len(v)}:{v}" for v in key) + f"\x1f{k}" for key, k in counts.items())
    assert forward["together"] == hashlib.sha256("\x1e".join(items).encode()).hexdigest()
