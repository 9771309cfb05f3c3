"""Hostile round 9's M8 (docs/hostile-round-9.md): `check` verified a `hash`, `partial` or `partial_email` mask by its
form only, also in the working database where the source and the salt are at hand. Each input below is the round's
edit of a released column that keeps the mask's form (N32: the unsalted sha256 of the raw SSN; N33: the card's
characters 13-16 in the mask's shape; N34: the e-mail's second-level domain); each passed `check` and `export` wrote
it. Now the `masks <column>` rows re-derive the masked values from the source and fail them (exit 3, nothing
written), while genuine releases (with suppression, with a privacy unit) still pass.
"""
from __future__ import annotations

import hashlib
from collections import Counter

import duckdb
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.cli.main import main

SALT = "pepper-of-the-owner"
CUSTS = """CREATE TABLE custs AS SELECT i::BIGINT AS cid, 20 + 10*(i % 5) AS age,
  CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, printf('%03d-%02d-%04d', 100 + i, i % 90 + 10, 1000 + i) AS ssn,
  'user' || i || '@mail' || (i % 4) || '.com' AS email, '4111' || lpad(i::VARCHAR, 12, '0') AS card,
  (i * 37) % 5000 AS income FROM range(200) t(i)"""
MASKS = (f"identifier(ssn, mask => {{'function': 'hash', 'salt': '{SALT}'}}), "
         "identifier(email, mask => {'function': 'partial_email'}), "
         "insensitive(card, mask => {'function': 'partial', 'keep_start': 2, 'pad': 'XXXX', 'keep_end': 2})")
MK = f"""CREATE ANONYMIZED VIEW mk WITH (k = 5, method = 'levels',
  method_params = {{'levels': {{'age': 0, 'sex': 0}}}}) AS SELECT identifier(cid),
  quasi(age, taxonomy => {{'kind': 'top'}}), quasi(sex, taxonomy => {{'kind': 'top'}}), {MASKS}, insensitive(income)
  FROM custs"""
# the rows of age 99 (3 people) form classes below k: suppressed within max_suppression
SUPPRESSED = f"""CREATE ANONYMIZED VIEW ms WITH (k = 5, method = 'levels', max_suppression = 0.05,
  method_params = {{'levels': {{'age': 0, 'sex': 0}}}}) AS SELECT identifier(cid),
  quasi(age, taxonomy => {{'kind': 'top'}}), quasi(sex, taxonomy => {{'kind': 'top'}}), {MASKS}, insensitive(income)
  FROM custs_rare"""
# several rows per person (cid repeats), masked columns on every row
UNITS = f"""CREATE ANONYMIZED VIEW mu WITH (k = 5, method = 'levels', privacy_unit = 'cid',
  method_params = {{'levels': {{'age': 0, 'sex': 0}}}}) AS SELECT identifier(cid, action => 'pseudonymize'),
  quasi(age, taxonomy => {{'kind': 'top'}}), quasi(sex, taxonomy => {{'kind': 'top'}}), {MASKS}, insensitive(income)
  FROM visits"""
# a row of mk is found back in custs through its unmasked income (distinct per customer)
N32 = "UPDATE mk SET ssn = sha256(c.ssn) FROM custs c WHERE mk.income = c.income"
N33 = ("UPDATE mk SET card = substr(c.card, 13, 2) || 'XXXX' || substr(c.card, 15, 2) FROM custs c "
       "WHERE mk.income = c.income")
N34 = ("UPDATE mk SET email = substr(c.email, 1, 1) || '******@******.' "
       "|| split_part(split_part(c.email, '@', 2), '.', 1) FROM custs c WHERE mk.income = c.income")


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("ANON_SQL_KEY", "round-9-key-0123456789abcdef")
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp_path / "cache"))
    path = str(tmp_path / "w.duckdb")
    with duckdb.connect(path) as c:
        anon_sql.install(c)
        c.execute(CUSTS)
        c.execute("CREATE TABLE custs_rare AS SELECT * REPLACE (CASE WHEN cid < 3 THEN 99 ELSE age END AS age) "
                  "FROM custs")
        c.execute("CREATE TABLE visits AS SELECT c.* FROM custs c, range(3) r(j) WHERE c.cid < 100 OR j = 0")
        for statement in (MK, SUPPRESSED, UNITS):
            anon_sql.execute(c, statement)
    return path


