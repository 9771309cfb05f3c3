"""The one reading of a checks view (``<release>__checks``: per class ``<check>_ok``, ``<check>_value`` and the
class size): one summary row per check. The runner's verification and the tamper-evident ``check`` both use it, and
it needs numpy only, so ``anon-sql check`` starts without pandas."""
from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping

import numpy as np

from .columns import SIZE


def summary_columns(columns: Iterable[str]) -> list[str]:
    """The columns of a checks view that :func:`summarize` reads (fetch only these: no QI values are needed)."""
    return [c for c in columns if c == SIZE or (c.endswith(("_ok", "_value")) and c != "__all_ok")]


def summarize(columns: Mapping[str, Any], largest: Collection[str] = ()) -> list[dict[str, Any]]:
    """One row per ``<check>_ok`` column (arrays, one entry per class): classes, failing classes and records, the
    worst value and passed. A NULL flag fails. The worst value is the largest for the checks named in ``largest``
    (each model declares it: ``SQLCheck.worst``, collected by ``models.largest_is_worst``), else the smallest."""
    size = _floats(columns[SIZE]) if SIZE in columns else np.zeros(0)
    rows = []
    for name in [c[: -len("_ok")] for c in columns if c.endswith("_ok") and c != "__all_ok"]:
        ok = _flags(columns[f"{name}_ok"])
        values = _floats(columns[f"{name}_value"]) if f"{name}_value" in columns else None
        worst = None
        if values is not None and len(values):
            known = values[~np.isnan(values)]
            worst = float("nan") if not len(known) else float(
                known.max() if name in largest else known.min())
        failing = ~ok
        rows.append({"check": name, "classes": int(len(ok)), "failing_classes": int(failing.sum()),
                     "failing_records": int(size[failing].sum()) if failing.any() else 0, "worst_value": worst,
                     "passed": not failing.any()})
    return rows


def _flags(column: Any) -> np.ndarray:
    """Pass flags as booleans; NULL / None / NaN count as failed (fail closed)."""
    filled = column.filled(False) if _masked(column) else np.asarray(column)
    return np.asarray(filled == True, dtype=bool)  # noqa: E712 — elementwise: None and NaN are not True


def _masked(column: Any) -> bool:
    """A numpy masked array (DuckDB's ``fetchnumpy`` gives one for a column with NULLs), told without importing
    ``numpy.ma``."""
    return hasattr(column, "mask") and hasattr(column, "filled")


def _floats(column: Any) -> np.ndarray:
    """Numbers as float64, NULL as NaN."""
    if _masked(column):
        return column.astype(float).filled(np.nan)
    array = np.asarray(column)
    if array.dtype == object:
        array = np.where(array == None, np.nan, array)  # noqa: E711 — elementwise
    return array.astype(float)


__all__ = ["summarize", "summary_columns"]
