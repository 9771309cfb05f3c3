"""Which catalog rows anon_sql wrote: taxonomies and privacy budgets, by identity rather than by name (issue 28.1).

A taxonomy is rows of ``anon.taxonomies`` / ``anon.taxonomy_nodes``, a budget a row of ``anon.privacy_budgets``:
anyone who can write the file can insert such rows by hand (or edit them). So anon_sql writes a random ``marker``
on each row it creates and keeps, in ``anon.owned_objects`` (``schema_name`` = the table holding the row, ``object``
= the taxonomy's name or the budget's id), the marker with a fingerprint of what defines the object: every node of
the taxonomy, the budget's table, unit and (ε, δ). Replacing or dropping one is allowed only when both still match.
A catalog from before markers has its rows adopted once, when the marker column is added (they were anon_sql's:
nothing else wrote them then).
"""
from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

TAXONOMIES = "anon.taxonomies"
BUDGETS = "anon.privacy_budgets"

# the same table as sql/catalog.sql's (the DP ledger may be the first thing of the catalog a database gets)
OWNED_DDL = ("CREATE TABLE IF NOT EXISTS anon.owned_objects (release VARCHAR, schema_name VARCHAR, object VARCHAR, "
             "marker VARCHAR, fingerprint VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp)")

# one catalog read for both (a DP query asks on every answer): is anon.owned_objects there, has the table a marker
_READY = ("SELECT (SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = "
          "'anon' AND table_name = 'owned_objects'), (SELECT count(*) FROM duckdb_columns() WHERE database_name = "
          "current_database() AND schema_name = 'anon' AND table_name = ? AND column_name = 'marker')")
# constant SQL per kind (no user text): the marker column of the object's row, and what its fingerprint digests
# the object's marker beside the recorded marker and fingerprint (NULLs when no identity row): one query
_MARKER = {TAXONOMIES: ("SELECT t.marker, o.marker, o.fingerprint FROM anon.taxonomies t LEFT JOIN anon.owned_objects o "
                        "ON o.release IS NULL AND o.schema_name = 'anon.taxonomies' AND o.object = t.name "
                        "WHERE t.name = ?"),
           BUDGETS: ("SELECT b.marker, o.marker, o.fingerprint FROM anon.privacy_budgets b LEFT JOIN "
                     "anon.owned_objects o ON o.release IS NULL AND o.schema_name = 'anon.privacy_budgets' AND "
                     "o.object = CAST(b.budget_id AS VARCHAR) WHERE CAST(b.budget_id AS VARCHAR) = ?")}
_SET_MARKER = {TAXONOMIES: "UPDATE anon.taxonomies SET marker = ? WHERE name = ?",
               BUDGETS: "UPDATE anon.privacy_budgets SET marker = ? WHERE CAST(budget_id AS VARCHAR) = ?"}
_DEFINES = {
    TAXONOMIES: ("SELECT t.kind, t.height, t.spec, (SELECT list([n.leaf, CAST(n.level AS VARCHAR), n.value] "
                 "ORDER BY n.level, n.leaf, n.value) FROM anon.taxonomy_nodes n WHERE n.taxonomy = t.name) "
                 "FROM anon.taxonomies t WHERE t.name = ?"),
    BUDGETS: ("SELECT table_name, privacy_unit, units, epsilon, delta FROM anon.privacy_budgets "
              "WHERE CAST(budget_id AS VARCHAR) = ?"),
}
_ALL = {TAXONOMIES: "SELECT name FROM anon.taxonomies",
        BUDGETS: "SELECT CAST(budget_id AS VARCHAR) FROM anon.privacy_budgets"}
_TABLE = {TAXONOMIES: "taxonomies", BUDGETS: "privacy_budgets"}
_ADD_MARKER = {TAXONOMIES: "ALTER TABLE anon.taxonomies ADD COLUMN IF NOT EXISTS marker VARCHAR",
               BUDGETS: "ALTER TABLE anon.privacy_budgets ADD COLUMN IF NOT EXISTS marker VARCHAR"}


def _fingerprint(con: Any, where: str, key: str) -> str | None:
    row = next(iter(con.execute(_DEFINES[where], [key]).fetchall()), None)
    if row is None:
        return None
    return hashlib.sha256(json.dumps(list(row), default=str).encode("utf-8")).hexdigest()


def ready(con: Any, where: str) -> None:
    """Make sure ``where`` (``TAXONOMIES`` or ``BUDGETS``) has its marker column and ``anon.owned_objects`` exists;
    when the column is added to an existing table, its rows are adopted (written before markers existed, by anon_sql).
    Call inside the writing transaction."""
    has_owned, has_marker = con.execute(_READY, [_TABLE[where]]).fetchall()[0]
    if not has_owned:
        con.execute(OWNED_DDL)
    if has_marker:
        return
    con.execute(_ADD_MARKER[where])
    for (key,) in con.execute(_ALL[where]).fetchall():   # one row per catalog object (taxonomy, budget)
        mark_row(con, where, key)


def mark_row(con: Any, where: str, key: str) -> None:
    """Write a new marker on object ``key`` of ``where`` and record it with the object's fingerprint."""
    marker = f"anon_sql row {uuid.uuid4().hex}"
    con.execute(_SET_MARKER[where], [marker, key])
    forget_row(con, where, key)
    con.execute("INSERT INTO anon.owned_objects (release, schema_name, object, marker, fingerprint) "
                "VALUES (NULL, ?, ?, ?, ?)", [where, key, marker, _fingerprint(con, where, key)])


def forget_row(con: Any, where: str, key: str) -> None:
    """Delete the identity row of object ``key`` of ``where`` (the object is being dropped or re-marked)."""
    con.execute("DELETE FROM anon.owned_objects WHERE release IS NULL AND schema_name = ? AND object = ?",
                [where, key])


def foreign(con: Any, where: str, key: str) -> str | None:
    """Why object ``key`` of ``where`` is not the one anon_sql wrote (None when it is, or when it does not exist).
    Needs :func:`ready` to have run in this transaction."""
    row = next(iter(con.execute(_MARKER[where], [key]).fetchall()), None)
    if row is None:
        return None
    marker, recorded_marker, recorded_fingerprint = row
    if marker is None or recorded_marker != marker:
        return (f"its row in {where} does not carry a marker anon_sql recorded in anon.owned_objects: it was "
                "inserted or edited by hand, not by anon_sql")
    if recorded_fingerprint != _fingerprint(con, where, key):
        return f"what defines it in {where} changed since anon_sql wrote it (edited by hand)"
    return None


__all__ = ["TAXONOMIES", "BUDGETS", "OWNED_DDL", "ready", "mark_row", "forget_row", "foreign"]
