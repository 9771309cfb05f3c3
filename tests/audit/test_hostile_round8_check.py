"""Hostile round 8's findings about `check` and the shared file of a single table (docs/hostile-round-8.md), each
reproduced from the round's script and failing on the code before its fix:

* M2 (P07): the shared policy kept the seed, so anyone inverted the seeded `noise` mask (200 of 200 incomes);
* E10b / P06b: the shared policy lost masks on identifiers and a hash mask's salt, and a genuine file failed `check`;
* M1 (C10): pseudonymized and masked columns set back to the raw values passed `check`, and `export` wrote them;
* N09 / N09b / N18 / N19: a macro, a table macro, an ENUM type or a comment added to a shared file passed.
"""
from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

import anon_sql
from anon_sql.audit.values import value_checks, value_query
from anon_sql.cli.main import main
from sqlglot import exp

KEY = "round-8-key-0123456789abcdef"
CUSTS = """CREATE TABLE custs AS SELECT i::BIGINT AS cid, 20 + 10*(i % 5) AS age,
  CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, printf('%03d-%02d-%04d', 100 + i, i % 90 + 10, 1000 + i) AS ssn,
  'user' || i || '@mail' || (i % 4) || '.com' AS email, '4111' || lpad(i::VARCHAR, 12, '0') AS card,
  (i * 37) % 5000 AS income FROM range(200) t(i)"""
C10 = """CREATE ANONYMIZED VIEW cm WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0, 'sex': 0}}) AS
  SELECT identifier(cid, action => 'pseudonymize'), quasi(age, taxonomy => {'kind': 'top'}),
         quasi(sex, taxonomy => {'kind': 'top'}), identifier(email, mask => {'function': 'partial_email'}),
         insensitive(card, mask => {'function': 'partial', 'keep_start': 2, 'pad': 'XXXX', 'keep_end': 2}),
         insensitive(income) FROM custs10"""
P07 = """CREATE ANONYMIZED VIEW nm WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0, 'sex': 0}},
  seed = 424242) AS SELECT identifier(cid), quasi(age, taxonomy => {'kind': 'top'}), quasi(sex, taxonomy =>
  {'kind': 'top'}), identifier(ssn), identifier(email), identifier(card),
  insensitive(income, mask => {'function': 'noise', 'ratio': 0.5}) FROM custs"""
