"""Verify: the privacy checks as SQL over the materialized release, reconciliation of the record counts, and the
failure message. Independent of the method; the built-in metrics come from :mod:`anon_sql.metrics.sizes`."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

import pandas as pd
from sqlglot import exp

from ..compiler import checks_summary
from . import suppression
from ..common.columns import UNIT
from ..compiler.views import EC_ID, SIZE, WEIGHT, CompiledRelease, ReleaseNames
from ..methods import AssignmentPlan, Plan
from ..metrics import sizes
from ..models import PrivacyModel, largest_is_worst
from ..policy.model import Policy
from ..common.sqlbuild import col, ident, record_count, render
from ..common.wording import counted


@dataclass
class Verification:
    """What the checks found: one row per check, the released classes, the failed checks, the record counts."""

    checks: pd.DataFrame          # check, classes, failing_classes, failing_records, worst_value, passed
    classes: pd.DataFrame         # one row per released class: ec_id, size, released QI values, per-model values
    failures: list[dict[str, Any]]
    records_out: int              # released records (noise included)
    suppressed: int
    noise: int
    metrics: dict[str, float]
    units: dict[str, int] | None = None   # with a privacy unit: people in, released, suppressed (docs/units.md)


def verify_release(con: Any, policy: Policy, compiled: CompiledRelease, records: int, plan: Plan,
           models: Sequence[PrivacyModel] = (), create: Callable[[exp.Create], None] | None = None,
           units: int | None = None,
           fetch_checks: Callable[[CompiledRelease], pd.DataFrame | None] | None = None) -> Verification:
    """Run the checks view over the materialized release, each model's whole-table check, and reconcile the record
    counts (``con``: DuckDB, or anything with the same ``execute(sql).df() / .fetchall()``; ``create``: the engine's
    way to keep a table a check writes — slicing's per-row risks; ``units``: the source's people when the policy
    has a privacy unit — suppression is then counted and budgeted in people, and reported in people and rows;
    ``fetch_checks``: the engine's own way to compute the checks view's rows, when it has one — Spark evaluates the
    same view over the fetched counted rows on the driver —, else None and the view is read)."""
    names = compiled.names
    checks = fetch_checks(compiled) if fetch_checks is not None else None
    if checks is None:
        checks = con.execute(render(exp.select("*").from_(names.checks.copy()))).df()
    # sorted here, not in SQL: one row per class (ec_id is unique), and on Spark an ORDER BY is two more jobs
    checks = checks.sort_values(EC_ID, kind="stable", ignore_index=True)
    weight = record_count(policy.count_column)
    released = int(con.execute(render(exp.select(weight).from_(names.table.copy()))).fetchall()[0][0] or 0)
    noise = 0
    if isinstance(plan, AssignmentPlan) and plan.noise is not None and len(plan.noise):
        released_noise = plan.noise[plan.noise[EC_ID].isin(checks[EC_ID])]   # noise of suppressed classes is gone
        noise = (int(len(released_noise)) if policy.count_column not in released_noise
                 else int(released_noise[policy.count_column].sum()))
    suppressed = records - (released - noise)
    people = released_people(con, names, units, compiled.people)
    summary = check_summary(checks, largest_is_worst(models))
    layout = plan.table_check if isinstance(plan, AssignmentPlan) else None
    # whole-table requirements (slicing's l-diversity): SQL over the release, per model
    for model in (m for m in models if m.whole_table):
        row = model.table_check(con, names.table, names.source, names.risk, layout, policy.count_column,
                                names.assignment, create=create)
        if row is not None:
            summary.append(row)
    failures = [row for row in summary if not row["passed"]]
    # the budget is a share of the records, or of the people with a privacy unit
    base, gone = (records, suppressed) if people is None else (people["in"], people["suppressed"])
    budget = policy.privacy.max_suppression * base
    if gone > budget + 1e-9:
        failures.append({"check": "max_suppression", "failing_records": gone,
                         **({"people": True} if people is not None else {})})
    # people counted outside the table (compiled.people): each class's rows in the table are those counted there
    apart, apart_rows = class_rows_apart(con, names, compiled.people) if compiled.people is not None else (0, 0)
    if apart:
        failures.append({"check": "reconciliation", "failing_classes": apart, "failing_records": apart_rows})
    summary.append({"check": "reconciliation", "classes": len(checks), "failing_classes": apart,
                    "failing_records": apart_rows, "worst_value": float(records - released + noise - suppressed),
                    "passed": records == released - noise + suppressed and not apart})
    summary.append({"check": "max_suppression", "classes": len(checks), "failing_classes": 0,
                    "failing_records": max(0, int(gone - budget)), "worst_value": float(gone),
                    "passed": gone <= budget + 1e-9})
    class_sizes = checks[SIZE].to_numpy() if len(checks) else []
    if people is None:
        metrics = sizes.builtin(class_sizes, records, released, suppressed, policy.privacy.k or 1)
    else:   # class sizes are people: every size-based metric counts people
        metrics = sizes.builtin(class_sizes, people["in"], people["released"], people["suppressed"],
                                policy.privacy.k or 1)
    classes = checks.drop(columns=[c for c in checks.columns if c.startswith(("__counts__", "__values__"))])
    return Verification(pd.DataFrame(summary), classes, failures, released, suppressed, noise, metrics, people)


def released_people(con: Any, names: ReleaseNames, units: int | None, people: exp.Table | None = None
                    ) -> dict[str, int] | None:
    """People in, released and suppressed (None without a privacy unit): the released table's distinct units,
    read before its unit column is dropped, or those of ``people``, where the checks count them (then the table
    never holds the unit, and :func:`class_rows_apart` ties its rows to that table)."""
    if units is None:
        return None
    q = exp.select(exp.Count(this=exp.Distinct(expressions=[col(UNIT)]))).from_(
        (people if people is not None else names.table).copy())
    out = int(con.execute(render(q)).fetchall()[0][0] or 0)
    return {"in": int(units), "released": out, "suppressed": int(units) - out}


def class_rows_apart(con: Any, names: ReleaseNames, people: exp.Table) -> tuple[int, int]:
    """The classes whose rows in the released table differ from the rows of their people in ``people`` (the base
    counts the checks read), and the rows by which they differ: (0, 0) when the table holds exactly the rows of
    the people counted, class by class (one GROUP BY ``ec_id`` over the table)."""
    table = (exp.select(col(EC_ID), exp.alias_(exp.Count(this=exp.Star()), "__n", quoted=True))
             .from_(names.table.copy()).group_by(col(EC_ID)))
    counted = (exp.select(col(EC_ID), exp.alias_(exp.Sum(this=col(WEIGHT)), "__n", quoted=True))
               .from_(people.copy()).group_by(col(EC_ID)))
    diff = exp.Abs(this=exp.Sub(this=exp.Coalesce(this=col("__n", "t"), expressions=[exp.Literal.number(0)]),
                                expression=exp.Coalesce(this=col("__n", "p"), expressions=[exp.Literal.number(0)])))
    q = (exp.select(exp.Count(this=exp.Star()), exp.Sum(this=col("__d")))
         .from_(exp.select(exp.alias_(diff, "__d", quoted=True))
                .from_(exp.Subquery(this=table, alias=exp.TableAlias(this=ident("t"))))
                .join(exp.Subquery(this=counted, alias=exp.TableAlias(this=ident("p"))),
                      on=exp.EQ(this=col(EC_ID, "t"), expression=col(EC_ID, "p")), join_type="full")
                .subquery("x"))
         .where(exp.GT(this=col("__d"), expression=exp.Literal.number(0))))
    apart, rows = con.execute(render(q)).fetchall()[0]
    return int(apart or 0), int(rows or 0)


def check_summary(checks: pd.DataFrame, largest: Collection[str] = ()) -> list[dict[str, Any]]:
    """One row per check column of a checks frame already fetched (any engine): the SQL summary of
    :mod:`anon_sql.compiler.checks_summary` run on a private in-memory DuckDB over the frame (``largest``: the checks whose worst
    value is the largest)."""
    wanted = checks_summary.summary_columns(checks.columns)
    local = _scratch()
    local.register("__checks", checks[wanted])
    try:
        return checks_summary.summarize_checks(local, exp.Table(this=ident("__checks")), wanted, largest)
    finally:
        local.unregister("__checks")


_LOCAL = threading.local()


def _scratch() -> Any:
    """This thread's private in-memory DuckDB connection for :func:`check_summary`, opened once: opening one costs
    tens of milliseconds, as much as the rest of a small release's verification (issue 17.1)."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        import duckdb

        con = _LOCAL.con = duckdb.connect()
    return con


