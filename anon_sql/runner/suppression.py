"""Suppression to a fixed point, and the budget a refusal advises.

The compiled release keeps the classes that pass every check *before* suppression (``__keep``). Some checks are
whole-table quantities that suppression itself changes: a ``[[privacy.requirements]]`` group can drop below its k
once a failing class inside it is gone, and t-closeness compares each class with the released table's distribution,
which moves when classes leave. So after materializing, :func:`settle` deletes from the release every class that
fails a check over the release *as it now stands*, and repeats until none fails (the kept set only shrinks, so it
ends). The runner settles only a release whose checks failed: one that passes has no class to delete. The advised budget (:func:`advised_budget`) is the suppression this fixed point needed, rounded up — the
budget at which the same plan meets every requirement.
"""
from __future__ import annotations

import math

from sqlglot import exp

from ..compiler.views import EC_ID, ReleaseNames
from ..common.sqlbuild import col

ALL_OK = "__all_ok"


def settle(engine, names: ReleaseNames, table: exp.Table | None = None, max_rounds: int = 1000,
           written: bool = False, people: exp.Table | None = None) -> int:
    """Delete the classes of the materialized release that fail a check over the release, until none fails
    (through ``engine.delete_classes``: a DELETE on DuckDB, the view's remaining rows re-registered on Spark) from
    ``table``, where the released rows are kept (default the released table); ``written``: the released table was
    written from ``table`` (rows with their counts, which the checks read), so its rows of those classes go first.
    ``people``: the session table the checks count people in (the table then holds no unit): its rows of those
    classes go last, since the failing classes are read from it. Returns the number of rounds that deleted
    something (0: the release already passed)."""
    failing = (exp.select(col(EC_ID)).distinct().from_(names.checks.copy())
               .where(exp.Not(this=exp.Coalesce(this=col(ALL_OK), expressions=[exp.false()]))))
    for rounds in range(max_rounds):
        if written and table is not None:
            engine.delete_classes(names.table, failing)
        deleted = engine.delete_classes(table if table is not None else names.table, failing)
        if people is not None:
            deleted = engine.delete_classes(people, failing)
        if not deleted:
            return rounds
    return max_rounds


def advised_budget(need: float, records: int) -> float | None:
    """The smallest ``max_suppression`` with 4 decimals that allows suppressing ``need`` of ``records`` records
    (rounded up, never down); None when nothing, or everything, would have to go."""
    if records <= 0 or need <= 0 or need >= records:
        return None
    return math.ceil(need / records * 1e4 - 1e-9) / 1e4


__all__ = ["settle", "advised_budget"]
