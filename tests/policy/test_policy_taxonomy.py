"""Policies round-trip between TOML, SQL and Python; taxonomy builders and loaders behave as specified."""
from __future__ import annotations

import re

import duckdb
from hypothesis import given, settings, strategies as st

import anon_sql
from anon_sql.data import taxonomy as tx
from conftest import data_path


FULL = '''
name = "adult_k5"
source = "adult"
method = "optimal"
seed = 7
count_column = "n"
[attributes.age]
role = "quasi"
taxonomy = "adult_age"
[attributes.zip]
role = "quasi"
taxonomy = { kind = "mask", levels = 5 }
[attributes.salary]
role = "sensitive"
[attributes.name]
role = "identifier"
action = "pseudonymize"
[privacy]
k = 5
max_suppression = 0.01
l_diversity = { kind = "recursive", c = 3, l = 2 }
t_closeness = 0.2
simpson = { diversity = 1.75, evenness = 0.75 }
theta = { mu = 0.6 }
[[privacy.requirements]]
quasi = ["zip", "age"]
k = 3
[method_params]
objective = "ncp"
'''


def test_toml_sql_python_round_trip():
    p = anon_sql.Policy.from_toml(FULL)
    assert anon_sql.Policy.from_toml(p.to_toml()) == p
    assert anon_sql.Policy.from_sql(p.to_sql()) == p
    assert anon_sql.Policy.from_sql(p.to_sql(pretty=False)) == p
    assert anon_sql.Policy.from_dict(p.to_dict()) == p
    assert p.quasi == ["age", "zip"] and p.sensitive == ["salary"]
    assert p.privacy.requirements[0].quasi == ["zip", "age"]


names = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(q=names, s=names, k=st.integers(1, 1000), widths=st.lists(st.integers(1, 50), min_size=1, max_size=3))
def test_round_trip_property(q, s, k, widths):
    if q == s:
        return
    p = anon_sql.Policy.from_dict({"name": q + "_rel", "source": s, "attributes": {
        q: {"role": "quasi", "taxonomy": {"kind": "interval", "widths": widths}}, s: {"role": "sensitive"}},
        "privacy": {"k": k, "l_diversity": {"kind": "distinct", "l": 2}}})
    assert anon_sql.Policy.from_sql(p.to_sql()) == p
    assert anon_sql.Policy.from_toml(p.to_toml()) == p


def test_arx_hierarchy_loads_into_catalog_and_is_queryable():
    con = duckdb.connect()
    tax = anon_sql.load_taxonomy_file(con, data_path("adult", "adult_hierarchy_age.csv"), "adult_age")
    assert tax.height == 4 and tax.mapping(1)["39"] == "35-39" and tax.mapping(4)["39"] == "*"
    rows = con.execute("SELECT value FROM anon.taxonomy_nodes WHERE taxonomy = 'adult_age' AND leaf = '39' "
                       "ORDER BY level").fetchall()
    assert [r[0] for r in rows] == ["39", "35-39", "30-39", "20-39", "*"]
    again = anon_sql.load_taxonomy(con, "adult_age")
    key = lambda t: t.levels.sort_values("level0").reset_index(drop=True)
    assert key(again).equals(key(tax))


def test_catalog_loads_several_taxonomies_in_two_queries_as_one_by_one():
    from anon_sql.catalog import store as catalog

    con = duckdb.connect()
    anon_sql.install(con)
    mixed = tx.from_mapping("quote's; \"mixed\"", {"a'1": ["x y"], "é2": ["x y"], "c;3": ["z"]})
    for t in (tx.from_arx_text("1;1-2;*\n2;1-2;*\n3;3-4;*\n", "nums"), mixed):
        catalog.store_taxonomy(con, t)
    statements = []

    class Counting:
        def execute(self, *args):
            statements.append(args[0])
            return con.execute(*args)

    batch = catalog.load_taxonomies(Counting(), ["nums", mixed.name, "absent"])
    assert set(batch) == {"nums", mixed.name} and len(statements) == 3     # is_installed, meta, nodes
    for name, t in batch.items():
        one = catalog.load_taxonomy(con, name)
        assert t.levels.equals(one.levels) and (t.kind, t.spec, t.height) == (one.kind, one.spec, one.height)
    assert catalog.load_taxonomies(con, []) == {} and catalog.load_taxonomies(duckdb.connect(), ["nums"]) == {}


