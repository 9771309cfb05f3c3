"""The checks of a release's related tables (``<release>_<name>``, docs/units.md): keyed to released people, the
columns and the row count released, and the form of their pseudonyms (hostile rounds 7 and 8).

In the working database the columns and row count are compared with ``anon.releases.related_tables``. In a shared
file the column *names* are derived from the policy (export lists every released related column explicitly in
``[related.<name>.attributes]``; hostile round 8, M5: the metadata's ``related_tables`` is the file author's own
record), and only the types and the row count come from that record, said so in the rows' basis.
"""
from __future__ import annotations

import json
from typing import Any

import duckdb
from sqlglot import exp

from ..common.sqlbuild import ident, render
from ..data.source import describe
from ..errors import SourceError
from ..policy.model import Policy
from ..common.content_kinds import KINDS
from ..runner.digests import content_digest_query
from . import program as check_program
from .program import table_check_row
from .values import PSEUDONYM, value_form, value_query

UNVERIFIED_METADATA = "metadata (unverified)"
_RELATED_REQUIRED = "every row keyed to a released person (or no key)"


def related_table(table: exp.Table, name: str) -> exp.Table:
    """The released related table ``<release>_<name>`` beside ``table`` (same database and schema)."""
    return exp.Table(this=ident(f"{table.name}_{name}"), db=table.args.get("db"), catalog=table.args.get("catalog"))


def unit_pseudonymized(policy: Policy) -> bool:
    """Is the release's unit pseudonymized (so every related table's key is the unit's pseudonym)?"""
    unit = policy.attributes.get(policy.privacy_unit or "")
    return unit is not None and unit.action == "pseudonymize"


def policy_related_columns(policy: Policy, name: str) -> list[str]:
    """The columns related table ``name`` releases by the policy alone: its key when the unit is pseudonymized, and
    every column ``[related.<name>.attributes]`` lists that is not a dropped identifier (a shared file's policy
    lists every released column: :func:`anon_sql.publish.share.explicit_related_attributes`)."""
    spec = policy.related[name]
    key = spec["key"]
    out = [key] if unit_pseudonymized(policy) else []
    for column, attr in (spec.get("attributes") or {}).items():
        dropped = attr.get("role") == "identifier" and attr.get("action", "drop") == "drop"
        if column != key and not dropped:
            out.append(column)
    return out


def related_rows(con: duckdb.DuckDBPyConnection, name: str, policy: Policy, table: exp.Table | None = None,
                 recorded: str | None = None, shared: bool = False) -> list[dict[str, Any]]:
    """The check rows of each related table of release ``name`` (docs/units.md):

    * ``related <name>``: the table exists; its key is the unit's pseudonym of a released person on every row (no
      row of a suppressed person, pseudonyms consistent with the unit table), or absent when the unit was dropped;
    * ``related <name> columns``: its columns and their types are those released (hostile round 7, C08: a column
      added afterwards, such as the raw unit key joined back, fails); in a ``shared`` file the names are the
      policy's (M5), the types the metadata's;
    * ``related <name> rows``: it holds the row count released (C05; N10: the count, not the contents);
    * ``values <name>.<column>``: each pseudonym of the table is of a pseudonym's form (M1).

    ``recorded``: the release's ``related_tables`` (JSON, catalog or shared metadata), what the columns and rows
    rows compare with; a release without it (made before it was kept) fails them. ``failing_records``: the rows that
    break it."""
    table = table if table is not None else exp.Table(this=ident(name))
    unit = policy.privacy_unit
    try:
        released = json.loads(recorded) if recorded else {}
    except ValueError:
        released = {}
    released = released if isinstance(released, dict) else {}
    pseudonymized = unit_pseudonymized(policy)
    out = []
    for rel, spec in policy.related.items():
        target = related_table(table, rel)
        check = f"related {rel}"
        expected = policy_related_columns(policy, rel) if shared else None
        try:
            described = describe(con, target)
        except (duckdb.Error, SourceError):
            out += [table_check_row(check, 0, _RELATED_REQUIRED, passed=False),
                    *_recorded_rows(con, check, target, None, None, expected)]
            continue
        columns = [r[0] for r in described]
        key = spec["key"]
        if not pseudonymized:   # the key leaves with the unit: no column may link a row to a person
            bad = int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(target.copy())))
                      .fetchall()[0][0]) if key in columns else 0
        else:
            people = exp.select(exp.column(unit, quoted=True)).from_(table.copy())
            orphan = exp.Not(this=exp.In(this=exp.column(key, quoted=True), query=exp.Subquery(this=people)))
            missing = exp.Is(this=exp.column(key, quoted=True), expression=exp.Null())
            bad = int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(target.copy()).where(
                exp.or_(orphan, missing)))).fetchall()[0][0]) if key in columns else -1
        out.append(table_check_row(check, max(bad, 0), _RELATED_REQUIRED, passed=bad == 0))
        out += _recorded_rows(con, check, target, described, released.get(rel), expected)
        out += _pseudonym_rows(con, policy, rel, target, columns)
    return out