def check(path, name: str):
    return CliRunner().invoke(main, ["check", name, "--db", str(path)])


def export(path, name: str, to):
    return CliRunner().invoke(main, ["export", name, "--db", str(path), "--to", str(to)])


def rows(path, name: str) -> dict:
    with duckdb.connect(str(path), read_only=True) as c:
        return {r["check"]: r for r in anon_sql.check(c, name).to_dict("records")}


@pytest.mark.parametrize("edit, column", [(N32, "ssn"), (N33, "card"), (N34, "email")], ids=["N32", "N33", "N34"])
def test_m8_a_mask_of_the_right_form_and_the_wrong_content_fails_check_and_export(db, tmp_path, edit, column):
    with duckdb.connect(db) as c:
        c.execute(edit)
        assert c.execute(f"SELECT count(*) FROM mk WHERE {column} IS NOT NULL").fetchall()[0][0] == 200
    got = rows(db, "mk")
    assert got[f"values {column}"]["passed"], got[f"values {column}"]   # the form is kept: `values` cannot see it
    for _ in range(2):          # the program compiled and cached, then the CLI's fast path over the cached program
        res = check(db, "mk")
        assert res.exit_code == 3, res.output
        assert f"FAILED: ['contents', 'masks {column}']" in res.output, res.output   # contents: round 10, M15
    assert got[f"masks {column}"]["failing_records"] == 200 and got[f"masks {column}"]["basis"] == "source"
    out = tmp_path / "mk.duckdb"
    res = export(db, "mk", out)
    assert res.exit_code == 3, res.output
    assert list(tmp_path.glob("mk.duckdb*")) == []


def test_m8_n32_the_unsalted_hash_is_what_the_round_said(db):
    """The oracle of N32's edit: hashlib's sha256 of each raw SSN, unsalted (the round's attack inverts it)."""
    with duckdb.connect(db) as c:
        c.execute(N32)
        released = Counter(r[0] for r in c.execute("SELECT ssn FROM mk").fetchall())
        raw = [r[0] for r in c.execute("SELECT ssn FROM custs").fetchall()]
    assert released == Counter(hashlib.sha256(s.encode()).hexdigest() for s in raw)


def test_m8_one_value_too_many_fails_by_one(db):
    """A sub-multiset, not a subset: a genuine masked value written over another row is one value too many."""
    with duckdb.connect(db) as c:
        c.execute("UPDATE mk SET ssn = (SELECT min(ssn) FROM mk) WHERE income = (SELECT max(income) FROM mk)")
    got = rows(db, "mk")
    assert not got["masks ssn"]["passed"] and got["masks ssn"]["failing_records"] == 1
    assert got["masks email"]["passed"] and got["masks card"]["passed"]


@pytest.mark.parametrize("name", ["mk", "ms", "mu"])
def test_m8_genuine_releases_pass_with_a_masks_row_per_column(db, name):
    """A release with each mask, with suppression (ms) and with a privacy unit (mu); the oracle: the released
    values recomputed in Python (hashlib, slicing) are a sub-multiset of the source's."""
    with duckdb.connect(db, read_only=True) as c:
        source = {"mk": "custs", "ms": "custs_rare", "mu": "visits"}[name]
        raw = c.execute(f"SELECT ssn, email, card FROM {source}").fetchall()
        released = c.execute(f"SELECT ssn, email, card FROM {name}").fetchall()
        suppressed = c.execute("SELECT suppressed FROM anon.releases WHERE release = ?", [name]).fetchall()[0][0]
    expected = Counter((hashlib.sha256((SALT + s).encode()).hexdigest(),
                        e[0] + "******@******." + e.rsplit(".", 1)[1], k[:2] + "XXXX" + k[-2:]) for s, e, k in raw)
    assert not Counter(released) - expected
    if name == "ms":
        assert suppressed > 0 and len(released) < len(raw)
    got = rows(db, name)
    assert {f"masks {c}" for c in ("ssn", "email", "card")} <= set(got)
    assert all(r["passed"] for r in got.values()), [r for r in got.values() if not r["passed"]]
    res = check(db, name)
    assert res.exit_code == 0 and "masks ssn" in res.output, res.output


