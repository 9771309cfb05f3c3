"""Bad input gets a clear error naming the column / value / parameter, and nothing is created."""
from __future__ import annotations

import pandas as pd
import pytest

import anon_sql
from conftest import load_seed000, seed000_policy


def _tables(con):
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = 'main'").fetchall()}


def test_unknown_source(con):
    with pytest.raises(anon_sql.SourceError, match="'nope' is not a table"):
        anon_sql.release(con, seed000_policy(source="nope"))


def test_unknown_column_lists_available(con):
    load_seed000(con)
    pol = seed000_policy()
    pol["attributes"]["height"] = {"role": "quasi", "taxonomy": {"kind": "top"}}
    with pytest.raises(anon_sql.PolicyError, match=r"\['height'\].*its columns are"):
        anon_sql.release(con, pol)


def test_unmentioned_columns_without_default_role(con):
    load_seed000(con)
    with pytest.raises(anon_sql.PolicyError, match="default_role") as err:
        anon_sql.release(con, seed000_policy(default_role=None))
    assert "'sex'" in str(err.value) and "'race'" in str(err.value)


def test_column_in_two_roles_sql_form():
    sql = "CREATE ANONYMIZED VIEW r WITH (k = 2) AS SELECT quasi(age, taxonomy => {'kind': 'top'}), sensitive(age) FROM t"
    with pytest.raises(anon_sql.PolicyError, match="two roles"):
        anon_sql.Policy.from_sql(sql)


def test_column_in_two_roles_toml_form():
    text = 'name = "r"\nsource = "t"\n[attributes.age]\nrole = "quasi"\n[attributes.age]\nrole = "sensitive"\n'
    with pytest.raises(anon_sql.PolicyError, match="not valid TOML"):
        anon_sql.Policy.from_toml(text)


def test_no_quasi_identifier(con):
    load_seed000(con)
    pol = {"name": "r", "source": "t1", "default_role": "insensitive", "attributes": {}, "privacy": {"k": 2}}
    with pytest.raises(anon_sql.PolicyError, match="no quasi-identifier"):
        anon_sql.release(con, pol)


@pytest.mark.parametrize("k", [0, -3])
def test_k_below_one(k):
    with pytest.raises(anon_sql.PolicyError, match="privacy.k must be an integer >= 1"):
        anon_sql.Policy.from_dict(seed000_policy(privacy={"k": k}))


def test_k_above_rows(con):
    load_seed000(con)
    with pytest.raises(anon_sql.PolicyError, match="larger than the 60 records"):
        anon_sql.release(con, seed000_policy(privacy={"k": 61}))


def test_empty_source(con):
    con.execute("CREATE TABLE empty (age INTEGER, zip VARCHAR, s VARCHAR)")
    pol = {"name": "r", "source": "empty", "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "top"}},
           "zip": {"role": "quasi", "taxonomy": {"kind": "top"}}, "s": {"role": "sensitive"}}, "privacy": {"k": 2}}
    with pytest.raises(anon_sql.SourceError, match="empty"):
        anon_sql.release(con, pol)


def test_taxonomy_missing_values_are_listed_with_counts(con):
    load_seed000(con)
    pol = seed000_policy()
    pol["attributes"]["alcohol"]["taxonomy"] = {"kind": "mapping", "mapping": {"Low": ["Yes"], "Med": ["Yes"]}}
    with pytest.raises(anon_sql.TaxonomyError) as err:
        anon_sql.release(con, pol)
    msg = str(err.value)
    assert "'High'" in msg and "'No'" in msg and "records" in msg and "'alcohol'" in msg
    assert not any(t.startswith("r000") for t in _tables(con))


def test_inconsistent_taxonomy_is_refused():
    frame = pd.DataFrame([["a", "x", "*"], ["b", "x", "*"], ["c", "y", "*"], ["a2", "x", "top2"]])
    with pytest.raises(anon_sql.TaxonomyError, match="more than one parent"):
        anon_sql.Taxonomy("bad", frame)


