"""The checks of a counted-rows release computed on the Spark driver (issue 29.4): the ``__checks`` view reads one
row per kept combination (``<release>__rows``, tens of thousands of rows at 10M records), yet Spark runs each
shuffle of its per-class chain (group, window, join to the global distribution, group) as a job of its own — 25 of
a fresh session's 50 jobs. The same view, rendered for DuckDB, is evaluated in the release's driver DuckDB
(:mod:`.driver_tables`) over the counted rows — the copy made there when they were computed on the driver, else one
Arrow fetch of them: the same SQL over the same rows, so the same checks."""
from __future__ import annotations

import pandas as pd

from ...compiler.views import CompiledRelease
from .driver_tables import DriverTables, reads

CHECKS_STATEMENT = "checks view"   # the description compiler.views gives the checks view's statement


def checks_on_driver(compiled: CompiledRelease, driver: DriverTables) -> pd.DataFrame | None:
    """The rows of ``compiled``'s checks view, computed on the driver from the counted rows; None when the release
    keeps no counted rows, its checks read anything else of the session (a population table, the source) or the
    driver declines them (:meth:`DriverTables.compute`): then Spark evaluates the view."""
    rows = compiled.counted_rows
    if rows is None:
        return None
    view = next((stmt for what, stmt in compiled.statements if what == CHECKS_STATEMENT), None)
    if view is None:
        return None
    query = view.expression
    if reads(query) != {rows.name}:
        return None
    driver.offer(rows.name)
    return driver.compute_frame(query)


__all__ = ["CHECKS_STATEMENT", "checks_on_driver"]
