"""SQL of the sdc modules as sqlglot trees: constant templates whose placeholder names become quoted identifiers,
tables and literals — no policy text is ever pasted into SQL."""
from __future__ import annotations

from typing import Any, Mapping

import sqlglot
from sqlglot import exp

DIALECT = "duckdb"


def ident(name: str) -> exp.Identifier:
    """A column name as a quoted identifier (any character, quotes included, is safe)."""
    return exp.to_identifier(str(name), quoted=True)


def table(name: str | exp.Expression) -> exp.Expression:
    """A table: a str is one quoted name (pass an ``exp.Table`` for a schema-qualified one, or an aliased subquery)."""
    if isinstance(name, exp.Expression):
        return name.copy()
    return exp.Table(this=ident(name))


def literal(value: Any) -> exp.Expression:
    """A literal value (numbers, strings, booleans, NULL) as sqlglot renders it."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    return exp.convert(value)


def fill(template: str, *, names: Mapping[str, str] | None = None, tables: Mapping[str, str | exp.Table] | None = None,
         values: Mapping[str, Any] | None = None) -> exp.Expression:
    """Parse a constant SQL template and replace its placeholder identifiers: ``names`` → quoted column identifiers,
    ``tables`` → tables, ``values`` → literals (a placeholder used as a bare column)."""
    names = {k: ident(v) for k, v in (names or {}).items()}
    tables = {k: table(v) for k, v in (tables or {}).items()}
    values = {k: (v.copy() if isinstance(v, exp.Expression) else literal(v)) for k, v in (values or {}).items()}
    tree = sqlglot.parse_one(template, read=DIALECT)

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name in tables:
            new = tables[node.name].copy()
            if node.args.get("alias"):
                new.set("alias", node.args["alias"].copy())
            return new
        if isinstance(node, exp.Column) and not node.table and node.name in values:
            return values[node.name].copy()
        if isinstance(node, exp.Identifier) and node.this in names:
            return names[node.this].copy()
        return node

    return tree.transform(swap)


def render(tree: exp.Expression) -> str:
    return tree.sql(dialect=DIALECT)


def run(con, tree: exp.Expression):
    """Execute one tree on a DuckDB connection."""
    return con.execute(render(tree))
