"""SQL of the sdc modules as sqlglot trees (the quoting builders of anon_sql.common.sqlbuild): constant templates whose placeholder names become quoted identifiers,
tables and literals — no policy text is ever pasted into SQL."""
from __future__ import annotations

from typing import Any, Mapping

import sqlglot
from sqlglot import exp

from ..common.sqlbuild import col, create_from_frame, func, ident, lit, render, table as table_ref
from ..data.session import refuse_read_only

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


_TEMP_NAMED = ("SELECT 'TEMP table' FROM duckdb_tables() WHERE temporary AND lower(table_name) = lower($n) UNION ALL "
               "SELECT 'TEMP view' FROM duckdb_views() WHERE temporary AND NOT internal AND lower(view_name) = lower($n)")
_HERE = "SELECT current_database(), current_schema()"


def claim_output(con, output: str, what: str, temporary: bool = False) -> None:
    """Refuse (:class:`~anon_sql.errors.PolicyError`, exit 2) to write ``output`` where it would replace or hide an
    object no SDC function wrote: a table or view of that name in the current schema that does not carry the mark
    (hostile round 19, M52), and any TEMP table or view of that name in the session — a TEMP output would replace it,
    and a persistent one would be hidden behind it, its mark landing on the user's object (round 20, M54, M55). A
    name with a dot, a TEMP output named like a table or view of the current schema (it would hide it), and a
    persistent output on a read-only database are refused too (round 20, S19, S16, R01)."""
    from ..errors import PolicyError

    name = str(output)
    if not name or "." in name:
        raise PolicyError(f"{what}: output {name!r} must be a bare table name (it is written to the current schema"
                          f"{'' if not temporary else ' of the session TEMP tables'}; without output=, it is the "
                          "source's name and a suffix): pass output='name'")
    for (kind,) in con.execute(_TEMP_NAMED, {"n": name}).fetchall():
        effect = ("it never replaces one" if temporary else
                  "the output would be hidden behind it for this session")
        raise PolicyError(f"{what}: output {name!r} is the name of a {kind} of this session that {what} did not "
                          f"create; {effect}: pass another output=, or drop that one first")
    if temporary:   # a TEMP table would hide a table or view of the current schema for the session (round 20, S16)
        for kind, _ in con.execute(_EXISTING, {"n": name}).fetchall():
            raise PolicyError(f"{what}: output {name!r} is the name of a {kind} of this database; a TEMP table of "
                              "that name would hide it for this session: pass another name")
        return
    refuse_read_only(con, f"{what} (table {name!r})")
    for kind, comment in con.execute(_EXISTING, {"n": name}).fetchall():
        if kind != "table" or comment != SDC_OUTPUT_MARK:
            raise PolicyError(f"{what}: output {name!r} is an existing {kind} that {what} did not write; it "
                              "never replaces one: pass another output=, or drop that one first")


def output_table(con, output: str) -> exp.Table:
    """Where an SDC function writes a persistent ``output``, by its whole name: the current database and schema —
    the place :func:`claim_output` looked (an unqualified name resolves to a TEMP object first: round 20, M54)."""
    database, schema = con.execute(_HERE).fetchall()[0]
    return exp.Table(this=ident(output), db=ident(schema), catalog=ident(database))


def create_output(con, output: str, query: exp.Expression, temporary: bool = False) -> None:
    """``CREATE OR REPLACE [TEMP] TABLE output AS query``, after :func:`claim_output`: a TEMP table of the session,
    or a table at :func:`output_table` marked as an SDC function's (a table comment on that same whole name), so that
    a later call may replace it."""
    if temporary:
        execute_tree(con, exp.Create(this=exp.Table(this=ident(output)), kind="TABLE", replace=True, expression=query,
                                     properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
        return
    table = output_table(con, output)
    execute_tree(con, exp.Create(this=table.copy(), kind="TABLE", replace=True, expression=query))
    execute_tree(con, exp.Comment(this=table, kind="TABLE", expression=lit(SDC_OUTPUT_MARK)))
