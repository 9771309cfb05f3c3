"""Masking macros (spec/10-sdc.md, PostgreSQL Anonymizer's vocabulary) and the policy-level mask builders."""
from __future__ import annotations

import math

import datetime as dt
import hashlib
import subprocess
import sys
import textwrap

import duckdb
import pytest
from hypothesis import given, settings, strategies as st
from sqlglot import exp

from anon_sql.errors import PolicyError
from anon_sql.sdc import masking
from anon_sql.sdc.sqlparts import render


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    masking.install_masking(c)
    return c


def one(con, sql, params=None):
    return con.execute(sql, params or []).fetchone()[0]


# ------------------------------------------------------------------------------------------------------------ golden

def test_partial_golden_spec(con):
    assert one(con, "SELECT anon.partial('4111222233334444', 2, 'XXXX', 2)") == "41XXXX44"
    assert one(con, "SELECT anon.partial('1234567890', 3, '*', 3)") == "123*890"
    assert one(con, "SELECT anon.partial('abcdefgh', 1, 'xxxx', 0)") == "axxxx"


def test_partial_short_text_is_fully_padded(con):
    assert one(con, "SELECT anon.partial('abc', 2, 'XXXX', 2)") == "XXXX"


def test_partial_email(con):
    assert one(con, "SELECT anon.partial_email('bruce.lee@enter.the.dragon.hk')") == "b******@******.hk"
    assert one(con, "SELECT anon.partial_email('daamien@gmail.com')") == "d******@******.com"
    assert one(con, "SELECT anon.partial_email('not an email')") == "******"


def test_hash_is_sha256_of_salt_and_text(con):
    assert one(con, "SELECT anon.hash('alice', 'pepper')") == hashlib.sha256(b"pepperalice").hexdigest()


def test_redact(con):
    assert one(con, "SELECT anon.redact('secret')") == "[REDACTED]"
    assert one(con, "SELECT anon.redact('secret', 'n/a')") == "n/a"


@pytest.mark.parametrize("call", [
    "anon.partial(NULL, 2, 'X', 2)", "anon.partial_email(NULL)", "anon.redact(NULL)", "anon.redact(NULL, 'x')",
    "anon.hash(NULL, 's')", "anon.noise(NULL, 0.1)", "anon.noise(NULL, 0.1, 1, 'k')",
    "anon.dnoise(NULL::DATE, INTERVAL 3 DAY)", "anon.dnoise(NULL::TIMESTAMP, INTERVAL 3 DAY, 1, 'k')"])
def test_null_in_null_out(con, call):
    assert one(con, "SELECT " + call) is None


def test_noise_and_dnoise_stay_in_range(con):
    lo, hi = con.execute("SELECT min(anon.noise(100, 0.1)), max(anon.noise(100, 0.1)) FROM range(5000)").fetchone()
    assert 90 <= lo < 92 and 108 < hi <= 110
    lo, hi = con.execute("SELECT min(anon.dnoise(DATE '2020-01-10', INTERVAL 5 DAY)), "
                         "max(anon.dnoise(DATE '2020-01-10', INTERVAL 5 DAY)) FROM range(5000)").fetchone()
    assert dt.datetime(2020, 1, 5) <= lo < dt.datetime(2020, 1, 6) and dt.datetime(2020, 1, 14) < hi <= dt.datetime(2020, 1, 15)


def test_seeded_overloads_are_reproducible_and_vary_with_seed_and_key(con):
    a = con.execute("SELECT anon.noise(100, 0.5, 7, i) FROM range(50) r(i)").fetchall()
    assert a == con.execute("SELECT anon.noise(100, 0.5, 7, i) FROM range(50) r(i)").fetchall()
    assert len(set(a)) == 50
    assert a != con.execute("SELECT anon.noise(100, 0.5, 8, i) FROM range(50) r(i)").fetchall()
    d = con.execute("SELECT anon.dnoise(TIMESTAMP '2020-01-01', INTERVAL 1 DAY, 7, i) FROM range(20) r(i)").fetchall()
    assert d == con.execute("SELECT anon.dnoise(TIMESTAMP '2020-01-01', INTERVAL 1 DAY, 7, i) FROM range(20) r(i)").fetchall()


# -------------------------------------------------------------------------------------------------------- hypothesis

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)


