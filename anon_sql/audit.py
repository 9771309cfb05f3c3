"""Tamper-evident re-verification of a recorded release (``anon-sql check``, :func:`anon_sql.check`).

Nothing in the database file is trusted but the released table and the policy that ``anon.releases`` recorded for
it: every privacy model is compiled afresh from that policy and run as SQL over the table (the release's own
``__checks`` / ``__classes`` views are never read, so rewriting them changes nothing), the record and class counts
are reconciled with the numbers recorded at release time, and the table's columns must be the ones the policy
releases. Reads only: it works on a read-only connection and on a reopened file without ``anon_sql.install``.

A shared file (written by ``--to`` / ``export``: no catalog, the released table beside its ``<release>__metadata``
row) is checked the same way from the policy and counts of that row; its models run on a private in-memory
connection that attaches the file read-only, so the file is never written.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from . import catalog
from .compiler import EC_ID, CompileInput, ReleaseNames, class_stats_query, released_columns
from .errors import SourceError
from .methods import LevelPlan
from .models import build_models
from .policy import Policy
from .source import file_relation, is_path, relation_exists, table_relation
from .sqlbuild import ident, lit, record_count, render

_SHARED = "__anon_shared"


def recorded(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any]:
    """The catalog row of release ``name``; :class:`SourceError` when no such release exists in this database."""
    row = catalog.recorded_release(con, name)
    if row is None:
        known = catalog.released_names(con)
        raise SourceError(f"{name!r} is not a release recorded in this database (anon.releases lists "
                          f"{known if known else 'no release'}); give the name of a release, e.g. the policy's name")
    if not relation_exists(con, name):
        raise SourceError(f"release {name!r} is recorded in anon.releases but its table is missing from this "
                          "database; release it again")
    return row


def metadata_table(name: str) -> exp.Table:
    """The one-row metadata table of a shared release file (see :mod:`anon_sql.share`)."""
    return exp.Table(this=ident(name + "__metadata"))


def is_shared(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Is ``name`` a release of a shared file here (its metadata table beside it, not recorded in a catalog)?"""
    return (catalog.recorded_release(con, name) is None and relation_exists(con, name)
            and relation_exists(con, metadata_table(name)))


def recheck(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame:
    """One row per check (``check``, ``classes``, ``failing_classes``, ``failing_records``, ``worst_value``,
    ``passed``): every model of the stored policy over the released table, then reconciliation, suppression,
    class count and released columns against the catalog (a shared file: against its metadata row)."""
    from .stages.verify import check_summary

    if is_shared(con, name):
        return _recheck_shared(con, name)
    row = recorded(con, name)
    policy = Policy.from_dict(json.loads(row["policy_json"]))
    plan = json.loads(row["plan"] or "{}")
    names = ReleaseNames(name)
    frame, columns = _class_checks(con, names.table, policy)
    rows = check_summary(frame)
    if plan.get("slicing_check"):
        rows.append(_slicing_check(con, policy, names, plan["slicing_check"]))
    rows += _catalog_checks(con, names.table, policy, row, plan, columns, len(frame))
    return pd.DataFrame(rows)


def _recheck_shared(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame:
    """:func:`recheck` of a shared file: the policy and counts of its metadata row; the models compiled afresh and
    run on an in-memory connection (macros and UDFs installed there) over the file attached read-only."""
    from .stages.verify import check_summary

    meta = con.execute(render(exp.select("*").from_(metadata_table(name)))).df()
    if len(meta) != 1 or not {"policy", "plan", "records_in", "suppressed", "noise", "classes"} <= set(meta.columns):
        raise SourceError(f"{render(metadata_table(name))} is not the one-row metadata table anon_sql writes "
                          "with a shared release; check the file that `--to` / `export` wrote")
    row = meta.iloc[0].to_dict()
    row["release"] = name
    try:
        policy = Policy.from_dict(json.loads(row["policy"]))
    except (ValueError, TypeError) as err:
        raise SourceError(f"the metadata of shared release {name!r} holds no readable policy ({err})") from None
    plan = json.loads(row["plan"] or "{}")
    private = duckdb.connect()
    try:
        catalog.install(private)
        table = _shared_table(con, private, name)
        frame, columns = _class_checks(private, table, policy)
        rows = check_summary(frame)
        if (policy.privacy.l_diversity or {}).get("kind") == "slicing":
            # slicing's whole-table l-diversity needs the source rows, which a shared file never holds
            rows.append({"check": "slicing_l_diversity", "classes": 0, "failing_classes": 0, "failing_records": 0,
                         "worst_value": None, "passed": False})
        rows += _catalog_checks(private, table, policy, row, plan, columns, len(frame))
    finally:
        private.close()
    return pd.DataFrame(rows)


def _shared_table(con: duckdb.DuckDBPyConnection, private: duckdb.DuckDBPyConnection, name: str) -> exp.Table:
    """The released table of ``con``'s file as seen from ``private``: the file attached read-only (else, e.g. an
    in-memory ``con``, a copy of the table's rows)."""
    path = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
    if path:
        try:
            private.execute(render(exp.Attach(this=exp.Alias(this=lit(path), alias=ident(_SHARED)),
                                              expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))])))
            return exp.Table(this=ident(name), db=ident("main"), catalog=ident(_SHARED))
        except duckdb.Error:
            pass
    private.register(_SHARED, con.execute(render(exp.select("*").from_(exp.Table(this=ident(name))))).arrow())
    return exp.Table(this=ident(_SHARED))


