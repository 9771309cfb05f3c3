"""The Spark engine: a SparkSession behind :class:`~anon_sql.engines.base.Engine`, so the release runner of
:mod:`anon_sql.release` runs on it unchanged."""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlglot import exp

from ..engines.base import Engine
from ..errors import PolicyError
from ..source import Source
from ..sqlbuild import ident, render
from . import planning, udfs
from .engine import JobCounter, SparkSQL, require_pyspark, resolve_source, table_exists


class SparkEngine(Engine):
    """A SparkSession as a release engine: views are temporary views, the released table (and a row-keyed source)
    ``CACHE TABLE … AS``; there is no transaction, so a refused release drops everything it created."""

    name = "spark"
    where = " in the Spark session"

    def __init__(self, spark: Any, catalog: Any = None, output: str | None = None, replace: bool = False):
        super().__init__()
        require_pyspark()
        self.spark = spark
        self.sq = SparkSQL(spark)
        self.jobs = JobCounter(spark)
        self._catalog = catalog
        self.output, self.replace = output, replace
        self.flavor = "spark"
        self.sql: list[str] = []

    @property
    def con(self) -> SparkSQL:
        return self.sq

    @property
    def catalog(self) -> Any:
        return self._catalog

    def exists(self, name: str) -> bool:
        return table_exists(self.spark, name)

    def register_source(self, source: Any, label: str) -> Source:
        src = resolve_source(self.spark, source, label)
        if src.relation.name == label:
            self.created.append(label)   # a path / DataFrame source's view goes with a failed release
        return src

    def prepare(self, models: list) -> None:
        if not all(m.portable for m in models):
            udfs.register(self.spark)
            self.flavor = "duckdb"   # duckdb trees carry the count lists; udfs.to_spark rewrites them

    def pseudonym_function(self, policy: Any) -> str | None:
        if any(a.role == "identifier" and a.action == "pseudonymize" for a in policy.attributes.values()):
            raise PolicyError("pseudonymized identifiers are not supported on Spark yet (the keyed hash is a DuckDB "
                              "UDF): drop the identifier (action = \"drop\") or release with the DuckDB engine")
        return None

    def plan(self, method: Any, ctx: Any) -> Any:
        return planning.plan(self, method, ctx)

    def execute(self, stmt: exp.Expression) -> None:
        self.spark.sql(self.render(stmt))

    def fetch(self, query: exp.Expression) -> pd.DataFrame:
        return self.spark.sql(self.render(query)).toPandas()

    def render(self, tree: exp.Expression) -> str:
        tree = udfs.to_spark(tree) if self.flavor != "spark" else tree
        return render(tree, "spark", pretty=True)

    def create(self, stmt: exp.Create, cache: bool = False, text: str | None = None) -> None:
        name = stmt.this.name   # ``text`` (DuckDB-flavoured) is not used: the tree is rewritten for Spark
        if stmt.args.get("kind") == "TABLE" or cache:
            self.drop(name)
            tree: exp.Expression = exp.Cache(this=exp.Table(this=ident(name)), expression=stmt.expression.copy(),
                                             lazy=False)
        else:
            tree = exp.Create(this=exp.Table(this=ident(name)), kind="VIEW", replace=True,
                              expression=stmt.expression.copy(),
                              properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
        text = self.render(tree)
        self.spark.sql(text)
        self.created.append(name)
        self.sql.append(text)

    def register_frame(self, frame: Any, name: str) -> None:
        """A Spark DataFrame as a cached temporary view of the release."""
        self.drop(name)
        frame.createOrReplaceTempView(name)
        self.spark.sql(render(exp.Cache(this=exp.Table(this=ident(name)), lazy=False), "spark"))
        self.created.append(name)

    def write_plan(self, names: Any, plan: Any, quasi: list[str]) -> None:
        """The assignment (a Spark DataFrame or pandas) and class values of a local-recoding plan."""
        from pyspark.sql import types as T

        assignment = plan.assignment
        if isinstance(assignment, pd.DataFrame):
            assignment = self.spark.createDataFrame(assignment)
        self.register_frame(assignment, names.assignment.name)
        values = plan.class_values
        fields = [T.StructField("ec_id", T.LongType(), False)]
        fields += [T.StructField(c, T.StringType(), True) for c in values.columns if c != "ec_id"]
        rows = values.astype(object).where(values.notna(), None)
        rows["ec_id"] = values["ec_id"].astype("int64")
        frame = self.spark.createDataFrame(list(rows.itertuples(index=False, name=None)), T.StructType(fields))
        self.register_frame(frame, names.ec_values.name)
        if plan.noise is not None and len(plan.noise):
            raise PolicyError("plans with noise records (θ-sensitivity) do not run on Spark yet; use DuckDB")

    def drop(self, name: str | exp.Table) -> None:
        name = name.name if isinstance(name, exp.Table) else name
        if table_exists(self.spark, name):
            self.spark.sql(render(exp.Uncache(this=exp.Table(this=ident(name)), exists=True), "spark"))
            if not self.spark.catalog.dropTempView(name):
                self.spark.sql(render(exp.Drop(tables=[exp.Table(this=ident(name))], kind="TABLE", exists=True),
                                      "spark"))

    def script(self, compiled: Any) -> list[str]:
        return list(self.sql)

    def record(self, rel: Any, plan: Any, source_label: str) -> None:
        """Spark keeps no catalog: the release persists as the ``output`` Parquet when one is asked for."""
        if self.output:
            with self.jobs.stage("output"):
                mode = "overwrite" if self.replace else "errorifexists"
                self.spark.table(rel.name).write.mode(mode).parquet(self.output)

    def stage(self, name: str) -> Any:
        return self.jobs.stage(name)

    def info(self) -> dict[str, Any]:
        return {"engine": "spark", "spark_jobs": dict(self.jobs.counts)}
