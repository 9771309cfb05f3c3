"""How a method plans on Spark, by what it reads (``Method.reads``), never by its name: the policy alone → planned
as on DuckDB; the base table (lattice searches) → aggregated in Spark and searched on the driver in an in-memory
DuckDB; the source's rows → a Spark planner registered for the method's class (Mondrian, local suppression), else
the rows of the ``__source`` view collected to the driver and planned by the method's own (DuckDB) planner over an
in-memory DuckDB copy — the same plan as on DuckDB, bounded by driver memory (:data:`DRIVER_ROWS_LIMIT`). A method
that plans with the population of k-map / δ-presence reads it on the driver as its distinct quasi-identifier
combinations with their records, aggregated in Spark (never its rows; at most :data:`DRIVER_ROWS_LIMIT`
combinations)."""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import duckdb
from sqlglot import exp

from ...data import base_counts
from ...errors import PolicyError
from ...methods import AssignmentPlan, Method, MethodContext, Plan
from ...methods.local_values import assign_rows
from ...methods.local_suppression import LocalSuppression
from ...methods.mondrian import Mondrian
from ...models import population_models
from ...models.population import WEIGHT as POP_WEIGHT
from ...policy.model import Policy
from ...common.columns import UNIT
from ...common.sqlbuild import alias, col, ident, record_count, render
from . import mondrian
from .local_suppression import plan_local_suppression
from .session import SparkSQL, quoted_name

BASE_WEIGHT = "__anon_n"
DRIVER_POPULATION = "__anon_population"   # the population's combinations in the driver's in-memory DuckDB
# methods that read rows without a Spark planner collect the __source view to the driver: refuse beyond this many
# records (an Arrow copy in the driver plus the method's numpy working set); raise it for a bigger driver
DRIVER_ROWS_LIMIT = 5_000_000

# method class → its Spark planner (methods that read the source's rows)
PLANNERS: dict[type[Method], Callable[..., Plan]] = {Mondrian: mondrian.plan_mondrian,
                                                     LocalSuppression: plan_local_suppression}


def plan_spark_release(engine: Any, method: Method, ctx: MethodContext) -> Plan:
    """The method's plan for a Spark release (``ctx.source_view`` is the release's ``__source`` temporary view)."""
    if method.reads == "nothing":
        return method.plan(dataclasses.replace(ctx, con=None))
    if method.reads == "base":
        duck, proxy = search_base(engine.sq, method, ctx.policy, ctx.source_view, ctx.models, ctx.base)
        try:
            models = driver_population(engine.sq, duck, ctx.models)
            return method.plan(dataclasses.replace(ctx, con=duck, policy=proxy, source_view="base", base=None,
                                                   models=models))
        finally:
            duck.close()
    planner = PLANNERS.get(type(method))
    # the Spark planners count neither a population nor people: with k-map / δ-presence or a privacy unit the
    # method's own planner runs on the driver (with a unit, over combinations weighted by people: docs/units.md)
    if planner is not None and not population_models(ctx.models) and not getattr(ctx.policy, "privacy_unit", None):
        return planner(engine.sq, ctx.policy, ctx.source_view, ctx.taxonomies, ctx.models, ctx.progress)
    duck = driver_rows(engine.sq, method, ctx)
    try:
        driver = dataclasses.replace(ctx, con=duck, models=driver_population(engine.sq, duck, ctx.models))
        out = method.plan(driver)
        if isinstance(out, AssignmentPlan) and out.assignment is None and out.tuple_classes is not None:
            # a class per QI tuple (Mondrian with k-map / δ-presence): DuckDB's release joins the tuples in its own
            # session; here the rows are on the driver already, so the per-row assignment is computed with them
            out = dataclasses.replace(out, assignment=assign_rows(driver, out.tuple_classes))
        return out
    finally:
        duck.close()


