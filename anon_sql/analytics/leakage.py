"""Entropy-based information leakage of attributes and attribute sets (seed 000, spec/01 §1), computed in SQL."""
from __future__ import annotations

import itertools
from typing import Sequence

import duckdb
import pandas as pd
from sqlglot import exp

from ..common.columns import is_numeric
from ..errors import PolicyError, SourceError
from ..data.source import accepts_sources
from ..common.sqlbuild import alias, col, lit, render, table as table_ref

def column_types(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Column name → DuckDB type of a table or view; SourceError listing the known tables when it does not exist."""
    if not isinstance(table, (str, exp.Table)) or not table:
        raise SourceError(f"table must be the name of a DuckDB table or view, got {table!r}")
    probe = exp.select(exp.Star()).from_(table_ref(table)).limit(0)
    try:
        cursor = con.execute(render(probe))
        description = cursor.description
        cursor.fetchall()
    except duckdb.CatalogException:
        # the user's tables and views, not the catalog's or the working schema's
        names = (exp.select(col("table_name")).from_(table_ref("tables", schema="information_schema"))
                 .where(exp.Not(this=exp.In(this=col("table_schema"), expressions=[lit("anon"), lit("anon_work")])))
                 .order_by(col("table_name")))
        known = [r[0] for r in con.execute(render(names)).fetchall()]
        raise SourceError(f"unknown table {table!r}; tables and views in this database: "
                          f"{', '.join(known) or '(none)'}") from None
    return {d[0]: str(d[1]) for d in description}


def resolve_columns(columns: dict[str, str], names: Sequence[str], table: str, role: str) -> list[str]:
    """Map requested names to the table's columns (case-insensitive, like DuckDB); PolicyError lists the columns."""
    if isinstance(names, str):
        names = [names]
    by_lower = {c.lower(): c for c in columns}
    resolved, unknown = [], []
    for name in names:
        match = name if name in columns else by_lower.get(str(name).lower())
        (unknown if match is None else resolved).append(name if match is None else match)
    if unknown:
        raise PolicyError(f"unknown {role} column(s) {', '.join(map(repr, unknown))} in {table!r}; "
                          f"available columns: {', '.join(columns)}")
    dupes = sorted({c for c in resolved if resolved.count(c) > 1})
    if dupes:
        raise PolicyError(f"{role} column(s) {', '.join(map(repr, dupes))} listed more than once; list each once")
    return resolved


def _count_if(condition: exp.Expression) -> exp.Expression:
    """``SUM(CASE WHEN condition THEN 1 ELSE 0 END)``."""
    return exp.Sum(this=exp.If(this=condition, true=lit(1), false=lit(0)))


def _record_weight(con: duckdb.DuckDBPyConnection, table: str, count_column: str | None,
                   columns: dict[str, str]) -> exp.Expression:
    """The per-row record weight (1, or the count column after checking it is numeric, non-null, non-negative)."""
    if count_column is None:
        weight: exp.Expression = lit(1)
    else:
        (count_column,) = resolve_columns(columns, [count_column], table, "count")
        if not is_numeric(columns[count_column]):
            raise PolicyError(f"count column {count_column!r} has type {columns[count_column]}; "
                              "it must be numeric (records per row)")
        weight = col(count_column)
    checks = exp.select(
        alias(exp.Count(this=exp.Star()), "rows"),
        alias(exp.Sum(this=weight.copy()), "records"),
        alias(_count_if(exp.Is(this=weight.copy(), expression=exp.null())), "nulls"),
        alias(_count_if(exp.LT(this=weight.copy(), expression=lit(0))), "negatives"),
    ).from_(table_ref(table))
    rows, records, nulls, negatives = con.execute(render(checks)).fetchall()[0]
    if not rows or not records:
        raise SourceError(f"table {table!r} holds no records; leakage needs at least one")
    if nulls:
        raise SourceError(f"count column {count_column!r} is NULL in {nulls} row(s); fill it (e.g. with 1) first")
    if negatives:
        raise SourceError(f"count column {count_column!r} is negative in {negatives} row(s); counts must be >= 0")
    return weight


def _leakage_query(table: str, sets: list[tuple[str, ...]], weight: exp.Expression) -> exp.Expression:
    """One GROUP BY per attribute set (UNION ALL), then ΔS and ΔS/log2 n per set; NULL groups like any value."""
    branches = [
        exp.select(alias(lit(i), "set_id"), alias(exp.Sum(this=weight.copy()), "size"))
        .from_(table_ref(table)).group_by(*[col(c) for c in cols])
        for i, cols in enumerate(sets)
    ]
    groups = branches[0] if len(branches) == 1 else exp.union(*branches, distinct=False)
    size = col("size")
    stats = (
        exp.select(
            col("set_id"),
            alias(exp.Count(this=exp.Star()), "partitions"),
            alias(exp.Sum(this=size.copy()), "n"),
            alias(exp.Sum(this=exp.Mul(this=size.copy(), expression=exp.Ln(this=size.copy()))), "size_ln_size"),
        )
        .from_(groups.subquery("g"))
        .where(exp.GT(this=size.copy(), expression=lit(0)))
        .group_by(col("set_id"))
    )
    # ΔS = log2 n − Σ_j (|E_j|/n) log2 |E_j|, computed in nats, then converted to bits and normalized by log2 n.
    ln_n = exp.Ln(this=col("n"))
    mean_ln_size = exp.Div(this=col("size_ln_size"), expression=col("n"))
    delta_nats = exp.Paren(this=exp.Sub(this=ln_n.copy(), expression=mean_ln_size))
    return (
        exp.select(
            col("set_id"),
            col("partitions"),
            alias(exp.Div(this=delta_nats.copy(), expression=exp.Ln(this=lit(2))), "avg_info_loss"),
            alias(exp.Div(this=delta_nats.copy(), expression=exp.Nullif(this=ln_n.copy(), expression=lit(0))),
                  "normalized"),
        )
        .from_(stats.subquery("s"))
        .order_by(col("set_id"))
    )


@accepts_sources
def leakage(con: duckdb.DuckDBPyConnection, table: str, attributes: Sequence[str], count_column: str | None = None,
            combinations: int = 1) -> pd.DataFrame:
    """Partitions, average information loss ΔS (bits) and normalized ΔS/log2 n per attribute (or per set of
    ``combinations`` attributes, as tuples), computed in SQL and sorted by normalized leakage, highest first."""
    columns = column_types(con, table)
    if isinstance(attributes, str):
        attributes = [attributes]
    if not attributes:
        raise PolicyError(f"no attributes given; choose some of the columns of {table!r}: {', '.join(columns)}")
    resolved = resolve_columns(columns, attributes, table, "attribute")
    if count_column is not None and count_column.lower() in {c.lower() for c in resolved}:
        raise PolicyError(f"count column {count_column!r} is also listed as an attribute; remove it from attributes")
    if not isinstance(combinations, int) or isinstance(combinations, bool) or not 1 <= combinations <= len(resolved):
        raise PolicyError(f"combinations={combinations!r} must be an integer between 1 and the number of "
                          f"attributes ({len(resolved)})")
    weight = _record_weight(con, table, count_column, columns)
    sets = list(itertools.combinations(resolved, combinations))
    labels = list(itertools.combinations(attributes, combinations))
    rows = con.execute(render(_leakage_query(table, sets, weight))).fetchall()
    out = pd.DataFrame(
        {
            "attribute": [labels[r[0]][0] if combinations == 1 else tuple(labels[r[0]]) for r in rows],
            "partitions": [int(r[1]) for r in rows],
            # clamp rounding noise (ΔS is >= 0 by construction); normalized is NaN when n = 1 (log2 n = 0)
            "avg_info_loss": [max(0.0, float(r[2])) for r in rows],
            "normalized": [float("nan") if r[3] is None else max(0.0, float(r[3])) for r in rows],
        }
    )
    return out.sort_values("normalized", ascending=False, kind="stable", na_position="last").reset_index(drop=True)


def compare_leakage(con: duckdb.DuckDBPyConnection, before_table: str, after_table: str, attributes: Sequence[str],
                    count_column: str | None = None) -> pd.DataFrame:
    """Pre/post-anonymization leakage per attribute side by side (seed 000's Table 8), in the order of ``before``."""
    before = leakage(con, before_table, attributes, count_column)
    after = leakage(con, after_table, attributes, count_column)
    merged = before.merge(after, on="attribute", how="left", suffixes=("_before", "_after"))
    return merged[["attribute", "partitions_before", "avg_info_loss_before", "normalized_before",
                   "partitions_after", "avg_info_loss_after", "normalized_after"]]
