"""Hostile round 10, M14 (docs/hostile-round-10.md, X12): a consistent `fake` mask is a keyed lookup of the raw
value, `Faker(sha256(mask_seed(seed, column) ‖ value))`, and ran under the public default seed 0, so a list of
candidates mapped 200 of 200 released SSNs back to the raw ones. Seed 0 is now refused for every mask and
perturbation that draws from the seed (fake, shuffle; swap, pram, noise), as round 9's M7 refused it for noise and
dnoise; each test here fails on the code before that fix.
"""
from __future__ import annotations

import zlib

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main as cli
from anon_sql.runner.sdc import mask_seed
from anon_sql.sdc.masking import fake_values
from anon_sql.sdc.perturb import perturb, swap_partners

pytest.importorskip("faker")

SECRET = 3_141_592_653_589_793_238   # a 62-bit seed, as secrets.randbits(62) gives
X12 = ("CREATE ANONYMIZED VIEW b1 WITH (k = 5, method = 'levels', method_params = {{'levels': {{'age': 0}}}}{seed})"
       " AS SELECT quasi(age, taxonomy => {{'kind': 'top'}}),"
       " identifier(ssn, mask => {{'function': 'fake', 'provider': 'ssn'}}),"
       " identifier(email, mask => {{'function': 'fake', 'provider': 'email'}}), insensitive(income) FROM people;")


def _people(c) -> None:
    c.execute("""CREATE TABLE people AS SELECT 20 + 10 * (i % 5) AS age,
        (100 + i)::VARCHAR || '-' || (i % 90 + 10)::VARCHAR || '-' || (1000 + 7 * i)::VARCHAR AS ssn,
        'user' || i || '@mail2.com' AS email, (i * 37) % 5000 AS income FROM range(200) t(i)""")


def _people_db(path) -> str:
    """A database file holding the catalog and ``people``; its path."""
    with duckdb.connect(str(path)) as c:
        anon_sql.install(c)
        _people(c)
    return str(path)


def _state(db: str) -> list:
    """Every table of the file with its rows: what "the database exactly as before" compares."""
    with duckdb.connect(db) as c:
        tables = c.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()
        return [(s, t, sorted(map(repr, c.execute(f'SELECT * FROM "{s}"."{t}"').fetchall()))) for s, t in tables]


def test_x12_fake_identifiers_under_the_default_seed_exit_2_and_change_nothing(tmp_path):
    db = str(tmp_path / "x12.duckdb")
    with duckdb.connect(db) as c:
        anon_sql.install(c)
        _people(c)
    before = _state(db)
    res = CliRunner().invoke(cli, ["run", "-", "--db", db], input=X12.format(seed=""))
    assert res.exit_code == 2, res.output
    assert "attributes.ssn.mask" in res.output and "keyed lookup of the raw value" in res.output
    assert "secrets.randbits(62)" in res.output
    assert _state(db) == before


def test_x12_with_a_secret_seed_the_candidate_lookup_finds_nothing(tmp_path):
    """The round's recovery script, `dict(zip(fake_values(candidates, col, seed=mask_seed(0, col)), candidates))`,
    run over the released file: with a 62-bit seed it maps no released value back (and with the seed itself, all:
    the mask is exactly as secret as the seed)."""
    db = str(tmp_path / "x12s.duckdb")
    with duckdb.connect(db) as c:
        anon_sql.install(c)
        _people(c)
    res = CliRunner().invoke(cli, ["run", "-", "--db", db], input=X12.format(seed=f", seed = {SECRET}"))
    assert res.exit_code == 0, res.output
    with duckdb.connect(db) as c:
        raw = {col: [r[0] for r in c.execute(f"SELECT {col} FROM people ORDER BY {col}").fetchall()]
               for col in ("ssn", "email")}
        released = {col: [r[0] for r in c.execute(f"SELECT {col} FROM b1").fetchall()] for col in ("ssn", "email")}
    provider = {"ssn": "ssn", "email": "email"}
    for col in ("ssn", "email"):
        candidates = raw[col]
        assert not set(released[col]) & set(candidates)                # nothing released raw
        public = dict(zip(fake_values(candidates, provider[col], seed=mask_seed(0, col)), candidates))
        assert sum(v in public for v in released[col]) == 0
        keyed = dict(zip(fake_values(candidates, provider[col], seed=mask_seed(SECRET, col)), candidates))
        assert sum(v in keyed for v in released[col]) == 200


def _policy(**attr) -> dict:
    return {"name": "rel", "source": "people",
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "ssn": {"role": "identifier"}, "email": {"role": "identifier"},
                           "income": {"role": "insensitive", **attr}},
            "method": "levels", "method_params": {"levels": {"age": 0}}, "privacy": {"k": 5}}


