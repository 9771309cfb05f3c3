"""``method = "local_suppression"`` (sdcMicro ``localSuppression``; docs/sdc.md): cells of the quasi-identifiers,
not records, are suppressed until every record matches at least k records, a suppressed cell (released as ``*``)
matching any value. The search is :func:`anon_sql.sdc.local_suppression.local_suppression`; the release is verified
by the wildcard k model (anon_sql/models/wildcard_k.py), SQL over the released table."""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlglot import exp

from ..common.sqlbuild import alias, col, lit, render, table as table_ref
from ..errors import PolicyError
from ..models import find
from ..policy.keys import MapOf, key, number
from ..sdc.local_suppression import local_suppression
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext

WILDCARD = "*"
# the models this method's release is verified by: the wildcard k (and the plain k, over its single class)
VERIFIED = ("k_anonymity", "k_wildcard")


def wildcard_model(policy: Any, models: list) -> Any:
    """The wildcard k model of the release (anon_sql/models/wildcard_k.py). Local suppression forms no partition
    into classes (a suppressed cell matches several), so it verifies k only: every other model, a count column and a
    k below 2 are refused."""
    other = [m.name for m in models if m.name not in VERIFIED]
    if other:
        raise PolicyError(f"method 'local_suppression' verifies k-anonymity only (a suppressed cell matches any "
                          f"value, so records share no classes a model could test): remove {', '.join(other)} from "
                          "[privacy], or use a generalization method (optimal, mondrian, …) for them")
    if policy.count_column:
        raise PolicyError(f"method 'local_suppression' suppresses cells of single records: expand count_column "
                          f"{policy.count_column!r} to one row per record and drop count_column")
    model = find(models, "k_wildcard")
    if model is None or model.k < 2:
        raise PolicyError(f"method 'local_suppression' needs privacy.k >= 2 (got {getattr(model, 'k', None)!r}); "
                          "set k = 2 or more")
    return model


@register_method
class LocalSuppression(Method):
    """Suppress the fewest cells (the least important quasi-identifiers first) until k-anonymity with wildcards."""

    name = "local_suppression"
    plan_kind = "assignment"
    releases_rows = True
    needs_taxonomies = False
    reads = "rows"
    parameters = (
        key("importance", MapOf(number(), "quasi-identifier"),
            "weight per quasi-identifier: higher = more important = suppressed later (left out: 0); default: the "
            "quasi-identifiers with more distinct values are suppressed first"),
    )

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        policy = ctx.policy
        model = wildcard_model(policy, ctx.models)
        quasi, k = list(model.quasi), int(model.k)
        out = f"{policy.name}__anon_local_suppression"
        done = local_suppression(ctx.con, table_ref(ctx.source_view), quasi, k,
                                 importance=self.params.get("importance"), output=out, temporary=True)
        try:
            cells = [alias(exp.func("COALESCE", exp.cast(col(q), "VARCHAR"), lit(WILDCARD)), q) for q in quasi]
            query = exp.select(col(ROW_ID), *cells).from_(table_ref(out)).order_by(col(ROW_ID))
            values = ctx.con.execute(render(query)).df()
        finally:
            ctx.con.execute(render(exp.Drop(tables=[table_ref(out)], kind="TABLE", exists=True)))
        values.insert(1, "ec_id", 1)
        for q in quasi:
            values[q] = values[q].astype("string")
        assignment = pd.DataFrame({ROW_ID: values[ROW_ID], "ec_id": 1})
        return suppression_plan(assignment, values, done, quasi, k)


def suppression_plan(assignment: Any, values: Any, done: Any, quasi: list[str], k: int) -> AssignmentPlan:
    """The plan of a local-suppression release (on any engine): every row in class 1, its released QI cells
    (``*`` where suppressed) per row, what was suppressed, and the wildcard check of the release."""
    info = {"suppressed_cells": done.suppressed, "suppressed_cells_total": int(sum(done.suppressed.values())),
            "rounds": done.rounds, "suppression_order": done.order, "wildcard": WILDCARD}
    return AssignmentPlan(assignment, values, None, info, released_quasi=[], row_values=True,
                          table_check={"kind": "wildcard", "quasi": quasi, "k": k})


__all__ = ["LocalSuppression", "suppression_plan", "wildcard_model"]