@settings(max_examples=150)
@given(txt=texts, ks=st.integers(0, 8), pad=texts, ke=st.integers(0, 8))
def test_partial_property(con, txt, ks, pad, ke):
    out = one(con, "SELECT anon.partial(?, ?, ?, ?)", [txt, ks, pad, ke])
    if len(txt) < ks + ke:
        assert out == pad
    else:
        assert len(out) == ks + len(pad) + ke
        assert out.startswith(txt[:ks]) and out[ks:ks + len(pad)] == pad
        assert out[len(out) - ke:] == (txt[len(txt) - ke:] if ke else "")


@settings(max_examples=100)
@given(local=st.text(alphabet="abcdefgh.XYZ_+0123", min_size=1, max_size=12),
       labels=st.lists(st.text(alphabet="abcdefghij-09", min_size=1, max_size=8), min_size=1, max_size=4))
def test_partial_email_property(con, local, labels):
    out = one(con, "SELECT anon.partial_email(?)", [local + "@" + ".".join(labels)])
    tld = "." + labels[-1] if len(labels) > 1 else ""
    assert out == local[0] + "******@******" + tld


@settings(max_examples=60)
@given(x=st.floats(-1e9, 1e9), ratio=st.floats(0, 1))
def test_noise_property(con, x, ratio):
    out = one(con, "SELECT anon.noise(?::DOUBLE, ?::DOUBLE)", [x, ratio])
    # within the ratio, up to the rounding of a double near x (x·(1 + ε) is the nearest double, a few ulps off)
    assert abs(out - x) <= abs(x) * ratio * (1 + 1e-9) + 4 * math.ulp(x) + 1e-9


# ---------------------------------------------------------------------------------------- persisted, no Python needed

def _make_file(path):
    c = duckdb.connect(str(path), config={"storage_compatibility_version": "v1.0.0"})   # readable by DuckDB 1.x
    masking.install_masking(c)
    c.execute("CREATE TABLE cards AS SELECT '4111222233334444' AS card, 'jo@x.org' AS mail")
    c.close()


QUERY = "SELECT anon.partial(card, 2, 'XXXX', 2), anon.partial_email(mail), anon.hash('a', 's') FROM cards"


