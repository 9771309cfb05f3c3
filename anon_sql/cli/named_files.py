"""The files a command reads without naming them as arguments: the strings of its policy (a TOML / JSON or a .sql
POLICY file, or the recorded policy of a release), of its SQL script, and of the views of its ``--db`` database,
that name an existing file. :mod:`anon_sql.cli.output` never writes an output over one of them (hostile rounds 11
and 12, M20 / M26: a ``--json`` replaced the pseudonym key file, the source CSV, the CSV a source view reads).

Broad on purpose: every quoted string, string or name token and word of the text counts, not only the options
that are file paths today; a false hit only refuses an output over a file the command's text names. Never raises:
what cannot be read guards nothing, and the command itself then says why."""
from __future__ import annotations

import glob
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable

# a SQL string ('it''s') or quoted name ("a""b"): its text, the doubled quote undone
_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")
# the words of a text: what lies between blanks, quotes, brackets and separators (a path without spaces)
_WORDS = re.compile(r"[^\s'\"`(),;=<>{}\[\]]+")
_MAX_CANDIDATES = 100_000     # a huge script: its first strings and words only (each costs a stat)
_MAX_GLOB = 1_000             # a glob ('data/*.csv', DuckDB reads every match): its first matches
_GLOB_SECONDS = 2.0           # and globs ('/**/*.csv' walks every folder) for this long in all


def files_named(text: str, tokens: bool = True) -> list[str]:
    """Every existing file a text names: its quoted strings (with and without the SQL comments stripped, so that an
    apostrophe in a comment does not hide a string), the string and name tokens of sqlglot's DuckDB tokenizer
    (``tokens``; a text it cannot tokenize keeps the plain scans), and its words; a quoted glob names its matches."""
    candidates: dict[str, None] = {}
    for found in _scan(text, tokens):
        if len(candidates) >= _MAX_CANDIDATES:
            break
        candidates.setdefault(found, None)
    words = dict.fromkeys(_WORDS.findall(text)[:_MAX_CANDIDATES])   # not globbed: `SELECT *` names no file
    return list(dict.fromkeys([*existing_files(candidates), *existing_files(words, globs=False)]))


def existing_files(values: Iterable[str], globs: bool = True) -> list[str]:
    """The values that name an existing file (as given, ``~`` expanded, or — ``globs`` — the matches of a glob with
    two letters or digits at least, as ``'data/*.csv'``: a bare ``'*'`` or ``'1*'`` names no file), in order."""
    out: dict[str, None] = {}
    deadline = time.monotonic() + _GLOB_SECONDS
    for value in values:
        if not value or len(value) > 4096 or "\x00" in value:
            continue
        try:
            for path in (value, os.path.expanduser(value)):
                if os.path.isfile(path):
                    out.setdefault(path, None)
            if globs and any(c in value for c in "*?[") and len(re.sub(r"[^A-Za-z0-9]", "", value)) >= 2:
                for i, path in enumerate(glob.iglob(os.path.expanduser(value), recursive=True)):
                    if i >= _MAX_GLOB or time.monotonic() > deadline:
                        break
                    if os.path.isfile(path):
                        out.setdefault(path, None)
        except (OSError, ValueError, re.error):
            continue
    return list(out)


def _scan(text: str, tokens: bool) -> Iterable[str]:
    """The candidate file names of a text (see :func:`files_named`)."""
    for match in _QUOTED.finditer(text):
        yield (match.group(1) or "").replace("''", "'") if match.group(2) is None else match.group(2).replace('""', '"')
    stripped = re.sub(r"--[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    for match in _QUOTED.finditer(stripped):
        yield (match.group(1) or "").replace("''", "'") if match.group(2) is None else match.group(2).replace('""', '"')
    if tokens:
        yield from (t.text for t in _tokens(text) if t.token_type.name in ("STRING", "IDENTIFIER", "VAR"))


def _tokens(text: str) -> list[Any]:
    """sqlglot's DuckDB tokens of a text; none when it cannot tokenize it."""
    try:
        import sqlglot

        return list(sqlglot.tokenize(text, read="duckdb"))
    except Exception:   # noqa: BLE001 — an unterminated string: the plain scans of files_named still run
        return []


def policy_files(params: dict[str, Any]) -> list[str]:
    """Every existing file the command's policy names: the POLICY file's (a .sql policy parsed as ``release`` parses
    it, a TOML / JSON one as data; and its text scanned like a script), or the recorded policy of the release a
    ``check`` / ``report`` names in the ``--db`` database (read-only, closed at once)."""
    policy = params.get("policy")
    found: list[str] = []
    try:
        if isinstance(policy, str) and os.path.isfile(policy):
            raw = Path(policy).read_bytes().decode("utf-8", errors="replace")
            found += existing_files(_strings(_parsed_policy(raw)))
            found += files_named(raw)
            return found
        name = next((params[k] for k in ("release_name", "name", "table") if isinstance(params.get(k), str)), None)
        db = params.get("db")
        if isinstance(name, str) and isinstance(db, str) and os.path.isfile(db):
            import duckdb

            with duckdb.connect(db, read_only=True) as con:
                rows = con.execute("SELECT policy_json FROM anon.releases WHERE release = ? AND status = 'released' "
                                   "ORDER BY created_at DESC LIMIT 1", [name]).fetchall()
            if rows and rows[0][0]:
                found += existing_files(_strings(json.loads(rows[0][0])))
    except Exception:   # noqa: BLE001 — a guard, never a new failure: an unreadable policy or catalog guards no more
        pass
    return found


def _parsed_policy(raw: str) -> Any:
    """A policy file's data: a CREATE ANONYMIZED VIEW statement through the product's SQL-form parser, JSON, or
    TOML; None when it does not parse (the scan of its text still guards its strings)."""
    try:
        if raw.lstrip().upper().startswith("CREATE"):
            from ..policy.sql import parse_policy_sql

            return parse_policy_sql(raw)
        if raw.lstrip().startswith("{"):
            return json.loads(raw)
        import tomllib

        return tomllib.loads(raw)
    except Exception:   # noqa: BLE001 — not a policy: the command reports it
        return None


def view_files(db: Any) -> list[str]:
    """Every existing file the views of the ``--db`` database read (``duckdb_views()``, read-only, closed at once):
    a policy's source, or a table a script names, may be a view (or a chain of views) over a CSV (hostile round 12,
    M20d). No sqlglot here: ``check`` starts without it."""
    if not isinstance(db, str) or not os.path.isfile(db):
        return []
    try:
        import duckdb

        with duckdb.connect(db, read_only=True) as con:
            rows = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal AND sql IS NOT NULL").fetchall()
    except Exception:   # noqa: BLE001 — a database in use, or not one: the command says why
        return []
    return files_named("\n".join(r[0] for r in rows), tokens=False)


def script_files(params: dict[str, Any]) -> list[str]:
    """Every existing file the SCRIPT of ``run`` names (a path, not stdin: stdin's text is noted when it is read)."""
    script = params.get("script")
    path = getattr(script, "name", script)
    if not isinstance(path, str) or not os.path.isfile(path):
        return []
    try:
        return files_named(Path(path).read_bytes().decode("utf-8", errors="replace"))
    except OSError:
        return []


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (dicts' values, lists' items), keys aside."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
