"""The version history of anonymized views (``anon.release_versions``): what each create / refresh produced and changed.

Before a recorded release is replaced, :func:`snapshot` copies its rows and its class table into session-temporary
tables; before the new version commits (in its transaction), :func:`record` compares them with the new release (rows with
``EXCEPT ALL``, classes by their released quasi-identifier values) and appends one version row. Everything is SQL
over the two tables; Python sees the counts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from . import store as catalog
from ..common.sqlbuild import col, ident, lit, render, session_table

_PREV_ROWS = "__anon_previous_rows"
_PREV_CLASSES = "__anon_previous_classes"
_PREV_TRACE = "__anon_previous_trace"
_TRACE = exp.Table(this=ident("search_trace"), db=ident("anon"))
_TRACE_COLUMNS = ("release", "step", "node", "event", "violations", "distinct_rows", "feasible", "score")
_VERSIONS = exp.Table(this=ident("release_versions"), db=ident("anon"))
_CLASSES = exp.Table(this=ident("equivalence_classes"), db=ident("anon"))


def _where_release(name: str) -> exp.Expression:
    return exp.EQ(this=col("release"), expression=lit(name))


@dataclass
class Snapshot:
    """The previous version's rows and classes, held in temp tables until :func:`discard_snapshots`."""

    release: str
    plan: str | None
    digests: str | None = None     # the taxonomy digests (JSON) of the version the snapshot holds


