"""How a method plans on Spark, by what it reads (``Method.reads``), never by its name: the policy alone → planned
as on DuckDB; the base table (lattice searches) → aggregated in Spark and searched on the driver in an in-memory
DuckDB; the source's rows → a Spark planner registered for the method's class (Mondrian), else the rows of the
``__source`` view collected to the driver and planned by the method's own (DuckDB) planner over an in-memory DuckDB
copy — the same plan as on DuckDB, bounded by driver memory (:data:`DRIVER_ROWS_LIMIT`)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import duckdb
from sqlglot import exp

from .. import base_counts
from ..errors import PolicyError
from ..methods import Method, MethodContext, Plan
from ..methods.mondrian import Mondrian
from ..policy import Policy
from ..sqlbuild import alias, col, ident, record_count, render
from . import mondrian
from .engine import SparkSQL

BASE_WEIGHT = "__anon_n"
# methods that read rows without a Spark planner collect the __source view to the driver: refuse beyond this many
# records (an Arrow copy in the driver plus the method's numpy working set); raise it for a bigger driver
DRIVER_ROWS_LIMIT = 5_000_000

# method class → its Spark planner (methods that read the source's rows)
PLANNERS: dict[type[Method], Callable[..., Plan]] = {Mondrian: mondrian.plan}


def plan(engine: Any, method: Method, ctx: MethodContext) -> Plan:
    """The method's plan for a Spark release (``ctx.source_view`` is the release's ``__source`` temporary view)."""
    if method.reads == "nothing":
        return method.plan(dataclasses.replace(ctx, con=None))
    if method.reads == "base":
        duck, proxy = search_base(engine.sq, method, ctx.policy, ctx.source_view, ctx.models, ctx.base)
        try:
            return method.plan(dataclasses.replace(ctx, con=duck, policy=proxy, source_view="base", base=None))
        finally:
            duck.close()
    planner = PLANNERS.get(type(method))
    if planner is not None:
        return planner(engine.sq, ctx.policy, ctx.source_view, ctx.taxonomies, ctx.models, ctx.progress)
    duck = driver_rows(engine.sq, method, ctx)
    try:
        return method.plan(dataclasses.replace(ctx, con=duck))
    finally:
        duck.close()


def driver_rows(sq: SparkSQL, method: Method, ctx: MethodContext,
                limit: int | None = None) -> duckdb.DuckDBPyConnection:
    """The release's ``__source`` view (row key ``__row`` included, as Spark computed it) collected to the driver as
    Arrow and kept as the table of the same name in an in-memory DuckDB holding the ``anon`` catalog — what the
    method's planner reads on DuckDB. Refuses sources of more than ``limit`` records (driver memory)."""
    from .. import catalog

    limit = DRIVER_ROWS_LIMIT if limit is None else limit
    if ctx.records > limit:
        raise PolicyError(f"method {method.name!r} plans on the Spark driver over the collected rows, and the source "
                          f"has {ctx.records:,} records (limit {limit:,}: driver memory); release it with the DuckDB "
                          "engine, sample the source, or raise anon_sql.spark.planning.DRIVER_ROWS_LIMIT with a "
                          "bigger spark.driver.memory")
    arrow = sq.spark.table(_quoted(ctx.source_view)).toArrow()
    duck = duckdb.connect()
    try:
        catalog.install(duck)
        duck.register("__anon_rows_arrow", arrow)
        duck.execute(render(exp.Create(this=exp.Table(this=ident(ctx.source_view)), kind="TABLE",
                                       expression=exp.select("*").from_("__anon_rows_arrow"))))
        duck.unregister("__anon_rows_arrow")
    except BaseException:
        duck.close()
        raise
    return duck


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def search_base(sq: SparkSQL, method: Any, policy: Policy, source_view: str, models: list,
                base: exp.Table | None = None) -> tuple[duckdb.DuckDBPyConnection, Policy]:
    """Aggregate the lattice's base table (distinct QI text values, sensitive and — when the search counts distinct
    rows — other released columns, with record counts) in Spark, and hand it to the driver-side lattice as a DuckDB
    table ``base`` of an in-memory connection, with a policy whose count column is the aggregated weight. ``base``:
    the release's cached base counts, grouped again when they hold every column needed (no scan of the source)."""
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
    weight: exp.Expression = record_count(policy.count_column)
    relation = exp.Table(this=ident(source_view))
    if base is not None and set(policy.quasi + rest) <= set(base_counts.keys(policy)):
        weight, relation = exp.Sum(this=col(base_counts.WEIGHT)), base.copy()
    items = [alias(k.copy(), name) for k, name in zip(keys, policy.quasi + rest)] + [alias(weight, weight_name)]
    query = exp.select(*items).from_(relation).group_by(*keys)
    arrow = sq.run(query).toArrow()
    duck = duckdb.connect()
    duck.register("__anon_base_arrow", arrow)
    duck.execute(render(exp.Create(this=exp.Table(this=ident("base")), kind="TABLE",
                                   expression=exp.select("*").from_("__anon_base_arrow"))))
    duck.unregister("__anon_base_arrow")
    return duck, dataclasses.replace(policy, count_column=weight_name)
