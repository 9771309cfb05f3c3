"""Are a database's SQL macros the ones anon_sql installs? Compiled SQL calls the ``anon.*`` macros, which live in the
database file, and built-in functions called unqualified, which a macro of the file's ``main`` schema shadows (DuckDB
resolves ``main`` before the built-ins). A redefined ``anon.hash`` or a ``main.hash`` would change what a release
writes, what a check concludes and which rows a DP query bounds, so every one of them asks here first (hostile round
8, M4: a release ran over a ``main.hash`` that made SafePub's sample keep every record).
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Sequence

# the file's anon macros, as DuckDB shows them (its normalized definition text), in the current database
# (names lower-cased: DuckDB resolves them case-insensitively, so `anon.HASH` is `anon.hash`; hostile round 9, M6)
_ANON_COLUMNS = "lower(function_name), function_type, parameters, macro_definition"
_ANON_WHERE = ("database_name = current_database() AND lower(schema_name) = 'anon' "
               "AND function_type IN ('macro', 'table_macro')")
ANON_MACROS = f"SELECT {_ANON_COLUMNS} FROM duckdb_functions() WHERE {_ANON_WHERE} ORDER BY ALL"
# the file's other macros that shadow a built-in function (the SQL and the anon macros call built-ins unqualified)
# — in any case, in the TEMP catalog, which DuckDB searches first, and in every attached database, which a
# search_path can put before the built-ins (hostile round 9, M6: `SHA256`, a TEMP `least`; Q06b: an attached one); a
# TEMP `anon` macro shadows the package's `anon.*` (a macro of `main` named like one does not: the SQL calls them
# qualified)
_SHADOWING_NAME = ("CASE WHEN database_name = current_database() THEN '' ELSE database_name || '.' END "
                   "|| schema_name || '.' || function_name")
_SHADOWING_WHERE = ("database_name <> 'system' AND NOT internal AND ((lower(schema_name) <> 'anon' AND "
                    "lower(function_name) IN (SELECT lower(function_name) FROM f WHERE database_name = 'system')) OR "
                    "(database_name = 'temp' AND lower(schema_name) = 'anon'))")
# both in one read of duckdb_functions(): each read lists every function (3,000+ rows, ~20 ms of CPU whatever the
# filter), and a release, a check and a DP query each ask (issue 29.1: three reads were 66 ms of a warm Adult release)
_TRUST = ("WITH f AS MATERIALIZED (SELECT database_name, schema_name, function_name, function_type, parameters, "
          "macro_definition, internal FROM duckdb_functions()) "
          f"SELECT 'anon', {_ANON_COLUMNS} FROM f WHERE {_ANON_WHERE} "
          f"UNION ALL SELECT DISTINCT 'shadowing', {_SHADOWING_NAME}, NULL, NULL, NULL FROM f WHERE {_SHADOWING_WHERE} "
          "ORDER BY ALL")


def by_name(rows: Sequence[Sequence[Any]]) -> dict[str, list]:
    """Macro rows by name (a macro may have overloads), as JSON-comparable lists."""
    found: dict[str, list] = {}
    for name, *rest in rows:
        found.setdefault(name, []).append(json.loads(json.dumps(rest, default=str)))
    return found


@lru_cache(maxsize=1)
def package_macros() -> dict[str, list]:
    """This package's ``anon`` macros as :data:`ANON_MACROS` reads them: sql/macros.sql and the masking macros
    (anon_sql/sdc/masking.sql) run in a throwaway in-memory database, once per process."""
    import duckdb

    from ..sql import macro_statements

    scratch = duckdb.connect()
    try:
        scratch.execute("CREATE SCHEMA anon")
        for stmt in macro_statements():
            scratch.execute(stmt)
        # read as the file itself: a cached check loads no sqlglot (anon_sql.sdc.masking would)
        scratch.execute(resources.files("anon_sql.sdc").joinpath("masking.sql").read_text(encoding="utf-8"))
        return by_name(scratch.execute(ANON_MACROS).fetchall())
    finally:
        scratch.close()


def macro_problems(con: Any, expected: dict[str, list] | None = None, missing_ok: bool = False) -> list[str]:
    """What makes ``con``'s macros untrustworthy, in words (empty when none): ``anon`` macros missing, not this
    package's or redefined (against ``expected``, default :func:`package_macros`), and macros shadowing a built-in.
    ``missing_ok``: an ``anon`` macro that is missing, or one the package does not define, is no problem (a release
    installs its macros, and calls only the package's)."""
    rows = con.execute(_TRUST).fetchall()
    found = by_name([r[1:] for r in rows if r[0] == "anon"])
    expected = package_macros() if expected is None else expected
    differ = sorted(n for n in set(found) | set(expected) if found.get(n) != expected.get(n))
    missing = [n for n in differ if n not in found]
    added = [n for n in differ if n not in expected]
    changed = [n for n in differ if n in found and n in expected]
    labelled = ((("missing", missing), ("not this package's", added)) if not missing_ok else ())
    what = [f"{label} {', '.join('anon.' + n for n in names)}" for label, names in
            (*labelled, ("redefined", changed)) if names]
    shadowing = [r[1] for r in rows if r[0] == "shadowing"]
    if shadowing:
        what.append(f"shadowing a built-in function {', '.join(shadowing)}")
    return what


def refuse_untrusted_macros(con: Any, what: str) -> None:
    """Refuse (:class:`PolicyError`, exit 2; nothing runs) ``what`` — a release, a DP query — over a database whose
    ``anon`` macros were redefined or that shadows a built-in with a macro (missing ones are installed by it)."""
    from ..errors import PolicyError

    problems = macro_problems(con, missing_ok=True)
    if problems:
        raise PolicyError(f"{what} cannot run over this database's SQL macros: {'; '.join(problems)}. Its SQL calls "
                          "them, so they could change what it writes or answers (raw values through a redefined "
                          "anon.hash, every row kept by a shadowed hash): drop the shadowing macros and reinstall "
                          "anon's with anon_sql.install(con), then run it again")


__all__ = ["ANON_MACROS", "by_name", "package_macros", "macro_problems", "refuse_untrusted_macros"]