def test_mask_interval_date_builders():
    z = tx.mask("zip", ["52003", "52000", "54001"])
    assert z.mapping(1)["52003"] == "5200*" and z.mapping(5)["52003"] == "*****" and z.height == 5
    a = tx.interval("age", [20, 34, 35, 85], bounds=[[20, 35, 45, 65, 86], [20, 45, 86], [20, 86]])
    assert a.mapping(1)["34"] == "[20-34]" and a.mapping(1)["35"] == "[35-44]" and a.mapping(2)["85"] == "[45-85]"
    assert a.mapping(3)["20"] == "[20-85]" and a.mapping(4)["20"] == "*"
    w = tx.interval("w", [3, 7, 12], widths=[5, 10])
    assert w.mapping(1)["7"] == "[5-9]" and w.mapping(2)["12"] == "[10-19]"
    d = tx.dates("d", ["2020-03-04", "2021-12-31"])
    assert d.mapping(1)["2020-03-04"] == "2020-03" and d.mapping(2)["2021-12-31"] == "2021" and d.mapping(3)["2020-03-04"] == "*"


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.integers(-1000, 1000), min_size=1, max_size=40),
       widths=st.lists(st.integers(1, 100), min_size=1, max_size=3))
def test_interval_taxonomy_contains_its_leaves(values, widths):
    widths = sorted(widths)
    widths = [w for i, w in enumerate(widths) if all(w % x == 0 for x in widths[:i])]  # nested bins
    t = tx.interval("x", values, widths=widths)
    for level in range(1, t.height):
        for leaf, label in t.mapping(level).items():
            lo, hi = re.fullmatch(r"\[(-?\d+)-(-?\d+)\]", label).groups()
            assert int(lo) <= int(leaf) <= int(hi)


def test_arx_file_parsed_and_fingerprinted_once_per_content(tmp_path, monkeypatch):
    """A second load of an unchanged ARX file reuses the parsed taxonomy and its content digest (no parse, no
    digest again); each load is an independent copy, so a caller changing its copy cannot change the next load;
    a changed file is read again even with the same size and modification time."""
    import os

    path = tmp_path / "color.csv"
    path.write_text("red;warm;*\nblue;cold;*\n")
    first = tx.from_arx_csv(path)
    digest = first.fingerprint()
    parses, digests = [], []
    real_parse, real_sha = tx.from_arx_text, tx.hashlib.sha256
    monkeypatch.setattr(tx, "from_arx_text", lambda *a, **k: parses.append(a) or real_parse(*a, **k))
    monkeypatch.setattr(tx.hashlib, "sha256", lambda *a: digests.append(a) or real_sha(*a))
    second = tx.from_arx_csv(path)
    assert second.fingerprint() == digest and not parses and not digests
    assert second is not first and second.levels is not first.levels
    second.levels.iloc[0, 1] = "changed"                   # a caller corrupting its own copy
    third = tx.from_arx_csv(path)
    assert third.levels.iloc[0, 1] == "warm" and third.fingerprint() == digest
    assert third.fingerprint() == real_parse(path.read_text(), "color").fingerprint()   # the digest of the content
    stat = path.stat()
    path.write_text("red;cold;*\nblue;warm;*\n")              # same size; the old modification time put back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = tx.from_arx_csv(path)
    assert changed.mapping(1) == {"red": "cold", "blue": "warm"} and changed.fingerprint() != digest
    assert len(parses) == 1          # the changed file alone: the unchanged loads parsed nothing


def test_builtin_taxonomy_fingerprinted_once():
    """A built-in taxonomy is parsed and fingerprinted once per process; every load is its own copy."""
    from anon_sql.data import builtin_taxonomies as taxonomies

    a = taxonomies.load_builtin_taxonomy("adult_sex")
    b = taxonomies.load_builtin_taxonomy("adult_sex")
    assert a is not b and a.levels is not b.levels
    assert b.__dict__.get("_fingerprint") == a.fingerprint() == tx.from_arx_text(a.to_arx_csv(), "x").fingerprint()


def test_a_short_row_whose_padding_conflicts_is_named():
    """Hostile round 22, Y60: ``b;x`` after ``a;x;*`` is padded to ``b;x;x``, and the conflict at level 2 was reported
    without the row that made it."""
    from anon_sql.errors import TaxonomyError

    try:
        tx.from_arx_text("a;x;*\nb;x\n", "t")
    except TaxonomyError as err:
        assert "row 'b;x' has 2 of 3 values and was padded" in str(err)
    else:
        raise AssertionError("the inconsistent taxonomy was accepted")
