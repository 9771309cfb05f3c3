"""The names of a release's working objects: one function, :func:`working`, names every object the product keeps
beside a released table, so the compiler that makes them and the ownership rules that may drop them agree."""
from __future__ import annotations

from sqlglot import exp

from ..common.sqlbuild import ident

WORK_SCHEMA = "anon_work"        # the schema of a release's working objects (DuckDB), out of the analysts' way
# working objects kept after a release: the __source view (metrics compare with it), the plan's tables (the
# record of how the release was made: check reads the assignment) and the perturbed source (statistical disclosure
# control: what __source reads when the policy perturbs or table-masks a column); the other views are dropped
KEPT_WORKING = ("source", "assignment", "ec_values", "noise", "risk", "perturbed")
WORKING = ("source", "general", "classes", "checks", "assignment", "ec_values", "noise", "risk", "perturbed")
COUNTED_ROWS = "rows"   # a release kept as counted rows (ReleaseNames.rows): not one of WORKING, DuckDB never makes it


def working(release: str, part: str, schema: str | None = WORK_SCHEMA) -> exp.Table:
    """The one name of a release's working object ``part`` (``"source"``, ``"assignment"``, … see
    :data:`WORKING`): ``anon_work."<release>__<part>"`` (unqualified when ``schema`` is None: Spark's temporary
    views, scripts compiled for another dialect)."""
    if part not in WORKING:
        raise ValueError(f"unknown working object {part!r}; one of {', '.join(WORKING)}")
    return exp.Table(this=ident(f"{release}__{part}"), db=ident(schema) if schema else None)
