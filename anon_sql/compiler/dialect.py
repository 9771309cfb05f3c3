"""What the compiled SQL may use, as data: one :class:`Target` per (dialect, engine), read by the view builders
instead of asking which dialect or engine they serve (after ibis's compilers: capability flags on one class).

A dialect's flags say what its SQL can express; the engine flags say what the engine that runs the SQL keeps
between statements. DuckDB SQL run by DuckDB uses all of it. How a dialect spells what the trees hold (the kernels'
calls, ordered list aggregates) is data on its sqlglot dialect class (anon_sql.common.sqlbuild), so no engine
rewrites a compiled tree.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Target:
    """Capabilities of the SQL a release compiles to."""

    dialect: str
    # -- the dialect's SQL
    list_aggregates: bool = False     # ordered array_agg per class: the count / value lists the models' macros read
    values_relation: bool = True      # an inline ``VALUES (...) AS t(a, b)`` relation (else a UNION ALL of SELECTs)
    replace_view: bool = True         # CREATE OR REPLACE VIEW
    # -- the engine that runs it
    session_tables: bool = False      # session temp tables the script makes and drops (base counts, row and tuple maps)
    enum_types: bool = False          # generalized columns released as ENUMs, their VALUES lists rendered once
    materialized_ctes: bool = False   # WITH x AS MATERIALIZED: the one aggregation over the rows computed once
    hash_order: bool = False          # ``hash(values, seed)`` orders the released rows within a class
    work_schema: bool = False         # working objects in the product's own schema
    cached: bool = False              # a level plan's statements are compiled once per plan shape

    @property
    def native(self) -> bool:
        """Everything DuckDB offers: its SQL, run by DuckDB."""
        return self.session_tables


# what each dialect's SQL can express (a dialect not listed: the portable subset)
DIALECTS = {
    "duckdb": Target("duckdb", list_aggregates=True),
    "spark": Target("spark", list_aggregates=True),     # ordered lists as sort_array(collect_list(x)) (common.sqlbuild)
    "sqlite": Target("sqlite", values_relation=False, replace_view=False),
}
# engine → the dialect it runs natively and what it adds to that dialect's SQL (other engines add nothing)
ENGINES = {
    "duckdb": ("duckdb", dict(session_tables=True, enum_types=True, materialized_ctes=True, hash_order=True,
                              work_schema=True, cached=True)),
}


def dialect_target(dialect: str) -> Target:
    """The SQL capabilities of ``dialect`` alone."""
    return DIALECTS.get(dialect, Target(dialect))


def target(dialect: str, engine: str) -> Target:
    """The capabilities of ``dialect`` SQL run by ``engine`` (the engine's own objects only when it runs its own
    dialect)."""
    native, adds = ENGINES.get(engine, (None, {}))
    base = dialect_target(dialect)
    return replace(base, **adds) if native == dialect else base