def failing_classes_records(con: Any, names: ReleaseNames) -> int:
    """Records in the classes that fail before any suppression (``__classes``): a lower bound of what suppression
    needs (for an engine that cannot settle suppression to a fixed point, e.g. Spark)."""
    pre = con.execute(render(exp.select(col(SIZE), col("__all_ok")).from_(names.classes.copy()))).df()
    return int(pre.loc[~pre["__all_ok"].astype(bool), SIZE].sum())


def failure_message(policy: Policy, plan: Plan, result: Verification, records: int, need: float | None,
                    at_least: bool = False, method: Any = None) -> str:
    """Say which requirement failed, for how many classes/records, and the budget that would satisfy it (the
    suppression the same plan needs to meet every requirement, rounded up), or that no budget would.
    ``at_least``: ``need`` is only a lower bound (no fixed point was computed): say so, advise nothing.
    ``method``: the planning method (says when it formed its classes without the population models)."""
    parts = []
    # with a privacy unit the class sizes, and so the failing counts and the budget, are people (docs/units.md)
    noun, nouns = ("person", "people") if policy.privacy_unit else ("record", "records")
    for f in result.failures:
        if f["check"] == "max_suppression":
            what = counted(f['failing_records'], noun, nouns)
            parts.append(f"suppression of {what} exceeds max_suppression = {policy.privacy.max_suppression}")
        elif f["check"] == "slicing_l_diversity":
            parts.append(f"slicing l-diversity fails: max p(t, s) = {f['worst_value']:.4g} for "
                         f"{counted(f['failing_records'], noun, nouns)}")
        else:
            parts.append(f"{f['check']} fails for {counted(f['failing_classes'], 'class')} "
                         f"({counted(f['failing_records'], noun, nouns)})")
    population = [k for k in ("k_map", "delta_presence") if getattr(policy.privacy, k, None) is not None]
    if (population and method is not None and method.plan_kind == "assignment"
            and not getattr(method, "plans_population", False)):
        are, them = ("is", "it") if len(population) == 1 else ("are", "them")
        parts.append(f"method {policy.method!r} forms its classes without the population, so "
                     f"{' and '.join(population)} {are} verified on its release only and the classes that fail {them} "
                     f"must be suppressed (max_suppression); methods mondrian, upa, fixed_interval and the level "
                     f"searches plan with {them}")
    unchanged = unchanged_quasi(policy, plan)
    if unchanged:
        parts.append(f"method {policy.method!r} released quasi-identifier(s) {unchanged} unchanged "
                     f"({plan.info.get('selection', 'not generalized')} selection), and every check groups by "
                     "every declared quasi-identifier: generalize them (e.g. method_params.quasi = \"policy\") or "
                     "declare them insensitive if they are not quasi-identifiers")
    budget = suppression.advised_budget(need, records) if need is not None else None
    if at_least and need:
        hint = (f"; at this plan at least {need:g} of {records} {nouns} fail before suppression "
                f"(max_suppression >= {need / records:.4g}; group rules and t-closeness may need more)")
    elif budget is not None:
        hint = (f"; meeting every requirement at this plan needs suppression of {need:g} of {records} {nouns}: "
                f"allow it with max_suppression = {budget:g} (or more), or generalize further / choose a search method")
    elif need is not None and need >= records:
        hint = (f"; at this plan every {noun} would have to be suppressed, so no max_suppression helps: generalize "
                "further or relax the requirements")
    elif need is None:
        hint = "; suppressing records cannot meet it at this plan: generalize further or relax the requirements"
    else:
        hint = ""
    return f"release {policy.name!r} not created: " + "; ".join(parts) + hint


def unchanged_quasi(policy: Policy, plan: Plan) -> list[str]:
    """Declared QIs an assignment plan released as they are (not in its class values; bucket plans excepted)."""
    if not isinstance(plan, AssignmentPlan) or plan.row_values:
        return []
    return [q for q in policy.quasi if q not in plan.class_values.columns]
