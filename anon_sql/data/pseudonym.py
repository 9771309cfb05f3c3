"""Keyed pseudonyms for identifiers: HMAC-SHA256 with a key from the environment or a key file, never stored."""
from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import PolicyError

ENV_KEY = "ANON_SQL_KEY"
FUNCTION = "anon_pseudonym"


def load_key(key_file: str | None = None) -> bytes:
    """The pseudonymization key: ``key_file`` if given, else ``$ANON_SQL_KEY``."""
    if key_file:
        path = Path(key_file)
        if not path.exists():
            raise PolicyError(f"pseudonymization key file {key_file!r} does not exist")
        key = path.read_bytes().strip()
    else:
        key = os.environ.get(ENV_KEY, "").encode()
    if len(key) < 16:
        raise PolicyError(
            f"pseudonymization needs a secret key of at least 16 bytes: set ${ENV_KEY} or the identifier's "
            "key_file option (the key is never written to the release or the catalog)"
        )
    return key


def pseudonyms(key: bytes, values: list[str | None]) -> list[str | None]:
    """The keyed hash of each text value (hex HMAC-SHA256 of its UTF-8 bytes; NULL stays NULL) — the one definition
    every engine's pseudonym function calls (DuckDB: an arrow UDF; Spark: a pandas UDF)."""
    # one HMAC per distinct value of the batch: identifiers repeat rarely, but the work stays per batch
    cache: dict[str, str | None] = {}
    out = []
    for v in values:
        if v not in cache:
            cache[v] = None if v is None else hmac.new(key, v.encode(), hashlib.sha256).hexdigest()
        out.append(cache[v])
    return out


def register_duckdb_pseudonym(con: duckdb.DuckDBPyConnection, key: bytes) -> str:
    """Register ``anon_pseudonym(VARCHAR) -> VARCHAR`` bound to ``key`` on this connection (not persisted)."""

    def pseudonym(values: pa.Array) -> pa.Array:
        return pa.array(pseudonyms(key, values.to_pylist()), type=pa.string())

    # DuckDB 2 refuses to (un)register a function while a result of this connection is unfetched (a refresh whose
    # released table was renamed leaves one); a query completes it first
    con.execute("SELECT 1").fetchall()
    try:
        con.remove_function(FUNCTION)
    except Exception:
        pass
    con.create_function(FUNCTION, pseudonym, ["VARCHAR"], "VARCHAR", type="arrow", null_handling="special")
    return FUNCTION
