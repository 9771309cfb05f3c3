"""Hostile round 18, M50: anon_sql registered its scratch frames under fixed names (`__anon_share_metadata`,
`__anon_tax_frame`, `__anon_assess_source`, …) and unregistered them after, so a DataFrame the user had registered
under such a name was replaced, then gone. Every scratch name now carries a random suffix."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import anon_sql
from anon_sql.common.sqlbuild import scratch_name
from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy

POLICY = {"name": "lv", "source": "pt", "method": "levels", "default_role": "insensitive",
          "attributes": {"pid": {"role": "identifier"},
                         "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20]}},
                         "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}},
          "privacy": {"k": 5}, "method_params": {"levels": {"age": 1, "sex": 0}}}
NAMES = ["__anon_share_metadata", "__anon_tax_frame", "__anon_assess_source", "__anon_classes_frame",
         "__anon_plan_frame", "__anon_input_1"]


def test_scratch_names_are_fresh():
    assert scratch_name("__x") != scratch_name("__x") and scratch_name("__x").startswith("__x_")


@pytest.mark.parametrize("name", NAMES)
def test_m50_a_frame_the_user_registered_survives_export_taxonomy_and_assess(patients, tmp_path, name):
    con = patients
    anon_sql.release(con, POLICY)       # (a release refuses while one is registered: round 17, M48's reserved names)
    con.register(name, pd.DataFrame({"note": ["my registered frame"]}))
    anon_sql.execute(con, f"EXPORT ANONYMIZED VIEW lv TO '{tmp_path / 'out.parquet'}'")
    anon_sql.store_taxonomy(con, dataclasses.replace(load_builtin_taxonomy("adult_sex"), name="my_sex"),
                            replace=False)
    anon_sql.assess(con, con.execute("SELECT * FROM pt").df(), quasi=["age", "sex"])
    assert con.execute(f'SELECT * FROM "{name}"').fetchall() == [("my registered frame",)]


def test_an_export_beside_a_database_attached_as_the_old_share_alias(patients, tmp_path):
    """Hostile round 18, H08: the export attached its new file under a fixed alias `__anon_share`; a database the user
    attached under that name failed the export with DuckDB's raw message. The alias is fresh per export now."""
    anon_sql.release(patients, POLICY)
    patients.execute("ATTACH ':memory:' AS __anon_share")
    patients.execute("CREATE TABLE __anon_share.notes AS SELECT 'mine' AS note")
    anon_sql.execute(patients, f"EXPORT ANONYMIZED VIEW lv TO '{tmp_path / 'o.duckdb'}'")
    assert (tmp_path / "o.duckdb").exists()
    assert patients.execute("SELECT note FROM __anon_share.notes").fetchall() == [("mine",)]


def test_m51_the_standalone_sdc_functions_keep_a_users_tables_of_their_old_work_names(tmp_path):
    """Hostile round 19, M51: perturb, local_suppression and fake_select replaced and dropped TEMP tables named
    `<output>__sdc_work`, `<output>__sdc_<i>`, `<output>__sdc_coded`, `__anon_fake_<column>`."""
    import duckdb

    from anon_sql.sdc.local_suppression import local_suppression
    from anon_sql.sdc.masking import fake_select
    from anon_sql.sdc.perturb import perturb

    c = duckdb.connect()
    c.execute("CREATE TABLE people AS SELECT i AS id, 20 + i % 50 AS age, ['F','M'][i % 2 + 1] AS sex, "
              "['a','b','c'][i % 3 + 1] AS race FROM range(600) t(i)")
    mine = ("out__sdc_work", "out__sdc_work_n", "out__sdc_0", "people__suppressed__sdc_coded",
            "people__suppressed__sdc_map", "__anon_fake_race")
    for t in mine:
        c.execute(f"CREATE TEMP TABLE {t} AS SELECT 'my session table' AS note")
    perturb(c, "people", {"age": {"kind": "microaggregation", "k": 3}}, seed=1, output="out")
    local_suppression(c, "people", ["age", "sex"], 3)
    fake_select(c, "people", "race", {"provider": "name"}, 1)
    for t in mine:
        assert c.execute(f"SELECT note FROM temp.main.{t}").fetchall() == [("my session table",)], t


def test_m53_a_check_of_a_slicing_release_keeps_a_users_view_of_its_old_scratch_name(patients):
    """Hostile round 19, M53: `check` of a slicing release replaced and dropped a TEMP view named
    `__anon_check_slicing_source`."""
    con = patients
    anon_sql.release(con, {"name": "sl", "source": "pt", "method": "slicing", "seed": 0,
                           "default_role": "insensitive",
                           "attributes": {"pid": {"role": "identifier"}, "age": {"role": "quasi"},
                                          "sex": {"role": "quasi"}, "zip": {"role": "sensitive"}},
                           "privacy": {"k": 5, "l_diversity": {"kind": "slicing", "l": 2}, "max_suppression": 0.05},
                           "method_params": {"columns": 2}})
    con.execute("CREATE TEMP VIEW __anon_check_slicing_source AS SELECT 'my session view' AS note")
    anon_sql.check(con, "sl")
    assert con.execute("SELECT note FROM __anon_check_slicing_source").fetchall() == [("my session view",)]


def test_m52_an_sdc_output_never_replaces_a_users_table_but_replaces_its_own():
    """Hostile round 19, M52: perturb / local_suppression wrote their default output (`<table>__perturbed`,
    `<table>__suppressed`) with CREATE OR REPLACE over a user's table of that name. A user's table is refused now;
    the function's own earlier output (marked by its comment) is replaced as before."""
    import duckdb

    from anon_sql.errors import PolicyError
    from anon_sql.sdc.local_suppression import local_suppression
    from anon_sql.sdc.perturb import perturb

    c = duckdb.connect()
    c.execute("CREATE TABLE people AS SELECT i AS id, 20 + i % 50 AS age, ['F','M'][i % 2 + 1] AS sex "
              "FROM range(600) t(i)")
    for name in ("people__perturbed", "people__suppressed"):
        c.execute(f"CREATE TABLE {name} AS SELECT 'my notes' AS note")
    with pytest.raises(PolicyError, match="output 'people__perturbed' is an existing table that perturb did not"):
        perturb(c, "people", {"age": {"kind": "microaggregation", "k": 3}}, seed=1)
    with pytest.raises(PolicyError, match="output 'people__suppressed' is an existing table"):
        local_suppression(c, "people", ["age", "sex"], 3)
    for name in ("people__perturbed", "people__suppressed"):
        assert c.execute(f"SELECT note FROM {name}").fetchall() == [("my notes",)]
        c.execute(f"DROP TABLE {name}")
    for _ in range(2):      # its own output: written, then replaced
        perturb(c, "people", {"age": {"kind": "microaggregation", "k": 3}}, seed=1)
        local_suppression(c, "people", ["age", "sex"], 3)
    assert c.execute("SELECT count(*) FROM people__perturbed").fetchall() == [(600,)]
