"""The source aggregated once: distinct (quasi-identifier, sensitive) combinations with their record counts.

Level plans generalize these counts, never the rows, and taxonomy coverage reads per-column counts from them, so a
DuckDB level release scans the source once for planning and once to write the released rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from sqlglot import exp

from .sqlbuild import alias, col, dtype, ident, lit, record_count, render

if TYPE_CHECKING:
    import pandas as pd

WEIGHT = "__w"
SUFFIX = "__base"


def keys(policy: Any) -> list[str]:
    """Grouping columns: the quasi-identifiers, then the sensitive attributes that are not also quasi."""
    return [*policy.quasi, *[s for s in policy.sensitive if s not in policy.quasi]]


def query(policy: Any, relation: exp.Expression) -> exp.Select:
    """``SELECT keys, SUM(weight) AS __w FROM relation GROUP BY keys``."""
    cols = [col(c) for c in keys(policy)]
    total = record_count(policy.count_column)
    return (exp.select(*cols, alias(total, WEIGHT))
            .from_(relation.copy()).group_by(*[c.copy() for c in cols]))


def temp_table(release_name: str) -> exp.Table:
    """The session-temporary table that holds a release's base counts (``temp.main."<release>__base"``)."""
    return exp.Table(this=ident(release_name + SUFFIX), db=ident("main"), catalog=ident("temp"))


def create(policy: Any, relation: exp.Expression, table: exp.Table) -> exp.Create:
    """``CREATE OR REPLACE TEMP TABLE table AS <query>`` (DuckDB)."""
    return exp.Create(this=table.copy(), kind="TABLE", replace=True, expression=query(policy, relation),
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def drop(table: exp.Table) -> exp.Drop:
    """``DROP TABLE IF EXISTS table``."""
    return exp.Drop(tables=[table.copy()], kind="TABLE", exists=True)


_VALUE_COUNTS_SQL: dict[tuple[str, tuple[str, ...]], str] = {}


def _all_value_counts_sql(table: exp.Table, columns: list[str]) -> str:
    """The UNION ALL of the per-column aggregates, rendered once per (table, columns): a warm release of the same
    policy reuses the text."""
    key = (render(table), tuple(columns))
    text = _VALUE_COUNTS_SQL.get(key)
    if text is None:
        n = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
        union: exp.Expression | None = None
        for i, column in enumerate(columns):
            v = exp.Cast(this=col(column), to=dtype("VARCHAR"))
            part = (exp.select(alias(lit(i), "c"), alias(v, "v"), alias(n.copy(), "n"))
                    .from_(table.copy()).group_by(v.copy()))
            union = part if union is None else exp.Union(this=union, expression=part, distinct=False)
        text = render(exp.select("*").from_(exp.Subquery(this=union, alias=exp.TableAlias(this=ident("u"))))
                      .order_by(col("c")))
        if len(_VALUE_COUNTS_SQL) >= 256:
            _VALUE_COUNTS_SQL.clear()
        _VALUE_COUNTS_SQL[key] = text
    return text


def all_value_counts(con: Any, table: exp.Table, columns: list[str]) -> dict[str, pd.DataFrame]:
    """:func:`value_counts` of several key columns in one query (a UNION ALL of the per-column aggregates)."""
    if not columns:
        return {}
    frame = con.execute(_all_value_counts_sql(table, columns)).df()
    # rows ordered by column index: each column's counts are one slice
    cuts = np.searchsorted(frame["c"].to_numpy(), np.arange(len(columns) + 1))
    frame = frame[["v", "n"]]
    return {column: frame.iloc[cuts[i]:cuts[i + 1]].reset_index(drop=True) for i, column in enumerate(columns)}


def value_counts(con: Any, table: exp.Table, column: str) -> pd.DataFrame:
    """Per-value record counts of one key column (as text, like the taxonomy leaves), read from the base table."""
    v = exp.Cast(this=col(column), to=dtype("VARCHAR"))
    n = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
    q = (exp.select(alias(v, "v"), alias(n, "n"))
         .from_(table.copy()).group_by(v.copy()))
    return con.execute(render(q)).df()