def test_release_name_exists_then_replace_atomically(con):
    load_seed000(con)
    pol = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    anon_sql.release(con, pol)
    with pytest.raises(anon_sql.ReleaseExistsError, match="replace"):
        anon_sql.release(con, pol)
    before = con.execute("SELECT * FROM r000").df()
    # a failing replacement leaves the previous release untouched
    failing = seed000_policy(method_params={"levels": {"zip": 0}})
    with pytest.raises(anon_sql.PrivacyRequirementError):
        anon_sql.release(con, failing, replace=True)
    pd.testing.assert_frame_equal(before, con.execute("SELECT * FROM r000").df())
    anon_sql.release(con, seed000_policy(method_params={"levels": {"zip": 2, "age": 1}}), replace=True)
    assert set(con.execute("SELECT DISTINCT zip FROM r000").df()["zip"]) <= {"520**", "530**", "540**"}


def test_nulls_are_values_of_their_own(con):
    con.execute("""CREATE TABLE nulls AS SELECT * FROM (VALUES
        (NULL, 'a', 'x'), (NULL, 'a', 'y'), (NULL, 'a', NULL), (30, 'b', 'x'), (30, 'b', NULL), (30, 'b', 'y'),
        (40, NULL, 'x'), (40, NULL, 'y'), (40, NULL, 'z')) AS t(age, grp, s)""")
    pol = {"name": "rn", "source": "nulls", "attributes": {
        "age": {"role": "quasi", "taxonomy": {"kind": "top"}}, "grp": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "s": {"role": "sensitive"}}, "privacy": {"k": 3, "l_diversity": {"kind": "distinct", "l": 3}},
        "method_params": {"levels": {}}}
    rel = anon_sql.release(con, pol)
    assert rel.records_out == 9 and len(rel.classes) == 3
    # NULL sensitive values count as a value: every class has 3 distinct values
    assert (rel.classes["__distinct__s"] == 3).all()
    # generalizing a NULL gives the taxonomy's top
    anon_sql.release(con, {**pol, "name": "rn2", "method_params": {"levels": {"age": 1}}})
    assert con.execute("SELECT count(*) FROM rn2 WHERE age IS NULL").fetchall() == [(0,)]


NASTY = 'x"; DROP TABLE t1; --'


@pytest.mark.parametrize("name", [NASTY, "weird name", "âge é", "it's"])
def test_hostile_and_unicode_names_round_trip(con, name):
    con.execute("CREATE TABLE src AS SELECT * FROM (VALUES (1, 'a'), (1, 'b'), (2, 'a'), (2, 'b')) AS t(q, s)")
    con.execute("CREATE TABLE t1 AS SELECT 1 AS keep_me")
    from sqlglot import exp
    from anon_sql.common.sqlbuild import ident, render
    con.execute(render(exp.Alter(this=exp.Table(this=ident("src")), kind="TABLE", actions=[
        exp.RenameColumn(this=exp.column("q"), to=ident(name))])))
    pol = {"name": name + " release", "source": "src", "attributes": {
        name: {"role": "quasi", "taxonomy": {"kind": "top"}}, "s": {"role": "sensitive"}}, "privacy": {"k": 2},
        "method_params": {"levels": {name: 1}}}
    p = anon_sql.Policy.from_dict(pol)
    assert anon_sql.Policy.from_sql(p.to_sql()) == p
    assert anon_sql.Policy.from_toml(p.to_toml()) == p
    rel = anon_sql.release(con, p)
    assert rel.records_out == 4
    assert con.execute("SELECT * FROM t1").fetchall() == [(1,)]  # nothing dropped
    cols = con.execute(render(exp.Describe(this=exp.Table(this=ident(name + " release"))))).fetchall()
    assert name in [c[0] for c in cols]


def test_bad_parameters_are_named():
    with pytest.raises(anon_sql.PolicyError, match="max_suppression"):
        anon_sql.Policy.from_dict(seed000_policy(privacy={"k": 2, "max_suppression": 1.5}))
    with pytest.raises(anon_sql.PolicyError, match="role"):
        anon_sql.Policy.from_dict({"name": "r", "source": "t", "attributes": {"a": {"role": "secret"}}})
    with pytest.raises(anon_sql.PolicyError, match="unknown method"):
        import duckdb
        c = duckdb.connect()
        load_seed000(c)
        anon_sql.release(c, seed000_policy(method="magic"))


def test_full_domain_method_refuses_quasi_without_taxonomy(con):
    load_seed000(con)
    pol = seed000_policy()
    pol["attributes"]["zip"] = {"role": "quasi"}
    with pytest.raises(anon_sql.PolicyError, match="'zip' has no taxonomy"):
        anon_sql.release(con, pol)