def test_m8_without_the_source_no_masks_row_and_values_says_form_only(db, tmp_path):
    with duckdb.connect(db) as c:
        c.execute("DROP TABLE custs CASCADE")
    got = rows(db, "mk")
    assert not [c for c in got if c.startswith("masks ")]
    for column in ("ssn", "email", "card"):
        assert got[f"values {column}"]["required"].startswith("form only: ")
    res = check(db, "mk")
    assert res.exit_code == 0, res.output
    assert "masks" not in res.output


def test_m8_a_shared_file_has_no_masks_row(db, tmp_path):
    out = tmp_path / "mk.duckdb"
    assert export(db, "mk", out).exit_code == 0
    res = check(out, "mk")
    assert res.exit_code == 0 and "masks" not in res.output and "form only" in res.output, res.output


class _Attribute:
    """The two things :func:`source_mask_rows` reads of a policy's attribute."""

    def __init__(self, spec: dict) -> None:
        self.spec, self.options = spec, {"mask": spec["mask"]}

    def to_dict(self) -> dict:
        return self.spec


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=20)), min_size=1, max_size=25), st.data())
def test_masks_rows_pass_every_genuine_subset_and_fail_one_value_too_many(values, data):
    """Property (the oracle: the package's own macros over a random source, rows removed at random as suppression
    does): a genuine masked subset passes each `masks` row; one masked value more than the source gives fails it
    by one."""
    from types import SimpleNamespace

    from anon_sql.audit.values import source_mask_rows

    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE raw (i INTEGER, v VARCHAR)")
    c.executemany("INSERT INTO raw VALUES (?, ?)", list(enumerate(values)))
    kept = data.draw(st.sets(st.integers(0, len(values) - 1)))
    specs = {"hash": {"function": "hash", "salt": "s@lt"}, "partial": {"function": "partial", "keep_start": 1,
             "pad": "**", "keep_end": 1}, "partial_email": {"function": "partial_email"}}
    for name, mask in specs.items():
        macro = {"hash": "anon.hash(v, 's@lt')", "partial": "anon.partial(v, 1, '**', 1)",
                 "partial_email": "anon.partial_email(v)"}[name]
        c.execute(f"CREATE OR REPLACE TABLE rel AS SELECT {macro} AS v FROM raw WHERE list_contains(?, i)",
                  [sorted(kept)])
        policy = SimpleNamespace(source="raw", attributes={"v": _Attribute({"role": "insensitive", "mask": mask})})
        table = exp.Table(this=exp.to_identifier("rel"))
        [row] = source_mask_rows(c, table, policy)
        assert row["passed"] and row["check"] == "masks v", (name, row)
        extra = c.execute(f"SELECT {macro} FROM raw WHERE v IS NOT NULL LIMIT 1").fetchall()
        if extra:   # the first non-NULL source value's mask once more than the source gives it
            c.execute(f"INSERT INTO rel SELECT {macro} FROM raw WHERE v IS NOT NULL AND {macro} = ? "
                      "AND NOT list_contains(?, i)", [extra[0][0], sorted(kept)])
            c.execute("INSERT INTO rel VALUES (?)", [extra[0][0]])
            [row] = source_mask_rows(c, table, policy)
            assert not row["passed"] and row["failing_records"] == 1, (name, row)
    c.close()
