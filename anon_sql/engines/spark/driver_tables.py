"""The small working tables of a Spark release computed on the driver (issue 29.4), in an in-memory DuckDB.

A release's source is aggregated once in Spark into its base counts (one row per distinct combination: tens of
thousands of rows at 10M records). What a level plan builds on them — the class map, the per-class checks, the
counted rows — is small, yet Spark plans it as a many-way join and a chain of windows and shuffles: about 3.5 s of
query planning and 18 jobs for 19,000 rows in a fresh session, more than the scan of the 10M records itself. Here
such a statement runs in DuckDB on the driver instead, over copies of the Spark tables it reads (one Arrow fetch
each, at most :data:`DRIVER_TABLE_ROWS` rows), and its rows go back to Spark as a cached view under the same name
with the types Spark gives the same query (it is analysed, not run): the views over it and the released view read
it as before. DuckDB's release runs this very SQL, so the rows are the ones DuckDB releases; the checks of a
counted-rows release read the rows kept here too (:mod:`.driver_checks`).

Where the two engines could disagree, Spark runs the statement as before: a table above the row bound, a statement
that reads anything not copied (the source's rows, a population), and a statement that casts values to text when a
table it reads holds a type whose text differs between the engines (floating point, timestamps: the taxonomy maps
match leaves as text)."""
from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp

from ...common.sqlbuild import KernelCall, create_from_frame, ident, render
from .session import quoted_name

# the most rows a Spark table may have to be copied to the driver (one Arrow table in the driver's memory, and the
# statement's result uploaded back); a bigger table stays in Spark and so do the statements that read it
DRIVER_TABLE_ROWS = 2_000_000
# Spark types whose values CAST to text exactly as DuckDB casts the same values (checked by the tests): a statement
# that casts to text reads only tables of these types on the driver
_SAME_TEXT = ("string", "varchar", "char", "tinyint", "smallint", "int", "bigint", "boolean", "date", "decimal")
# the Spark types a table copied to the driver may hold (timestamps, intervals, binary and nested types stay in Spark)
_COPIED = _SAME_TEXT + ("float", "double")
_TEXT_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR,
               exp.DataType.Type.NVARCHAR}


