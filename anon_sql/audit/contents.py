"""The ``file contents`` check of a shared release file: it holds the release's set and nothing else.

Export writes tables only (``<release>``, ``__classes``, ``__metadata`` and the related tables), without comments,
defaults or constraints. Anything else in the file is data ``check`` would vouch for without reading it: a table or
view (hostile round 7, C03), a macro or table macro holding raw rows (round 8, N09 / N09b), a user type such as an
ENUM listing values (N18), a comment holding a mapping (N19), a sequence, a schema, an index, a column default or a
CHECK constraint.
"""
from __future__ import annotations

from typing import Any

import duckdb

from . import program as check_program

# every object of the file's database (the current one) that is not a table or view, named as "kind schema.name";
# each SELECT gives (what, schema, table name or NULL)
_OTHER_OBJECTS = """
SELECT function_type || ' ' || schema_name || '.' || function_name, schema_name, NULL FROM duckdb_functions()
  WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'type ' || schema_name || '.' || type_name, schema_name, NULL FROM duckdb_types()
  WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'sequence ' || schema_name || '.' || sequence_name, schema_name, NULL FROM duckdb_sequences()
  WHERE database_name = current_database()
UNION ALL SELECT 'schema ' || schema_name, schema_name, NULL FROM duckdb_schemas()
  WHERE database_name = current_database() AND NOT internal
UNION ALL SELECT 'comment on schema ' || schema_name, schema_name, NULL FROM duckdb_schemas()
  WHERE database_name = current_database() AND comment IS NOT NULL
UNION ALL SELECT 'index ' || schema_name || '.' || index_name, schema_name, NULL FROM duckdb_indexes()
  WHERE database_name = current_database()
UNION ALL SELECT 'comment on table ' || schema_name || '.' || table_name, schema_name, NULL FROM duckdb_tables()
  WHERE database_name = current_database() AND comment IS NOT NULL
UNION ALL SELECT 'comment on view ' || schema_name || '.' || view_name, schema_name, NULL FROM duckdb_views()
  WHERE database_name = current_database() AND NOT internal AND comment IS NOT NULL
UNION ALL SELECT 'comment on column ' || schema_name || '.' || table_name || '.' || column_name, schema_name, NULL
  FROM duckdb_columns() WHERE database_name = current_database() AND comment IS NOT NULL
UNION ALL SELECT 'default of column ' || schema_name || '.' || table_name || '.' || column_name, schema_name, NULL
  FROM duckdb_columns() WHERE database_name = current_database() AND column_default IS NOT NULL
UNION ALL SELECT 'check constraint on ' || schema_name || '.' || table_name, schema_name, NULL
  FROM duckdb_constraints() WHERE database_name = current_database() AND constraint_type = 'CHECK'
"""
_RELATIONS = ("SELECT schema_name || '.' || table_name, table_name, schema_name FROM duckdb_tables() "
              "WHERE database_name = current_database() UNION ALL SELECT schema_name || '.' || view_name, "
              "view_name, schema_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()")


def file_contents_row(con: duckdb.DuckDBPyConnection, name: str, policy: Any, populations: list[str]
                      ) -> dict[str, Any]:
    """The ``file contents`` check row of shared release ``name`` (``policy``: its policy, naming its related
    tables): the file holds the release's tables and nothing else but the ``populations`` its k-map / δ-presence
    models name, which a reader may put beside it to re-verify them (docs/sharing.md). Fails naming the rest."""
    mine = {n.lower() for n in (name, f"{name}__classes", f"{name}__metadata", *populations,
                                *(f"{name}_{r}" for r in policy.related))}
    found = con.execute(_RELATIONS).fetchall()
    other = sorted(q for q, t, schema in found if not (schema == "main" and t.lower() in mine))
    other += sorted(r[0] for r in con.execute(_OTHER_OBJECTS).fetchall())
    return check_program.table_check_row(
        "file contents", len(other), "the release's tables only (no other table, view, macro, type, sequence, index, "
        "comment, default or constraint)", message=("not part of the release: " + ", ".join(other)) if other else None)


__all__ = ["file_contents_row"]