def _pseudonym_rows(con: duckdb.DuckDBPyConnection, policy: Policy, rel: str, target: exp.Table,
                    columns: list[str]) -> list[dict[str, Any]]:
    """``values <rel>.<column>`` of each pseudonym column of a related table (its key when the unit is
    pseudonymized, and its pseudonymized identifiers): one aggregate counting the values not of a pseudonym's
    form."""
    spec = policy.related[rel]
    wanted = {c: a for c, a in (spec.get("attributes") or {}).items()
              if a.get("role") == "identifier" and a.get("action") == "pseudonymize"}
    if unit_pseudonymized(policy):
        wanted[spec["key"]] = {"role": "identifier", "action": "pseudonymize"}
    forms = [(f"values {rel}.{c}", c, PSEUDONYM, value_form(wanted[c])[1]) for c in columns if c in wanted]
    if not forms:
        return []
    counts = con.execute(value_query(target, forms)).fetchall()[0]
    rows = []
    for (check, _, required, _), n in zip(forms, counts):
        n = int(n or 0)
        rows.append(table_check_row(
            check, n, required,
            message=f"{n} non-NULL value(s) are not pseudonyms (raw values put back?); release it again" if n
            else None))
    return rows


def _recorded_rows(con: duckdb.DuckDBPyConnection, check: str, target: exp.Table, described: list[tuple] | None,
                   recorded: dict[str, Any] | None, expected: list[str] | None) -> list[dict[str, Any]]:
    """The ``columns`` and ``rows`` rows of one related table: against what its release recorded, the column names
    against the policy's ``expected`` ones in a shared file (None: the working database)."""
    count = (f"row count as released ({recorded.get('released')})"
             if isinstance(recorded, dict) and isinstance(recorded.get("released"), int) else "row count as released")
    if expected is None:
        columns_required, basis_cols, basis_rows = "the columns (names, types) released", None, check_program.TABLE
    else:
        columns_required = "the columns the policy releases: " + ", ".join(expected) + " (types as recorded)"
        basis_cols = f"policy (names); {UNVERIFIED_METADATA}: types"
        basis_rows = UNVERIFIED_METADATA
    basis_cols = basis_cols or check_program.TABLE
    if described is None:
        return [table_check_row(check + " columns", 0, columns_required, basis_cols, passed=False),
                table_check_row(check + " rows", 0, count, basis_rows, passed=False),
                _content_row(con, check + " contents", target, None, basis_rows)]
    if not isinstance(recorded, dict) or not isinstance(recorded.get("columns"), list):
        why = ("what was released is not recorded (a release made before anon_sql kept it, or an edited catalog / "
               "metadata row): release it again")
        return [table_check_row(check + " columns", 0, columns_required, basis_cols, why, passed=False),
                table_check_row(check + " rows", 0, count, basis_rows, why, passed=False),
                _content_row(con, check + " contents", target, None, basis_rows)]
    now = {(str(c[0]), str(c[1])) for c in described}
    then = {(str(c[0]), str(c[1])) for c in recorded["columns"] if isinstance(c, list) and len(c) == 2}
    odd = sorted(now ^ then)
    if expected is not None:   # the names from the policy; the recorded types of those names
        names = {c for c, _ in now}
        odd = sorted({*[(c, t) for c, t in now ^ then if c in expected and c in names],
                      *[(c, t) for c, t in now if c not in expected],
                      *[(c, "(missing)") for c in expected if c not in names]})
    rows = int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(target.copy()))).fetchall()[0][0])
    released = recorded.get("released")
    gap = abs(rows - released) if isinstance(released, int) else rows
    return [
        table_check_row(check + " columns", 0, columns_required, basis_cols,
                        ("added, removed or retyped: " + ", ".join(f"{c} {t}" for c, t in odd)) if odd else None,
                        passed=not odd),
        table_check_row(check + " rows", gap, count, basis_rows,
                        None if gap == 0 else f"{rows} rows, {released} released",
                        passed=isinstance(released, int) and gap == 0),
        _content_row(con, check + " contents", target, recorded.get("content"), basis_rows,
                     {str(c[0]): str(c[1]) for c in described})]


def _content_row(con: duckdb.DuckDBPyConnection, check: str, target: exp.Table, wanted: Any,
                 basis: str, types: dict[str, str] | None = None) -> dict[str, Any]:
    """``related <name> contents``: the digest of the related table's rows over the columns its release recorded
    against that record (round 10, C12: each row's insensitive ``visit`` set to the person's raw Id passed, the
    count and columns unchanged)."""
    columns = wanted.get("columns") if isinstance(wanted, dict) else None
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        return check_program.content_row(con, check, {}, None, basis)
    queries = {kind: render(content_digest_query(target, columns, types)) for kind in KINDS}
    return check_program.content_row(con, check, queries, wanted, basis)


__all__ = ["UNVERIFIED_METADATA", "policy_related_columns", "related_rows", "related_table", "unit_pseudonymized"]