def test_macros_persist_and_run_without_anon_sql(tmp_path):
    path = tmp_path / "m.duckdb"
    _make_file(path)
    code = textwrap.dedent(f"""
        import sys, duckdb
        con = duckdb.connect({str(path)!r}, read_only=True)
        print(con.execute({QUERY!r}).fetchone())
        assert not any(m.startswith("anon_sql") for m in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(("41XXXX44", "j******@******.org", hashlib.sha256(b"sa").hexdigest()))


def test_macros_run_in_the_duckdb_cli(tmp_path):
    pytest.importorskip("duckdb_cli", reason="the duckdb-cli package (dev extra) is the real DuckDB CLI")
    path = tmp_path / "m.duckdb"
    _make_file(path)
    out = subprocess.run([sys.executable, "-m", "duckdb_cli", "-readonly", "-csv", "-noheader", str(path),
                          "-c", "SELECT version(); " + QUERY + "; SELECT anon.noise(10, 0.1, 1, 'k') BETWEEN 9 AND 11"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0].startswith("v1.")
    assert lines[1] == "41XXXX44,j******@******.org," + hashlib.sha256(b"sa").hexdigest()
    assert lines[2] == "true"


def test_install_is_idempotent_and_creates_the_schema():
    c = duckdb.connect()
    assert masking.install_masking(c) == masking.install_masking(c)
    names = {r[0] for r in c.execute("SELECT DISTINCT function_name FROM duckdb_functions() "
                                     "WHERE schema_name = 'anon'").fetchall()}
    assert names == set(masking.MACROS)


# ---------------------------------------------------------------------------------------------------- mask_expression

@pytest.fixture()
def people():
    c = duckdb.connect()
    masking.install_masking(c)
    c.execute("""CREATE TABLE "pe'ople" AS SELECT i AS id, 'name' || (i % 7) AS "first name", i * 10.0 AS salary,
                 DATE '1980-01-01' + CAST(i AS INTEGER) AS dob, CASE WHEN i % 9 = 0 THEN NULL ELSE 'p' || i END AS x
                 FROM range(60) r(i)""")
    return c


def test_mask_expression_builds_macro_calls(people):
    specs = [("first name", {"function": "partial", "keep_start": 1, "pad": "**", "keep_end": 1}),
             ("x", {"function": "partial_email"}), ("x", {"function": "redact"}),
             ("x", {"function": "hash", "salt": "it's"}), ("salary", {"function": "noise", "ratio": 0.2})]
    q = exp.select(*[masking.mask_expression(c, s) for c, s in specs]).from_(exp.to_table('"pe\'ople"', dialect="duckdb"))
    rows = people.execute(render(q)).fetchall()
    assert rows[1][0] == "n**1" and rows[1][3] == hashlib.sha256(b"it'sp1").hexdigest()
    assert rows[0][1] is None and rows[0][2] is None        # NULL x stays NULL
    d = masking.mask_expression("dob", {"function": "dnoise", "interval": "30 days"}, seed=5, key=exp.column("id"),
                                column_type="DATE")
    vals = people.execute(render(exp.select(d, "dob").from_(exp.to_table('"pe\'ople"', dialect="duckdb")))).fetchall()
    assert all(isinstance(a, dt.date) and abs((a - b).days) <= 30 for a, b in vals)


@pytest.mark.parametrize("spec, message", [
    ({"function": "partial", "keep_start": -1, "pad": "X", "keep_end": 1}, "keep_start must be a whole number"),
    ({"function": "partial", "keep_start": 1, "pad": 3, "keep_end": 1}, "pad must be a string"),
    ({"function": "hash"}, "give a secret salt"),
    ({"function": "noise", "ratio": 2}, r"ratio must be a number in \[0, 1\]"),
    ({"function": "dnoise", "interval": "ten days"}, "interval must be a DuckDB interval"),
    ({"function": "shuffle"}, "shuffle_select"),
    ({"function": "scramble"}, "unknown mask function 'scramble'"),
])
def test_mask_expression_refuses_bad_specs(spec, message):
    with pytest.raises(PolicyError, match=message):
        masking.mask_expression("c", spec)


# ----------------------------------------------------------------------------------------------------- shuffle, fake

def test_shuffle_permutes_one_column_seeded(people):
    t = exp.to_table('"pe\'ople"', dialect="duckdb")
    before = people.execute("SELECT * FROM \"pe'ople\" ORDER BY id").fetchall()
    run = lambda seed: people.execute(render(masking.shuffle_select(t, "first name", seed))).fetchall()  # noqa: E731
    a = sorted(run(1))
    assert [r[0] for r in a] == [r[0] for r in before] and [r[2:] for r in a] == [r[2:] for r in before]
    assert sorted(r[1] for r in a) == sorted(r[1] for r in before) and [r[1] for r in a] != [r[1] for r in before]
    assert sorted(run(1)) == a and sorted(run(2)) != a


def test_shuffle_over_a_view_with_key_columns(people):
    people.execute("CREATE VIEW v AS SELECT * FROM \"pe'ople\"")
    q = masking.shuffle_select("v", "salary", 3, key_columns=["id"])
    out = people.execute(render(q)).fetchall()
    assert sorted(r[2] for r in out) == sorted(r[0] * 10.0 for r in out)


def test_fake_is_deterministic_per_seed_and_value(people):
    spec = {"provider": "first_name", "locale": "fr_FR"}
    q = masking.fake_select(people, "pe'ople", "x", spec, seed=11)
    a = dict(people.execute(render(exp.select("id", "x").from_(q.subquery("q")))).fetchall())
    assert a[0] is None and all(isinstance(a[i], str) for i in range(1, 9))
    q2 = masking.fake_select(people, "pe'ople", "x", spec, seed=11, mapping_table="other")
    assert dict(people.execute(render(exp.select("id", "x").from_(q2.subquery("q")))).fetchall()) == a
    assert masking.fake_values(["p1"], "first_name", "fr_FR", 11) == [a[1]]
    assert masking.fake_values(["p1", "p1"], "first_name", "fr_FR", 12)[0] == masking.fake_values(["p1"], "first_name", "fr_FR", 12)[0]


def test_fake_pool_mode_keeps_nulls_and_row_count(people):
    q = masking.fake_select(people, "pe'ople", "x", {"provider": "last_name", "consistent": False}, seed=1,
                            key_columns=["id"])
    rows = people.execute(render(q)).fetchall()
    assert len(rows) == 60 and sum(r[4] is None for r in rows) == 7


def test_unknown_faker_provider_lists_close_ones(people):
    with pytest.raises(PolicyError, match=r"unknown Faker provider 'firstname'.*first_name"):
        masking.fake_select(people, "pe'ople", "x", {"provider": "firstname"}, seed=1)
    with pytest.raises(PolicyError, match=r"unknown Faker locale 'fr_XX'.*fr_"):
        masking.fake_values(["a"], "first_name", "fr_XX", 1)
