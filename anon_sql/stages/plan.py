"""Plan: the method's decision (a level vector or a record assignment) over the resolved inputs, and the policy as
released under that plan."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from ..methods import AssignmentPlan, LevelPlan, MethodContext, Plan
from ..policy import Policy
from .resolve import Resolved


def placeholder(resolved: Resolved) -> Plan:
    """An empty plan of the method's kind: what the ``__source`` view is compiled with before planning (assignment
    plans key the source's rows)."""
    if resolved.method.plan_kind == "assignment":
        return AssignmentPlan(pd.DataFrame(), pd.DataFrame())
    return LevelPlan({})


def make_context(resolved: Resolved, con: Any, source_view: str,
                 say: Callable[[str], None] = lambda message: None) -> MethodContext:
    """What the method may use: ``con`` (the engine's connection) and ``source_view`` (the release's ``__source``
    view), with the resolved policy, taxonomies, models and record count."""
    return MethodContext(con, resolved.policy, source_view, resolved.taxonomies, resolved.models, resolved.records,
                         say)


def released_policy(policy: Policy, plan: Plan) -> Policy:
    """A method that chooses which quasi-identifiers it generalizes (UPA with quasi = "ktfs") lists them in
    ``plan.released_quasi``; the others are released unchanged, so they are insensitive in the release."""
    chosen = plan.released_quasi if isinstance(plan, AssignmentPlan) else None
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