E10 = """CREATE ANONYMIZED VIEW hm WITH (k = 5, method = 'levels', method_params = {'levels': {'age': 0, 'sex': 0}})
  AS SELECT identifier(cid), quasi(age, taxonomy => {'kind': 'top'}), quasi(sex, taxonomy => {'kind': 'top'}),
  identifier(ssn, mask => {'function': 'hash', 'salt': 'pepper-of-the-owner'}), identifier(email), identifier(card),
  insensitive(income, mask => {'function': 'hash', 'salt': 'pepper-of-the-owner'}) FROM custs"""


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", KEY)
    path = str(tmp_path / "b.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        c.execute(CUSTS)
        c.execute("CREATE VIEW custs10 AS SELECT * EXCLUDE (ssn) FROM custs")   # C10's table had no ssn
        for statement in (C10, P07, E10):
            anon_sql.execute(c, statement)
    return path


def export(db: str, name: str, to) -> CliRunner:
    return CliRunner().invoke(main, ["export", name, "--db", db, "--to", str(to)])


def check(path, name: str):
    return CliRunner().invoke(main, ["check", name, "--db", str(path)])


def test_m2_p07_the_shared_file_holds_no_seed_and_the_inversion_recovers_nothing(db, tmp_path):
    out = tmp_path / "nm.duckdb"
    assert export(db, "nm", out).exit_code == 0
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute(f"ATTACH '{out}' AS s (READ_ONLY)")
    policy, declared = c.execute("SELECT policy, declared_policy FROM s.nm__metadata").fetchall()[0]
    assert "seed" not in json.loads(policy) and "seed" not in json.loads(declared)
    # the round's attack with the seed the file gives (the package's default, 0, when it gives none): a chance
    # collision of the 200 x 5,001 doubles at most, never the released rows
    seed = json.loads(policy).get("seed", 0)
    inverted = ("SELECT count(*) FROM s.nm JOIN (SELECT x AS raw, anon.noise(x, 0.5, {seed}, x) AS masked "
                "FROM range(0, 5001) t(x)) cand ON s.nm.income = cand.masked")
    assert c.execute(inverted.format(seed=seed)).fetchall()[0][0] < 5
    # the oracle: the owner's seed inverts all 200 (what the file used to give away)
    assert c.execute(inverted.format(seed=424242)).fetchall()[0][0] == 200
    res = check(out, "nm")
    assert res.exit_code == 0, res.output


def test_e10b_p06b_genuine_files_with_hash_and_identifier_masks_pass_their_check(db, tmp_path):
    for name in ("hm", "cm"):
        out = tmp_path / f"{name}.duckdb"
        assert export(db, name, out).exit_code == 0
        res = check(out, name)
        assert res.exit_code == 0, res.output
        with duckdb.connect(str(out), read_only=True) as c:
            text = c.execute(f"SELECT policy || declared_policy FROM {name}__metadata").fetchall()[0][0]
        assert "pepper-of-the-owner" not in text and KEY not in text
    assert "values email" in res.output and "values card" in res.output


def test_m1_c10_raw_values_put_back_fail_check_and_export_writes_nothing(db, tmp_path):
    with duckdb.connect(db) as c:
        c.execute("""UPDATE cm SET card = c.card, email = c.email, cid = c.cid::VARCHAR FROM custs c
                     WHERE cm.income = c.income AND cm.age = c.age AND cm.sex = c.sex""")
    res = check(db, "cm")
    assert res.exit_code == 3, res.output
    # since round 10's M15 the rows' hash (`contents`) fails on any edit too
    assert "FAILED: ['values cid', 'values email', 'values card', 'contents', 'pseudonyms cid']" in res.output
    out = tmp_path / "cm.duckdb"
    res = export(db, "cm", out)
    assert res.exit_code == 3 and not out.exists(), res.output
    assert list(tmp_path.glob("cm.duckdb*")) == []


@pytest.mark.parametrize("edit, failing", [
    ("UPDATE cm SET cid = upper(cid) WHERE age = 20", ["pseudonyms cid", "values cid"]),   # not lowercase hex
    ("UPDATE cm SET card = '41XXXX1' WHERE age = 30", ["values card"]),                    # one character short
    # still the form, which `values` passes; since round 9's M8 the `masks` row re-derives it from the source
    ("UPDATE cm SET email = 'u******@******.com' || 'x' WHERE age = 40 AND sex = 'F'", ["masks email"]),
])
def test_m1_form_of_each_column(db, edit, failing):
    with duckdb.connect(db) as c:
        c.execute(edit)
        rows = anon_sql.check(c, "cm").set_index("check")
    failed = sorted(rows.index[~rows["passed"]])
    assert failed == sorted([*failing, "contents"])      # the rows' hash fails on any edit (round 10, M15)


def test_m1_the_values_check_runs_from_the_cached_program_too(db):
    with duckdb.connect(db) as c:
        c.execute("UPDATE cm SET cid = 'x' WHERE age = 20")
    for _ in range(2):        # the first check compiles and caches the program, the second runs it
        res = check(db, "cm")
        assert res.exit_code == 3 and "values cid" in res.output, res.output


def test_m1_pseudonyms_of_the_right_form_but_unkeyed_fail_where_the_key_and_source_are(db, tmp_path, monkeypatch):
    """sha256 of the raw Id has a pseudonym's form; with the key and the source at hand, check re-derives the
    pseudonyms (an independent recomputation: HMAC-SHA256 in Python below) and fails it."""
    import hashlib
    import hmac

    with duckdb.connect(db) as c:
        released = {r[0] for r in c.execute("SELECT cid FROM cm").fetchall()}
        raw = [str(r[0]) for r in c.execute("SELECT cid FROM custs").fetchall()]
    assert released == {hmac.new(KEY.encode(), v.encode(), hashlib.sha256).hexdigest() for v in raw}
    for _ in range(2):                       # compiled, then from the cached program (the CLI's fast path)
        res = check(db, "cm")
        assert res.exit_code == 0 and "pseudonyms cid" in res.output, res.output
    with duckdb.connect(db) as c:
        c.execute("UPDATE cm SET cid = sha256(cid) WHERE age = 20")
    res = check(db, "cm")
    assert res.exit_code == 3 and "FAILED: ['contents', 'pseudonyms cid']" in res.output, res.output
    out = tmp_path / "cm.duckdb"
    assert export(db, "cm", out).exit_code == 3 and not out.exists()
    monkeypatch.delenv("ANON_SQL_KEY")       # no key here: the form alone, which sha256 keeps; the rows' hash
    res = check(db, "cm")                    # recorded at release still tells the edit (round 10, M15)
    assert res.exit_code == 3 and "pseudonyms cid" not in res.output and "FAILED: ['contents']" in res.output, \
        res.output


@pytest.mark.parametrize("edit, named", [
    ("CREATE MACRO reid(p) AS p || '!'", "macro main.reid"),                                       # N09
    ("CREATE MACRO raw_rows() AS TABLE SELECT 1 AS cid, 20 AS age", "table_macro main.raw_rows"),  # N09b
    ("CREATE TYPE ids AS ENUM ('F:1', 'M:2')", "type main.ids"),                                   # N18
    ("COMMENT ON TABLE cm IS 'abc -> 1'", "comment on table main.cm"),                             # N19
    ("COMMENT ON COLUMN cm.income IS 'abc -> 1'", "comment on column main.cm.income"),
    ("CREATE SEQUENCE s START 7", "sequence main.s"),
    ("CREATE SCHEMA extra", "schema extra"),
])
def test_n09_n18_n19_objects_export_never_writes_fail_file_contents(db, tmp_path, edit, named):
    out = tmp_path / "cm.duckdb"
    assert export(db, "cm", out).exit_code == 0
    with duckdb.connect(str(out)) as c:
        c.execute(edit)
    res = check(out, "cm")
    assert res.exit_code == 3 and "FAILED: ['file contents']" in res.output and named in res.output, res.output


def _violations(c, attributes: dict, column: str = "v") -> int:
    forms = value_checks(attributes, [column])
    return int(c.execute(value_query(exp.Table(this=exp.to_identifier("t", quoted=True)), forms)).fetchall()[0][0])


@given(st.lists(st.one_of(st.none(), st.text(max_size=30)), min_size=1, max_size=20), st.integers(0, 4),
       st.text(max_size=5), st.integers(0, 4), st.text(alphabet="ab@.x", max_size=12))
def test_every_genuine_masked_value_has_its_form(values, start, pad, end, salt):
    """Property (an independent oracle: the package's own macros): whatever the input, a masked value passes the
    form check, so `values` never fails a genuine release."""
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE raw (x VARCHAR)")
    c.executemany("INSERT INTO raw VALUES (?)", [[v] for v in values])
    cases = {
        "partial": (f"anon.partial(x, {start}, ?, {end})", [pad],
                    {"role": "insensitive", "mask": {"function": "partial", "keep_start": start, "pad": pad,
                                                     "keep_end": end}}),
        "partial_email": ("anon.partial_email(x)", [], {"role": "identifier", "mask": {"function": "partial_email"}}),
        "hash": ("anon.hash(x, ?)", [salt or "s"], {"role": "insensitive", "mask": {"function": "hash", "salt": "s"}}),
        "redact": ("anon.redact(x, ?)", [pad], {"role": "insensitive", "mask": {"function": "redact",
                                                                                 "replacement": pad}}),
    }
    for masked, params, spec in cases.values():
        c.execute(f"CREATE OR REPLACE TABLE t AS SELECT {masked} AS v FROM raw", params)
        assert _violations(c, {"v": spec}) == 0, (masked, spec)
    c.close()
