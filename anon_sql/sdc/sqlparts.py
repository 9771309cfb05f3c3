"""SQL of the sdc modules as sqlglot trees (the quoting builders of anon_sql.common.sqlbuild): constant templates whose placeholder names become quoted identifiers,
tables and literals — no policy text is ever pasted into SQL."""
from __future__ import annotations

from typing import Any, Mapping

import sqlglot
from sqlglot import exp

from ..common.sqlbuild import col, create_from_frame, func, ident, lit, render, table as table_ref

DIALECT = "duckdb"
call = func   # a (schema-qualified) function or macro call


def table_label(name: str | exp.Table) -> str:
    """A table's name for messages."""
    return name.sql(dialect=DIALECT) if isinstance(name, exp.Table) else repr(str(name))


def table_or_subquery(name: str | exp.Expression, alias: str | None = None) -> exp.Expression:
    """A table: a str is one quoted name; an ``exp.Table`` (schema-qualified) or an aliased subquery is copied;
    ``alias`` names it in the query."""
    if not isinstance(name, exp.Expression) or isinstance(name, exp.Table):
        return table_ref(name, alias=alias)
    return exp.alias_(name.copy(), alias, table=True) if alias else name.copy()


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
    tables = {k: table_or_subquery(v) for k, v in (tables or {}).items()}
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



def execute_tree(con, tree: exp.Expression):
    """Execute one tree on a DuckDB connection."""
    return con.execute(render(tree))


def store_frame(con, name: str | exp.Table, frame) -> None:
    """Write a pandas frame to the temporary table ``name`` (the frame is registered under a scratch view name
    for the one statement, then unregistered)."""
    create_from_frame(con, frame, f"__anon_sdc_frame_{abs(hash(str(name))) % 10**9}", lambda view: execute_tree(
        con, fill("CREATE OR REPLACE TEMP TABLE __t AS SELECT * FROM __v", tables={"__t": name, "__v": view})))


# the comment an SDC function writes on its output table: the mark that lets a later call replace it
SDC_OUTPUT_MARK = "anon_sql sdc output: perturb / local_suppression may replace this table"
_EXISTING = ("SELECT 'table', comment FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary "
             "AND schema_name = current_schema() AND lower(table_name) = lower($n) UNION ALL SELECT 'view', NULL FROM "
             "duckdb_views() WHERE database_name = current_database() AND NOT temporary AND NOT internal AND "
             "schema_name = current_schema() AND lower(view_name) = lower($n)")


def claim_output(con, output: str, what: str) -> None:
    """Refuse (:class:`~anon_sql.errors.PolicyError`, exit 2) to write ``output`` over a table or view of that name
    that no SDC function wrote (hostile round 19, M52: the default ``<table>__perturbed`` replaced a user's table)."""
    from ..errors import PolicyError

    for kind, comment in con.execute(_EXISTING, {"n": str(output)}).fetchall():
        if kind != "table" or comment != SDC_OUTPUT_MARK:
            raise PolicyError(f"{what}: output {str(output)!r} is an existing {kind} that {what} did not write; it "
                              "never replaces one: pass another output=, or drop that one first")


def mark_output(con, output: str) -> None:
    """Mark ``output`` as an SDC function's (a table comment), so that a later call may replace it."""
    execute_tree(con, exp.Comment(this=table_or_subquery(output), kind="TABLE", expression=lit(SDC_OUTPUT_MARK)))
