"""Which tables anon_sql wrote, by identity rather than by name (issue 28.1).

A name proves nothing: a user may drop a release's table and create one of their own under its name. So when a
release is recorded, each table it keeps (the released table, its plan tables in ``anon_work``) gets a marker — a
``COMMENT ON TABLE`` with a random token — and ``anon.owned_objects`` keeps the token with a fingerprint of the
table's columns and types. A table is anon_sql's to replace or drop only when its comment is that marker and its
columns are those fingerprinted: a table created afresh has no such comment (``CREATE TABLE AS`` does not copy
one), and a column a user added changes the fingerprint. Catalogs recorded before this have no row: their objects
are still recognised by name (:func:`owned` returns None for them).
"""
from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from .names import WORK_SCHEMA, working
from ..common.sqlbuild import ident, lit, render

MARKER = "anon_sql release"
OWNED = exp.Table(this=ident("owned_objects"), db=ident("anon"))
PLAN_PARTS = ("assignment", "ec_values", "noise", "risk")   # the working tables a release keeps

# one table's comment and its columns, in order; $s NULL = the current schema
_TABLE = (
    "SELECT t.comment, list([c.column_name, c.data_type] ORDER BY c.column_index) FROM duckdb_tables() t "
    "LEFT JOIN duckdb_columns() c ON c.table_oid = t.table_oid "
    "WHERE t.database_name = current_database() AND t.schema_name = coalesce($s, current_schema()) "
    "AND t.table_name = $t GROUP BY ALL")
_HAS_OWNED = ("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
              "AND schema_name = 'anon' AND table_name = 'owned_objects'")


@dataclass(frozen=True)
class Seen:
    """A table as the database has it now: its comment and the fingerprint of its columns."""

    comment: str | None
    fingerprint: str


def fingerprint(columns: list[Any]) -> str:
    """The digest of a table's shape: its columns' names and types, in order."""
    return hashlib.sha256(json.dumps([list(c) for c in columns]).encode("utf-8")).hexdigest()


def seen(con: Any, name: str, schema: str | None = None) -> Seen | None:
    """The comment and shape of table ``schema.name`` (default: the current schema), or None when no such table."""
    rows = con.execute(_TABLE, {"s": schema, "t": name}).fetchall()
    if not rows:
        return None
    comment, columns = rows[0]
    return Seen(comment, fingerprint([c for c in columns or [] if c[0] is not None]))


def owned(con: Any, release: str, name: str, schema: str | None = None) -> dict[str, Any] | None:
    """The ``anon.owned_objects`` row of the table ``schema.name`` that release ``release`` wrote, or None when
    none is recorded (a catalog from before issue 28, or not the release's)."""
    if not con.execute(_HAS_OWNED).fetchall()[0][0]:
        return None
    cur = con.execute("SELECT * FROM anon.owned_objects WHERE release = ? AND object = ? AND schema_name IS NOT "
                      "DISTINCT FROM ?", [release, name, schema])
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def mismatch(con: Any, release: str, name: str, schema: str | None = None) -> str | None:
    """Why the table ``schema.name`` is not the one release ``release`` wrote (None: it is, it does not exist, or
    the catalog predates identities and the name decides)."""
    row = owned(con, release, name, schema)
    if row is None:
        return None
    now = seen(con, name, schema)
    if now is None:
        return None
    if now.comment != row["marker"]:
        return ("it does not carry the marker anon_sql wrote on the release's table (its comment is "
                f"{now.comment!r}): it was dropped and created again, not by anon_sql")
    if now.fingerprint != row["fingerprint"]:
        return "its columns or their types changed since anon_sql wrote it"
    return None


def mark(con: Any, release: str) -> None:
    """Mark the tables release ``release`` keeps and record their identity (inside the release's transaction):
    the released table of the current schema and the plan tables of ``anon_work`` that exist."""
    con.execute(render(exp.delete(OWNED.copy(), where=exp.EQ(this=exp.column("release"), expression=lit(release)))))
    targets: list[tuple[exp.Table, str | None]] = [(exp.Table(this=ident(release)), None)]
    targets += [(working(release, p), WORK_SCHEMA) for p in PLAN_PARTS]
    for table, schema in targets:
        if seen(con, table.name, schema) is None:
            continue
        marker = f"{MARKER} {uuid.uuid4().hex}"
        con.execute(render(exp.Comment(this=table.copy(), kind="TABLE", expression=lit(marker))))
        now = seen(con, table.name, schema)
        con.execute("INSERT INTO anon.owned_objects (release, schema_name, object, marker, fingerprint) "
                    "VALUES (?, ?, ?, ?, ?)", [release, schema, table.name, marker, now.fingerprint])


def forget(con: Any, release: str) -> None:
    """Delete the identity rows of ``release`` (DROP ANONYMIZED VIEW, inside its transaction)."""
    if con.execute(_HAS_OWNED).fetchall()[0][0]:
        con.execute(render(exp.delete(OWNED.copy(), where=exp.EQ(this=exp.column("release"),
                                                                   expression=lit(release)))))


__all__ = ["MARKER", "Seen", "fingerprint", "seen", "owned", "mismatch", "mark", "forget"]
