"""The ``anon`` catalog schema: DDL and macros from the packaged sql/ folder, UDF registration, catalog reads."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Iterable

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


def upgrade(con: duckdb.DuckDBPyConnection) -> None:
    """Run the idempotent catalog DDL again: adds the tables introduced after this database's catalog was made."""
    con.execute(_sql_file("catalog.sql"))


def is_installed(con: duckdb.DuckDBPyConnection) -> bool:
    """Does the database hold the anon catalog? (duckdb_tables(): a third of information_schema's cost)"""
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name = 'releases'"
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


def load_taxonomies(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> dict[str, Taxonomy]:
    """The stored taxonomies among ``names`` (absent ones left out): two queries however many are asked for."""
    wanted = sorted(set(names))
    if not wanted or not is_installed(con):
        return {}
    meta = con.execute("SELECT name, kind, spec FROM anon.taxonomies WHERE list_contains(?, name)",
                       [wanted]).fetchall()
    if not meta:
        return {}
    # one row per leaf with its values level by level (the wide form of Taxonomy.from_frame, pivoted in SQL)
    rows = con.execute("SELECT taxonomy, list(value ORDER BY level) FROM anon.taxonomy_nodes "
                       "WHERE list_contains(?, taxonomy) GROUP BY taxonomy, leaf ORDER BY taxonomy, leaf",
                       [[m[0] for m in meta]]).fetchall()
    wide: dict[str, list[list[str]]] = {}
    for taxonomy, path in rows:      # one step per taxonomy leaf (catalog metadata), not per data row
        wide.setdefault(taxonomy, []).append(path)
    return {name: _built(name, kind, spec or "{}", tuple(map(tuple, wide[name]))).copy()
            for name, kind, spec in meta if name in wide}


@lru_cache(maxsize=128)
def _built(name: str, kind: str, spec: str, paths: tuple[tuple[str, ...], ...]) -> Taxonomy:
    """A stored taxonomy built and validated once per content (name, kind, spec and every leaf's path)."""
    return Taxonomy(name, pd.DataFrame([list(p) for p in paths]), kind=kind, spec=json.loads(spec))


def taxonomy_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    if not is_installed(con):
        return []
    return [r[0] for r in con.execute("SELECT name FROM anon.taxonomies ORDER BY name").fetchall()]


def store_vulnerability(con: duckdb.DuckDBPyConnection, source: str, target: str, iv: pd.DataFrame,
                        transaction: bool = True) -> None:
    """Replace the stored identity vulnerability of (source, target, QI set) by ``iv`` (an identity_vulnerability
    result) in ``anon.identity_vulnerability``; ``transaction=False`` when the caller already holds one."""
    con.execute(_sql_file("catalog.sql"))       # idempotent: creates the table in catalogs installed before it existed
    quasi = json.dumps(sorted(iv["attribute"].astype(str)))
    a = iv.attrs
    rows = [[source, target, quasi, str(r.attribute), float(r.iv), float(r.importance), float(r.importance_std),
             None if pd.isna(r.relative) else float(r.relative), a.get("oob_score"), a.get("seed"),
             a.get("n_estimators")] for r in iv.itertuples(index=False)]
    if transaction:
        con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM anon.identity_vulnerability WHERE source = ? AND target = ? AND quasi = ?",
                    [source, target, quasi])
        con.executemany("INSERT INTO anon.identity_vulnerability (source, target, quasi, attribute, iv, importance, "
                        "importance_std, relative, oob_score, seed, n_estimators) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if transaction:
            con.execute("COMMIT")
    except Exception:
        if transaction:
            con.execute("ROLLBACK")
        raise


def load_vulnerability(con: duckdb.DuckDBPyConnection, source: str, target: str,
                       quasi: list[str]) -> pd.DataFrame | None:
    """The stored identity vulnerability of (source, target, QI set), or None."""
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'anon' "
                         "AND table_name = 'identity_vulnerability'").fetchall()[0][0]
    if not exists:
        return None
    df = con.execute("SELECT * FROM anon.identity_vulnerability WHERE source = ? AND target = ? AND quasi = ? "
                     "ORDER BY attribute", [source, target, json.dumps(sorted(map(str, quasi)))]).df()
    return df if len(df) else None


def releases(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    ensure_installed(con)
    return con.execute("SELECT * FROM anon.releases ORDER BY created_at").df()


__all__ = ["install", "store_taxonomy", "load_taxonomy", "taxonomy_names", "releases", "store_vulnerability",
           "load_vulnerability", "lit"]
