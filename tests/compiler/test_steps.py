"""The compile is an ordered tuple of one-job steps (anon_sql.compiler.views.STEPS): running the steps gives the
statements compile_release gives, each step's statements carry its job's descriptions, and any prefix of the steps
runs on its own (here: up to the classes view, whose classes a pandas recomputation of the seed 000 table checks)."""
from __future__ import annotations

import duckdb
import pytest
from sqlglot import exp

import anon_sql
from anon_sql.common.sqlbuild import render
from anon_sql.compiler.dialect import Target, target
from anon_sql.compiler.views import STEPS, CompileInput, ReleaseNames, classes_step, compile_release
from anon_sql.methods import LevelPlan
from anon_sql.runner.resolve import resolve_release
from conftest import load_seed000, seed000_policy

LEVELS = {"zip": 1, "age": 1}


@pytest.fixture
def compile_input():
    con = duckdb.connect()
    anon_sql.install(con)
    load_seed000(con)
    r = resolve_release(con, seed000_policy(method_params={"levels": LEVELS}))
    yield con, CompileInput(r.policy, r.source.relation, r.source.columns, LevelPlan(dict(LEVELS)), r.taxonomies,
                            r.models)
    con.close()


def test_the_steps_in_order_are_the_compiled_release(compile_input):
    _, ci = compile_input
    names = ReleaseNames(ci.policy.name, ci.schema)
    stepped = [render(s) for step in STEPS for _, s in step(ci, names)]
    assert stepped == [render(s) for _, s in compile_release(ci, names).statements]


def test_a_prefix_of_the_steps_runs_alone(compile_input):
    con, ci = compile_input
    names = ReleaseNames(ci.policy.name, ci.schema)
    prefix = STEPS[:STEPS.index(classes_step) + 1]
    for step in prefix:
        for _, stmt in step(ci, names):
            con.execute(render(stmt))
    classes = con.execute(render(exp.select("*").from_(names.classes.copy()))).df()
    source = con.execute("SELECT * FROM t1").df()
    assert classes["__size"].sum() == source["n"].sum()          # every record in one class, weighted by n
    assert len(classes) == len(classes.drop_duplicates(ci.policy.quasi)) and set(ci.policy.quasi) <= set(classes)


@pytest.mark.parametrize("dialect, engine", [("duckdb", "duckdb"), ("duckdb", "spark"), ("spark", "spark"),
                                             ("sqlite", "duckdb"), ("postgres", "duckdb")])
def test_only_duckdb_running_its_own_sql_gets_its_session_objects(dialect, engine):
    t = target(dialect, engine)
    assert isinstance(t, Target)
    native = (dialect, engine) == ("duckdb", "duckdb")
    assert (t.session_tables, t.enum_types, t.materialized_ctes, t.hash_order, t.work_schema, t.cached) == (native,) * 6
    assert t.list_aggregates == (dialect in ("duckdb", "spark"))   # Spark spells ordered lists sort_array(collect_list)
    assert t.replace_view == (dialect != "sqlite") and t.values_relation == (dialect != "sqlite")
