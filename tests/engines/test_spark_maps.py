"""The Spark engine's level maps by name: the engine hands the compiler each map's view (``CompileInput.level_map``,
anon_sql.engines.spark.maps), so the compiled tree joins it by name and nothing rewrites the tree afterwards."""
from __future__ import annotations

import dataclasses

import duckdb
import pytest
import sqlglot
from sqlglot import exp

import anon_sql
from anon_sql.compiler.views import CompileInput, ReleaseNames, compile_release
from anon_sql.engines.spark import maps
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
    yield CompileInput(r.policy, r.source.relation, r.source.columns, LevelPlan(dict(LEVELS)), r.taxonomies,
                       r.models, dialect="spark", engine="spark")
    con.close()


def _general(ci: CompileInput) -> exp.Expression:
    names = ReleaseNames(ci.policy.name, ci.schema)
    return next(s for _, s in compile_release(ci, names).statements
                if isinstance(s, exp.Create) and s.this.name == names.general.name)


def test_each_level_map_is_joined_by_the_name_the_engine_gives(compile_input):
    seen: list[tuple] = []

    def view(rows):
        if rows not in seen:
            seen.append(rows)
        return f"r__map{seen.index(rows) + 1}"

    tree = _general(dataclasses.replace(compile_input, level_map=view))
    taxonomies = compile_input.taxonomies
    assert sorted(seen) == sorted(tuple(taxonomies[c].mapping(level).items()) for c, level in LEVELS.items())
    aliases = {t.name: t.alias for t in tree.find_all(exp.Table) if t.name.startswith("r__map")}
    assert aliases == {"r__map1": "m0", "r__map2": "m1"}
    assert not any(v.alias in ("m0", "m1") for v in tree.find_all(exp.Values))


def test_without_an_engine_map_the_maps_stay_inline(compile_input):
    tree = _general(compile_input)
    assert sorted(v.alias for v in tree.find_all(exp.Values)) == ["m0", "m1"]


def test_the_script_statement_holds_the_rows():
    text = maps.statement("r__map1", (("17", "[15-20["), ("O'Neil", "*")))
    parsed = sqlglot.parse_one(text, read="spark")
    assert isinstance(parsed, exp.Create) and parsed.this.name == "r__map1"
    rows = [tuple(v.this for v in t.expressions) for t in parsed.find(exp.Values).expressions]
    assert rows == [("17", "[15-20["), ("O'Neil", "*")]
