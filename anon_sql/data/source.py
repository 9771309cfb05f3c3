"""Resolve a policy's source to a relation: a table or view of the database, a .csv/.parquet path, or a Python object
the user holds (pandas / Polars DataFrame, pyarrow Table / Dataset, DuckDB relation), registered on the connection.

Optional libraries (pandas, polars, pyarrow) are recognised by their type's module and name, never imported here:
the CLI imports this module and must start fast."""
from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import duckdb
from sqlglot import exp

from ..errors import SourceError
from ..common.sqlbuild import col, ident, lit, render, scratch_name, session_table

FILE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
ACCEPTED = ("a table or view name, a .csv/.tsv/.parquet path (str or pathlib.Path), a pandas or Polars DataFrame "
            "(or Polars LazyFrame), a pyarrow Table / RecordBatch / Dataset, or a DuckDB relation")
INPUT_NAME = "__anon_input"   # where an object source is registered when the caller names no place

# (module prefix, class name) of every in-memory source DuckDB can scan, by kind
_OBJECT_TYPES = {
    "pandas": {("pandas", "DataFrame")},
    "polars": {("polars", "DataFrame"), ("polars", "LazyFrame")},
    "pyarrow": {("pyarrow", "Table"), ("pyarrow", "RecordBatch"), ("pyarrow", "Dataset")},
    "relation": {("duckdb", "DuckDBPyRelation"), ("_duckdb", "DuckDBPyRelation")},   # module name differs by version
}
_ONE_SHOT = {("pyarrow", "RecordBatchReader")}


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


def named_relation(con: duckdb.DuckDBPyConnection, name: str) -> exp.Table | None:
    """The table or view ``name`` names: a relation of exactly that name first (``"Sales.2024"`` is one name when
    such a table exists), else ``schema.table`` when it has a dot; None when neither exists."""
    whole = exp.Table(this=ident(name))
    if relation_exists(con, whole):
        return whole
    if "." in name:
        schema, table = name.split(".", 1)
        qualified = exp.Table(this=ident(table), db=ident(schema))
        if relation_exists(con, qualified):
            return qualified
    return None


def readable_relation(con: duckdb.DuckDBPyConnection, name: str) -> exp.Expression | None:
    """What a policy's ``source`` string reads: the file (``read_csv`` / ``read_parquet``) of a path that exists, else
    :func:`named_relation`; None when neither is there (a source gone since the release)."""
    if is_path(name):
        return file_relation(name) if Path(name).exists() else None
    return named_relation(con, name)


_TABLE = "SELECT count(*) FROM duckdb_tables() WHERE table_name = $t AND ($s IS NULL OR schema_name = $s)"
_VIEW = ("SELECT count(*) FROM duckdb_views() WHERE NOT internal AND view_name = $t "
         "AND ($s IS NULL OR schema_name = $s)")


# the session's TEMP tables and views named (in any case) like one of $t, and TEMP macros named like one of $f (all
# of a kind when its list is NULL), as "TEMP table x", "TEMP view v", "TEMP macro m"
_TEMP = ("SELECT 'TEMP table ' || table_name FROM duckdb_tables() WHERE temporary "
         "AND ($t IS NULL OR list_contains($t, lower(table_name))) "
         "UNION ALL SELECT 'TEMP view ' || view_name FROM duckdb_views() WHERE temporary AND NOT internal "
         "AND ($t IS NULL OR list_contains($t, lower(view_name))) "
         "UNION ALL SELECT DISTINCT 'TEMP macro ' || function_name FROM duckdb_functions() WHERE database_name = 'temp' "
         "AND function_type IN ('macro', 'table_macro') AND ($f IS NULL OR list_contains($f, lower(function_name))) "
         "ORDER BY 1")


def temp_shadows(con: duckdb.DuckDBPyConnection, names: Any) -> list[str]:
    """The TEMP tables and views of this session named like one of ``names`` (any case; a ``schema.table`` name by
    its table part): DuckDB binds an unqualified name, and ``main.name`` too, to the TEMP one first, so SQL the
    product writes for the database's object would read, replace or drop the session's (hostile round 10, M12)."""
    wanted = sorted({str(n).rsplit(".", 1)[-1].lower() for n in names if n})
    return [r[0] for r in con.execute(_TEMP, {"t": wanted, "f": []}).fetchall()] if wanted else []


