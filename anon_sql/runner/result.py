"""The outcome of a release (:class:`Release`): the table's name, its policy, the SQL that made it, its plan,
classes, checks and metrics."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..policy.model import Policy
from ..common.wording import counted


@dataclass
class Release:
    """The outcome of a release: the table's name, the SQL that made it, its classes, checks and metrics."""

    name: str
    policy: Policy
    sql: list[str]
    plan: dict[str, Any]
    classes: pd.DataFrame
    checks: pd.DataFrame
    metrics: dict[str, float]
    records_in: int
    records_out: int
    suppressed: int
    noise: int = 0
    materialized: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    # the policy as the user declared it (resolved), before the method's release turned any QI insensitive
    # (runner/plan.py): what `check` derives the released policy from (None: the same as ``policy``)
    declared: Policy | None = None
    # what the catalog recorded for `check` (its row's policy, plan and digests, the table's columns), as written
    # inside the release's transaction: the check program is compiled from it without reading it back (issue 29.1)
    recorded: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def table(self) -> str:
        return self.name

    @property
    def passed(self) -> bool:
        return bool(self.checks["passed"].all()) if len(self.checks) else True

    def summary(self) -> str:
        lines = [
            f"release {self.name!r} ({self.policy.method}): {counted(self.records_in, 'record')} in, "
            f"{self.records_out} released, {self.suppressed} suppressed, {self.noise} noise, "
            f"{counted(len(self.classes), 'class')}",
            f"plan: {json.dumps(self.plan, default=str)}",
        ]
        people = self.info.get("people")
        if people:   # a privacy unit: the guarantee counts people (docs/units.md)
            lines.insert(1, f"people ({self.policy.privacy_unit}): {people['in']} in, {people['released']} "
                            f"released, {people['suppressed']} suppressed")
        for name, t in (self.info.get("related") or {}).items():   # related tables: rows of released people only
            lines.insert(2, f"related {name!r} → {t['table']!r}: {counted(t['rows_in'], 'row')} in, "
                            f"{t['released']} released, {t['suppressed']} of suppressed people")
        return "\n".join(lines)

    def report(self, format: str = "text") -> str:
        """A report of plan, checks and metrics: plain text, or ``"html"`` / ``"json"`` (anon_sql.report.build)."""
        if format != "text":
            from ..report.build import from_release, render_report

            return render_report(from_release(self), format)
        parts = [self.summary(), "", "checks:", self.checks.to_string(index=False), "", "metrics:"]
        parts += [f"  {k}: {v:.6g}" if isinstance(v, float) else f"  {k}: {v}" for k, v in self.metrics.items()]
        return "\n".join(parts)
