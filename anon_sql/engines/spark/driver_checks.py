"""The checks of a counted-rows release computed on the Spark driver (issue 29.4): the ``__checks`` view reads one
row per kept combination (``<release>__rows``, tens of thousands of rows at 10M records), yet Spark runs each
shuffle of its per-class chain (group, window, join to the global distribution, group) as a job of its own — 25 of
a fresh session's 50 jobs. The rows are fetched once (one job) into an in-memory DuckDB and the same view, rendered
for DuckDB, is evaluated there: the same SQL over the same rows, so the same checks."""
from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from ...common.sqlbuild import KernelCall, ident, render
from ...compiler.views import CompiledRelease

CHECKS_STATEMENT = "checks view"   # the description compiler.views gives the checks view's statement


def checks_on_driver(spark: Any, compiled: CompiledRelease) -> pd.DataFrame | None:
    """The rows of ``compiled``'s checks view, computed on the driver from the counted rows; None when the release
    keeps no counted rows or its checks read anything else of the session (a population table, the source): then
    Spark evaluates the view."""
    rows = compiled.counted_rows
    if rows is None:
        return None
    view = next((stmt for what, stmt in compiled.statements if what == CHECKS_STATEMENT), None)
    if view is None:
        return None
    query = view.expression
    local = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    read = {t.name for t in query.find_all(exp.Table) if t.name not in local}
    if read != {rows.name}:
        return None
    arrow = spark.table("`" + rows.name.replace("`", "``") + "`").toArrow()
    duck = duckdb.connect()
    try:
        if query.find(KernelCall) is not None:   # the kernels' SQL macros (anon.*) the view calls
            from ...catalog import store as catalog

            catalog.install(duck)
        duck.register("__anon_counted_rows", arrow)
        duck.execute(render(exp.Create(this=exp.Table(this=ident(rows.name)), kind="TABLE",
                                       expression=exp.select("*").from_("__anon_counted_rows"))))
        duck.unregister("__anon_counted_rows")
        return duck.execute(render(query, "duckdb")).df()
    finally:
        duck.close()


__all__ = ["CHECKS_STATEMENT", "checks_on_driver"]
