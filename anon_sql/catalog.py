"""The ``anon`` catalog schema: DDL and macros from the packaged sql/ folder, UDF registration, catalog reads."""
from __future__ import annotations

import json
from importlib import resources

import duckdb
import pandas as pd

from .sqlbuild import lit
from .taxonomy import Taxonomy

SCHEMA = "anon"


def _sql_file(name: str) -> str:
    return resources.files("anon_sql.sql").joinpath(name).read_text(encoding="utf-8")


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create schema ``anon`` (catalog tables + SQL macros) and register the Python UDFs. Idempotent."""
    con.execute(_sql_file("catalog.sql"))
    from .udfs import duckdb_udfs

    duckdb_udfs.install_macros(con)
    duckdb_udfs.register(con)


def is_installed(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'anon' AND table_name = 'releases'"
    ).fetchall()
    return bool(rows[0][0])


def ensure_installed(con: duckdb.DuckDBPyConnection) -> None:
    if not is_installed(con):
        install(con)
    else:
        from .udfs import duckdb_udfs

        duckdb_udfs.register(con)


def store_taxonomy(con: duckdb.DuckDBPyConnection, tax: Taxonomy, replace: bool = True) -> None:
    """Write a taxonomy to ``anon.taxonomies`` / ``anon.taxonomy_nodes`` (replacing one of the same name)."""
    ensure_installed(con)
    frame = tax.to_frame()
    con.execute("BEGIN TRANSACTION")
    try:
        if replace:
            con.execute("DELETE FROM anon.taxonomy_nodes WHERE taxonomy = ?", [tax.name])
            con.execute("DELETE FROM anon.taxonomies WHERE name = ?", [tax.name])
        con.execute(
            "INSERT INTO anon.taxonomies (name, kind, height, leaves, spec) VALUES (?, ?, ?, ?, ?)",
            [tax.name, tax.kind, tax.height, len(tax.leaves), json.dumps(tax.spec)],
        )
        con.register("__anon_tax_frame", frame)
        con.execute("INSERT INTO anon.taxonomy_nodes SELECT taxonomy, leaf, level, value FROM __anon_tax_frame")
        con.unregister("__anon_tax_frame")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def load_taxonomy(con: duckdb.DuckDBPyConnection, name: str) -> Taxonomy | None:
    """Read a stored taxonomy by name (None when absent)."""
    if not is_installed(con):
        return None
    meta = con.execute("SELECT kind, spec FROM anon.taxonomies WHERE name = ?", [name]).fetchall()
    if not meta:
        return None
    long = con.execute(
        "SELECT leaf, level, value FROM anon.taxonomy_nodes WHERE taxonomy = ? ORDER BY level, leaf", [name]
    ).df()
    return Taxonomy.from_frame(name, long, kind=meta[0][0], spec=json.loads(meta[0][1] or "{}"))


def taxonomy_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    if not is_installed(con):
        return []
    return [r[0] for r in con.execute("SELECT name FROM anon.taxonomies ORDER BY name").fetchall()]


def releases(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    ensure_installed(con)
    return con.execute("SELECT * FROM anon.releases ORDER BY created_at").df()


__all__ = ["install", "store_taxonomy", "load_taxonomy", "taxonomy_names", "releases", "lit"]
