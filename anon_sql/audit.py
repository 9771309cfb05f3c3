"""Tamper-evident re-verification of a recorded release (``anon-sql check``, :func:`anon_sql.check`).

Nothing in the database file is trusted but the released table and the policy that ``anon.releases`` recorded for
it: every privacy model is compiled afresh from that policy and run as SQL over the table (the release's own
``__checks`` / ``__classes`` views are never read, so rewriting them changes nothing), the record and class counts
are reconciled with the numbers recorded at release time, and the table's columns must be the ones the policy
releases. Reads only: it works on a read-only connection and on a reopened file without ``anon_sql.install``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from . import catalog
from .compiler import EC_ID, CompileInput, ReleaseNames, checks_view, released_columns
from .errors import SourceError
from .methods import LevelPlan
from .models import PrivacyModel, build_models
from .policy import Policy
from .source import file_relation, is_path, relation_exists, table_relation
from .sqlbuild import ident, record_count, render


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


def recheck(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame:
    """One row per check (``check``, ``classes``, ``failing_classes``, ``failing_records``, ``worst_value``,
    ``passed``): every model of the stored policy over the released table, then reconciliation, suppression,
    class count and released columns against the catalog."""
    from .stages.verify import check_summary

    row = recorded(con, name)
    policy = Policy.from_dict(json.loads(row["policy_json"]))
    plan = json.loads(row["plan"] or "{}")
    names = ReleaseNames(name)
    table = names.table
    columns = [r[0] for r in con.execute(render(exp.Describe(this=exp.select("*").from_(table.copy())))).fetchall()]
    models = build_models(policy, con)
    ci = CompileInput(policy, table.copy(), columns, LevelPlan({}), {}, models)
    frame = con.execute(render(checks_view(ci, names).order_by(exp.column(EC_ID)))).df()
    rows = check_summary(frame)
    layout = plan.get("slicing_check")
    for model in (m for m in models if m.whole_table and layout):
        rows.append(_table_check(con, policy, names, model, layout))
    rows += _catalog_checks(con, policy, row, plan, columns, len(frame))
    return pd.DataFrame(rows)


def _catalog_checks(con, policy: Policy, row: dict[str, Any], plan: dict[str, Any], columns: list[str],
                    classes: int) -> list[dict[str, Any]]:
    """The table against the numbers recorded at release time: records reconcile, suppression within budget, the
    same number of classes, and exactly the columns the policy releases (no identifier added back)."""
    table = exp.Table(this=ident(row["release"]))
    released = int(con.execute(render(exp.select(record_count(policy.count_column)).from_(table)))
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


def _table_check(con, policy: Policy, names: ReleaseNames, model: PrivacyModel, layout: dict[str, Any]
                 ) -> dict[str, Any]:
    """A model's whole-table check (slicing's l-diversity), with the source rows read afresh through the stored
    policy (not the release's ``__source`` view); not recomputable (the source is gone) counts as failed."""
    from .compiler import source_view
    from .methods import AssignmentPlan

    src = policy.source
    if not (Path(src).exists() if is_path(src) else relation_exists(con, src)):
        return {"check": model.name, "classes": 0, "failing_classes": 0, "failing_records": 0,
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
    assignment = names.assignment if relation_exists(con, names.release + "__assignment") else None
    return model.table_check(con, names.table, source, None, layout, policy.count_column, assignment)


__all__ = ["recorded", "recheck"]