def _class_checks(con, table: exp.Table, policy: Policy) -> tuple[pd.DataFrame, list[str]]:
    """The models of ``policy`` per class of ``table`` (every model's value and pass flag), and its columns."""
    columns = [r[0] for r in con.execute(render(exp.Describe(this=exp.select("*").from_(table.copy())))).fetchall()]
    ci = CompileInput(policy, table.copy(), columns, LevelPlan({}), {}, build_models(policy, con))
    frame = con.execute(render(class_stats_query(ci, table.copy(), [EC_ID, *policy.quasi], null_safe=True)
                               .order_by(exp.column(EC_ID)))).df()
    return frame, columns


def _catalog_checks(con, table: exp.Table, policy: Policy, row: dict[str, Any], plan: dict[str, Any],
                    columns: list[str], classes: int) -> list[dict[str, Any]]:
    """The table against the numbers recorded at release time: records reconcile, suppression within budget, the
    same number of classes, and exactly the columns the policy releases (no identifier added back)."""
    released = int(con.execute(render(exp.select(record_count(policy.count_column)).from_(table.copy())))
                   .fetchall()[0][0] or 0)
    records_in, noise = int(row["records_in"]), int(row["noise"] or 0)
    suppressed = records_in - (released - noise)
    gap = records_in - (released - noise + int(row["suppressed"]))
    budget = policy.privacy.max_suppression * records_in
    expected = [c for c in released_columns(policy, list(policy.attributes)) if c != policy.count_column]
    expected += [c for c in (plan.get("noise_flag"), EC_ID, policy.count_column) if c]
    odd = sorted(set(columns) ^ set(expected))
    return [
        {"check": "reconciliation", "classes": classes, "failing_classes": 0, "failing_records": abs(gap),
         "worst_value": float(gap), "passed": gap == 0},
        {"check": "max_suppression", "classes": classes, "failing_classes": 0,
         "failing_records": max(0, int(suppressed - budget)), "worst_value": float(suppressed),
         "passed": suppressed <= budget + 1e-9},
        {"check": "classes", "classes": classes, "failing_classes": abs(classes - int(row["classes"] or 0)),
         "failing_records": 0, "worst_value": float(classes), "passed": classes == int(row["classes"] or 0)},
        {"check": "columns", "classes": classes, "failing_classes": 0, "failing_records": 0,
         "worst_value": float(len(odd)), "passed": not odd},
    ]


def _slicing_check(con, policy: Policy, names: ReleaseNames, spec: dict[str, Any]) -> dict[str, Any]:
    """Slicing's whole-table l-diversity, with the source rows read afresh through the stored policy (not the
    release's ``__source`` view); not recomputable (the source is gone) counts as failed."""
    from .compiler import source_view
    from .methods import AssignmentPlan
    from .methods.slicing_sql import verify

    src = policy.source
    if not (Path(src).exists() if is_path(src) else relation_exists(con, src)):
        return {"check": "slicing_l_diversity", "classes": 0, "failing_classes": 0, "failing_records": 0,
                "worst_value": None, "passed": False}
    relation = file_relation(src) if is_path(src) else table_relation(src)
    cols = [r[0] for r in con.execute(render(exp.Describe(this=exp.select("*").from_(relation.copy())))).fetchall()]
    # the row key orders by every source column, as at release time; identifiers are not needed for the check
    d = policy.to_dict()
    for spec_ in d["attributes"].values():
        if spec_["role"] == "identifier":
            spec_["action"] = "drop"
    ci = CompileInput(Policy.from_dict(d), relation, cols, AssignmentPlan(pd.DataFrame(), pd.DataFrame()), {}, [])
    source = exp.Subquery(this=source_view(ci, names), alias=exp.TableAlias(this=ident("__s")))
    assignment = names.assignment if relation_exists(con, names.assignment) else None
    out = verify(con, names.table, source, None, spec, policy.count_column, assignment)
    out.pop("requirement", None)
    return out


__all__ = ["recorded", "recheck", "is_shared", "metadata_table"]