def recorded(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    """The catalog row of the released (not failed) anonymized view ``name``, or None when there is none."""
    return catalog.recorded_release(con, name)


def snapshot(con: duckdb.DuckDBPyConnection, name: str) -> Snapshot:
    """Copy the release's rows and class table into temp tables (the comparison base of the next version)."""
    row = recorded(con, name)
    rows_q = exp.select("*").from_(exp.Table(this=ident(name)))
    classes_q = exp.select(col("qi_values"), col("size")).from_(_CLASSES.copy()).where(_where_release(name))
    # the search trace the version being replaced has not numbered yet (a release made before versions, or before
    # anon.search_trace.version): :func:`record` gives it back that version's number (hostile round 5, R11)
    trace_q = exp.select(*[col(c) for c in _TRACE_COLUMNS]).from_(_TRACE.copy()).where(
        exp.and_(_where_release(name), *([exp.Is(this=col("version"), expression=exp.Null())]
                                         if _trace_has_versions(con) else [])))
    for table, q in ((_PREV_ROWS, rows_q), (_PREV_CLASSES, classes_q), (_PREV_TRACE, trace_q)):
        con.execute(render(exp.Create(this=session_table(table), kind="TABLE", replace=True, expression=q,
                                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
    last = latest(con, name) or {}
    return Snapshot(name, None if row is None else row.get("plan"),
                    last.get("taxonomy_digests") or (None if row is None else row.get("taxonomy_digests")))


def _trace_has_versions(con: duckdb.DuckDBPyConnection) -> bool:
    """Does anon.search_trace have its ``version`` column? (A catalog from before it gains it at the next write.)"""
    return bool(con.execute("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() AND "
                            "schema_name = 'anon' AND table_name = 'search_trace' AND column_name = 'version'"
                            ).fetchall()[0][0])


def _number_trace(con: duckdb.DuckDBPyConnection, name: str, version: int, previous: Snapshot | None,
                  last: int | None) -> None:
    """Give the new release's search trace (its rows not numbered yet) ``version``, and the snapshot's unnumbered
    rows of the version it replaced back under that version's number ``last``: a refresh never loses the search
    an earlier version recorded (KEEP PLAN searches nothing; hostile round 5, R11)."""
    con.execute(render(exp.update(_TRACE.copy(), {"version": lit(version)}, where=exp.and_(
        _where_release(name), exp.Is(this=col("version"), expression=exp.Null())))))
    if previous is None or last is None:
        return
    restored = exp.select(*[col(c) for c in _TRACE_COLUMNS], exp.alias_(lit(last), "version")).from_(
        session_table(_PREV_TRACE))
    con.execute(render(exp.insert(restored, _TRACE.copy(), columns=[*_TRACE_COLUMNS, "version"])))


def discard_snapshots(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the temp snapshot tables (whatever happened to the new version)."""
    for table in (_PREV_ROWS, _PREV_CLASSES, _PREV_TRACE):
        con.execute(render(exp.Drop(tables=[session_table(table)], kind="TABLE", exists=True)))


def _count(con: duckdb.DuckDBPyConnection, q: exp.Expression) -> int:
    return int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(q.subquery("d")))).fetchall()[0][0])


def _columns(con: duckdb.DuckDBPyConnection, table: exp.Table) -> list[str]:
    described = con.execute(render(exp.Describe(this=exp.select("*").from_(table.copy())))).fetchall()
    return [r[0] for r in described]


def _diff(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, int]:
    """Rows added / removed (multiset, ec_id aside, values compared as text) and classes added / removed / resized
    (by released quasi-identifier values) between the snapshot and the release now in place."""
    new_t, old_t = exp.Table(this=ident(name)), session_table(_PREV_ROWS)
    old_cols = set(_columns(con, old_t))
    common = [c for c in _columns(con, new_t) if c in old_cols and c != "ec_id"]

    def rows(t: exp.Table) -> exp.Select:
        # no column in common (a replacement with another shape): every row differs; a constant keeps the multiset
        values = [exp.Cast(this=col(c), to=exp.DataType.build("VARCHAR")) for c in common] or [
            lit(t is new_t)]
        return exp.select(*values).from_(t.copy())

    def classes(t: exp.Expression) -> exp.Select:
        return exp.select(col("qi_values"), col("size")).from_(t.copy())

    new_c = exp.select(col("qi_values"), col("size")).from_(_CLASSES.copy()).where(_where_release(name))
    old_c = session_table(_PREV_CLASSES)
    changed_new = exp.except_(new_c, classes(old_c), distinct=False)
    gone_old = exp.except_(classes(old_c), new_c.copy(), distinct=False)
    in_old = exp.select(col("qi_values")).from_(old_c.copy())
    in_new = new_c.copy().select(col("qi_values"), append=False)

    def matching(q: exp.Expression, keys: exp.Select, present: bool) -> exp.Select:
        cond = exp.In(this=col("qi_values"), query=keys.subquery())
        return exp.select("*").from_(q.subquery("c")).where(cond if present else exp.Not(this=cond))

    return {
        "rows_added": _count(con, exp.except_(rows(new_t), rows(old_t), distinct=False)),
        "rows_removed": _count(con, exp.except_(rows(old_t), rows(new_t), distinct=False)),
        "classes_added": _count(con, matching(changed_new, in_old, False)),
        "classes_removed": _count(con, matching(gone_old, in_new, False)),
        "classes_resized": _count(con, matching(changed_new.copy(), in_old.copy(), True)),
    }


def _insert(con: duckdb.DuckDBPyConnection, values: dict[str, Any]) -> None:
    names = list(values)
    q = exp.insert(exp.select(*[lit(values[n]) for n in names]), _VERSIONS.copy(), columns=names)
    con.execute(render(q))


def ensure_history(con: duckdb.DuckDBPyConnection, name: str, row: dict[str, Any] | None = None) -> None:
    """Give a release made outside SQL statements (``anon_sql.runner.run``, ``anon-sql release``) its version 1, from
    its ``anon.releases`` row (``row``: that row as read before a replacement overwrote it), so that later versions
    number on from it."""
    if latest(con, name) is not None:
        return
    row = row if row is not None else recorded(con, name)
    if row is None:
        return
    _insert(con, {"release": name, "version": 1, "action": "create", "method": row["method"], "plan": row["plan"],
                  "policy_json": row["policy_json"], "records_in": row["records_in"],
                  "records_out": row["records_out"], "suppressed": row["suppressed"], "classes": row["classes"],
                  "k_achieved": row["k_achieved"], "created_at": str(row["created_at"]),
                  "taxonomy_digests": row.get("taxonomy_digests")})


def has_versions(con: duckdb.DuckDBPyConnection) -> bool:
    """Does the catalog have anon.release_versions? (Reads never create it: issue 28.5.)"""
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
                            "schema_name = 'anon' AND table_name = 'release_versions'").fetchall()[0][0])


def latest(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    """The newest version row of ``name`` (None without history). Reads only."""
    if not has_versions(con):
        return None
    q = (exp.select("*").from_(_VERSIONS.copy()).where(_where_release(name))
         .order_by(exp.Ordered(this=col("version"), desc=True)).limit(1))
    frame = con.execute(render(q)).df()
    return None if frame.empty else frame.iloc[0].to_dict()


def record(con: duckdb.DuckDBPyConnection, rel, action: str, declared_json: str,
           previous: Snapshot | None) -> dict[str, Any]:
    """Append the version row of the release ``rel`` (inside its transaction, before the commit: issue 28.2),
    compared with ``previous`` when given. ``plan_changed`` is true when the plan or the digest of any taxonomy
    differs from the previous version's (or the previous version recorded none): released values could then mean
    something else."""
    catalog.upgrade(con)
    last = latest(con, rel.name)
    digests = rel.info.get("taxonomy_digests")
    plan = json.dumps(rel.plan, default=str)
    values: dict[str, Any] = {
        "release": rel.name, "version": 1 if last is None else int(last["version"]) + 1, "action": action,
        "method": rel.policy.method, "plan": plan, "policy_json": declared_json, "records_in": rel.records_in,
        "records_out": rel.records_out, "suppressed": rel.suppressed, "classes": len(rel.classes),
        "k_achieved": int(rel.metrics["k"]),
        "taxonomy_digests": None if digests is None else json.dumps(digests, sort_keys=True),
    }
    if previous is not None:
        try:
            before = json.loads(previous.digests) if previous.digests else None
        except ValueError:      # an edited catalog: nothing is known about what the previous values meant
            before = None
        values["plan_changed"] = bool(_plan_of(previous.plan) != rel.plan
                                      or (digests is not None and before != digests))
        values.update(_diff(con, rel.name))
    else:
        rows = int(con.execute(render(exp.select(exp.Count(this=exp.Star()))
                                      .from_(exp.Table(this=ident(rel.name))))).fetchall()[0][0])
        values.update(rows_added=rows, rows_removed=0, classes_added=len(rel.classes), classes_removed=0,
                      classes_resized=0)
    _insert(con, values)
    _number_trace(con, rel.name, values["version"], previous, None if last is None else int(last["version"]))
    return values


def _plan_of(text: str | None) -> Any:
    return json.loads(text) if text else None


def history(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame:
    """Every version of ``name``, oldest first (empty without history). Reads only."""
    if not has_versions(con):
        return pd.DataFrame(columns=["version", "action"])
    q = (exp.select(*[col(c) for c in ("version", "action", "method", "plan", "records_in", "records_out",
                                       "suppressed", "classes", "k_achieved", "plan_changed", "rows_added",
                                       "rows_removed", "classes_added", "classes_removed", "classes_resized",
                                       "created_at")])
         .from_(_VERSIONS.copy()).where(_where_release(name)).order_by(col("version")))
    return con.execute(render(q)).df()


def forget(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Delete the version rows of ``name`` (DROP ANONYMIZED VIEW; inside the caller's transaction)."""
    if not has_versions(con):
        return
    con.execute(render(exp.delete(_VERSIONS.copy(), where=_where_release(name))))
