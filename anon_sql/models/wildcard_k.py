"""k-anonymity with wildcards (sdcMicro ``localSuppression``; docs/sdc.md): a suppressed cell (released as ``*``)
matches any value, so a record's class is every record that agrees with it on their non-suppressed cells. The
relation is not a partition, so the check is over the whole release: SQL that counts, for every released QI
combination, the records it matches (:func:`anon_sql.sdc.local_suppression.kanonymity_with_wildcards_sql`)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from sqlglot import exp

from ..common.sqlbuild import col, ident, lit, render
from .base import PrivacyModel

WILDCARD = "*"
LAYOUT = "wildcard"     # AssignmentPlan.table_check["kind"] of a release whose suppressed cells are wildcards


class WildcardKAnonymity(PrivacyModel):
    """Every released record matches at least k records (itself included) when ``*`` matches any value."""

    name = "k_wildcard"
    per_class = False
    whole_table = True
    monotone = True

    def __init__(self, k: int, quasi: Sequence[str]):
        self.k, self.quasi = int(k), list(quasi)

    def sql_checks(self, cols: Any) -> list:
        return []   # not a per-class column: see table_check

    def table_check(self, con: Any, release: exp.Table, source: exp.Expression, risk: exp.Table | None,
                    layout: dict[str, Any] | None, weight: str | None, assignment: exp.Table | None = None,
                    create: Callable[[exp.Create], None] | None = None) -> dict[str, Any] | None:
        if not layout or layout.get("kind") != LAYOUT:
            return None
        from ..sdc.local_suppression import kanonymity_with_wildcards_sql   # numpy / pandas: loaded on use

        # the declared policy's QIs, never the recorded layout's (issue 28.8): `check` builds this model from the
        # declared policy the catalog keeps (runner/plan.py derives the released one from it), so a layout naming
        # fewer QIs changes nothing. None: a release recorded before the declared policy was kept
        quasi = list(self.quasi)
        if not quasi:
            return {"check": self.name, "classes": None, "failing_classes": None, "failing_records": None,
                    "worst_value": None, "passed": False,
                    "message": "no quasi-identifiers to check: the release's declared policy is not recorded (a "
                               "release made before anon_sql kept it); release it again"}
        # the release's '*' cells as NULL (the verifier's "suppressed"), every QI compared as text
        cells = exp.select(*[exp.alias_(exp.func("NULLIF", exp.cast(col(q), "VARCHAR"), lit(WILDCARD)), ident(q))
                             for q in quasi]).from_(release.copy())
        failing = kanonymity_with_wildcards_sql(cells.subquery("__released"), quasi, self.k)
        q = exp.select(exp.func("COUNT", exp.Star()), exp.func("COALESCE", exp.func("SUM", col("records")), lit(0)),
                       exp.func("MIN", col("matching"))).from_(failing.subquery("__failing"))
        combos, records, worst = con.execute(render(q)).fetchall()[0]
        if worst is None:   # nothing fails: the smallest matching count over every record, for the report
            every = kanonymity_with_wildcards_sql(cells.subquery("__released"), quasi, 2**62)
            worst = con.execute(render(exp.select(exp.func("MIN", col("matching")))
                                       .from_(every.subquery("__all")))).fetchall()[0][0]
        return {"check": self.name, "classes": None, "failing_classes": int(combos), "failing_records": int(records),
                "worst_value": float(worst) if worst is not None else None, "passed": int(combos) == 0}

    def table_requirement(self) -> str | None:
        return f"matching records >= {self.k} (* matches any value)"

    def describe(self) -> str:
        return f"k-anonymity with wildcards (k = {self.k}; a suppressed cell matches any value)"
