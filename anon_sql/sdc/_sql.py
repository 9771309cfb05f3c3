"""Tiny sqlglot builders for anon_sql.sdc: every name and literal is a quoted node (sdc imports nothing else of anon_sql)."""
from __future__ import annotations

from typing import Any

from sqlglot import exp

DIALECT = "duckdb"


def ident(name: str) -> exp.Identifier:
    """A quoted identifier: any name (spaces, quotes, non-ASCII) stays one name."""
    return exp.to_identifier(str(name), quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference, optionally qualified by a table alias."""
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table(name: str | exp.Table, alias: str | None = None) -> exp.Table:
    """A table by one quoted name (or a copy of a ready ``exp.Table``, e.g. ``exp.table_(t, db=s, quoted=True)``)."""
    t = name.copy() if isinstance(name, exp.Table) else exp.Table(this=ident(name))
    if alias:
        t.set("alias", exp.TableAlias(this=ident(alias)))
    return t


def lit(value: Any) -> exp.Expression:
    """A literal for a Python scalar (None → NULL)."""
    if value is None:
        return exp.null()
    if hasattr(value, "item"):            # numpy scalar
        value = value.item()
    if isinstance(value, bool):
        return exp.true() if value else exp.false()
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def call(name: str, *args: exp.Expression, schema: str | None = None) -> exp.Expression:
    """A call of a function or (schema-qualified) macro."""
    f = exp.Anonymous(this=name, expressions=list(args))
    return exp.Dot(this=exp.to_identifier(schema), expression=f) if schema else f


def render(expression: exp.Expression) -> str:
    """The DuckDB text of a tree (rendered last, once)."""
    return expression.sql(dialect=DIALECT)


def table_label(name: str | exp.Table) -> str:
    """A table's name for messages."""
    return name.sql(dialect=DIALECT) if isinstance(name, exp.Table) else repr(str(name))
