"""A recorded release's re-verification as a *program*: the SQL texts :mod:`anon_sql.audit.recheck` compiles from the
stored policy (the models' per-class summary, the released records) and the numbers the catalog checks compare
with. This module runs a program, and keeps programs in a local cache so that ``anon-sql check`` of a release
compiled before runs without importing sqlglot, numpy or the compiler (it starts at once; bench/bench_startup.py).

Why the cache keeps the check tamper-evident: it never lives in the database file, and an entry is named by a
digest of everything its program is compiled from — the release name, the policy and plan recorded in
``anon.releases``, the released table's columns and types, this package's code and sqlglot's version. Editing the
table's rows changes none of them (the same SQL, rerun over the edited rows); editing its columns, the stored policy
or plan, or upgrading the code names another entry, compiled afresh. So a cached program is exactly what recompiling
would give; the cache is trusted like the installed code (same user, a 0700 folder). Programs that read the
database beyond the policy (population tables, catalog taxonomies, whole-table checks) are not cached.

The SQL calls the ``anon.*`` macros, which live in the database file, and plain functions (``ln``, ``least``, ...)
that a macro of the file's ``main`` schema can shadow (DuckDB resolves ``main`` before the built-ins). So before a
program runs, :func:`guard_macros` compares the file's ``anon`` macros (name, kind, parameters, definition as
``duckdb_functions()`` shows them) with the ones this package's sql/macros.sql gives in a throwaway in-memory
database (computed once per code and DuckDB version, cached beside the programs), and looks for any other macro of
the file named like a built-in function: a macro missing, added, redefined or shadowing fails the check (exit 3),
named, before any of it runs.

``ANON_SQL_CACHE``: the folder (default ``$XDG_CACHE_HOME/anon_sql`` or ``~/.cache/anon_sql``); ``off``: no cache.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..catalog.macro_trust import macro_problems, package_macros
from ..catalog.read import not_released_objects, recorded_release, related_tables, table_columns
from ..compiler.checks_summary import summary_rows
from ..errors import PrivacyRequirementError, SourceError

FORMAT = 10    # 2: the noise count from the table; 3: records_in recounted from the source (issue 28.8); 4: people;
# 5: the declared policy and the source digest; 6: the policy row of a release without one, the models' requirement;
# 7: the values checks (the form of pseudonymized and masked columns, hostile round 8, M1); 8: the digest of each
# QI's released values (round 9, M9); 9: the content digest's query per kind (round 10, B40); 10: the counted
# content digest (round 11, M24; round 12, M25: JSON by its text)
# what a check row's figures rest on (its ``basis``): the policy and the released table, or, for the two checks that
# read ``records_in`` (reconciliation, max_suppression), the source recounted or the catalog's number taken as it is
TABLE, SOURCE, UNVERIFIED = "table", "source", "catalog (unverified)"
_PACKAGE = Path(__file__).resolve().parents[1]   # the whole anon_sql package (the compiler included), not audit/


def run_program(con: Any, program: dict[str, Any], row: dict[str, Any], columns: Sequence[str],
        table_rows: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The check rows of ``program`` over its table (``columns``: the table's columns; ``row``: the recorded counts
    ``records_in``, ``suppressed``, ``noise``, ``classes``): the models per check, then ``table_rows`` (whole-table
    checks run by the caller), then the catalog checks."""
    summary = con.execute(program["summary"]).fetchall()[0]      # its first column: the number of classes
    classes = int(summary[0])
    released = int(con.execute(program["records"]).fetchall()[0][0] or 0)
    # the noise records: counted in the table through the policy's flag; the recorded number only for θ without a
    # flag (then nothing in the table marks them), and none for any other method
    recorded_noise = int(row["noise"] or 0)
    noise = (int(con.execute(program["noise"]).fetchall()[0][0] or 0) if program.get("noise")
             else recorded_noise if program.get("noise_recorded") else 0)
    basis = records_basis(con, program.get("source_records"), int(row["records_in"]), row.get("source_digest"))
    rows = [*summary_rows(program["summary_columns"], summary), *table_rows,
            *catalog_rows(row, released, columns, program["expected_columns"], program["max_suppression"], classes,
                          noise)]
    rows = [{**r, "basis": basis if r["check"] in ("reconciliation", "max_suppression") else r.get("basis") or TABLE}
            for r in rows]
    values = program.get("values")
    if values:   # the form of each pseudonymized and masked column (hostile round 8, M1)
        rows += _value_rows(list(con.execute(values["query"]).fetchall()[0]), values["checks"])
    if program.get("released_values"):   # each QI's values as released (hostile round 9, M9)
        digests = program["released_values"]
        rows += released_value_rows(list(con.execute(digests["query"]).fetchall()[0]), digests["columns"],
                                    row.get("released_values"))
        if digests.get("describe"):   # every column's type as released (round 10, C09 / C10)
            rows.append(released_type_row([tuple(r[:2]) for r in con.execute(digests["describe"]).fetchall()],
                                          row.get("released_values")))
        if digests.get("content"):    # every row as released (round 10, M15, B40)
            rows.append(released_content_row(con, digests["content"], row.get("released_values")))
    if program.get("policy_mismatch"):   # the recorded released policy is not the declared one's (issue 28.8)
        rows.append({"check": "policy", "classes": classes, "failing_classes": 0, "failing_records": 0,
                     "worst_value": None, "passed": False, "basis": TABLE, "message": program["policy_mismatch"]})
    elif program.get("policy_unverified"):   # a release from before declared policies were kept (round 5, C12)
        rows.append({"check": "policy", "classes": classes, "failing_classes": 0, "failing_records": 0,
                     "worst_value": None, "passed": True,
                     "basis": f"{UNVERIFIED}: no declared policy recorded: the released policy could not be derived "
                              "(a release made before anon_sql kept it); the models are checked as recorded"})
    if program.get("people"):
        rows = [_people_classes(r, int(row["classes"] or 0)) if r["check"] == "classes" else r for r in rows]
    required = {**_catalog_required(program, row, classes), **(program.get("required") or {})}
    return [_with_required(r, required.get(r["check"])) for r in rows]


