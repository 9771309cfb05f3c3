"""Resolve a policy's source — a table or view of the database, a .csv/.parquet path, or a DataFrame — to a relation."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
from sqlglot import exp

from .errors import SourceError
from .sqlbuild import col, ident, lit, render

FILE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")


@dataclass
class Source:
    """A readable relation: the sqlglot expression to select from, and its columns with DuckDB types."""

    label: str
    relation: exp.Expression
    columns: list[str]
    types: dict[str, str]

    def select_all(self) -> exp.Select:
        return exp.select("*").from_(self.relation.copy())


def is_path(source: str) -> bool:
    return Path(source).suffix.lower() in FILE_SUFFIXES or "/" in source


def file_relation(path: str) -> exp.Expression:
    """``read_csv(path, auto_detect = true)`` / ``read_parquet(path)`` as a table-valued function."""
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        call = exp.Anonymous(this="read_parquet", expressions=[lit(path)])
    else:
        call = exp.Anonymous(this="read_csv", expressions=[
            lit(path), exp.EQ(this=exp.column("auto_detect"), expression=exp.true())])
    return exp.Table(this=call)


def table_relation(name: str) -> exp.Table:
    """A (possibly schema-qualified, dot-separated) table name as a quoted table reference."""
    parts = name.split(".") if "." in name and not Path(name).suffix else [name]
    if len(parts) == 2:
        return exp.Table(this=ident(parts[1]), db=ident(parts[0]))
    return exp.Table(this=ident(name))


_TABLE = "SELECT count(*) FROM duckdb_tables() WHERE table_name = $t AND ($s IS NULL OR schema_name = $s)"
_VIEW = ("SELECT count(*) FROM duckdb_views() WHERE NOT internal AND view_name = $t "
         "AND ($s IS NULL OR schema_name = $s)")


def relation_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Is ``name`` (or ``schema.name``) a table or view? Tables first, views only when it is none: duckdb_tables()
    and the non-internal duckdb_views() hold the rows of information_schema.tables, and a table answers at half its
    cost (it is asked on every metrics call)."""
    parts = name.split(".", 1) if "." in name else [None, name]
    schema, tbl = parts if len(parts) == 2 else (None, parts[0])
    args = {"t": tbl, "s": schema}
    return bool(con.execute(_TABLE, args).fetchall()[0][0] or con.execute(_VIEW, args).fetchall()[0][0])


def resolve(con: duckdb.DuckDBPyConnection, source: str | pd.DataFrame, label: str | None = None) -> Source:
    """Find the source and read its columns; raise :class:`SourceError` naming what exists when it is not found."""
    if isinstance(source, pd.DataFrame):
        name = label or "__anon_dataframe_source"
        con.register(name, source)
        relation: exp.Expression = exp.Table(this=ident(name))
        label = name
    elif is_path(source):
        if not Path(source).exists():
            raise SourceError(f"source file {source!r} does not exist")
        relation = file_relation(source)
        label = source
    else:
        if not relation_exists(con, source):
            tables = [r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema <> 'anon' ORDER BY 1"
            ).fetchall()]
            raise SourceError(
                f"source {source!r} is not a table or view of the database (found: {tables[:20]}); "
                "load it first, or give a .csv/.parquet path"
            )
        relation = table_relation(source)
        label = source
    try:
        described = con.execute(render(exp.Describe(this=exp.select("*").from_(relation.copy())))).fetchall()
    except duckdb.Error as err:
        raise SourceError(f"cannot read source {label!r}: {err}") from None
    columns = [r[0] for r in described]
    types = {r[0]: r[1] for r in described}
    return Source(label, relation, columns, types)


_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT")


def check_count_column(con: duckdb.DuckDBPyConnection, src: Source, column: str) -> None:
    """A count column says how many records each row stands for: a whole number >= 0 on every row. NULL, negative
    or fractional counts (or a non-numeric column) are refused with the number of offending rows and an example."""
    kind = src.types.get(column, "").upper()
    numeric = kind in _INTEGER or kind.startswith(("DECIMAL", "DOUBLE", "FLOAT", "REAL"))
    if not numeric:
        raise SourceError(f"count_column {column!r} of {src.label!r} has type {kind or 'unknown'}: it must hold whole "
                          f"numbers of records (an integer column); cast it, e.g. CAST({column} AS BIGINT) in a view")
    c = col(column)
    bad = {
        "NULL": exp.Is(this=c.copy(), expression=exp.null()),
        "negative": exp.LT(this=c.copy(), expression=lit(0)),
        "fractional": exp.NEQ(this=c.copy(), expression=exp.Floor(this=c.copy())),
    }
    items = [exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond)) for cond in bad.values()]
    items.append(exp.Min(this=c.copy()))
    counts = con.execute(render(exp.select(*items).from_(src.relation.copy()))).fetchall()[0]
    found = [f"{n} {what}" for what, n in zip(bad, counts[:3]) if n]
    if found:
        raise SourceError(f"count_column {column!r} of {src.label!r} must hold a whole number >= 0 of records on "
                          f"every row, but {', '.join(found)} row(s) do not (smallest value: {counts[3]}); fix those "
                          f"rows, or release a view that filters them (e.g. WHERE {column} >= 0)")
