"""What anon_sql may create or replace in a user's database: only what it recorded as its own.

A release creates a table named after the policy (in the current schema) and working objects in the product's own
schema ``anon_work`` (``<release>__source``, ``__assignment``, … see :func:`anon_sql.compiler.views.working`); objects of
the user's schema named like working objects are never touched. DuckDB matches names case-insensitively, so ``Rel``
and ``rel`` are the same name. Before a release runs, :func:`claim_release_name` makes sure none of these names
belongs to something anon_sql did not create: a release recorded in ``anon.releases`` may be replaced (when asked),
any other table is refused — never dropped. Working views are redefined (they hold no data).
"""
from __future__ import annotations

import duckdb
from sqlglot import exp

from . import identity, store as catalog
from .names import WORK_SCHEMA, WORKING, working
from .read import related_tables
from ..data.source import refuse_temp_shadows
from ..errors import ReleaseExistsError
from ..common.sqlbuild import ident

WORKING_SUFFIXES = tuple("__" + part for part in WORKING)

# tables and views of the current schema named in $n and of schema $w named in $wn (names lower-cased): one catalog
# scan for both (a release's name claim asks about both)
_OBJECTS_HERE_AND = (
    "SELECT table_name, 'table', schema_name = current_schema(), schema_name = $w FROM duckdb_tables() "
    "WHERE database_name = current_database() AND ((schema_name = current_schema() AND list_contains($n, "
    "lower(table_name))) OR (schema_name = $w AND list_contains($wn, lower(table_name)))) "
    "UNION ALL SELECT view_name, 'view', schema_name = current_schema(), schema_name = $w FROM duckdb_views() "
    "WHERE NOT internal AND database_name = current_database() AND ((schema_name = current_schema() AND "
    "list_contains($n, lower(view_name))) OR (schema_name = $w AND list_contains($wn, lower(view_name))))")


# the name claim's one scan: the objects above with each table's comment (its identity marker), and whether the
# catalog's identity table exists (one row of kind 'owned'); the claim reads nothing else of the catalog functions
_CLAIM_SCAN = (
    "SELECT table_name, 'table', schema_name = current_schema(), schema_name = $w, comment, "
    "schema_name = 'anon' AND table_name = 'owned_objects' FROM duckdb_tables() "
    "WHERE database_name = current_database() AND ((schema_name = current_schema() AND list_contains($n, "
    "lower(table_name))) OR (schema_name = $w AND list_contains($wn, lower(table_name))) OR (schema_name = 'anon' "
    "AND table_name = 'owned_objects')) "
    "UNION ALL SELECT view_name, 'view', schema_name = current_schema(), schema_name = $w, NULL, FALSE "
    "FROM duckdb_views() "
    "WHERE NOT internal AND database_name = current_database() AND ((schema_name = current_schema() AND "
    "list_contains($n, lower(view_name))) OR (schema_name = $w AND list_contains($wn, lower(view_name))))")


def existing_here_and(con: duckdb.DuckDBPyConnection, names: list[str], schema: str | None,
                      schema_names: list[str]
                      ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """:func:`existing` of ``names`` in the current schema and of ``schema_names`` in ``schema``, in one query."""
    lower, lower_there = [n.lower() for n in names], [n.lower() for n in schema_names]
    rows = con.execute(_OBJECTS_HERE_AND, {"n": lower, "w": schema, "wn": lower_there}).fetchall()
    here = {name.lower(): (name, kind) for name, kind, h, _ in rows if h and name.lower() in lower}
    there = {name.lower(): (name, kind) for name, kind, _, w in rows if w and name.lower() in lower_there}
    return here, there


def existing(con: duckdb.DuckDBPyConnection, names: list[str], schema: str | None = None
             ) -> dict[str, tuple[str, str]]:
    """Tables and views of ``schema`` (default: the current one) whose name equals one of ``names`` ignoring case:
    lower-cased name → (name as stored, ``"table"`` | ``"view"``)."""
    if schema is None:
        return existing_here_and(con, names, None, [])[0]
    return existing_here_and(con, [], schema, names)[1]


def _claim_scan(con: duckdb.DuckDBPyConnection, name: str, work_names: list[str]
                ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]],
                           dict[tuple[str | None, str], str | None], bool]:
    """One catalog scan for the name claim: :func:`existing_here_and` of ``name`` and its working names, the
    comments of the tables the release may own (:func:`anon_sql.catalog.identity.seen`'s, matched exactly), and
    whether ``anon.owned_objects`` exists."""
    lower, lower_there = [name.lower()], [n.lower() for n in work_names]
    rows = con.execute(_CLAIM_SCAN, {"n": lower, "w": WORK_SCHEMA, "wn": lower_there}).fetchall()
    has_owned = any(r[5] for r in rows)
    here = {t.lower(): (t, kind) for t, kind, h, _, _, o in rows if h and not o and t.lower() in lower}
    there = {t.lower(): (t, kind) for t, kind, _, w, _, o in rows if w and not o and t.lower() in lower_there}
    mine, plans = identity.candidates(name)
    comments = {(WORK_SCHEMA if w else None, t): comment for t, kind, h, w, comment, _ in rows
                if kind == "table" and ((h and t == mine) or (w and t in plans))}
    return here, there, comments, has_owned


