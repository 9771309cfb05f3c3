"""The one reading of a checks view (``<release>__checks``: per class ``<check>_ok``, ``<check>_value`` and the
class size): one summary row per check. The runner's verification and the tamper-evident ``check`` both use it.

The summary is one SQL aggregate over the view (one scan, however many classes; the engine does the row work), and
the handful of check rows are unpacked in plain Python — no numpy or pandas, so ``anon-sql check`` starts at once."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Collection, Iterable, Sequence

from ..common.columns import SIZE

if TYPE_CHECKING:       # sqlglot is imported where a summary is built: a cached check program only reads one
    from sqlglot import exp


def summary_columns(columns: Iterable[str]) -> list[str]:
    """The columns of a checks view that the summary reads (no QI values are needed)."""
    return [c for c in columns if c == SIZE or (c.endswith(("_ok", "_value")) and c != "__all_ok")]


def check_names(columns: Sequence[str]) -> list[str]:
    """The checks of a checks view, in column order: one per ``<check>_ok`` column."""
    return [c[: -len("_ok")] for c in columns if c.endswith("_ok") and c != "__all_ok"]


def summary_query(relation: exp.Expression, columns: Sequence[str], largest: Collection[str] = ()) -> exp.Select:
    """One row over the checks relation: ``classes``, then per check its failing classes, failing records and worst
    value (the largest for the checks named in ``largest`` — each model declares it, ``SQLCheck.worst``, collected
    by ``models.largest_is_worst`` — else the smallest; NULL and NaN values are unknown, not worst). A NULL flag
    fails (fail closed). Read it with :func:`summary_rows`."""
    from sqlglot import exp

    from ..common.sqlbuild import alias, col, dtype

    present = set(columns)
    items: list[exp.Expression] = [alias(exp.Count(this=exp.Star()), "classes")]
    for i, name in enumerate(check_names(columns)):
        failing = exp.Not(this=exp.NullSafeEQ(this=col(f"{name}_ok"), expression=exp.true()))   # NULL, NaN fail
        items.append(alias(exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=failing.copy())),
                           f"failing_classes_{i}"))
        records = (exp.Filter(this=exp.Sum(this=col(SIZE)), expression=exp.Where(this=failing.copy()))
                   if SIZE in present else exp.Literal.number(0))
        items.append(alias(exp.Coalesce(this=records, expressions=[exp.Literal.number(0)]), f"failing_records_{i}"))
        if f"{name}_value" in present:
            value = exp.Cast(this=col(f"{name}_value"), to=dtype("DOUBLE"))
            pick = exp.Max if name in largest else exp.Min
            known = exp.Where(this=exp.Not(this=exp.func("isnan", value.copy())))
            items.append(alias(exp.Filter(this=pick(this=value), expression=known), f"worst_{i}"))
    return exp.select(*items).from_(relation.copy())


def summary_rows(columns: Sequence[str], row: Sequence[Any]) -> list[dict[str, Any]]:
    """The one row of :func:`summary_query` as one dict per check: ``check``, ``classes``, ``failing_classes``,
    ``failing_records``, ``worst_value`` (None without values or classes; NaN when every value is unknown),
    ``passed``."""
    got = dict(zip(_summary_names(columns), row))
    classes = int(got["classes"])
    out = []
    for i, name in enumerate(check_names(columns)):
        worst = None
        if f"worst_{i}" in got and classes:
            worst = float("nan") if got[f"worst_{i}"] is None else float(got[f"worst_{i}"])
        failing = int(got[f"failing_classes_{i}"])
        out.append({"check": name, "classes": classes, "failing_classes": failing,
                    "failing_records": int(got[f"failing_records_{i}"]), "worst_value": worst,
                    "passed": failing == 0})
    return out


def summarize_checks(con: Any, relation: exp.Expression, columns: Sequence[str],
              largest: Collection[str] = ()) -> list[dict[str, Any]]:
    """One row per check of the checks relation ``relation`` with these (:func:`summary_columns`) columns."""
    from ..common.sqlbuild import render

    return summary_rows(columns, con.execute(render(summary_query(relation, columns, largest))).fetchall()[0])


def _summary_names(columns: Sequence[str]) -> list[str]:
    """The output columns of :func:`summary_query`, in order."""
    names = ["classes"]
    for i, name in enumerate(check_names(columns)):
        names += [f"failing_classes_{i}", f"failing_records_{i}"]
        if f"{name}_value" in columns:
            names.append(f"worst_{i}")
    return names


__all__ = ["check_names", "summarize_checks", "summary_columns", "summary_query", "summary_rows"]
