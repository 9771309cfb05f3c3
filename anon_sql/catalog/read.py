"""The catalog reads that need nothing but a DuckDB connection: whether the ``anon`` catalog is installed, and the
recorded row of a release. :mod:`anon_sql.catalog.store` re-exports them; ``anon-sql check`` reads them before (and, with
its program cached, instead of) importing sqlglot, numpy and the compiler. Constant SQL, values as parameters."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

# the connections (by id) whose catalog a probe found installed during the current release: nothing in a release
# drops the catalog (a failed release removes one it installed only after it returns), so one probe is enough
_INSTALLED: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("anon_sql_installed", default=None)


@contextlib.contextmanager
def probed_once() -> Iterator[None]:
    """Within the block (one release), :func:`is_installed` remembers a connection whose catalog it found: the
    release asked it five times (issue 17.1). A "not installed" answer is never remembered."""
    if _INSTALLED.get() is not None:    # nested: the outer block's memory holds
        yield
        return
    token = _INSTALLED.set(set())
    try:
        yield
    finally:
        _INSTALLED.reset(token)


def is_installed(con: Any) -> bool:
    """Does the current database hold the anon catalog? (duckdb_tables(): a third of information_schema's cost.)
    Another attached database's catalog does not count: after ``USE other`` every catalog query (``anon.releases``)
    reads ``other``, so a catalog elsewhere left them to fail with DuckDB's raw "schema anon does not exist"."""
    known = _INSTALLED.get()
    if known is not None and id(con) in known:
        return True
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = 'releases' "
        "AND database_name = current_database()"
    ).fetchall()
    if rows[0][0] and known is not None:
        known.add(id(con))
    return bool(rows[0][0])


_HAS_OWNED = ("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
              "AND schema_name = 'anon' AND table_name = 'owned_objects'")
# the release's own objects ($n: its table and related tables, current schema) recorded in anon.owned_objects that
# are now a table without the marker anon_sql wrote on it, or a view
_UNMARKED = ("SELECT t.table_name, 'table' FROM duckdb_tables() t JOIN anon.owned_objects o ON o.release = $r AND "
             "o.schema_name IS NULL AND o.object = t.table_name WHERE t.database_name = current_database() AND "
             "t.schema_name = current_schema() AND list_contains($n, t.table_name) AND t.comment IS DISTINCT FROM "
             "o.marker UNION ALL SELECT v.view_name, 'view' FROM duckdb_views() v JOIN anon.owned_objects o ON "
             "o.release = $r AND o.schema_name IS NULL AND o.object = v.view_name WHERE v.database_name = "
             "current_database() AND v.schema_name = current_schema() AND NOT v.internal AND list_contains($n, "
             "v.view_name) ORDER BY 1")


def has_owned_objects(con: Any) -> bool:
    """Does the catalog record what anon_sql created (``anon.owned_objects``, issue 28)?"""
    return bool(con.execute(_HAS_OWNED).fetchall()[0][0])


def not_released_objects(con: Any, name: str) -> str | None:
    """Why the table of release ``name`` (or one of its related tables) is not the object anon_sql wrote — it no
    longer carries the marker (dropped and created again by someone else) or a view stands in its place —, or None;
    None too for a catalog from before ownership was recorded. Constant SQL (``anon-sql check`` runs it before a
    cached program: hostile round 22, Y62–Y66b; rounds 20 and 22, U05 / U06 / Y29)."""
    if not has_owned_objects(con):
        return None
    found = con.execute(_UNMARKED, {"r": name, "n": [name, *related_tables(con, name)]}).fetchall()
    if not found:
        return None
    table, kind = found[0]
    why = ("a view stands under its name" if kind == "view" else
           "it does not carry the marker anon_sql wrote on it: it was dropped and created again, not by anon_sql")
    return f"table {table!r} is not the table anon_sql released ({why})"


def forget_installed(con: Any) -> None:
    """Forget that :func:`is_installed` found ``con``'s catalog: a rolled-back transaction installed it."""
    known = _INSTALLED.get()
    if known is not None:
        known.discard(id(con))


def recorded_release(con: Any, name: str) -> dict | None:
    """The ``anon.releases`` row of release ``name`` with status ``released`` (the latest), or None: what anon_sql
    itself created under that name. Reads only (works on a read-only connection)."""
    if not is_installed(con):
        return None
    cur = con.execute("SELECT * FROM anon.releases WHERE release = ? AND status = 'released' "
                      "ORDER BY created_at DESC LIMIT 1", [name])
    row = next(iter(cur.fetchall()), None)   # fetchall: a fetchone leaves the result open (DuckDB 2)
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row))


def related_tables(con: Any, name: str) -> list[str]:
    """The related tables recorded release ``name`` wrote beside its table (``<release>_<related name>``, from its
    recorded policy; docs/units.md), in the policy's order; empty for none."""
    import json

    if not is_installed(con):
        return []
    rows = con.execute("SELECT policy_json FROM anon.releases WHERE release = ? AND status = 'released' "
                       "ORDER BY created_at DESC LIMIT 1", [name]).fetchall()
    try:
        related = json.loads((rows[0][0] if rows else None) or "{}").get("related") or {}
    except ValueError:
        related = {}
    return [f"{name}_{n}" for n in related]


def table_columns(con: Any, name: str) -> list[tuple[str, str]]:
    """(name, type) of each column of table ``name`` in the current schema of the current database, in order;
    empty when there is no such table."""
    return [tuple(r) for r in con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND table_name = ? ORDER BY column_index", [name]).fetchall()]


__all__ = ["is_installed", "probed_once", "forget_installed", "recorded_release", "related_tables",
           "has_owned_objects", "not_released_objects",
           "table_columns"]