def _value_rows(counts: list[Any], checks: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The ``values`` check rows (:mod:`anon_sql.audit.values`) from the counts its query gave (``checks``: each
    one's ``check`` and ``required``)."""
    rows = []
    for n, spec in zip(counts, checks):
        n = int(n or 0)
        rows.append(table_check_row(
            spec["check"], n, spec["required"],
            message=(f"{n} non-NULL value(s) are not of the released form ({spec['required']}): the column was "
                     "edited since the release (raw values put back?); release it again") if n else None))
    return rows


def table_check_row(check: str, failing_records: int, required: str | None = None, basis: str | None = TABLE,
                    message: str | None = None, passed: bool | None = None) -> dict[str, Any]:
    """A check row of the whole table (no classes): ``failing_records`` rows fail it, it passes when there are none
    (or as ``passed`` says). ``required`` / ``basis`` None: left out, for :func:`run_program` to fill in."""
    row: dict[str, Any] = {"check": check, "classes": 0, "failing_classes": 0, "failing_records": failing_records,
                           "worst_value": None}
    if required is not None:
        row["required"] = required
    row["passed"] = failing_records == 0 if passed is None else passed
    if basis is not None:
        row["basis"] = basis
    if message:
        row["message"] = message
    return row


def released_value_rows(found: list[Any], columns: list[str], recorded: str | None) -> list[dict[str, Any]]:
    """The ``values <qi>`` rows, and with two QIs or more ``values (<qi>, ...)``: each quasi-identifier's digest of
    its values with their rows, then their combinations' (``found``, as
    :func:`anon_sql.runner.digests.released_values_query` gives them over the table now), against the digests the
    release recorded (``recorded``: JSON, the catalog's ``released_values`` or the shared metadata's). A value put
    back or changed since the release fails, also where every class keeps its size, and values swapped between
    classes; a digest that is not recorded fails too (a release or export made before anon_sql recorded one, or an
    edited record: release it again)."""
    try:
        wanted = json.loads(recorded) if recorded else None
    except ValueError:
        wanted = None
    wanted = wanted if isinstance(wanted, dict) and isinstance(wanted.get("columns"), dict) else None
    checks = [(f"values {c}", repr(c), (wanted or {}).get("columns", {}).get(c), "the values released")
              for c in columns]
    if len(columns) > 1:
        checks.append((f"values ({', '.join(columns)})", "their combinations", (wanted or {}).get("together"),
                       "the combinations released"))
    rows = []
    for (check, what, expected, words), digest in zip(checks, found):
        passed = isinstance(expected, str) and expected == str(digest)
        message = (f"no digest of the released values of {what} is recorded (a release or export made before "
                   "anon_sql recorded one, or an edited record): release it again" if not isinstance(expected, str)
                   else None if passed else
                   f"the values of {what} or the rows holding them are not those released: the table was edited "
                   "since the release (raw values put back?); release it again")
        rows.append(table_check_row(
            check, 0, f"{words}, with the rows holding each (their digest as the release recorded it)",
            message=message, passed=passed))
    return rows


def released_type_row(described: list[tuple[str, str]], recorded: str | None) -> dict[str, Any]:
    """The ``types`` row: each column of the table (``described``: name, type as DuckDB names it now) of the type
    the release recorded (``released_values.types``; an ENUM with its dictionary, so raw values put into a column's
    type, or a column retyped to hold text, fail). Columns the release did not record are the ``columns`` row's
    (θ's noise flag, left out of a shared file, is not compared). No types recorded: fails, release it again."""
    try:
        wanted = (json.loads(recorded) or {}).get("types") if recorded else None
    except (ValueError, AttributeError):
        wanted = None
    required = "each column of the type released (an ENUM with the values it was released with)"
    if not isinstance(wanted, dict):
        return table_check_row("types", 0, required, passed=False, message=(
            "the released columns' types are not recorded (a release or export made before anon_sql recorded them, "
            "or an edited record): release it again"))
    odd = [f"{name} {kind} (released {wanted[name]})" for name, kind in described
           if name in wanted and str(wanted[name]) != str(kind)]
    return table_check_row("types", len(odd), required, passed=not odd,
                           message=("retyped since the release: " + "; ".join(odd)[:600]) if odd else None)


def released_content_row(con: Any, queries: dict[str, str], recorded: str | None) -> dict[str, Any]:
    """The ``contents`` row of a released table: :func:`content_row` against ``released_values.content``
    (``recorded``: that JSON), so that any value edited since the release fails, an insensitive column's too (round
    10, M15)."""
    try:
        wanted = (json.loads(recorded) or {}).get("content") if recorded else None
    except (ValueError, AttributeError):
        wanted = None
    return content_row(con, "contents", queries, wanted)


def content_row(con: Any, check: str, queries: dict[str, str], wanted: Any, basis: str = TABLE) -> dict[str, Any]:
    """A ``contents`` row: the digest of every row of a table, recomputed now by the query of the kind recorded
    (``queries``: kind → SQL; :func:`anon_sql.runner.digests.content_digest_query`), against ``wanted`` (the
    recorded ``{"hash", "kind", "duckdb", …}``): a sha256 no edit can be computed to keep (round 10, B40). A hash
    sum, which rows can be solved for (records from before session 14, and session 14's tables of over a million
    rows: round 11, M24), fails: release it again. A record made by another DuckDB version (a value's text may
    differ) is not compared: the basis says so and the other rows stand."""
    import duckdb

    from ..common.content_kinds import CONTENT_HASH_SUM, CONTENT_SHA256, KINDS

    required = "every row as released (the digest of the rows the release recorded)"
    if not isinstance(wanted, dict) or not isinstance(wanted.get("hash"), str):
        return table_check_row(check, 0, required, basis, passed=False, message=(
            "the released rows' digest is not recorded (a release or export made before anon_sql recorded it, or an "
            "edited record): release it again"))
    kind = wanted.get("kind")
    if kind is None or kind == CONTENT_HASH_SUM:   # rows can be solved for to keep a sum (round 11, M24)
        return table_check_row(check, 0, required, basis, passed=False, message=(
            "the released rows' digest is a sum of row hashes (recorded before anon_sql kept a sha256 digest of "
            "every table), and rows can be computed to keep a sum: release it again"))
    if kind == CONTENT_SHA256:   # to_json re-wrote a JSON column's text: edits of it kept the digest (round 12, M25)
        return table_check_row(check, 0, required, basis, passed=False, message=(
            "the released rows' digest is of every row's JSON text (recorded on 2026-11-28 before anon_sql digested "
            "JSON columns by their stored text), and a JSON value's spacing could change under it: release it again"))
    if kind not in KINDS or kind not in queries:
        return table_check_row(check, 0, required, basis, passed=False, message=(
            f"the released rows' digest is of an unknown kind {str(kind)[:60]!r} (an edited record): release it "
            "again"))
    if wanted.get("duckdb") != duckdb.__version__:
        return table_check_row(check, 0, required, f"{UNVERIFIED}: recorded by DuckDB {wanted.get('duckdb')}, "
                               f"whose text of a value may differ from {duckdb.__version__}'s")
    try:
        same = wanted["hash"] == str(con.execute(queries[kind]).fetchall()[0][0])
    except duckdb.Error:   # a recorded column gone: the columns row says which
        same = False
    return table_check_row(check, 0 if same else 1, required, basis, passed=same, message=None if same else (
        "the released rows are not those released: a value was edited, or rows added or removed, since the release "
        "(raw values put back?); release it again"))


def _catalog_required(program: dict[str, Any], row: dict[str, Any], classes: int) -> dict[str, str]:
    """What the catalog checks and the policy row require, in words."""
    return {"reconciliation": "records in = released + suppressed (+ noise)",
            "max_suppression": f"suppressed <= {program['max_suppression']:g} of records in",
            "classes": f"as recorded: {int(row['classes'] or 0)}", "columns": "the columns the policy releases",
            "policy": "recorded policy = the declared policy's derivation"}


def _with_required(r: dict[str, Any], required: str | None) -> dict[str, Any]:
    """Check row ``r`` with its ``required`` column after ``worst_value`` (hostile round 5, C02 / C06); checks
    whose requirement the program does not know (a whole-table check, a related table) say ``-``."""
    out: dict[str, Any] = {}
    for key, value in r.items():
        if key != "required":
            out[key] = value
        if key == "worst_value":
            out["required"] = required or r.get("required") or "-"
    return out


def _people_classes(r: dict[str, Any], recorded: int) -> dict[str, Any]:
    """A release by people whose quasi-identifiers vary inside a unit has classes of people's signatures
    (docs/units.md), which the table cannot recount without the unit it does not release: a count that differs is
    the catalog's, not verified (the models' checks over the table still run)."""
    if r["passed"]:
        return r
    return {**r, "passed": True, "failing_classes": 0,
            "basis": f"{UNVERIFIED}: {recorded} classes of people's signatures; the table groups "
                     f"{int(r['worst_value'])} released tuples"}


def records_basis(con: Any, query: str | None, records_in: int, digest: str | None = None) -> str:
    """What ``records_in`` (the records before suppression, which the released table cannot give) rests on:
    ``source`` when ``query`` recounts the source to the same number and, with the ``digest`` recorded at release
    (runner/digests.py), to the same rows and content hash; else the catalog's number, unverified (a shared file,
    which holds no source; a source that is gone, or that counts another number or holds other rows now: changed
    since, or the number was forged)."""
    import duckdb

    if not query:
        return UNVERIFIED
    try:
        found = con.execute(query).fetchall()[0]
    except duckdb.Error:
        return UNVERIFIED   # the source is gone (or the columns its digest hashed are)
    now = int(found[0] or 0)
    if now != records_in:
        return f"{UNVERIFIED}: the source counts {now} records now"
    try:
        recorded = json.loads(digest) if digest else None
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict) or len(found) < 3:
        why = recorded.get("skipped") if isinstance(recorded, dict) else None
        return f"{SOURCE} (records recounted; no content digest recorded" + (f": {why})" if why else ")")
    if [int(found[1] or 0), str(found[2])] == [recorded.get("rows"), str(recorded.get("hash"))]:
        return SOURCE
    if recorded.get("duckdb") != duckdb.__version__:   # another DuckDB's hash: the count alone is comparable
        return f"{SOURCE} (records recounted; the content digest was taken by DuckDB {recorded.get('duckdb')})"
    return (f"{UNVERIFIED}: the source counts {now} records as recorded, but holds other rows now (its content "
            "digest differs from the one recorded at release)")


def catalog_rows(row: dict[str, Any], released: int, columns: Sequence[str], expected: Sequence[str],
                 max_suppression: float, classes: int, noise: int | None = None) -> list[dict[str, Any]]:
    """The table against the numbers recorded at release time: records reconcile, suppression within budget, the
    same number of classes, and exactly the columns the policy releases (no identifier added back). ``noise``: the
    noise records as derived from the table and policy (default: as recorded); a recorded number that differs
    fails the reconciliation."""
    recorded_noise = int(row["noise"] or 0)
    noise = recorded_noise if noise is None else noise
    records_in = int(row["records_in"])
    suppressed = records_in - (released - noise)
    gap = records_in - (released - noise + int(row["suppressed"]))
    budget = max_suppression * records_in
    odd = sorted(set(columns) ^ set(expected))
    return [
        {"check": "reconciliation", "classes": classes, "failing_classes": 0,
         "failing_records": abs(gap) + abs(noise - recorded_noise), "worst_value": float(gap),
         "passed": gap == 0 and noise == recorded_noise},
        {"check": "max_suppression", "classes": classes, "failing_classes": 0,
         "failing_records": max(0, int(suppressed - budget)), "worst_value": float(suppressed),
         "passed": suppressed <= budget + 1e-9},
        {"check": "classes", "classes": classes, "failing_classes": abs(classes - int(row["classes"] or 0)),
         "failing_records": 0, "worst_value": float(classes), "passed": classes == int(row["classes"] or 0)},
        {"check": "columns", "classes": classes, "failing_classes": 0, "failing_records": 0,
         "worst_value": float(len(odd)), "passed": not odd},
    ]


def rederives_pseudonyms(con: Any, name: str) -> bool:
    """Does ``check`` of recorded release ``name`` re-derive pseudonyms from the source (its policy pseudonymizes an
    identifier, and ``$ANON_SQL_KEY`` or a ``key_file`` is set)? Then it runs more than the cached program."""
    return any(a.get("action") == "pseudonymize" and (os.environ.get("ANON_SQL_KEY") or a.get("key_file"))
               for a in _recorded_attributes(con, name))


def rederives_masks(con: Any, name: str) -> bool:
    """Does ``check`` of recorded release ``name`` re-derive masked values from the source (its policy masks a column
    with ``hash``, ``partial`` or ``partial_email``: :func:`anon_sql.audit.values.source_mask_rows`)? Then it runs
    more than the cached program."""
    return any(isinstance(a.get("mask"), dict) and a["mask"].get("function") in ("hash", "partial", "partial_email")
               for a in _recorded_attributes(con, name))


def _recorded_attributes(con: Any, name: str) -> list[dict[str, Any]]:
    """The attribute tables (dict form) of the main table of recorded release ``name``'s policy; [] when unreadable."""
    row = recorded_release(con, name) or {}
    try:
        attributes = json.loads(row.get("policy_json") or "{}").get("attributes") or {}
        return [a for a in attributes.values() if isinstance(a, dict)]
    except (TypeError, ValueError, AttributeError):
        return []


def released_table_problem(con: Any, name: str, row: dict[str, Any], columns: Sequence[str]) -> str | None:
    """Why recorded release ``name``'s table cannot be checked as the table anon_sql released, or None: it (or a
    related table) is not the object anon_sql wrote (:func:`anon_sql.catalog.read.not_released_objects`), or a
    column the release recorded (``row``'s ``released_values`` types) is gone from ``columns`` — dropped or renamed
    since (hostile round 22, Y22–Y27: DuckDB's binder error, exit 1). No sqlglot: it runs before a cached program."""
    problem = not_released_objects(con, name)
    if problem:
        return problem
    try:
        recorded = json.loads(row.get("released_values") or "{}").get("types") or {}
    except (TypeError, ValueError, AttributeError):
        return None   # an unreadable record: the values rows say so
    gone = [c for c in recorded if c not in set(columns)] if columns else []   # none: bound elsewhere (search_path)
    if gone:
        return (f"table {name!r} has lost column {gone[0]!r} of the release (dropped or renamed since anon_sql wrote "
                "it)")
    return None


def problem_rows(problem: str) -> list[dict[str, Any]]:
    """The one failing ``table`` row of a release whose table is not the one released (:func:`released_table_problem`)."""
    return [table_check_row("table", 0, required="the table anon_sql released (its marker and columns)",
                            message=problem, passed=False)]


def cached_rows(con: Any, name: str) -> list[dict[str, Any]] | None:
    """The check rows of recorded release ``name`` from its cached program, or None when there is none (not a
    recorded release, table missing, not compiled before on this machine, or the cache is off): then
    :func:`anon_sql.audit.recheck.recheck_rows` compiles it (and caches it)."""
    row = recorded_release(con, name)
    described = table_columns(con, name) if row is not None else []
    if row is None or not described:
        return None
    shadows = con.execute(_TEMP_NAMED, {"t": [n.lower() for n in (name, *related_tables(con, name))]}).fetchall()
    if shadows:   # the compiled path reads the release by name too (hostile round 16, M47: a TEMP copy passed)
        raise SourceError(f"release {name!r}: {', '.join(r[0] for r in shadows)} of this session shadows the "
                          "database's object of that name (DuckDB reads the TEMP one first), so anon_sql would work "
                          "on the wrong object; nothing was done: drop or rename the TEMP object (e.g. DROP TABLE "
                          "temp.main.<name>), or run it in another session")
    problem = released_table_problem(con, name, row, [c for c, _ in described])
    if problem:   # nothing of a program can be read over another table (hostile round 22, Y66: a cached one passed)
        return problem_rows(problem)
    try:
        program = load_program(program_digest(name, row, described))
    except (TypeError, ValueError):      # an unreadable stored policy: compiling says what is wrong with it
        return None
    if program is None:
        return None
    guard_macros(con)
    return run_program(con, program, row, [c for c, _ in described])


# the session's TEMP tables and views named (in any case) like one of $t, as "TEMP table name"
_TEMP_NAMED = ("SELECT 'TEMP table ' || table_name FROM duckdb_tables() WHERE temporary AND list_contains($t, "
               "lower(table_name)) UNION ALL SELECT 'TEMP view ' || view_name FROM duckdb_views() WHERE temporary "
               "AND NOT internal AND list_contains($t, lower(view_name)) ORDER BY 1")


def guard_macros(con: Any) -> None:
    """Refuse (:class:`PrivacyRequirementError`, exit 3) to run a check over a database whose ``anon`` macros are
    not exactly this package's, or that holds a macro shadowing a built-in function: either could make a failing
    check pass. Reads only."""
    what = macro_problems(con, expected_macros())
    if not what:
        return
    raise PrivacyRequirementError(
        "the check cannot be trusted: this database's SQL macros are not the ones anon_sql installs ("
        + "; ".join(what) + "), and they could make a failing check pass. If you changed them on purpose, drop the "
        "shadowing macros and reinstall the anon macros (anon_sql.install(con), or re-run `anon-sql release`), "
        "then check again")


def expected_macros() -> dict[str, list]:
    """This package's ``anon`` macros (:func:`anon_sql.catalog.macro_trust.package_macros`), cached per code and
    DuckDB version beside the programs (its text depends on both), so a cached check starts at once."""
    import duckdb

    digest = hashlib.sha256(f"{code_version()}:{duckdb.__version__}".encode()).hexdigest()
    folder = cache_dir()
    path = folder / "macros" / f"{digest}.json" if folder is not None else None
    if path is not None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    expected = package_macros()
    if path is not None:
        _write(path, expected)
    return expected


def program_digest(name: str, row: dict[str, Any], described: Sequence[tuple[str, str]]) -> str:
    """The digest naming a program: everything it is compiled from (see the module's docstring)."""
    facts = {"format": FORMAT, "code": code_version(), "release": name, "policy": row["policy_json"],
             "declared": row.get("declared_policy"), "source_digest": row.get("source_digest"), "plan": row["plan"], "columns": [list(c) for c in described], "files": _files(row["policy_json"])}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


@lru_cache(maxsize=1)
def code_version() -> str:
    """This package's code (every file's path, size and modification time) and sqlglot's version: any change of
    what compiles a program names new cache entries. Read once per process (a check needs it for the program's key
    and for the expected macros)."""
    files = sorted(p for p in _PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256(_sqlglot_version().encode())
    for p in files:
        st = p.stat()
        digest.update(f"{p.relative_to(_PACKAGE)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


def _files(policy_json: str) -> list[list]:
    """Every file the policy names (a taxonomy CSV, a category table's CSV, the source), by path, size and
    modification time: a program compiled from a file's content is not reused once the file changed."""
    found, stack = [], [json.loads(policy_json)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack += list(value.values())
        elif isinstance(value, list):
            stack += value
        elif isinstance(value, str) and len(value) < 4096 and os.path.isfile(value):
            st = os.stat(value)
            found.append([os.path.abspath(value), st.st_size, st.st_mtime_ns])
    return sorted(found)


def _sqlglot_version() -> str:
    """sqlglot's installed version, told from its files without importing sqlglot or ``importlib.metadata`` (each
    costs start-up time): the text of ``sqlglot/_version.py``, else the package file's size and modification time."""
    from importlib.util import find_spec

    spec = find_spec("sqlglot")
    if spec is None or not spec.origin:       # pragma: no cover - sqlglot is a dependency
        return "unknown"
    try:
        return Path(spec.origin).with_name("_version.py").read_text(encoding="utf-8")
    except OSError:
        st = os.stat(spec.origin)
        return f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}"


def cache_dir() -> Path | None:
    """The programs' folder, or None when ``ANON_SQL_CACHE=off``."""
    configured = os.environ.get("ANON_SQL_CACHE")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anon_sql"


def load_program(digest: str) -> dict[str, Any] | None:
    """The cached program of ``digest``, or None (absent, unreadable, or of another format: compiled again)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        program = json.loads((folder / "checks" / f"{digest}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    wanted = {"format", "summary", "summary_columns", "records", "expected_columns", "max_suppression"}
    return program if isinstance(program, dict) and wanted <= set(program) and program["format"] == FORMAT else None


def store(digest: str, program: dict[str, Any]) -> None:
    """Keep ``program`` under ``digest`` (written atomically; a folder that cannot be written is no error: the
    next check compiles again)."""
    folder = cache_dir()
    if folder is not None:
        _write(folder / "checks" / f"{digest}.json", {**program, "format": FORMAT})


def _write(path: Path, value: Any) -> None:
    """``value`` as JSON at ``path``, atomically, its folder made 0700; a folder that cannot be written is no
    error (computed again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


__all__ = ["FORMAT", "SOURCE", "TABLE", "UNVERIFIED", "cache_dir", "cached_rows", "catalog_rows", "code_version",
           "expected_macros", "guard_macros", "program_digest", "load_program", "records_basis",
           "rederives_masks", "rederives_pseudonyms", "content_row", "released_content_row", "released_type_row", "released_value_rows", "run_program",
           "store", "table_check_row"]