# every table and view, TEMP included, of any attached database and schema named (in any case) $t, in schema or
# database $s when given, as "table db.schema.name"
_SAME_NAMED = ("SELECT kind || ' ' || database_name || '.' || schema_name || '.' || name FROM ("
               "SELECT 'table' AS kind, database_name, schema_name, table_name AS name FROM duckdb_tables() "
               "UNION ALL SELECT 'view', database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal) "
               "WHERE lower(name) = $t AND ($s IS NULL OR lower(schema_name) = $s OR lower(database_name) = $s) "
               "ORDER BY 1")


def ambiguous_name(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """Every table and view a policy's ``source`` name could bind to, when there is more than one (else none):
    DuckDB binds an unqualified name through the TEMP objects and the ``search_path``, so a same-named object of
    another schema or attached database may be read instead of the one the release read (hostile round 10, B42: a
    schema on the ``search_path`` whose table's masks cover the edited values). The whole name first, as
    :func:`named_relation` reads it; a file path names no object."""
    if is_path(name):
        return []
    found = [r[0] for r in con.execute(_SAME_NAMED, {"t": name.lower(), "s": None}).fetchall()]
    if not found and "." in name:
        schema, table = name.lower().split(".", 1)
        found = [r[0] for r in con.execute(_SAME_NAMED, {"t": table, "s": schema}).fetchall()]
    return found if len(found) > 1 else []


# a view of the current database: its SQL
_VIEW_SQL = ("SELECT sql FROM duckdb_views() WHERE NOT internal AND NOT temporary AND database_name = current_database() "
             "AND lower(view_name) = $v AND lower(schema_name) = $s")


def _parsed_view(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> tuple[str | None, Any]:
    """(the SQL of view ``schema.name`` of this database or None when it is none, its CREATE VIEW as sqlglot reads it
    or None when it cannot)."""
    import sqlglot

    rows = con.execute(_VIEW_SQL, {"v": name.lower(), "s": schema.lower()}).fetchall()
    if not rows:
        return None, None
    text = str(rows[0][0]).strip().rstrip(";")
    try:
        return text, sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.ParseError:
        return text, None


def view_input_shadows(con: duckdb.DuckDBPyConnection, schema: str, name: str, depth: int = 0) -> list[str]:
    """The TEMP tables, views and macros of this session named like anything view ``schema.name`` reads — its
    tables and views (through nested views) and its functions: DuckDB binds the view's names when it is read, so a
    TEMP object changes what the view returns (hostile round 11, M21: a TEMP table named like a budgeted view's
    base table renumbered the unit, and a DP query counted 1,800 rows as people). None for a table."""
    text, tree = _parsed_view(con, schema, name)
    if text is None or depth > 16:
        return []
    if not isinstance(tree, exp.Create):   # a view sqlglot cannot read: any TEMP object may be what it reads
        return [r[0] for r in con.execute(_TEMP, {"t": None, "f": None}).fetchall()]
    tables = {(t.db or schema, t.name) for t in tree.find_all(exp.Table) if t.name}
    functions = sorted({f.name.lower() for f in tree.find_all(exp.Anonymous) if f.name}
                       | {f.sql_name().lower() for f in tree.find_all(exp.Func) if not isinstance(f, exp.Anonymous)})
    named = {"t": sorted({t.lower() for _, t in tables}), "f": functions}
    found = [r[0] for r in con.execute(_TEMP, named).fetchall()]
    found += _temp_types_named_in(con, text)    # a cast to a user type binds it too (hostile round 16, E08)
    for s, t in sorted(tables):
        found += view_input_shadows(con, s, t, depth + 1)
    return sorted(set(found))


def _temp_types_named_in(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    """The TEMP types and sequences of this session named like a word of SQL ``text`` (DuckDB binds them first)."""
    import sqlglot

    kinds = con.execute(_TEMP_OBJECTS).fetchall()
    wanted = {name: label for label, name in kinds if label.startswith(("TEMP type ", "TEMP sequence "))}
    if not wanted:
        return []
    try:
        words = {t.text.lower() for t in sqlglot.tokenize(text, read="duckdb")}
    except sqlglot.errors.TokenError:
        return sorted(wanted.values())
    return [wanted[w] for w in sorted(words & set(wanted))]


# the schemas of the current database: a two-part name whose first part is none of them names another database
_SCHEMAS = "SELECT lower(schema_name) FROM duckdb_schemas() WHERE database_name = current_database()"
# this database's tables and views (TEMP ones aside: view_input_shadows refuses those), as (schema, name)
_RELATIONS = ("SELECT lower(schema_name), lower(table_name) FROM duckdb_tables() WHERE database_name = "
              "current_database() AND NOT temporary UNION ALL SELECT lower(schema_name), lower(view_name) FROM "
              "duckdb_views() WHERE database_name = current_database() AND NOT temporary AND NOT internal")
# every TEMP object of the session (TEMP tables, views, macros, types, sequences) as (what it is, lower-case name)
_TEMP_OBJECTS = ("SELECT 'TEMP table ' || table_name, lower(table_name) FROM duckdb_tables() WHERE temporary "
                 "UNION ALL SELECT 'TEMP view ' || view_name, lower(view_name) FROM duckdb_views() WHERE temporary "
                 "AND NOT internal UNION ALL SELECT DISTINCT 'TEMP macro ' || function_name, lower(function_name) FROM "
                 "duckdb_functions() WHERE database_name = 'temp' AND function_type IN ('macro', 'table_macro') "
                 "UNION ALL SELECT 'TEMP type ' || type_name, lower(type_name) FROM duckdb_types() "
                 "WHERE database_name = 'temp' AND NOT internal UNION ALL SELECT 'TEMP sequence "
                 "' || sequence_name, lower(sequence_name) FROM duckdb_sequences() WHERE temporary")
# the generated columns of this database's tables: computed when read, in the reading session (round 15, M41)
_GENERATED = ("SELECT lower(schema_name), lower(table_name), column_name, generation_expression FROM duckdb_columns() "
              "WHERE database_name = current_database() AND is_generated")
# the user's macros (TEMP ones too; the package's `anon` macros aside: the DP query checks those against its own)
_USER_MACROS = ("SELECT lower(function_name), macro_definition FROM duckdb_functions() WHERE database_name <> 'system' "
                "AND NOT internal AND function_type IN ('macro', 'table_macro') AND lower(schema_name) <> 'anon'")


def view_foreign_reads(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> list[str]:
    """What the budgeted relation ``schema.name`` — a view, through nested views, or a table with generated columns —
    reads beyond this database's stored rows: a table function or table macro (``query_table('visits')``,
    ``read_csv(…)``, ``src()``), another database's table (an attached alias can be re-attached to other data), a
    name that is no table or view of this database (``FROM 'visits.csv'``: a file found from the folder the query runs
    in), or SQL anon_sql cannot read. Each binds when the view is read, beyond what :func:`view_input_shadows` can see
    (hostile round 12, M27: a renumbered copy answered 1,800 people for 300 through each; round 13, M33: the relative
    path); a user macro whose body reads a table (round 12, D03b: a TEMP copy of its mapping table split every
    person); a function whose result is not the same in every session, in the view, a macro it reaches or a generated
    column it reads; and a setting of this session other than the one a budgeted view is read with (round 14, M35:
    ``getvariable`` after ``SET VARIABLE``, a TIMESTAMPTZ's text after ``SET TimeZone``; round 15, M37, M38, M41: the
    process's time zone, functions a list of names missed, a table's generated unit column;
    :mod:`anon_sql.data.session`). A macro that computes from its arguments alone may stay. Empty for a table
    without generated columns. The catalog is read once, not per nested view."""
    from .session import changed_settings, unstable_functions

    generated: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for s_name, t_name, column, expression in con.execute(_GENERATED).fetchall():
        generated.setdefault((s_name, t_name), []).append((column, str(expression)))
    if _parsed_view(con, schema, name)[0] is None and (schema.lower(), name.lower()) not in generated:
        return []
    schemas = {r[0] for r in con.execute(_SCHEMAS).fetchall()}
    relations = {(r[0], r[1]) for r in con.execute(_RELATIONS).fetchall()}
    here = str(con.execute("SELECT current_database()").fetchall()[0][0]).lower()
    bodies: dict[str, list[str]] = {}
    for macro, body in con.execute(_USER_MACROS).fetchall():
        bodies.setdefault(macro, []).append(str(body))
    unstable = unstable_functions(con)
    temp = {str(n): str(label) for label, n in con.execute(_TEMP_OBJECTS).fetchall()}

    def walk(schema: str, name: str, depth: int) -> list[str]:
        text, tree = _parsed_view(con, schema, name)
        if depth > 16:
            return []
        if text is None:    # a table: what its generated columns compute, in the session that reads them
            return [item for column, expression in generated.get((schema.lower(), name.lower()), [])
                    for item in _reads_beyond_arguments(bodies, expression, unstable, temp,
                                                        f"the generated column {schema}.{name}.{column}")]
        if not isinstance(tree, exp.Create) or not isinstance(tree.expression, exp.Expression):
            return [f"view {schema}.{name}'s SQL, which anon_sql cannot read"]
        body = tree.expression
        ctes = {c.alias_or_name.lower() for c in body.find_all(exp.CTE)}
        found: list[str] = []
        views: set[tuple[str, str]] = set()
        for t in body.find_all(exp.Table):
            if not isinstance(t.this, exp.Identifier):
                found.append(f"the table function {t.this.sql(dialect='duckdb')[:80]}")
            elif (t.catalog and t.catalog.lower() != here) or (t.db and t.db.lower() not in schemas):
                found.append(f"another database's table {t.sql(dialect='duckdb')[:80]}")
            elif not t.db and t.name.lower() in ctes:
                continue
            elif ((t.db or schema).lower(), t.name.lower()) not in relations:
                found.append(f"{t.name[:80]!r}, which is no table or view of this database (a file, or a name bound "
                             "where the query runs)")
            else:
                views.add((t.db or schema, t.name))
        found += _reads_beyond_arguments(bodies, text, unstable, temp, f"view {schema}.{name}")
        for s, t in sorted(views):
            found += walk(s, t, depth + 1)
        return found

    return sorted(set(walk(schema, name, 0))) + [f"this session's setting {c}" for c in changed_settings(con)]


def _reads_beyond_arguments(bodies: dict[str, list[str]], text: str, unstable: frozenset[str],
                            temp: dict[str, str], label: str) -> list[str]:
    """What SQL ``text`` (of ``label``: a view, a generated column) and the user macros it names (``bodies``: name →
    their bodies), through the macros they name, read beyond the database's rows: a macro whose body reads a table
    (it binds its table names when the query runs, so a TEMP table of that name changes what it returns: hostile
    round 12, D03b) and a call of a function in ``unstable`` (:func:`anon_sql.data.session.unstable_functions`:
    ``getvariable`` after ``SET VARIABLE`` split every person, round 14, M35). Macros are found by any token of the
    text, quoted or not (round 13, M32: a macro named like a function sqlglot knows was read as that function, not as
    a call); a function by its name before ``(``, or as a keyword (``current_date``). A TEMP object of the session
    (``temp``: lower-case name → what it is) named like any token of the text is refused too: DuckDB binds a type,
    a sequence, a macro or a table name to the TEMP one first (hostile round 16: a TEMP TYPE named like the owner's
    type made a cast keep fractions, and 300 people became 1,200 units)."""
    import sqlglot

    found: list[str] = []
    seen: set[str] = set()
    todo = [(text, label)]
    while todo:
        sql, where = todo.pop()
        try:
            tokens = [t for t in sqlglot.tokenize(sql, read="duckdb") if t.token_type != sqlglot.TokenType.STRING]
        except sqlglot.errors.TokenError:
            found.append(f"the SQL of {where}, which anon_sql cannot read")
            continue
        words = {t.text.lower() for t in tokens}
        found += [f"the {temp[w]} of this session, named like a word of {where}" for w in sorted(words & set(temp))]
        calls = {t.text.lower() for i, t in enumerate(tokens)
                 if t.text.lower() in unstable and (
                     t.token_type not in (sqlglot.TokenType.VAR, sqlglot.TokenType.IDENTIFIER)
                     or (i + 1 < len(tokens) and tokens[i + 1].token_type == sqlglot.TokenType.L_PAREN))}
        found += [f"{name}() in {where} (its result is not the same in every session: SET VARIABLE, SET, USE, the "
                  "moment or the statements run)" for name in sorted(calls)]
        for macro in sorted(words & set(bodies) - seen):
            seen.add(macro)
            for body in bodies[macro]:
                try:
                    parsed = sqlglot.parse_one(body, read="duckdb")
                except sqlglot.errors.ParseError:
                    found.append(f"the macro {macro}, whose body anon_sql cannot read")
                    continue
                if next(parsed.find_all(exp.Table), None) is not None:
                    found.append(f"the macro {macro}, whose body reads a table")
                todo.append((body, f"the macro {macro}"))
    return found


def refuse_temp_shadows(con: duckdb.DuckDBPyConnection, names: Any, doing: str) -> None:
    """Refuse (:class:`SourceError`, exit 2) ``doing`` while a TEMP table or view of the session shadows one of
    ``names`` (:func:`temp_shadows`): nothing is read, charged, replaced or dropped."""
    found = temp_shadows(con, names)
    if found:
        raise SourceError(f"{doing}: {', '.join(found)} of this session shadows the database's object of that name "
                          "(DuckDB reads the TEMP one first), so anon_sql would work on the wrong object; nothing "
                          "was done: drop or rename the TEMP object (e.g. DROP TABLE temp.main.<name>), or run "
                          "it in another session")


def refuse_reserved_temp(con: duckdb.DuckDBPyConnection, release: str, doing: str) -> None:
    """Refuse (:class:`SourceError`, exit 2) ``doing`` while the session holds a TEMP table or view named like one of
    the release's working tables — ``<release>__…`` or ``__anon_…`` — which the release would replace and then drop
    (hostile round 17, M48: a user's TEMP ``adult_demo__base`` was gone after a refresh, and after a refused CREATE)."""
    name = str(release).rsplit(".", 1)[-1].lower()
    found = [r[0] for r in con.execute(_RESERVED_TEMP, {"p": name + "__"}).fetchall()]
    if found:
        raise SourceError(f"{doing}: {', '.join(found)} of this session has a name anon_sql keeps for the working "
                          f"tables of a release ({name}__… and __anon_…), which it would replace and drop; nothing "
                          "was done: rename or drop that TEMP object (a DataFrame you registered: con.unregister(name)), or run it "
                          "in another session")


# TEMP tables and views whose name starts (in any case) with $p or "__anon_"
_RESERVED_TEMP = ("SELECT 'TEMP table ' || table_name FROM duckdb_tables() WHERE temporary AND (starts_with("
                  "lower(table_name), $p) OR starts_with(lower(table_name), '__anon_')) UNION ALL SELECT 'TEMP view ' "
                  "|| view_name FROM duckdb_views() WHERE temporary AND NOT internal AND (starts_with(lower(view_name), "
                  "$p) OR starts_with(lower(view_name), '__anon_')) ORDER BY 1")


def refuse_shadowed_source(con: duckdb.DuckDBPyConnection, source: Any, doing: str) -> None:
    """Refuse (:class:`SourceError`, exit 2) ``doing`` from the named ``source`` while a TEMP table or view of this
    session shadows it — a database object of that name exists too, and DuckDB reads the TEMP one first — or shadows
    what the source view reads (:func:`view_input_shadows`): a release would be made from the session's rows and
    recorded as the database's source (hostile round 15, M39: REFRESH released a TEMP copy of 1,726 rows as version 2
    of a 3,000-row source). A source that is itself only a TEMP object, a path or a Python object is read as given."""
    if not isinstance(source, str) or not source.strip() or is_path(source):
        return
    table = source.rsplit(".", 1)[-1].lower()
    shadows = temp_shadows(con, [source])
    stored = con.execute(_STORED_NAMED, {"t": table}).fetchall()
    if shadows and stored:
        raise SourceError(f"{doing}: {', '.join(shadows)} of this session shadows the database's source {source!r} "
                          "(DuckDB reads the TEMP one first), so the release would be made from the session's rows; "
                          "nothing was done: drop or rename the TEMP object (e.g. DROP TABLE temp.main.<name>), or "
                          "run it in another session")
    for schema, name in stored:
        found = view_input_shadows(con, schema, name)
        if found:
            raise SourceError(f"{doing}: {', '.join(found)[:300]} of this session shadows what the source view "
                              f"{schema}.{name} reads (DuckDB binds its names when it is read); nothing was done: "
                              "drop the TEMP object, or run it in another session")


# the current database's stored (not TEMP) tables and views named $t, as (schema, name)
_STORED_NAMED = ("SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary AND database_name = "
                 "current_database() AND lower(table_name) = $t UNION ALL SELECT schema_name, view_name FROM "
                 "duckdb_views() WHERE NOT temporary AND NOT internal AND database_name = current_database() "
                 "AND lower(view_name) = $t")


def relation_exists(con: duckdb.DuckDBPyConnection, name: str | exp.Table) -> bool:
    """Is ``name`` (a table reference, or a string read as :func:`named_relation` reads it: the whole name first,
    then ``schema.name``) a table or view? Tables first, views only when it is
    none: duckdb_tables() and the non-internal duckdb_views() hold the rows of information_schema.tables, and a
    table answers at half its cost (it is asked on every metrics call)."""
    if not isinstance(name, exp.Table):   # one reading of a name everywhere: the whole name first (issue 28.7)
        return named_relation(con, name) is not None
    args = {"t": name.name, "s": name.db or None}
    return bool(con.execute(_TABLE, args).fetchall()[0][0] or con.execute(_VIEW, args).fetchall()[0][0])


def _type_names(obj: Any) -> set[tuple[str, str]]:
    """(top-level module, class name) of the object's type and its bases."""
    return {(c.__module__.split(".")[0], c.__name__) for c in type(obj).__mro__}


def object_kind(obj: Any) -> str | None:
    """'pandas', 'polars', 'pyarrow' or 'relation' for an in-memory source DuckDB can scan, else None."""
    names = _type_names(obj)
    return next((kind for kind, types in _OBJECT_TYPES.items() if names & types), None)


def _type_label(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def register_input_view(con: duckdb.DuckDBPyConnection, obj: Any, name: str = INPUT_NAME) -> str:
    """Register an in-memory source on the connection as the temporary view ``name`` and return ``name``.

    DuckDB scans the object in place (no copy through Python rows). A DuckDB relation of another connection cannot
    be scanned across connections: it is read once into an Arrow table (by DuckDB) and that is registered.
    Anything else, or a one-shot stream, is a :class:`SourceError` naming the type and what is accepted."""
    kind = object_kind(obj)
    if kind is None:
        if _type_names(obj) & _ONE_SHOT:
            raise SourceError(f"source of type {_type_label(obj)} can be read only once, and a release reads its "
                              "source several times: pass reader.read_all() (a pyarrow Table) instead")
        raise SourceError(f"source of type {_type_label(obj)} is not supported; pass {ACCEPTED}")
    if ("pyarrow", "RecordBatch") in _type_names(obj):    # DuckDB < 2.0 scans tables, not single batches
        import pyarrow as pa

        obj = pa.Table.from_batches([obj])
    try:
        con.register(name, obj)
        describe(con, exp.Table(this=ident(name)))
    except duckdb.Error as err:
        if kind != "relation":
            unregister(con, name)
            raise SourceError(f"cannot read the {kind} source: {err}") from None
        try:   # a relation of another connection (or database): DuckDB reads it into Arrow, once
            table = obj.to_arrow_table() if hasattr(obj, "to_arrow_table") else obj.arrow()
        except duckdb.Error as err2:
            unregister(con, name)
            raise SourceError(f"cannot read the DuckDB relation passed as source (is its connection closed?): "
                              f"{err2}") from None
        con.register(name, table)
    return name


def unregister(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop what :func:`register_input_view` or :func:`temporary_table` created under ``name`` (no error when gone)."""
    with contextlib.suppress(duckdb.Error):
        con.unregister(name)
    temp = session_table(name)
    con.execute(render(exp.Drop(tables=[temp], kind="VIEW", exists=True)))


@contextlib.contextmanager
def temporary_table(con: duckdb.DuckDBPyConnection, source: Any) -> Iterator[str]:
    """A table name for any source, valid inside the ``with``: a table/view name as given; a path or a Python object
    as a temporary view of a fresh name, dropped on exit."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if (isinstance(source, str) and not is_path(source)) or isinstance(source, exp.Table):
        yield source   # a name, or a table reference (a release's working view)
        return
    name = scratch_name(INPUT_NAME)     # a name no view of the user's holds (hostile round 18, M50)
    if isinstance(source, str):
        if not Path(source).exists():
            raise SourceError(f"source file {source!r} does not exist")
        view = exp.Create(this=exp.Table(this=ident(name)), kind="VIEW", replace=True,
                          properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                          expression=exp.select("*").from_(file_relation(source)))
        con.execute(render(view))
    else:
        register_input_view(con, source, name)
    try:
        yield name
    finally:
        unregister(con, name)


F = TypeVar("F", bound=Callable[..., Any])


def accepts_sources(fn: F) -> F:
    """Let ``fn(con, table, ...)``, written for a table name, take any source (path, DataFrame, Arrow, relation)."""
    @functools.wraps(fn)
    def wrapper(con, table=None, *args, **kwargs):
        with temporary_table(con, table) as name:
            return fn(con, name, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def describe(con: duckdb.DuckDBPyConnection, relation: exp.Expression) -> list[tuple]:
    """DuckDB's DESCRIBE of a relation: one (name, type, ...) row per column."""
    return con.execute(render(exp.Describe(this=exp.select("*").from_(relation.copy())))).fetchall()


def resolve_source(con: duckdb.DuckDBPyConnection, source: Any, label: str | None = None) -> Source:
    """Find the source and read its columns; raise :class:`SourceError` naming what exists when it is not found.

    ``source``: see :data:`ACCEPTED`. A Python object is registered on the connection as the temporary view
    ``label`` (default :data:`INPUT_NAME`); it stays registered, since the release's views read it."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, exp.Table):      # a reference the product made (a release's working view)
        relation = source.copy()
        label = render(source)
    elif not isinstance(source, str):
        name = register_input_view(con, source, label or INPUT_NAME)
        relation: exp.Expression = exp.Table(this=ident(name))
        label = name
    elif not source.strip():
        raise SourceError(f"source is an empty name; pass {ACCEPTED}")
    elif is_path(source):
        if not Path(source).exists():
            raise SourceError(f"source file {source!r} does not exist")
        relation = file_relation(source)
        label = source
    else:
        relation = named_relation(con, source)
        if relation is None:
            tables = [r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('anon', 'anon_work') "
                "AND table_catalog = current_database() ORDER BY 1"   # the user's tables, not our working ones
            ).fetchall()]
            first = source.split(".")[0]
            attached = bool(con.execute(   # a name qualified with an ATTACHed database (hostile round 5, S27)
                "SELECT count(*) FROM duckdb_databases() WHERE database_name = ? AND NOT internal "
                "AND database_name <> current_database()", [first]).fetchall()[0][0])
            raise SourceError(
                f"source {source!r} is not a table or view of the database (found: {tables[:20]}); "
                + (f"{first!r} is an attached database, and a release reads its source from the current one: "
                   f"create a view here over it (CREATE VIEW v AS SELECT * FROM {source}) and name that view"
                   if attached else "load it first, or give a .csv/.parquet path")
            )
        label = source
    try:
        described = describe(con, relation)
    except duckdb.Error as err:   # its first line: DuckDB's CSV sniffer adds a 25-line report (hostile round 3, A10)
        first = next((x for x in str(err).splitlines() if x.strip()), str(err)).rstrip(".")
        hint = f"; check that it is a {Path(label).suffix or 'CSV'} file" if is_path(label) else ""
        raise SourceError(f"cannot read source {label!r}: {first}{hint}") from None
    columns = [r[0] for r in described]
    types = {r[0]: r[1] for r in described}
    return Source(label, relation, columns, types)


_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT")


def check_count_column(con: duckdb.DuckDBPyConnection, src: Source, column: str) -> None:
    """A count column says how many records each row stands for: a whole number >= 1 on every row. NULL, zero,
    negative or fractional counts (or a non-numeric column) are refused with the number of offending rows and the
    smallest value (a row standing for no record would still release its values)."""
    kind = src.types.get(column, "").upper()
    numeric = kind in _INTEGER or kind.startswith(("DECIMAL", "DOUBLE", "FLOAT", "REAL"))
    if not numeric:
        raise SourceError(f"count_column {column!r} of {src.label!r} has type {kind or 'unknown'}: it must hold whole "
                          f"numbers of records (an integer column); cast it, e.g. CAST({column} AS BIGINT) in a view")
    c = col(column)
    bad = {
        "NULL": exp.Is(this=c.copy(), expression=exp.null()),
        "zero": exp.EQ(this=c.copy(), expression=lit(0)),
        "negative": exp.LT(this=c.copy(), expression=lit(0)),
        "fractional": exp.NEQ(this=c.copy(), expression=exp.Floor(this=c.copy())),
    }
    items = [exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond)) for cond in bad.values()]
    items.append(exp.Min(this=c.copy()))
    counts = con.execute(render(exp.select(*items).from_(src.relation.copy()))).fetchall()[0]
    found = [f"{n} {what}" for what, n in zip(bad, counts[:len(bad)]) if n]
    if found:
        raise SourceError(f"count_column {column!r} of {src.label!r} must hold a whole number >= 1 of records on "
                          f"every row, but {', '.join(found)} row(s) do not (smallest value: {counts[len(bad)]}); fix "
                          f"those rows, or release a view that filters them (e.g. WHERE {column} >= 1)")
