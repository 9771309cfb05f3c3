"""How a method plans on Spark, by what it reads (``Method.reads``), never by its name: the policy alone → planned
as on DuckDB; the base table (lattice searches) → aggregated in Spark and searched on the driver in an in-memory
DuckDB; the source's rows → a Spark planner registered for the method's class (Mondrian), else refused."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import duckdb
from sqlglot import exp

from ..errors import PolicyError
from ..methods import REGISTRY, Method, MethodContext, Plan
from ..methods.mondrian import Mondrian
from ..policy import Policy
from ..sqlbuild import alias, col, ident, record_count, render
from . import mondrian
from .engine import SparkSQL

BASE_WEIGHT = "__anon_n"

# method class → its Spark planner (methods that read the source's rows)
PLANNERS: dict[type[Method], Callable[..., Plan]] = {Mondrian: mondrian.plan}


def runs_on_spark(cls: type[Method]) -> bool:
    """Whether a method class can plan on Spark: it reads nothing or the base table, or has a Spark planner."""
    return cls.reads != "rows" or cls in PLANNERS


def plan(engine: Any, method: Method, ctx: MethodContext) -> Plan:
    """The method's plan for a Spark release (``ctx.source_view`` is the release's ``__source`` temporary view)."""
    if method.reads == "nothing":
        return method.plan(dataclasses.replace(ctx, con=None))
    if method.reads == "base":
        duck, proxy = search_base(engine.sq, method, ctx.policy, ctx.source_view, ctx.models)
        try:
            return method.plan(dataclasses.replace(ctx, con=duck, policy=proxy, source_view="base"))
        finally:
            duck.close()
    planner = PLANNERS.get(type(method))
    if planner is None:
        runs = sorted(n for n, cls in REGISTRY.items() if runs_on_spark(cls))
        raise PolicyError(f"method {method.name!r} does not run on Spark yet (Spark runs: {', '.join(runs)}); "
                          "release it with the DuckDB engine")
    return planner(engine.sq, ctx.policy, ctx.source_view, ctx.taxonomies, ctx.models, ctx.progress)


def search_base(sq: SparkSQL, method: Any, policy: Policy, source_view: str,
                models: list) -> tuple[duckdb.DuckDBPyConnection, Policy]:
    """Aggregate the lattice's base table (distinct QI text values, sensitive and — when the search counts distinct
    rows — other released columns, with record counts) in Spark, and hand it to the driver-side lattice as a DuckDB
    table ``base`` of an in-memory connection, with a policy whose count column is the aggregated weight."""
    columns = sq.spark.table(source_view).columns
    weight_name = BASE_WEIGHT
    while weight_name in columns:
        weight_name += "_"
    rows = getattr(method, "rows", True) or getattr(method, "objective", None) == "distinct_rows"
    sens = []
    for m in models:
        a = getattr(m, "attribute", None)
        if getattr(m, "needs_sensitive", False) and a is not None and a not in sens:
            sens.append(a)
    rest = [c for c in columns if c not in policy.quasi and c != policy.count_column and (rows or c in sens)]
    keys = [exp.Cast(this=col(q), to=exp.DataType.build("VARCHAR")) for q in policy.quasi] + [col(c) for c in rest]
    weight = record_count(policy.count_column)
    items = [alias(k.copy(), name) for k, name in zip(keys, policy.quasi + rest)] + [alias(weight, weight_name)]
    query = exp.select(*items).from_(exp.Table(this=ident(source_view))).group_by(*keys)
    arrow = sq.run(query).toArrow()
    duck = duckdb.connect()
    duck.register("__anon_base_arrow", arrow)
    duck.execute(render(exp.Create(this=exp.Table(this=ident("base")), kind="TABLE",
                                   expression=exp.select("*").from_("__anon_base_arrow"))))
    duck.unregister("__anon_base_arrow")
    return duck, dataclasses.replace(policy, count_column=weight_name)
