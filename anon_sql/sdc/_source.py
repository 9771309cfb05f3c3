"""Reading a source for the risk measures: check the named columns exist and fetch them in one scan."""
from __future__ import annotations

from typing import Sequence

import duckdb
import pandas as pd
from sqlglot import exp

from anon_sql.errors import PolicyError, SourceError

from .sqlparts import col, render, table_or_subquery, table_label


def columns_of(con: duckdb.DuckDBPyConnection, source: str | exp.Table) -> dict[str, str]:
    """Column name → DuckDB type of a table or view (a SourceError naming it when it cannot be read)."""
    try:
        rel = con.execute(render(exp.select(exp.Star()).from_(table_or_subquery(source)).limit(0)))
    except duckdb.CatalogException:
        raise SourceError(f"no table or view {table_label(source)} in this database") from None
    return {d[0]: str(d[1]) for d in rel.description}


def check_columns(con, source, named: dict[str, Sequence[str]]) -> dict[str, str]:
    """Refuse unknown or repeated column names, naming them, the argument and the columns there are."""
    have = columns_of(con, source)
    for what, names in named.items():
        missing = [c for c in names if c not in have]
        if missing:
            raise PolicyError(f"{what}: no column {', '.join(map(repr, missing))} in {table_label(source)}; "
                              f"its columns are {', '.join(map(repr, have))}")
        if len(set(names)) != len(names):
            raise PolicyError(f"{what}: a column is named twice in {list(names)!r}")
    return have


def fetch(con, source, names: Sequence[str]) -> pd.DataFrame:
    """The named columns of every row, in one scan (SourceError for an empty source)."""
    frame = con.execute(render(exp.select(*[col(c) for c in names]).from_(table_or_subquery(source)))).df()
    if frame.empty:
        raise SourceError(f"{table_label(source)} has no rows: nothing to measure")
    return frame