def _objects(c) -> list:
    return c.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


@pytest.mark.parametrize("attr, where", [
    ({"mask": {"function": "shuffle"}}, "attributes.income.mask: a shuffle mask"),
    ({"mask": {"function": "fake", "provider": "first_name", "consistent": False}}, "attributes.income.mask: a fake"),
    ({"perturb": {"kind": "swap", "window": 10}}, "attributes.income.perturb: kind = \"swap\""),
    ({"perturb": {"kind": "noise", "scale": 0.2}}, "attributes.income.perturb: kind = \"noise\""),
    ({"perturb": {"kind": "pram", "retain": 0.8}}, "attributes.income.perturb: kind = \"pram\""),
], ids=["shuffle", "fake-pool", "swap", "perturb-noise", "pram"])
def test_every_seeded_mask_and_perturbation_refuses_the_default_seed(attr, where):
    with duckdb.connect() as c:
        anon_sql.install(c)
        _people(c)
        if "pram" in str(attr):
            c.execute("ALTER TABLE people ALTER income TYPE VARCHAR")
        before = _objects(c)
        with pytest.raises(anon_sql.PolicyError, match="seed = 0 is the default; set seed to a secret random"):
            try:
                anon_sql.release(c, _policy(**attr))
            except anon_sql.PolicyError as e:
                assert where in str(e), e
                raise
        assert _objects(c) == before
        anon_sql.release(c, {**_policy(**attr), "seed": SECRET})


@pytest.mark.parametrize("perturbation", [{"kind": "microaggregation", "k": 3}, {"kind": "top_code", "above": 4000}],
                         ids=["microaggregation", "top_code"])
def test_perturbations_that_draw_nothing_run_under_the_default_seed(perturbation):
    """Microaggregation and coding are deterministic: the seed keys nothing of theirs, so 0 reveals nothing."""
    with duckdb.connect() as c:
        anon_sql.install(c)
        _people(c)
        anon_sql.release(c, _policy(perturb=perturbation))


def test_why_swap_is_refused_the_seed_alone_undoes_it():
    """The premise of refusing `swap` under a public seed: its rank pairs come from the seed and n alone, so the
    released column by itself maps every value back to the raw value of its row (every swap undone)."""
    with duckdb.connect() as c:
        c.execute("CREATE TABLE t AS SELECT i AS id, (i * 7919) % 1000 AS income FROM range(300) t(i)")
        perturb(c, "t", {"income": {"kind": "swap", "window": 10}}, seed=0, output="s", row_id="r")
        rows = c.execute("SELECT s.income, t.income FROM s JOIN t ON t.rowid = s.r ORDER BY s.r").fetchall()
    released = np.array([r[0] for r in rows], dtype=float)
    raw = np.array([r[1] for r in rows], dtype=float)
    assert (released != raw).sum() > 20                               # the swap changed values
    ranked = np.sort(released)                                        # the raw values by rank (the same multiset)
    rng = np.random.default_rng(np.random.SeedSequence([0, zlib.crc32(b"income")]))   # perturb's generator, seed 0
    partner = swap_partners(ranked, 10.0, rng)                        # on ranks: the seed and n alone decide it
    rank_of = {v: i for i, v in enumerate(ranked)}                    # the values here are distinct
    recovered = np.array([ranked[partner[rank_of[v]]] for v in released])
    assert (recovered == raw).all()


@pytest.mark.parametrize("seed", [2**62, 2**63, 3 * 2**62, -(2**62)])
def test_m19_a_multiple_of_2_62_is_seed_0_and_is_refused_too(tmp_path, seed):
    """Hostile round 11, M19 (H20, H20c, H104): the masks' per-column seed is taken modulo 2⁶², so these seeds gave
    exactly seed 0's fake values (200 of 200 SSNs recovered) and shuffle; each is refused, nothing changed."""
    assert mask_seed(seed, "ssn") == mask_seed(0, "ssn")   # why: the same masks as the public seed
    db = _people_db(tmp_path / "m19.duckdb")
    before = _state(db)
    res = CliRunner().invoke(cli, ["run", "-", "--db", db], input=X12.format(seed=f", seed = {seed}"))
    assert res.exit_code == 2, res.output
    assert "multiple of 2^62" in res.output and "attributes.ssn.mask" in res.output
    assert _state(db) == before


def test_m19_a_seed_next_to_a_multiple_of_2_62_releases(tmp_path):
    db = _people_db(tmp_path / "m19b.duckdb")
    res = CliRunner().invoke(cli, ["run", "-", "--db", db], input=X12.format(seed=f", seed = {2**62 + 1}"))
    assert res.exit_code == 0, res.output
