"""The Spark engine: a SparkSession behind :class:`~anon_sql.engines.base.Engine`, so the release runner of
:mod:`anon_sql.runner.run` runs on it unchanged."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from sqlglot import exp

from ...data import base_counts
from ...common.columns import EC_ID, UNIT
from ...compiler.views import COUNTED_ROWS
from ..base import Engine
from ...data.source import Source, is_path
from ...common.sqlbuild import ident, render
from . import ctes, driver_checks, maps, ownership, planning, udfs
from .driver_tables import DriverFirstSQL, DriverTables
from .ownership import UNITS_SUFFIX
from .session import (JobCounter, SparkSQL, quoted_name, require_pyspark, resolve_spark_source, table_exists,
                      temporary_view)


class SparkEngine(Engine):
    """A SparkSession as a release engine: views are temporary views, tables (a row-keyed source, the distinct
    rows of a release, or the release itself) ``CACHE TABLE … AS``; there is no transaction, so a refused release
    drops everything it created."""

    name = "spark"
    where = " in the Spark session"
    persists = False   # every object is a temporary view of the session: nothing outlives it, nothing to tidy
    # a release written as repeated rows is cached as the rows with their counts it repeats and the table is a view
    # repeating them: caching every record costs about three bare GROUP BYs of the source at 10M rows (Spark's
    # in-memory columnar cache, or a Parquet write) and reading them back is slower than repeating the counted
    # rows again (docs/spark.md, "Performance")
    keeps_counted_rows = True
    releases_signatures = False   # no list_sort: QIs varying inside a unit are refused (docs/spark.md)
    releases_related = False      # no catalog to mark related tables with: [related.*] is refused
    inline_masks = True   # the anon.* macros live in DuckDB files: their bodies run inline (anon_sql.sdc.portable)

    def __init__(self, spark: Any, catalog: Any = None, output: str | None = None, replace: bool = False):
        super().__init__()
        require_pyspark()
        from pyspark.errors import PySparkException

        self.errors = (PySparkException,)   # e.g. a population value that does not cast to the source's type
        self.spark = spark
        self.sq = SparkSQL(spark)
        self.jobs = JobCounter(spark)
        self._catalog = catalog
        self.output, self.replace = output, replace
        self.flavor = "spark"
        self.sql: list[str] = []
        self.scratch: list[str] = []   # caches only the release's own statements read (hoisted CTEs, base counts)
        self.release_name = "anon_release"   # set by claim_name: the prefix of the level-map views
        self.maps: dict[tuple, str] = {}     # (leaf, value) rows of a taxonomy level → its view (maps.py)
        # the queries of the views and lazy caches this release defined: a view over the release is defined again
        # over the rows kept with the unit when the unit leaves the release (drop_unit)
        self.defined: dict[str, tuple[exp.Expression, bool]] = {}
        self.driver = DriverTables(spark)   # the release's small tables computed on the driver (driver_tables.py)

    @property
    def con(self) -> SparkSQL:
        return self.sq

    @property
    def catalog(self) -> Any:
        return self._catalog

    def exists(self, name: str) -> bool:
        return table_exists(self.spark, name)

    def claim_name(self, name: str, replace: bool, dry_run: bool) -> bool:
        """Never a table or view this session's releases did not create (:mod:`anon_sql.engines.spark.ownership`)."""
        self.release_name = name
        try:
            return ownership.claim_spark_release_name(self.spark, name, replace=replace, dry_run=dry_run)
        except BaseException:
            self.cleanup()   # the source's input view registered for this release goes too
            raise

    def register_source(self, source: Any, label: str) -> Source:
        existed = False
        if not isinstance(source, str) or (is_path(source) and Path(source).exists()):
            ownership.check_working_name(self.spark, label)   # becomes the view ``label``: never over the user's
            existed = table_exists(self.spark, label)          # then an earlier release's: it stays with that one
        src = resolve_spark_source(self.spark, source, label)
        if src.relation.name == label and not existed:
            self.created.append(label)   # a path / DataFrame source's view goes with a failed release
        return src

    def base_table(self, release: str) -> exp.Table:
        """A name no existing view has: an earlier release of the same name still reads its own base counts (a
        refused replacement must leave it whole)."""
        return exp.Table(this=ident(self._fresh(release + base_counts.SUFFIX)))

    def base_counts(self, policy: Any, relation: exp.Expression, table: exp.Table, carried: Any = ()) -> Any:
        """The source aggregated once into a cached temporary view (one scan); the taxonomy coverage check, the
        searches and the release statement of a level plan read it instead of the source."""
        self._cache(table.name, base_counts.query(policy, relation), lazy=False)
        self.scratch.append(table.name)
        self.driver.offer(table.name)   # copied to the driver by the first query that reads it there
        return base_counts.reader(DriverFirstSQL(self.sq, self.driver), policy, table)

    def drop_base(self, table: exp.Table) -> None:
        """Kept once the release is committed (its temporary views read the base counts, like ``__source``); a
        refused release drops it with everything else it created."""
        if table.name in self.created:
            self.drop(table)

    def prepare(self, models: list) -> None:
        if not all(m.portable for m in models):
            udfs.register_spark_udfs(self.spark)    # the kernels the models' checks call, as the session's UDFs

    def pseudonym_function(self, policy: Any) -> str | None:
        """The keyed hash as a pandas UDF of the session: the DuckDB function's values (same key, same hex)."""
        ids = [a for a in policy.attributes.values() if a.role == "identifier" and a.action == "pseudonymize"]
        if not ids:
            return None
        from ...data import pseudonym

        return udfs.register_pseudonym(self.spark, pseudonym.load_key(ids[0].options.get("key_file")))

    def plan(self, method: Any, ctx: Any) -> Any:
        return planning.plan_spark_release(self, method, ctx)

    def execute(self, stmt: exp.Expression) -> None:
        self.spark.sql(self.render(stmt))

    def fetch(self, query: exp.Expression) -> pd.DataFrame:
        return self.spark.sql(self.render(query)).toPandas()

    def render(self, tree: exp.Expression) -> str:
        unknown = udfs.unknown_kernels(tree)
        if unknown:
            from ...errors import PolicyError

            raise PolicyError(f"the SQL function(s) {', '.join('anon.' + k for k in unknown)} have no Spark form "
                              f"(known: {sorted(udfs.KERNELS)})")
        return render(tree, "spark", pretty=True)

    def level_map(self, rows: tuple[tuple[str, str], ...]) -> str:
        """The temporary view of one taxonomy level map, registered once per release (:mod:`.maps`); the compiler
        joins it by name (``CompileInput.level_map``)."""
        name = self.maps.get(rows)
        if name is None:
            name = self._fresh(f"{self.release_name}{maps.SUFFIX}{len(self.maps) + 1}")
            maps.register_map_view(self.spark, rows, name)
            self.driver.offer_rows(name, maps.COLUMNS, rows)
            self.maps[rows] = name
            self.created.append(name)
            self.sql.append(maps.statement(name, rows))
        return name

    def create(self, stmt: exp.Create, cache: bool = False, text: str | None = None) -> None:
        """A view as a temporary view; the released table and its counted rows as ``CACHE TABLE`` (rows that keep
        their lineage); any other table — a working step the release builds on — as a local checkpoint, a leaf of
        the plans that read it. Every common table expression the statement reads more than once first becomes a
        lazily cached view of its own (Spark inlines CTEs and would compute each reference again — a scan of the
        data per reference).

        Why checkpoints: a cached table keeps its whole plan, so a table built over cached tables is analysed
        together with all of theirs, and Spark's cache lookup compares every cached plan with every subtree — the
        SDC preparation's dozen working tables took 126 s to release 300 rows that way, 28 s as checkpoints
        (docs/spark.md, "Working tables")."""
        name = stmt.this.name   # ``text`` (DuckDB-flavoured) is not used: the tree is rewritten for Spark
        if (stmt.args.get("kind") == "TABLE" or cache) and self._create_on_driver(name, stmt.expression):
            return
        query = stmt.expression.copy()
        for part in ctes.hoist_shared(query, name, self._fresh):
            if part.materialized:
                self._checkpoint(part.name, part.body)
            else:
                self._cache(part.name, part.body, lazy=True)
                self.scratch.append(part.name)
                self.defined[part.name] = (part.body, True)
        if stmt.args.get("kind") == "TABLE" or cache:
            if name in (self.release_name, f"{self.release_name}__{COUNTED_ROWS}"):
                self._cache(name, query, lazy=False)
            else:
                self._checkpoint(name, query)
            return
        self._run(name, temporary_view(name, query))
        self.defined[name] = (query, False)

    def _create_on_driver(self, name: str, query: exp.Expression) -> bool:
        """The table ``name`` computed on the driver when everything ``query`` reads is small (:mod:`.driver_tables`),
        registered as a cached view with the types Spark gives ``query`` (analysed, not run: DuckDB's ``ROW_NUMBER``
        is a BIGINT where Spark's is an INT, its sum of BIGINTs a HUGEINT). False: Spark makes it."""
        rows = self.driver.compute(query)
        if rows is None:
            return False
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = self.spark.sql(self.render(query)).schema
        if [c.lower() for c in rows.column_names] != [c.lower() for c in schema.names]:
            return False   # not expected (the same aliases): Spark makes it as before
        try:
            rows = rows.rename_columns(schema.names).cast(to_arrow_schema(schema))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):   # not expected: Spark makes it as before
            return False
        self.register_frame(self.spark.createDataFrame(rows), name)
        self.driver.keep(name, rows, [f.dataType.simpleString() for f in schema.fields])
        self.sql.append(self.render(exp.Cache(this=exp.Table(this=ident(name)), expression=query, lazy=False)))
        return True

    def drop_unit(self, names: Any) -> None:
        """Spark has no ``ALTER TABLE … DROP COLUMN`` on a temporary view: the verified release's rows, unit
        included, are checkpointed as the working view ``<release>__units``; the views over the release
        (``__checks``, which counts people) are defined again over it, and the release becomes the view of its
        columns without the unit. The released view never holds the unit; ``__units`` lives with the session's
        other working views (``__source`` holds the raw unit as well)."""
        name = names.table.name
        held = name + UNITS_SUFFIX
        self.driver.forget(name)
        ownership.check_working_name(self.spark, held)   # never over a view no release of this session made
        rows = self.spark.table(quoted_name(name)).localCheckpoint(eager=True)
        self.drop(held)   # an earlier release's of this name: its release and views are replaced by now
        rows.createOrReplaceTempView(held)
        self.created.append(held)
        self.sql.append(self.render(temporary_view(held, exp.select("*").from_(exp.Table(this=ident(name))))))
        for view, (query, lazy) in list(self.defined.items()):
            if view in self.created and _reads(query, name):
                query = _repointed(query, name, held)
                if lazy:
                    self._cache(view, query, lazy=True)
                else:
                    self._run(view, temporary_view(view, query))
                self.defined[view] = (query, lazy)
        released = [exp.column(c, quoted=True) for c in rows.columns if c != UNIT]
        self.drop(name)   # the cached release with the unit (its rows are the checkpoint now)
        self._run(name, temporary_view(name, exp.select(*released).from_(exp.Table(this=ident(held)))))

    def _fresh(self, name: str) -> str:
        """``name``, or ``name`` numbered, whichever no table or view of the session has: a working object of the
        release never replaces one it did not create (an earlier release's, still read by that release's views,
        or the user's)."""
        fresh, n = name, 1
        while fresh not in self.created and table_exists(self.spark, fresh):
            n += 1
            fresh = f"{name}_{n}"
        return fresh

    def _cache(self, name: str, query: exp.Expression, lazy: bool) -> None:
        self.drop(name)
        self._run(name, exp.Cache(this=exp.Table(this=ident(name)), expression=query, lazy=lazy))

    def _checkpoint(self, name: str, query: exp.Expression) -> None:
        """``query`` computed now into a local checkpoint, registered as the temporary view ``name``: a leaf of the
        plans that read it (a cached view is expanded into each reading plan at analysis; see :mod:`.ctes`)."""
        self.drop(name)
        self.spark.sql(self.render(query)).localCheckpoint(eager=True).createOrReplaceTempView(name)
        self.created.append(name)
        self.sql.append(self.render(temporary_view(name, query)))

    def _run(self, name: str, tree: exp.Expression) -> None:
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

    def fetch_checks(self, compiled: Any) -> pd.DataFrame | None:
        """A counted-rows release's checks computed on the driver over the fetched counted rows (one Spark job
        instead of one per shuffle of the checks view: :mod:`.driver_checks`)."""
        return driver_checks.checks_on_driver(compiled, self.driver)

    def put_frame(self, frame: pd.DataFrame, name: str) -> exp.Table:
        """A pandas frame as a cached temporary view through Arrow, its types as pandas has them (a column of no
        value at all as text)."""
        import pyarrow as pa

        name = self._fresh(name)
        table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
        schema = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f for f in table.schema])
        self.register_frame(self.spark.createDataFrame(table.cast(schema)), name)
        return exp.Table(this=ident(name))

    def write_plan(self, names: Any, plan: Any, quasi: list[str], enum_values: bool = False) -> None:
        """The plan's assignment and class values (Spark DataFrames or pandas), and noise records as cached views,
        typed as on DuckDB: keys BIGINT, released quasi-identifier values text, other columns their source type."""
        from pyspark.sql import types as T

        source = {f.name: f.dataType for f in self.spark.table(quoted_name(names.source.name)).schema.fields}
        types = {c: T.LongType() for c in ("ec_id", "__row")}
        types.update({c: T.StringType() for c in quasi})
        assignment = plan.assignment
        if isinstance(assignment, pd.DataFrame):
            assignment = self._frame(assignment, types, source)
        self.register_frame(assignment, names.assignment.name)
        values = plan.class_values   # a Spark DataFrame when a Spark planner left the per-row values in Spark
        self.register_frame(self._frame(values, types, source) if isinstance(values, pd.DataFrame) else values,
                            names.ec_values.name)
        if plan.noise is not None:
            self.register_frame(self._frame(plan.noise, types, source), names.noise.name)

    def _frame(self, frame: pd.DataFrame, types: dict[str, Any], source: dict[str, Any]) -> Any:
        """A pandas frame of the plan as a Spark DataFrame through Arrow, with an explicit schema (``types`` first,
        then the source column's type, else text) so that an all-NULL or categorical column keeps its type."""
        import pyarrow as pa
        from pyspark.sql import types as T
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = T.StructType([T.StructField(c, types.get(c) or source.get(c) or T.StringType(), True)
                               for c in frame.columns])
        table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
        return self.spark.createDataFrame(table.cast(to_arrow_schema(schema)))

    def delete_classes(self, table: exp.Table, failing: exp.Expression) -> int:
        """Spark has no DELETE on a cached temporary view: the failing classes' ids are collected (one small query),
        the view's other rows checkpointed (read from its cache, order kept) and registered under the same name;
        the views over it (``__checks``) read the new rows. Returns the number of classes deleted."""
        from pyspark.sql import functions as F

        ids = [row[0] for row in self.spark.sql(self.render(failing)).collect()]
        if not ids:
            return 0
        name = table.name
        kept = self.spark.table(quoted_name(name)).where(~F.col(quoted_name(EC_ID)).isin(ids)).localCheckpoint(eager=True)
        # replaced in place: the name keeps its place in ``created``, so a rollback still drops the views over it first
        self.spark.sql(render(exp.Uncache(this=exp.Table(this=ident(name)), exists=True), "spark"))
        self.driver.forget(name)   # the driver's copy (if any) still holds the deleted classes
        kept.createOrReplaceTempView(name)
        self.spark.sql(render(exp.Cache(this=exp.Table(this=ident(name)), lazy=False), "spark"))
        return len(ids)

    def drop(self, name: str | exp.Table) -> None:
        name = name.name if isinstance(name, exp.Table) else name
        self.driver.forget(name)
        if table_exists(self.spark, name):
            from pyspark.errors import AnalysisException

            try:
                self.spark.sql(render(exp.Uncache(this=exp.Table(this=ident(name)), exists=True), "spark"))
            except AnalysisException:   # a stale view over a since-replaced one no longer analyses: nothing cached
                pass                    # to release through it; it is dropped below all the same
            if not self.spark.catalog.dropTempView(name):
                self.spark.sql(render(exp.Drop(tables=[exp.Table(this=ident(name))], kind="TABLE", exists=True),
                                      "spark"))

    def commit(self) -> None:
        """Keep what the release created, and free the caches only its own statements needed (the hoisted CTEs, the
        base counts): the views stay — the release's views read them, and compute them again if read — but their
        cached rows are released. Only this release's objects are uncached; the released table keeps its cache
        (already loaded, it no longer depends on theirs)."""
        from pyspark.errors import AnalysisException

        for name in dict.fromkeys(self.scratch):
            if name in self.created and table_exists(self.spark, name):
                try:
                    self.spark.sql(render(exp.Uncache(this=exp.Table(this=ident(name)), exists=True), "spark"))
                except AnalysisException:   # a view over a since-replaced one: nothing cached through it
                    pass
        self.scratch.clear()
        self.driver.close()
        super().commit()

    def rollback(self) -> None:
        self.scratch.clear()
        self.driver.close()
        super().rollback()

    def cleanup(self) -> None:
        self.maps.clear()   # the map views go with everything else the release created
        self.driver.close()
        super().cleanup()

    def script(self, compiled: Any) -> list[str]:
        return list(self.sql)

    def record(self, rel: Any, plan: Any, source_label: str) -> None:
        """Spark keeps no catalog: the session remembers the release's name (so that it may be replaced later, and
        nothing else ever is) and the release persists as the ``output`` Parquet when one is asked for."""
        ownership.remember_spark_release(self.spark, rel.name)
        if self.output:
            with self.jobs.stage("output"):
                mode = "overwrite" if self.replace else "errorifexists"
                self.spark.table(rel.name).write.mode(mode).parquet(self.output)

    def stage(self, name: str) -> Any:
        return self.jobs.stage(name)

    def info(self) -> dict[str, Any]:
        return {"engine": "spark", "spark_jobs": dict(self.jobs.counts),
                "stage_seconds": {k: round(v, 3) for k, v in self.jobs.seconds.items()}}


def _reads(query: exp.Expression, name: str) -> bool:
    """Whether ``query`` reads the unqualified table or view ``name``."""
    return any(t.name == name and not t.args.get("db") for t in query.find_all(exp.Table))


def _repointed(query: exp.Expression, name: str, to: str) -> exp.Expression:
    """``query`` reading ``to`` wherever it read the unqualified table or view ``name``."""
    out = query.copy()
    for t in out.find_all(exp.Table):
        if t.name == name and not t.args.get("db"):
            t.set("this", ident(to))
    return out