class DriverTables:
    """The driver's copies of a release's small Spark tables, and the statements computed over them. ``offer`` names
    a Spark table that may be copied when a statement needs it; a table kept here (:meth:`keep`) holds exactly the
    rows of the Spark view of the same name; :meth:`forget` drops a copy whose Spark view changed."""

    def __init__(self, spark: Any):
        self.spark = spark
        self._duck: duckdb.DuckDBPyConnection | None = None
        self._offered: set[str] = set()
        self._kept: set[str] = set()
        self._declined: set[str] = set()   # offered tables left to Spark (too many rows, or a type)
        self._types: dict[str, list[str]] = {}   # a kept table's Spark column types (simpleString)
        self._macros = False

    def offer(self, name: str) -> None:
        """The Spark table or view ``name`` may be copied to the driver when a statement reads it."""
        self._offered.add(name)

    def offer_rows(self, name: str, columns: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> None:
        """A small table of text values the engine holds in Python (a taxonomy level map), kept here as well."""
        import pyarrow as pa

        table = pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(columns)})
        self.keep(name, table, ["string"] * len(columns))

    def forget(self, name: str) -> None:
        """``name``'s Spark view is no longer the copy's rows (deleted classes, replaced, dropped)."""
        self._offered.discard(name)
        if name in self._kept:
            self._kept.discard(name)
            self._types.pop(name, None)
            self._connection().execute(render(exp.Drop(tables=[exp.Table(this=ident(name))], kind="TABLE",
                                                       exists=True)))

    def covers(self, query: exp.Expression) -> bool:
        """Whether every table ``query`` reads is kept here or may be copied."""
        read = reads(query)
        return bool(read) and read <= (self._kept | self._offered) - self._declined

    def compute(self, query: exp.Expression) -> Any | None:
        """``query``'s rows computed on the driver (an Arrow table), or None: Spark computes it (a table it reads is
        above the row bound, or holds a type whose text form differs while the query casts to text)."""
        result = self.relation(query)
        return None if result is None else result.to_arrow_table()

    def compute_frame(self, query: exp.Expression) -> pd.DataFrame | None:
        """:meth:`compute` as a pandas frame (DuckDB's conversion, as a DuckDB release reads the same query)."""
        result = self.relation(query)
        return None if result is None else result.df()

    def relation(self, query: exp.Expression) -> duckdb.DuckDBPyRelation | None:
        """``query`` as a relation of the driver's DuckDB, or None (see :meth:`compute`)."""
        if not self.covers(query):
            return None
        for name in sorted(reads(query) - self._kept):
            if not self.copy(name):
                return None
        if _casts_to_text(query) and not all(_same_text(t) for n in reads(query) for t in self._types[n]):
            return None
        duck = self._connection()
        if query.find(KernelCall) is not None and not self._macros:
            from ...catalog import store as catalog   # the kernels' SQL macros (anon.*) the statement calls

            catalog.install(duck)
            self._macros = True
        return duck.sql(render(query, "duckdb"))

    def keep(self, name: str, rows: Any, spark_types: list[str]) -> None:
        """Keep ``rows`` (Arrow, Spark's types) as the copy of the Spark view ``name``."""
        duck = self._connection()
        create_from_frame(duck, rows, "__anon_driver_rows", lambda view: duck.execute(render(exp.Create(
            this=exp.Table(this=ident(name)), kind="TABLE", replace=True, expression=exp.select("*").from_(view)))))
        self._kept.add(name)
        self._types[name] = spark_types

    def close(self) -> None:
        """Free the copies (the end of the release, committed or not)."""
        if self._duck is not None:
            self._duck.close()
        self._duck = None
        self._offered.clear()
        self._kept.clear()
        self._declined.clear()
        self._types.clear()
        self._macros = False

    def copy(self, name: str) -> bool:
        """Copy the offered Spark table ``name`` here (one Arrow fetch of at most DRIVER_TABLE_ROWS + 1 rows); False
        when it is bigger, or holds a type the driver leaves to Spark."""
        if name in self._kept:
            return True
        if name not in self._offered or name in self._declined:
            return False
        frame = self.spark.table(quoted_name(name))
        types = [f.dataType.simpleString() for f in frame.schema.fields]
        if not all(t.split("(")[0] in _COPIED for t in types):
            self._declined.add(name)
            return False
        rows = frame.limit(DRIVER_TABLE_ROWS + 1).toArrow()
        if rows.num_rows > DRIVER_TABLE_ROWS:
            self._declined.add(name)
            return False
        self.keep(name, rows, types)
        return True

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._duck is None:
            self._duck = duckdb.connect()
        return self._duck


def reads(query: exp.Expression) -> set[str]:
    """The tables and views ``query`` reads (its own common table expressions aside)."""
    local = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    return {t.name for t in query.find_all(exp.Table) if t.name not in local}


def _casts_to_text(query: exp.Expression) -> bool:
    return any(c.to.this in _TEXT_TYPES for c in query.find_all(exp.Cast))


def _same_text(spark_type: str) -> bool:
    return spark_type.split("(")[0] in _SAME_TEXT



class DriverFirstSQL:
    """The Spark engine's SQL runner (``execute(sql)`` of DuckDB-flavoured text, then ``df()`` / ``fetchall()`` /
    ``arrow()``) answering on the driver whatever :class:`DriverTables` covers: the base counts' per-column value
    counts (the taxonomy coverage check, the records) are one more query over rows the driver copies anyway."""

    def __init__(self, sq: Any, driver: DriverTables):
        self.sq, self.driver = sq, driver

    def execute(self, sql: str, params: Any = None) -> Any:
        if not params:
            found = self.driver.relation(sqlglot.parse_one(sql, read="duckdb"))
            if found is not None:
                return _DriverResult(found)
        return self.sq.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sq, name)


class _DriverResult:
    """A driver relation with the result interface of :class:`~anon_sql.engines.spark.session.SparkSQL`."""

    def __init__(self, relation: duckdb.DuckDBPyRelation):
        self.relation = relation

    def df(self) -> pd.DataFrame:
        return self.relation.df()

    def fetchall(self) -> list[tuple]:
        return self.relation.fetchall()

    def arrow(self) -> Any:
        return self.relation.to_arrow_table()


__all__ = ["DRIVER_TABLE_ROWS", "DriverFirstSQL", "DriverTables", "reads"]
