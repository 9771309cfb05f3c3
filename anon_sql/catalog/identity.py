"""Which tables anon_sql wrote, by identity rather than by name (issue 28.1).

A name proves nothing: a user may drop a release's table and create one of their own under its name. So when a
release is recorded, each table it keeps (the released table and its related tables ``<release>_<name>``, its plan
tables in ``anon_work``) gets a marker — a
``COMMENT ON TABLE`` with a random token — and ``anon.owned_objects`` keeps the token with a fingerprint of the
table's columns and types. A table is anon_sql's to replace or drop only when its comment is that marker and its
columns are those fingerprinted: a table created afresh has no such comment (``CREATE TABLE AS`` does not copy
one), and a column a user added changes the fingerprint. Catalogs recorded before this have no row: their objects
are still recognised by name (:func:`owned` finds no row for them).
"""
from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from .names import WORK_SCHEMA, working
from .read import has_owned_objects
from ..common.sqlbuild import ident, lit, render

MARKER = "anon_sql release"
OWNED = exp.Table(this=ident("owned_objects"), db=ident("anon"))
PLAN_PARTS = ("assignment", "ec_values", "noise", "risk")   # the working tables a release keeps

# the comment of the release's table ($n in the current schema) and of its plan tables ($wn in schema $w), then their
# columns in order: two scans of the catalog functions for all of them (a join of the two costs twice as much)
_WHERE = ("database_name = current_database() AND ((schema_name = current_schema() "
          "AND list_contains($n, table_name)) OR (schema_name = $w AND list_contains($wn, table_name)))")
_COMMENTS = f"SELECT schema_name = $w, table_name, comment FROM duckdb_tables() WHERE {_WHERE}"
_COLUMNS = (f"SELECT schema_name = $w, table_name, list([column_name, data_type] ORDER BY column_index) "
            f"FROM duckdb_columns() WHERE {_WHERE} GROUP BY ALL")


@dataclass(frozen=True)
class Seen:
    """A table as the database has it now: its comment and the fingerprint of its columns."""

    comment: str | None
    fingerprint: str


def fingerprint(columns: list[Any]) -> str:
    """The digest of a table's shape: its columns' names and types, in order."""
    return hashlib.sha256(json.dumps([list(c) for c in columns]).encode("utf-8")).hexdigest()


def _plan_tables(release: str) -> list[str]:
    return [working(release, p).name for p in PLAN_PARTS]


def _args(release: str, related: Sequence[str]) -> dict[str, Any]:
    return {"n": [release, *related], "w": WORK_SCHEMA, "wn": _plan_tables(release)}


def seen(con: Any, release: str, comments: dict[tuple[str | None, str], str | None] | None = None,
         related: Sequence[str] = ()) -> dict[tuple[str | None, str], Seen]:
    """The tables release ``release`` may own as they are now: (schema — None for the release's table and its
    ``related`` tables (their names) in the current schema, ``anon_work`` for a plan table —, name) → comment and
    shape; absent tables left out. ``comments``: those tables' comments when the caller has just read them (the
    name claim's scan)."""
    args = _args(release, related)
    if comments is None:
        comments = {(WORK_SCHEMA if w else None, name): comment
                    for w, name, comment in con.execute(_COMMENTS, args).fetchall()}
    if not comments:
        return {}
    columns = {(WORK_SCHEMA if w else None, name): cols for w, name, cols in con.execute(_COLUMNS, args).fetchall()}
    return {key: Seen(comment, fingerprint(columns.get(key) or [])) for key, comment in comments.items()}


def candidates(release: str) -> tuple[str, list[str]]:
    """The names of the tables release ``release`` may own: its table's (current schema) and its plan tables'
    (``anon_work``), matched exactly."""
    return release, _plan_tables(release)


