"""Plan: the method's decision (a level vector or a record assignment) over the resolved inputs, and the policy as
released under that plan."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pandas as pd
from sqlglot import exp

from ..methods import AssignmentPlan, LevelPlan, MethodContext, Plan
from ..policy.model import Policy
from .resolve import Resolved


def placeholder(resolved: Resolved) -> Plan:
    """An empty plan of the method's kind: what the ``__source`` view is compiled with before planning (assignment
    plans key the source's rows)."""
    if resolved.method.plan_kind == "assignment":
        return AssignmentPlan(pd.DataFrame(), pd.DataFrame())
    return LevelPlan({})


def make_context(resolved: Resolved, con: Any, source_view: str | exp.Table,
                 say: Callable[[str], None] = lambda message: None) -> MethodContext:
    """What the method may use: ``con`` (the engine's connection) and ``source_view`` (the release's ``__source``
    view), with the resolved policy, taxonomies, models and record count."""
    # with a privacy unit a method's budget and sizes are in people (methods that count units: docs/units.md)
    records = resolved.units if resolved.units is not None else resolved.records
    return MethodContext(con, resolved.policy, source_view, resolved.taxonomies, resolved.models, records,
                         say, base=resolved.base, varying=resolved.varying,
                         base_rows=resolved.base_rows)


def signed_plan(resolved: Resolved, plan: Plan) -> Plan:
    """A level plan over QIs that vary inside units releases classes of signatures (compiler/signature.py)."""
    if resolved.varying and isinstance(plan, LevelPlan) and not plan.signatures:
        return dataclasses.replace(plan, signatures=True)
    return plan


def released_policy(policy: Policy, plan: Plan) -> Policy:
    """Every check groups by every declared quasi-identifier as released — except for bucket plans (slicing's
    ``row_values``: original values permuted inside buckets), whose classes are the buckets: they list no QI in
    ``plan.released_quasi``, and the QIs are insensitive in the release (docs/slicing.md says what slicing
    guarantees). A method that merely leaves a QI unchanged (UPA with quasi = "ktfs") is still checked over it.
    ``check`` derives the same policy from the method alone: :func:`anon_sql.methods.declared_release_policy`."""
    if not isinstance(plan, AssignmentPlan) or not plan.row_values:
        return policy
    chosen = plan.released_quasi
    if chosen is None or set(chosen) == set(policy.quasi):
        return policy
    d = policy.to_dict()
    for q in policy.quasi:
        if q not in chosen:
            d["attributes"][q] = {"role": "insensitive"}
    return Policy.from_dict(d)


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan for Release.plan: a level vector (every QI) or the assignment summary."""
    return plan.as_dict()
