"""Spark plumbing shared by the Spark engine: a local session, a DuckDB-connection-shaped SQL runner, the source as a
temporary view, and a counter of the Spark jobs a stage launches."""
from __future__ import annotations

import csv
import itertools
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import sqlglot
from sqlglot import exp

from ...errors import AnonSQLError, SourceError
from ...data.source import Source, is_path, table_relation
from ...common.sqlbuild import ident, render

try:  # pyspark is an optional extra
    from pyspark.sql import DataFrame, SparkSession
except ImportError:  # pragma: no cover - exercised only without the extra
    DataFrame = SparkSession = None  # type: ignore[assignment,misc]

INSTALL_HINT = "the Spark engine needs pyspark: pip install 'anon-sql[spark]' (and Java 17+)"


def require_pyspark() -> None:
    """Raise a clear error when pyspark is not importable."""
    if SparkSession is None:
        raise AnonSQLError(INSTALL_HINT)


def local_session(cores: int = 2, shuffle_partitions: int = 4, app: str = "anon-sql",
                  conf: dict[str, str] | None = None) -> Any:
    """A local SparkSession (``local[cores]``) whose Python workers run this interpreter, UI and progress bars off."""
    require_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Result:
    """The part of a DuckDB result the shared release code reads: ``df()``, ``fetchall()``, ``arrow()``."""

    def __init__(self, frame: Any):
        self.frame = frame

    def df(self) -> pd.DataFrame:
        return self.frame.toPandas()

    def fetchall(self) -> list[tuple]:
        return [tuple(r) for r in self.frame.collect()]

    def arrow(self) -> Any:
        return self.frame.toArrow()


class SparkSQL:
    """Runs SQL written for DuckDB (the shared release code renders its small queries in DuckDB's dialect) on a
    SparkSession, transpiled by sqlglot; trees can be run directly with :meth:`run`."""

    def __init__(self, spark: Any):
        self.spark = spark

    def execute(self, sql: str, params: Any = None) -> _Result:
        if params:
            raise AnonSQLError("SparkSQL.execute takes no parameters: build the values into the sqlglot tree")
        text = sqlglot.transpile(sql, read="duckdb", write="spark")[0]
        return _Result(self.spark.sql(text))

    def run(self, tree: exp.Expression) -> Any:
        """Execute a sqlglot tree rendered for Spark; returns the Spark DataFrame."""
        return self.spark.sql(render(tree, "spark"))


# -- types --------------------------------------------------------------------------------------------------------
_TYPES = {"tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT", "float": "FLOAT",
          "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
          "timestamp_ntz": "TIMESTAMP", "binary": "BLOB"}


def duck_type(simple: str) -> str:
    """A Spark type's simpleString as the DuckDB type name the shared code understands (``decimal(…)`` kept)."""
    base = simple.split("(")[0]
    if base == "decimal":
        return simple.upper()
    if base.startswith(("varchar", "char")):
        return "VARCHAR"
    return _TYPES.get(base, simple.upper())


def temporary_view(name: str, query: exp.Expression) -> exp.Create:
    """``CREATE OR REPLACE TEMPORARY VIEW name AS query``."""
    return exp.Create(this=exp.Table(this=ident(name)), kind="VIEW", replace=True, expression=query,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def table_exists(spark: Any, name: str, qualified: bool = False) -> bool:
    """Whether the session has a table or temporary view ``name`` (any characters; ``qualified``: a dotted
    ``db.table`` name is tried as such first)."""
    if qualified:
        try:
            if spark.catalog.tableExists(name):
                return True
        except Exception:  # not a parseable multipart name: fall back to one quoted identifier
            pass
    return bool(spark.catalog.tableExists(quoted_name(name)))


def quoted_name(name: str) -> str:
    """A table or view name as Spark reads it in ``spark.table`` / the catalog (backticks, doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


# -- source -------------------------------------------------------------------------------------------------------
def _csv_delimiter(path: Path) -> str:
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        sample = fh.read(65536)
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def read_path(spark: Any, path: str) -> Any:
    """A Parquet file/directory or a CSV file (header, inferred types, sniffed delimiter) as a Spark DataFrame."""
    p = Path(path)
    if not p.exists():
        raise SourceError(f"source file {path!r} does not exist")
    if p.suffix.lower() in (".parquet", ".pq") or p.is_dir():
        return spark.read.parquet(str(p))
    return spark.read.csv(str(p), header=True, inferSchema=True, sep=_csv_delimiter(p))


def resolve_spark_source(spark: Any, source: Any, view: str) -> Source:
    """The policy's source in Spark: a table / temporary view of the session, a Parquet/CSV path, or a Spark
    DataFrame (registered as the temporary view ``view``; a table is read in place)."""
    require_pyspark()
    if DataFrame is not None and isinstance(source, DataFrame):
        frame, label = source, view
    elif isinstance(source, pd.DataFrame):
        frame, label = spark.createDataFrame(source), view
    elif isinstance(source, str) and is_path(source) and Path(source).exists():
        frame, label = read_path(spark, source), source
    elif isinstance(source, str):
        if not table_exists(spark, source, qualified=True):
            if is_path(source):
                raise SourceError(f"source file {source!r} does not exist")
            known = [t.name for t in spark.catalog.listTables()]
            raise SourceError(f"source {source!r} is not a table or view of the Spark session (found: {known[:20]}); "
                              "register it (df.createOrReplaceTempView) or give a .csv/.parquet path")
        frame = spark.table(source if table_exists(spark, source, qualified=True) else quoted_name(source))
        schema = frame.schema
        return Source(source, table_relation(source), [f.name for f in schema.fields],
                      {f.name: duck_type(f.dataType.simpleString()) for f in schema.fields})
    else:
        raise SourceError(f"source must be a table name, a .csv/.parquet path or a DataFrame, got {type(source)}")
    frame.createOrReplaceTempView(view)
    schema = frame.schema
    columns = [f.name for f in schema.fields]
    types = {f.name: duck_type(f.dataType.simpleString()) for f in schema.fields}
    return Source(label, exp.Table(this=ident(view)), columns, types)


# -- jobs ---------------------------------------------------------------------------------------------------------
_GROUPS = itertools.count(1)


@dataclass
class JobCounter:
    """Counts the Spark jobs launched inside :meth:`stage` blocks (one job group per stage) and times them."""

    spark: Any
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        sc = self.spark.sparkContext
        # a name no other stage of the session had (an id() is reused once its object is gone: a later release
        # would count an earlier one's jobs too)
        group = f"anon-sql-{name}-{next(_GROUPS)}"
        sc.setJobGroup(group, f"anon-sql {name}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.counts[name] = self.counts.get(name, 0) + len(sc.statusTracker().getJobIdsForGroup(group))
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)