def owned(con: Any, release: str, has_table: bool | None = None) -> dict[tuple[str | None, str], dict[str, Any]]:
    """The ``anon.owned_objects`` rows of ``release``, by (schema, name); empty when none is recorded (a catalog
    from before issue 28). ``has_table``: whether ``anon.owned_objects`` exists, when the caller knows."""
    if has_table is None:
        has_table = has_owned_objects(con)
    if not has_table:
        return {}
    cur = con.execute("SELECT * FROM anon.owned_objects WHERE release = ?", [release])
    names = [d[0] for d in cur.description]
    return {(r["schema_name"], r["object"]): r for r in (dict(zip(names, row)) for row in cur.fetchall())}


def mismatches(con: Any, release: str, comments: dict[tuple[str | None, str], str | None] | None = None,
               has_owned: bool | None = None, related: Sequence[str] = ()) -> dict[tuple[str | None, str], str]:
    """Each table named like one release ``release`` wrote that is not the one it wrote, with why: (schema, name)
    → reason. Tables that do not exist, and releases recorded before identities (the name decides), give none.
    ``comments`` / ``has_owned``: what the caller's catalog scan already read (:func:`seen`, :func:`owned`);
    ``related``: the names of the release's related tables, checked too."""
    recorded = owned(con, release, has_owned)
    if not recorded:
        return {}
    out = {}
    for key, now in seen(con, release, comments, related).items():
        row = recorded.get(key)
        if row is None:
            continue
        if now.comment != row["marker"]:
            out[key] = ("it does not carry the marker anon_sql wrote on it (its comment is "
                        f"{now.comment!r}): it was dropped and created again, not by anon_sql")
        elif now.fingerprint != row["fingerprint"]:
            out[key] = "its columns or their types changed since anon_sql wrote it"
    return out


def shapes(con: Any, release: str, related: Sequence[str] = ()) -> dict[tuple[str | None, str], list[tuple[str, str]]]:
    """The columns (name, type, in order) of each table release ``release`` (and its ``related`` tables) may own
    that exists now, by (schema, name): one scan of the columns (a table has at least one), without the comments
    :func:`seen` reads too."""
    args = _args(release, related)
    return {(WORK_SCHEMA if w else None, name): [tuple(c) for c in cols or []]
            for w, name, cols in con.execute(_COLUMNS, args).fetchall()}


def mark(con: Any, release: str, related: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Mark the tables release ``release`` keeps and record their identity (inside the release's transaction):
    the released table and its ``related`` tables (their names) of the current schema and the plan tables of
    ``anon_work`` that exist. One read of their
    columns, then one script: the old identity rows out, a new marker on each table, its row in
    ``anon.owned_objects`` (issue 29.1: two calls, not five). Returns the released table's columns as read."""
    script = [exp.delete(OWNED.copy(), where=exp.EQ(this=exp.column("release"), expression=lit(release)))]
    rows = []
    tables = shapes(con, release, related)
    for (schema, name), columns in sorted(tables.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        marker = f"{MARKER} {uuid.uuid4().hex}"
        table = exp.Table(this=ident(name), db=ident(schema) if schema else None)
        script.append(exp.Comment(this=table, kind="TABLE", expression=lit(marker)))
        rows.append(exp.Tuple(expressions=[lit(release), lit(schema), lit(name), lit(marker),
                                           lit(fingerprint(columns))]))
    if rows:   # a comment leaves the columns as they are: the shape read above is the marked table's
        script.append(exp.insert(exp.Values(expressions=rows), OWNED.copy(),
                                 columns=["release", "schema_name", "object", "marker", "fingerprint"]))
    con.execute(";\n".join(render(stmt) for stmt in script))
    return tables.get((None, release), [])


def forget_identity(con: Any, release: str) -> None:
    """Delete the identity rows of ``release`` (DROP ANONYMIZED VIEW, inside its transaction)."""
    if has_owned_objects(con):
        con.execute(render(exp.delete(OWNED.copy(), where=exp.EQ(this=exp.column("release"),
                                                                   expression=lit(release)))))


__all__ = ["MARKER", "PLAN_PARTS", "Seen", "fingerprint", "seen", "candidates", "shapes", "owned", "mismatches",
           "mark", "forget_identity"]
