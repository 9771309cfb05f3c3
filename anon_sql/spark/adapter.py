"""``anon_sql.spark.release(spark, policy)``: the DuckDB release flow, run on a SparkSession.

The policy is prepared with the same code as in DuckDB (its small queries transpiled to Spark SQL), the release views
are the compiler's sqlglot trees rendered for Spark (temporary views; the released table is ``CACHE TABLE … AS``),
and the verification is the same SQL checks view over the released table, read back by the same code. Lattice
searches aggregate the base table of distinct combinations in Spark and search it on the driver; Mondrian computes
its split statistics level by level in Spark (:mod:`anon_sql.spark.mondrian`).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import duckdb
import pandas as pd
from sqlglot import exp

from ..compiler import CompileInput, ReleaseNames, compile_release
from ..errors import PolicyError, PrivacyRequirementError, ReleaseExistsError
from ..methods import AssignmentPlan, LevelPlan, MethodContext, get_method
from ..models import build_models
from ..policy import Policy, coerce_policy
from ..release import (Release, _count_records, _effective_policy, _failure_message, _is_numeric, _plan_dict,
                       _verify, check_records, failing_classes_records, resolve_taxonomies as _resolve_taxonomies)
from ..source import Source
from ..sqlbuild import alias, col, ident, record_count, render
from ..taxonomy import Taxonomy
from . import udfs
from .engine import JobCounter, SparkSQL, require_pyspark, resolve_source, table_exists

SEARCHES = ("iab", "exhaustive", "greedy", "optimal")
BASE_WEIGHT = "__anon_n"


def release(spark: Any, policy: Policy | dict | str, *, source: Any = None, output: str | None = None,
            replace: bool = False, catalog: duckdb.DuckDBPyConnection | None = None,
            progress: Callable[[str], None] | None = None) -> Release:
    """Plan, materialize and verify a release on Spark; ``Release.name`` is a cached temporary view of the session.

    ``source`` overrides the policy's source (a table / view name, a Parquet/CSV path, or a Spark DataFrame);
    ``output`` also writes the released rows as Parquet; ``catalog`` is a DuckDB connection whose ``anon`` catalog
    holds named taxonomies (built-in and file taxonomies need none). A failed check drops everything the release
    created and raises :class:`PrivacyRequirementError`.
    """
    require_pyspark()
    say = progress or (lambda message: None)
    t0 = time.perf_counter()
    jobs = JobCounter(spark)
    sq = SparkSQL(spark)
    policy = coerce_policy(policy)
    names = ReleaseNames(policy.name)
    exists = table_exists(spark, policy.name)
    if exists and not replace:
        raise ReleaseExistsError(f"a table or view named {policy.name!r} already exists in the Spark session; pass "
                                 "replace=True (CLI: --replace) or choose another name")
    with jobs.stage("prepare"):
        src = resolve_source(spark, source if source is not None else policy.source, policy.name + "__input")
        if policy.name == src.label:
            raise PolicyError(f"release name {policy.name!r} would overwrite the source; choose another")
        policy = _effective_policy(policy, src)
        records = _count_records(sq, src, policy)
        check_records(policy, src, records)
        method = get_method(policy.method, policy.method_params)
        taxonomies = resolve_taxonomies(sq, policy, src, method.needs_taxonomies, catalog)
    models = build_models(policy, catalog)
    if any(a.role == "identifier" and a.action == "pseudonymize" for a in policy.attributes.values()):
        raise PolicyError("pseudonymized identifiers are not supported on Spark yet (the keyed hash is a DuckDB "
                          "UDF): drop the identifier (action = \"drop\") or release with the DuckDB engine")
    portable = all(m.portable for m in models)
    if not portable:
        udfs.register(spark)
    flavor = "spark" if portable else "duckdb"  # duckdb trees carry the count lists; udfs.to_spark rewrites them
    numeric_sa = {s for s in policy.sensitive if _is_numeric(src.types.get(s, ""))}
    runner = _Runner(sq, names, flavor)
    if src.relation.name == policy.name + "__input":
        runner.created.append(src.relation.name)   # a path / DataFrame source's view goes with a failed release
    try:
        kind_plan: LevelPlan | AssignmentPlan = (AssignmentPlan(pd.DataFrame(), pd.DataFrame())
                                                 if method.plan_kind == "assignment" else LevelPlan({}))
        probe = CompileInput(policy, src.relation, src.columns, kind_plan, taxonomies, models, dialect=flavor,
                             numeric_sensitive=numeric_sa, engine="spark")
        with jobs.stage("plan"):
            # assignment plans key rows by ROW_NUMBER over every column: computed once, cached
            runner.run(compile_release(probe, names).statements[0][1], cache=method.plan_kind == "assignment")
            say("planning")
            plan = _plan(spark, sq, method, policy, names.source.name, taxonomies, models, records, say)
        ci = CompileInput(policy, src.relation, src.columns, plan, taxonomies, models, dialect=flavor,
                          numeric_sensitive=numeric_sa, engine="spark")
        compiled = compile_release(ci, names)
        say("materializing")
        with jobs.stage("materialize"):
            if isinstance(plan, AssignmentPlan):
                runner.plan_tables(spark, plan, policy.quasi)
            if exists:
                runner.drop(policy.name)
            for _, stmt in compiled.statements[1:]:
                runner.run(stmt)
        say("verifying")
        with jobs.stage("verify"):
            result = _verify(sq, policy, compiled, models, records, plan)
            if result["failures"]:
                need = failing_classes_records(sq, names)
                raise PrivacyRequirementError(_failure_message(policy, plan, result, records, need, at_least=True))
        if output:
            with jobs.stage("output"):
                spark.table(policy.name).write.mode("overwrite" if replace else "errorifexists").parquet(output)
    except BaseException:
        runner.drop_all()
        raise
    info = {**getattr(plan, "info", {}), "seconds": time.perf_counter() - t0, "engine": "spark",
            "spark_jobs": dict(jobs.counts)}
    return Release(policy.name, policy, runner.sql, _plan_dict(plan), result["classes"], result["checks"],
                   result["metrics"], records, result["records_out"], result["suppressed"], result["noise"],
                   materialized=True, info=info)


class _Runner:
    """Executes compiled statements on Spark: views as temporary views, the released table (and what ``cache``
    asks for) as ``CACHE TABLE … AS``; remembers what it created so that a failure can drop all of it."""

    def __init__(self, sq: SparkSQL, names: ReleaseNames, flavor: str):
        self.sq, self.names, self.flavor = sq, names, flavor
        self.created: list[str] = []
        self.sql: list[str] = []

    def _text(self, tree: exp.Expression) -> str:
        tree = udfs.to_spark(tree) if self.flavor != "spark" else tree
        return render(tree, "spark", pretty=True)

    def run(self, stmt: exp.Expression, cache: bool = False) -> None:
        assert isinstance(stmt, exp.Create)
        name = stmt.this.name
        if stmt.args.get("kind") == "TABLE" or cache:
            self.drop(name)
            tree: exp.Expression = exp.Cache(this=exp.Table(this=ident(name)), expression=stmt.expression.copy(),
                                             lazy=False)
        else:
            tree = exp.Create(this=exp.Table(this=ident(name)), kind="VIEW", replace=True,
                              expression=stmt.expression.copy(),
                              properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
        text = self._text(tree)
        self.sq.spark.sql(text)
        self.created.append(name)
        self.sql.append(text)

    def register(self, frame: Any, name: str) -> None:
        """A Spark DataFrame as a cached temporary view of the release."""
        self.drop(name)
        frame.createOrReplaceTempView(name)
        self.sq.spark.sql(render(exp.Cache(this=exp.Table(this=ident(name)), lazy=False), "spark"))
        self.created.append(name)

    def plan_tables(self, spark: Any, plan: AssignmentPlan, quasi: list[str]) -> None:
        """The assignment (a Spark DataFrame or pandas), class values and noise of a local-recoding plan."""
        from pyspark.sql import types as T

        assignment = plan.assignment
        if isinstance(assignment, pd.DataFrame):
            assignment = spark.createDataFrame(assignment)
        self.register(assignment, self.names.assignment.name)
        values = plan.class_values
        fields = [T.StructField("ec_id", T.LongType(), False)]
        fields += [T.StructField(c, T.StringType(), True) for c in values.columns if c != "ec_id"]
        rows = values.astype(object).where(values.notna(), None)
        rows["ec_id"] = values["ec_id"].astype("int64")
        frame = spark.createDataFrame(list(rows.itertuples(index=False, name=None)), T.StructType(fields))
        self.register(frame, self.names.ec_values.name)
        if plan.noise is not None and len(plan.noise):
            raise PolicyError("plans with noise records (θ-sensitivity) do not run on Spark yet; use DuckDB")

    def drop(self, name: str) -> None:
        spark = self.sq.spark
        if table_exists(spark, name):
            spark.sql(render(exp.Uncache(this=exp.Table(this=ident(name)), exists=True), "spark"))
            if not spark.catalog.dropTempView(name):
                spark.sql(render(exp.Drop(tables=[exp.Table(this=ident(name))], kind="TABLE", exists=True), "spark"))

    def drop_all(self) -> None:
        for name in reversed(self.created):
            self.drop(name)
        self.created.clear()


def _plan(spark: Any, sq: SparkSQL, method: Any, policy: Policy, source_view: str, taxonomies: dict[str, Taxonomy],
          models: list, records: int, say: Callable[[str], None]) -> LevelPlan | AssignmentPlan:
    """The method's plan: fixed levels directly, lattice searches over a base table aggregated in Spark, Mondrian
    level by level in Spark."""
    if policy.method == "levels":
        return method.plan(MethodContext(None, policy, source_view, taxonomies, models, records, say))
    if policy.method in SEARCHES:
        duck, proxy = search_base(sq, method, policy, source_view, models)
        try:
            return method.plan(MethodContext(duck, proxy, "base", taxonomies, models, records, say))
        finally:
            duck.close()
    if policy.method == "mondrian":
        from .mondrian import plan as mondrian_plan

        return mondrian_plan(sq, policy, source_view, taxonomies, models, say)
    raise PolicyError(f"method {policy.method!r} does not run on Spark yet (Spark runs: levels, "
                      f"{', '.join(SEARCHES)}, mondrian); release it with the DuckDB engine")


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


def resolve_taxonomies(sq: SparkSQL, policy: Policy, src: Source, need: bool,
                       catalog: duckdb.DuckDBPyConnection | None = None) -> dict[str, Taxonomy]:
    """The DuckDB path's taxonomy resolution, with value counts from Spark (values as Spark's text)."""
    return _resolve_taxonomies(sq, policy, src, need, catalog_con=catalog)