def driver_population(sq: SparkSQL, duck: duckdb.DuckDBPyConnection, models: list,
                      limit: int | None = None) -> list:
    """The models as the driver-side planner reads them: a population model's population becomes its distinct
    quasi-identifier combinations with their records (``__pw``), aggregated in Spark and kept as the table
    ``__anon_population`` of the planner's in-memory DuckDB ``duck`` — the same relation, counted, so the same plan.
    Refuses a population of more than ``limit`` combinations (driver memory); models without a population as given."""
    pop_models = population_models(models)
    if not pop_models:
        return list(models)
    pop = pop_models[0].population
    limit = DRIVER_ROWS_LIMIT if limit is None else limit
    quasi = list(pop.quasi)
    query = (exp.select(*[col(q) for q in quasi], alias(exp.Sum(this=col(POP_WEIGHT)), POP_WEIGHT))
             .from_(exp.Subquery(this=pop.relation.copy(), alias=exp.TableAlias(this=ident("p"))))
             .group_by(*[col(q) for q in quasi]).limit(limit + 1))
    arrow = sq.run(query).toArrow()
    if arrow.num_rows > limit:
        raise PolicyError(f"population {pop.name!r} has more than {limit:,} distinct quasi-identifier combinations, "
                          "which the planner reads on the Spark driver (limit: driver memory); release on DuckDB, or "
                          "raise anon_sql.engines.spark.planning.DRIVER_ROWS_LIMIT with a bigger spark.driver.memory")
    duck.register("__anon_population_arrow", arrow)
    duck.execute(render(exp.Create(this=exp.Table(this=ident(DRIVER_POPULATION)), kind="TABLE", replace=True,
                                   expression=exp.select("*").from_("__anon_population_arrow"))))
    duck.unregister("__anon_population_arrow")
    counted = dataclasses.replace(pop, relation=exp.select("*").from_(exp.Table(this=ident(DRIVER_POPULATION))))
    out = []
    for m in models:
        if any(m is p for p in pop_models):
            m = copy.copy(m)
            m.population = counted
        out.append(m)
    return out


def driver_rows(sq: SparkSQL, method: Method, ctx: MethodContext,
                limit: int | None = None) -> duckdb.DuckDBPyConnection:
    """The release's ``__source`` view (row key ``__row`` included, as Spark computed it) collected to the driver as
    Arrow and kept as the table of the same name in an in-memory DuckDB holding the ``anon`` catalog — what the
    method's planner reads on DuckDB. Refuses sources of more than ``limit`` records (driver memory)."""
    from ...catalog import store as catalog

    limit = DRIVER_ROWS_LIMIT if limit is None else limit
    if ctx.records > limit:
        raise PolicyError(f"method {method.name!r} plans on the Spark driver over the collected rows, and the source "
                          f"has {ctx.records:,} records (limit {limit:,}: driver memory); release it with the DuckDB "
                          "engine, sample the source, or raise anon_sql.engines.spark.planning.DRIVER_ROWS_LIMIT with a "
                          "bigger spark.driver.memory")
    arrow = sq.spark.table(quoted_name(ctx.source_view)).toArrow()
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
    unit = getattr(policy, "privacy_unit", None)
    if unit:   # people: the search counts distinct units over each (QI, sensitive, unit) row (methods/people.py)
        rest = [c for c in columns if c in sens] + [UNIT]
    else:
        rest = [c for c in columns if c not in policy.quasi and c != policy.count_column and (rows or c in sens)]
    keys = [exp.Cast(this=col(q), to=exp.DataType.build("VARCHAR")) for q in policy.quasi] + [col(c) for c in rest]
    weight: exp.Expression = record_count(policy.count_column)
    relation = exp.Table(this=ident(source_view))
    if base is not None and set(policy.quasi + rest) <= set(base_counts.keys(policy)):
        weight, relation = exp.Sum(this=col(base_counts.WEIGHT)), base.copy()
    items = [alias(k.copy(), name) for k, name in zip(keys, policy.quasi + rest)] + [alias(weight, weight_name)]
    query = exp.select(*items).from_(relation).group_by(*keys)
    if unit:   # a row per person and value: bounded by driver memory like collected rows
        query = query.limit(DRIVER_ROWS_LIMIT + 1)
    arrow = sq.run(query).toArrow()
    if unit and arrow.num_rows > DRIVER_ROWS_LIMIT:
        raise PolicyError(f"a lattice search with privacy_unit {unit!r} reads one row per person and sensitive value "
                          f"on the Spark driver, and the source has more than {DRIVER_ROWS_LIMIT:,} (limit: driver "
                          "memory); release it with the DuckDB engine, or raise "
                          "anon_sql.engines.spark.planning.DRIVER_ROWS_LIMIT with a bigger spark.driver.memory")
    duck = duckdb.connect()
    duck.register("__anon_base_arrow", arrow)
    duck.execute(render(exp.Create(this=exp.Table(this=ident("base")), kind="TABLE",
                                   expression=exp.select("*").from_("__anon_base_arrow"))))
    duck.unregister("__anon_base_arrow")
    # with a unit the search counts the people of those rows itself (a count column is refused with a unit)
    return duck, (policy if unit else dataclasses.replace(policy, count_column=weight_name))
