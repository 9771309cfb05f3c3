"""Reserved column names of a release and the numeric-type test, shared by the compiler, the runner, the methods,
the metrics and the catalog (a leaf module: it imports nothing, so any layer can use it)."""
from __future__ import annotations

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "UHUGEINT", "INT")
NUMERIC_TYPES = INTEGER_TYPES + ("FLOAT", "DOUBLE", "REAL", "DECIMAL", "NUMERIC")


def is_numeric(type_name: str) -> bool:
    """Whether an engine column type (DuckDB's or Spark's name, e.g. ``DECIMAL(10,2)``, ``bigint``) is a number:
    integer, floating point or decimal. Lists (``INTEGER[]``), intervals, BOOLEAN and text are not."""
    return str(type_name).upper().split("(")[0].strip() in NUMERIC_TYPES


def is_integer(type_name: str) -> bool:
    """Whether an engine column type is an integer type (its sums are exact, whatever the order of the rows)."""
    return str(type_name).upper().split("(")[0].strip() in INTEGER_TYPES

EC_ID = "ec_id"     # the equivalence class of a released row
SIZE = "__size"     # a class's record count in the classes / checks views
UNIT = "__unit"     # the privacy unit's value carried through the working views (never in a committed release)