def claim_release_name(con: duckdb.DuckDBPyConnection, name: str, *, replace: bool = False,
                       dry_run: bool = False) -> bool:
    """May a release named ``name`` be created here? True when it replaces an earlier release of that name.

    Raises :class:`ReleaseExistsError` when the name (or one of its working names) differs from an existing object
    only by case, belongs to an object anon_sql did not create (a user table or view: never replaced, whatever
    ``replace`` says), or is an earlier release and neither ``replace`` nor ``dry_run`` was given."""
    work_names = [working(name, p).name for p in WORKING]
    found, work, comments, has_owned = _claim_scan(con, name, work_names)
    ours = catalog.recorded_release(con, name) is not None
    # the identity of what this release wrote, read once for both questions below, from the claim's scan and at
    # most two more reads (the identity rows, the tables' columns)
    mismatched = (identity.mismatches(con, name, comments=comments, has_owned=has_owned)
                  if ours and (name.lower() in found or work) else {})
    if name.lower() in found:
        stored, kind = found[name.lower()]
        if stored != name:
            raise ReleaseExistsError(
                f"release name {name!r} differs only by case from the existing {kind} {stored!r}; DuckDB treats "
                "them as one name: choose a release name that no table or view of the database has")
        if not ours:
            raise ReleaseExistsError(
                f"a {kind} named {name!r} already exists and is not a release of anon_sql (anon.releases does not "
                "list it); anon_sql never drops what it did not create: choose another release name")
        if kind == "view":
            raise ReleaseExistsError(
                f"{name!r} is a view, not the table release {name!r} wrote; anon_sql never replaces what it did not "
                "create: drop or rename the view yourself, or choose another release name")
        if not (replace or dry_run):
            raise ReleaseExistsError(
                f"release {name!r} already exists; pass replace=True (CLI: --replace) to replace it atomically, "
                "or choose another name")
        require_owned(con, name, mismatched)
    # working views are redefined (CREATE OR REPLACE VIEW: no data is lost); a working *table* of the product's
    # schema that is not this release's own (put there by hand, or of a release recorded under another case) would
    # be overwritten, so it is refused
    mine = set(work_names) if ours else set()
    changed = {t for s, t in mismatched if s == WORK_SCHEMA} if ours and work else set()
    foreign = [stored for stored, kind in work.values()
               if kind == "table" and (stored not in mine or stored in changed)]
    if foreign:
        raise ReleaseExistsError(
            f"release {name!r} would create working objects {sorted(foreign)} in schema {WORK_SCHEMA!r}, which "
            "already exist and were not created by an anon_sql release of that name; anon_sql never replaces them: "
            "choose another release name")
    return name.lower() in found


def require_owned(con: duckdb.DuckDBPyConnection, name: str,
                  mismatched: dict[tuple[str | None, str], str] | None = None) -> None:
    """Refuse (:class:`ReleaseExistsError`, exit 2) when the table named like release ``name`` or one of its plan
    tables is not the one anon_sql wrote (:func:`anon_sql.catalog.identity.mismatches`, or ``mismatched`` when the
    caller has just read them): nothing is replaced or dropped then."""
    # the session's TEMP object of the release's name (or a related table's) is what DROP / REPLACE would hit (round
    # 10, M12: DROP ANONYMIZED VIEW dropped the user's TEMP table and left the release outside the catalog)
    refuse_temp_shadows(con, [name, *related_tables(con, name)], f"anonymized view {name!r}")
    if mismatched is None:
        mismatched = identity.mismatches(con, name)
    for (schema, table), why in sorted(mismatched.items(), key=lambda kv: kv[0][0] or ""):
        if schema is None:
            raise ReleaseExistsError(
                f"table {table!r} is not the table anon_sql released as {name!r}: {why}; anon_sql never replaces or "
                "drops a table it did not write, so nothing was changed: rename or drop that table yourself, or "
                "choose another release name")
        raise ReleaseExistsError(
            f"table {schema}.{table!r} is not the working table anon_sql wrote for release {name!r}: {why}; "
            "nothing was changed: rename or drop it yourself")


# the working views every release of the layout before the anon_work schema left beside its table
_LEGACY_VIEWS = ("general", "classes", "checks")


def legacy_working(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[exp.Table, str]]:
    """The working objects that an anon_sql from before the ``anon_work`` schema (issue 13.4) left beside recorded
    release ``name`` in the user's schema (``"<name>__source"``, ``__assignment``, …): (table, ``"table"`` |
    ``"view"``), dependants first. They are the product's only when the release is recorded in ``anon.releases``
    and its three views that layout always kept (``__general``, ``__classes``, ``__checks``) are all there as views;
    otherwise none is (a user's object of such a name is never touched). Replacing, refreshing or dropping the
    release drops them with it; until then they stay, and ``check`` and the metrics never read them."""
    # the three views first (one catalog query, and nearly always the answer: no such views), the record only then
    found = existing(con, [working(name, p).name for p in WORKING])
    if not all(found.get(working(name, p).name.lower(), ("", ""))[1] == "view" for p in _LEGACY_VIEWS):
        return []
    if catalog.recorded_release(con, name) is None:
        return []
    views = [found[k] for k in (working(name, p).name.lower() for p in ("checks", "classes", "general", "source"))
             if k in found and found[k][1] == "view"]
    tables = [v for v in found.values() if v[1] == "table"]
    return [(exp.Table(this=ident(stored)), kind) for stored, kind in [*views, *tables]]


__all__ = ["WORKING_SUFFIXES", "existing", "existing_here_and", "claim_release_name", "require_owned",
           "legacy_working"]
