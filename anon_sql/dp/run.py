"""Answering DP statements: bound each unit's contribution in SQL, aggregate per group in SQL, then select groups,
add noise (OpenDP) and charge the table's budget in the same transaction that records the answer.

Entry points: `is_dp_statement(text)`, `run_dp_statement(con, text) -> DataFrame`, `dp_query(con, text)`.
"""
from __future__ import annotations

import json
import math
import secrets

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from anon_sql.catalog.macro_trust import refuse_untrusted_macros
from anon_sql.data.session import changed_settings, is_read_only, overloaded_builtins
from anon_sql.dp import ledger, mechanisms
from anon_sql.dp.query import Aggregate, BudgetStatement, DPQuery, is_dp_statement, parse_dp_select, parse_statement
from anon_sql.errors import AnonSQLError, PolicyError, PrivacyRequirementError

__all__ = ["is_dp_statement", "run_dp_statement", "dp_query", "build_sql", "build_quantile_sql", "plan_budget",
           "quantile_score_vectors", "bounded_statistics"]

_UNIT, _ROWS, _UNITS, _EXPECTED = "__dp_unit", "__dp_rows", "__dp_units", "__dp_expected_pairs"
_HASH, _PICK_UNIT, _PICK_HASH = "__dp_h", "__dp_pick_unit", "__dp_pick_h"


def _group(i: int) -> str:
    return f"__dp_g{i}"


def _col(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _subquery(query: exp.Expression, name: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(name, quoted=True)))


def _num(value: float) -> exp.Expression:
    # an integer literal only within BIGINT: int(1e308) is a 309-digit BIGNUM that DuckDB cannot hand to numpy
    return exp.convert(int(value) if float(value).is_integer() and abs(value) < 2 ** 63 else float(value))


def _clamp(node: exp.Expression, low: float, high: float) -> exp.Expression:
    return exp.Greatest(this=exp.Least(this=node, expressions=[_num(high)]), expressions=[_num(low)])


def _sum(node: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=exp.Sum(this=node), expressions=[exp.convert(0)])


def _statistics(q: DPQuery) -> list[tuple[str, str, Aggregate]]:
    """One named per-group statistic per noised quantity: (column name, noise kind, aggregate)."""
    stats = []
    for i, a in enumerate(q.aggregates):
        if a.kind in ("count", "count_column"):
            stats.append((f"__dp_c{i}", "count", a))
        elif a.kind == "count_distinct":
            stats.append((_UNITS if q.group_by else f"__dp_c{i}", "units", a))
        elif a.kind == "sum":
            stats.append((f"__dp_s{i}", "sum", a))
        elif a.kind == "percentile":
            stats.append((f"__dp_q{i}", "quantile", a))
        else:
            stats += [(f"__dp_s{i}", "avg_sum", a), (f"__dp_n{i}", "avg_count", a)]
    return stats


def _candidates(a: Aggregate) -> list[float]:
    return mechanisms.quantile_candidates(*a.bounds)


def _quantile_code(i: int, a: Aggregate) -> exp.Expression:
    """The code 2·k + (x = candidate k) of the clamped value x (column __dp_v<i>), k the index of the largest
    candidate ≤ x: found by arithmetic, then corrected by one against the candidate list itself (column __dp_l<i>),
    so rounding never moves a value across a candidate."""
    low, high = a.bounds
    count = len(_candidates(a))
    x = _col(f"__dp_v{i}")
    if count == 1:
        return exp.convert(1)
    step = (high - low) / (count - 1)
    guess = exp.Least(this=exp.Greatest(this=exp.cast(exp.Floor(this=exp.Div(
        this=exp.paren(exp.Sub(this=x.copy(), expression=_num(low))), expression=_num(step))), "BIGINT"),
        expressions=[exp.convert(0)]), expressions=[exp.convert(count - 1)])

    def at(index: exp.Expression, offset: int) -> exp.Expression:   # list_extract counts from 1; NULL past the end
        return exp.Anonymous(this="list_extract", expressions=[
            _col(f"__dp_l{i}"), exp.Add(this=exp.paren(index.copy()), expression=exp.convert(offset))])

    def flag(condition: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=condition, true=exp.convert(1))], default=exp.convert(0))
    k = exp.paren(exp.Add(this=exp.Sub(this=guess, expression=flag(exp.LT(this=x.copy(), expression=at(guess, 1)))),
                          expression=flag(exp.GTE(this=x.copy(), expression=at(guess, 2)))))
    return exp.Add(this=exp.Mul(this=k, expression=exp.convert(2)), expression=flag(exp.EQ(this=x.copy(), expression=at(k, 1))))


_ITERATED_CUT = 3   # m ≤ this: the cut by m successive minimums (bench/bench_dp.py: 15× vs 18× plain's CPU at m = 3)


def _counted_plan(q: DPQuery) -> bool:
    """Whether the counted plan (`_counted_pairs`) may answer `q`: GROUP BY and max_groups_contributed ≤
    _ITERATED_CUT, where the cut is m passes of successive minimums."""
    return bool(q.group_by) and q.max_groups_contributed <= _ITERATED_CUT


def _cut_pass(base: exp.Select, previous: exp.Expression | None) -> exp.Select:
    """One pass of the cut: per unit, the smallest hash of its rows above the previous pass's (`previous`, a
    relation aliased `__dp_cut`; None for the first pass), as (__dp_pick_unit, __dp_pick_h)."""
    rows = _subquery(base.copy(), "__dp_rows_cut")
    select = exp.select(exp.alias_(exp.column(_UNIT, "__dp_rows_cut", quoted=True), _PICK_UNIT, quoted=True),
                        exp.alias_(exp.Min(this=exp.column(_HASH, "__dp_rows_cut", quoted=True)), _PICK_HASH,
                                   quoted=True)).from_(rows)
    if previous is not None:
        select = select.join(previous, on=exp.and_(
            exp.EQ(this=exp.column(_UNIT, "__dp_rows_cut", quoted=True),
                   expression=exp.column(_PICK_UNIT, "__dp_cut", quoted=True)),
            exp.GT(this=exp.column(_HASH, "__dp_rows_cut", quoted=True),
                   expression=exp.column(_PICK_HASH, "__dp_cut", quoted=True))))
    return select.group_by(exp.column(_UNIT, "__dp_rows_cut", quoted=True))


def _cut(base: exp.Select, m: int) -> exp.Select:
    """Per unit, the m-th smallest distinct hash of its groups (__dp_pick_unit, __dp_pick_h).

    m = 1: min(h). 1 < m ≤ _ITERATED_CUT: m successive minimums (`_cut_pass`), each over the rows above the last
    one (a unit with fewer than m groups drops out: no cut). Larger m: the m-th of the sorted distinct hashes (NULL:
    no cut)."""
    if m <= _ITERATED_CUT:
        cut = None
        for _ in range(m):
            cut = _cut_pass(base, None if cut is None else _subquery(cut, "__dp_cut"))
        return cut
    # a sorted list of distinct hashes measured faster than min(DISTINCT h, m) at 10M rows (bench/bench_dp.py)
    # the order written out: list_sort's default follows the session's default_order (hostile round 17, M49: DESC kept
    # 9 groups a person for m = 4)
    nth = exp.Anonymous(this="list_extract", expressions=[exp.Anonymous(this="list_sort", expressions=[
        exp.ArrayAgg(this=exp.Distinct(expressions=[_col(_HASH)])), exp.Literal.string("ASC"),
        exp.Literal.string("NULLS LAST")]), exp.convert(m)])
    return (exp.select(exp.alias_(_col(_UNIT), _PICK_UNIT, quoted=True), exp.alias_(nth, _PICK_HASH, quoted=True))
            .from_(_subquery(base.copy(), "__dp_rows_cut")).group_by(_col(_UNIT)))


def _counted_pairs(base: exp.Select, pair: exp.Select, groups: int, m: int) -> exp.Select:
    """The kept rows summed per (unit, group), with no per-unit collision check: the cut's passes (`_cut_pass`) are
    materialized CTEs (`__dp_cut1` … `__dp_cut<m>`, pass k = the units with ≥ k distinct hashes), and every pair
    row carries `__dp_expected_pairs` = Σ_k |pass k| = Σ_units min(m, distinct hashes). Without a 64-bit collision inside a unit
    the kept pairs number exactly that; with one they number more, and `bounded_statistics` then reruns the checked
    plan. Cheaper than the check (string min/max per bucket): bench/bench_dp.py."""
    ctes, previous = [], None
    for k in range(1, m + 1):
        last = None if previous is None else exp.Table(this=exp.to_identifier(previous, quoted=True), alias=exp.TableAlias(
            this=exp.to_identifier("__dp_cut", quoted=True)))
        previous = f"__dp_cut{k}"
        ctes.append((previous, _cut_pass(base, last)))
    rows = exp.select("*").from_(_subquery(base, "__dp_rows_in"))
    if m == 1:
        rows = rows.join(_table(previous), join_type="semi", on=exp.and_(
            exp.EQ(this=_col(_UNIT), expression=_col(_PICK_UNIT)), exp.EQ(this=_col(_HASH), expression=_col(_PICK_HASH))))
    else:   # units with fewer than m groups are not in the last pass: a LEFT JOIN keeps all their rows
        rows = rows.join(_table(previous), on=exp.EQ(this=_col(_UNIT), expression=_col(_PICK_UNIT)),
                         join_type="left").where(exp.or_(exp.Is(this=_col(_PICK_HASH), expression=exp.Null()),
                                                         exp.LTE(this=_col(_HASH), expression=_col(_PICK_HASH))))
    expected = None
    for name, _ in ctes:
        size = exp.Subquery(this=exp.select(exp.Count(this=exp.Star())).from_(_table(name)))
        expected = size if expected is None else exp.Add(this=expected, expression=size)
    keys = [_col(_UNIT)] + [_col(_group(i)) for i in range(groups)]
    pair = pair.select(exp.alias_(expected, _EXPECTED, quoted=True)).from_(_subquery(rows, "__dp_kept"))
    pair = pair.group_by(*keys)
    for name, step in ctes:
        pair = pair.with_(exp.to_identifier(name, quoted=True), as_=step, materialized=True)
    return pair


def _bounded(q: DPQuery, table: exp.Table, unit: str, salt: int, counted: bool = False) -> exp.Select:
    """One row per unit and kept group: the unit's row count and per-aggregate totals there, before clamping.
    `counted` (GROUP BY, max_groups_contributed ≤ 3): `_counted_pairs`'s plan, whose collision check is a count.

    Each unit keeps at most max_groups_contributed groups, those with the smallest hash(unit, group, salt): `_cut`
    finds per unit the m-th smallest distinct hash, a join keeps the unit's rows at (m = 1) or below (m > 1) it, and
    only those are summed per unit (m = 1) or per (unit, hash). The rows are read again for each pass, never
    materialized (bench/bench_dp.py measured that cheaper in DuckDB CPU time), and no window or aggregate runs over
    every (unit, group) pair. A bucket holding two groups (a 64-bit hash collision inside one unit) is dropped, so a
    unit never reaches more than m groups. PERCENTILE_CONT keeps at most max_rows_contributed values per unit and
    group (the smallest hash(value, salt)), as candidate codes."""
    groups = [exp.alias_(g.copy(), _group(i), quoted=True) for i, g in enumerate(q.group_by)]
    base = exp.select(exp.alias_(_col(unit), _UNIT, quoted=True), *groups).from_(table.copy())
    condition = exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null()))
    if q.where is not None:
        condition = exp.and_(exp.paren(q.where.copy()), condition)
    base = base.where(condition)
    counted = counted and _counted_plan(q)
    pair = exp.select(_col(_UNIT))
    if counted:   # the groups are keys of the pairs
        pair = pair.select(*[_col(_group(i)) for i in range(len(q.group_by))])
    elif q.group_by:
        # min, not any_value: the HAVING below computes min(group) anyway (one string aggregate fewer per unit)
        pair = pair.select(*[exp.alias_(exp.Min(this=_col(_group(i))), _group(i), quoted=True)
                             for i in range(len(q.group_by))])
    pair = pair.select(exp.alias_(exp.Count(this=exp.Star()), _ROWS, quoted=True))
    for i, a in enumerate(q.aggregates):
        if a.argument is None or a.kind == "count_distinct":
            continue
        value = f"__dp_v{i}"
        if a.kind == "percentile":
            # one string literal cast to DOUBLE[] (repr round-trips every float exactly), not 1001 tree nodes that
            # every sqlglot builder step would copy
            candidates = exp.cast(exp.Literal.string("[" + ", ".join(repr(c) for c in _candidates(a)) + "]"),
                                  exp.DataType.build("DOUBLE[]", dialect="duckdb"))
            base = base.select(exp.alias_(_clamp(exp.cast(a.argument.copy(), "DOUBLE"), *a.bounds), value, quoted=True),
                               _col(f"__dp_l{i}"))
            base = base.join(_subquery(exp.select(exp.alias_(candidates, f"__dp_l{i}", quoted=True)), f"__dp_c{i}"),
                             join_type="cross")
            pick = exp.Anonymous(this="arg_min", expressions=[_quantile_code(i, a), exp.Anonymous(
                this="hash", expressions=[_col(value), exp.convert(salt)]), exp.convert(q.max_rows_contributed)])
            pair = pair.select(exp.alias_(exp.Filter(this=pick, expression=exp.Where(this=exp.Not(this=exp.Is(
                this=_col(value), expression=exp.Null())))), f"__dp_q{i}", quoted=True))
            continue
        base = base.select(exp.alias_(a.argument.copy(), value, quoted=True))
        agg = {"count_column": exp.Count, "sum": exp.Sum, "avg": exp.Avg}[a.kind]
        pair = pair.select(exp.alias_(agg(this=_col(value)), f"__dp_p{i}", quoted=True))
    if not q.group_by:
        return pair.from_(_subquery(base, "__dp_rows_in")).group_by(_col(_UNIT))
    row_hash = exp.Anonymous(this="hash", expressions=[_col(unit)] + [g.copy() for g in q.group_by]
                             + [exp.convert(salt)])
    base = base.select(exp.alias_(row_hash, _HASH, quoted=True))
    m = q.max_groups_contributed
    if counted:
        return _counted_pairs(base, pair, len(q.group_by), m)
    pick = _cut(base, m)
    rows = exp.select("*").from_(_subquery(base, "__dp_rows_in"))
    if m == 1:
        on = exp.and_(exp.EQ(this=_col(_UNIT), expression=_col(_PICK_UNIT)),
                      exp.EQ(this=_col(_HASH), expression=_col(_PICK_HASH)))
        rows = rows.join(_subquery(pick, "__dp_pick"), on=on, join_type="semi")
    elif m <= _ITERATED_CUT:
        # units with fewer than m groups have no cut: a LEFT JOIN keeps all their rows
        rows = rows.join(_subquery(pick, "__dp_pick"), on=exp.EQ(this=_col(_UNIT), expression=_col(_PICK_UNIT)),
                         join_type="left").where(exp.or_(exp.Is(this=_col(_PICK_HASH), expression=exp.Null()),
                                                         exp.LTE(this=_col(_HASH), expression=_col(_PICK_HASH))))
    else:
        on = exp.and_(exp.EQ(this=_col(_UNIT), expression=_col(_PICK_UNIT)), exp.or_(
            exp.Is(this=_col(_PICK_HASH), expression=exp.Null()), exp.LTE(this=_col(_HASH), expression=_col(_PICK_HASH))))
        rows = rows.join(_subquery(pick, "__dp_pick"), on=on, join_type="semi")
    one_group = [exp.and_(exp.NullSafeEQ(this=exp.Min(this=_col(_group(i))), expression=exp.Max(this=_col(_group(i)))),
                          exp.In(this=exp.Count(this=_col(_group(i))), expressions=[exp.convert(0), exp.Count(this=exp.Star())]))
                 for i in range(len(q.group_by))]
    keys = [_col(_UNIT)] if m == 1 else [_col(_UNIT), _col(_HASH)]
    return pair.from_(_subquery(rows, "__dp_kept")).group_by(*keys).having(exp.and_(*one_group))


def build_sql(q: DPQuery, table: exp.Table, unit: str, salt: int, counted: bool = False) -> exp.Select:
    """Row-level work as one query: the bounded (unit, group) rows of `_bounded`, their totals clamped, then one
    row per group with every statistic but the quantiles (`build_quantile_sql`). `counted` (GROUP BY, m ≤ 3): the
    plan whose collision check is a count, with one more column `__dp_expected_pairs` (`bounded_statistics`)."""
    counted = counted and _counted_plan(q)
    final = exp.select(*[_col(_group(i)) for i in range(len(q.group_by))],
                       exp.alias_(exp.Count(this=exp.Star()), _UNITS, quoted=True))
    if counted:
        final = final.select(exp.alias_(exp.Max(this=_col(_EXPECTED)), _EXPECTED, quoted=True))
    for name, kind, a in _statistics(q):
        i = q.aggregates.index(a)
        if kind == "units":
            if name != _UNITS:
                final = final.select(exp.alias_(exp.Count(this=exp.Star()), name, quoted=True))
            continue
        if kind == "quantile":
            continue
        if kind == "count":
            per_unit = _col(_ROWS) if a.kind == "count" else _col(f"__dp_p{i}")
            cap = a.bounds[1] if a.bounds else q.max_rows_contributed
            stat = _sum(exp.Least(this=per_unit, expressions=[_num(cap)]))
        elif kind == "sum":
            stat = _sum(_clamp(exp.Coalesce(this=_col(f"__dp_p{i}"), expressions=[exp.convert(0)]), *a.bounds))
        elif kind == "avg_sum":
            middle = (a.bounds[0] + a.bounds[1]) / 2
            stat = _sum(exp.Sub(this=_clamp(_col(f"__dp_p{i}"), *a.bounds), expression=_num(middle)))
        else:
            stat = exp.Count(this=_col(f"__dp_p{i}"))
        final = final.select(exp.alias_(stat, name, quoted=True))
    final = final.from_(_subquery(_bounded(q, table, unit, salt, counted), "__dp_pairs"))
    if q.group_by:
        final = final.group_by(*[_col(_group(i)) for i in range(len(q.group_by))])
    return final


def _statistics_frame(con: duckdb.DuckDBPyConnection, q: DPQuery, table: exp.Table, unit: str,
                      salt: int) -> tuple[pd.DataFrame, bool]:
    """bounded_statistics' frame, and whether the counted plan answered (its pair count showed no collision)."""
    frame = con.execute(build_sql(q, table, unit, salt, counted=True).sql(dialect="duckdb")).df()
    if _EXPECTED not in frame.columns:
        return frame, False
    expected = frame.pop(_EXPECTED)
    if len(frame) and int(frame[_UNITS].sum()) != int(expected.iloc[0]):
        return con.execute(build_sql(q, table, unit, salt).sql(dialect="duckdb")).df(), False
    return frame, True


def bounded_statistics(con: duckdb.DuckDBPyConnection, q: DPQuery, table: exp.Table, unit: str,
                       salt: int) -> pd.DataFrame:
    """build_sql's per-group statistics before noise, by the counted plan where it applies: if its kept pairs are
    not the count its cut passes imply (a 64-bit hash collision inside a unit), the checked plan answers instead,
    so no unit ever reaches more than max_groups_contributed groups."""
    return _statistics_frame(con, q, table, unit, salt)[0]


def build_quantile_sql(q: DPQuery, a: Aggregate, table: exp.Table, unit: str, salt: int,
                       counted: bool = False) -> exp.Select:
    """Per group, how many bounded values of PERCENTILE_CONT `a` fall on each code 2·k + (x = candidate k): the
    counts below and at every candidate follow. Same bounding (same salt) as build_sql. `counted`: the counted
    plan, whose pairs are the checked plan's when build_sql's count showed no collision (`_statistics_frame`)."""
    i = q.aggregates.index(a)
    groups = [_col(_group(j)) for j in range(len(q.group_by))]
    codes = exp.select(*groups, exp.alias_(exp.Unnest(expressions=[_col(f"__dp_q{i}")]), "__dp_code", quoted=True)
                       ).from_(_subquery(_bounded(q, table, unit, salt, counted), "__dp_pairs"))
    return (exp.select(*[g.copy() for g in groups], _col("__dp_code"), exp.alias_(exp.Count(this=exp.Star()), "__dp_n", quoted=True))
            .from_(_subquery(codes, "__dp_codes")).group_by(*[g.copy() for g in groups], _col("__dp_code")))


def _sensitivity(q: DPQuery, kind: str, a: Aggregate) -> float:
    """L1 change of the whole per-group vector when one unit is added: groups per unit × per-group bound."""
    groups = q.max_groups_contributed if q.group_by else 1
    if kind == "count":
        return groups * (a.bounds[1] if a.bounds else q.max_rows_contributed)
    if kind in ("units", "avg_count"):
        return groups
    if kind == "sum":
        return groups * max(abs(a.bounds[0]), abs(a.bounds[1]))
    return groups * (a.bounds[1] - a.bounds[0]) / 2


def plan_budget(q: DPQuery) -> tuple[float, float, list[tuple[str, float]]]:
    """(ε, δ) charged and ε per noised part: ε is split equally between partition selection (when grouping) and
    every noised statistic; δ all goes to partition selection (nothing is charged for δ without GROUP BY)."""
    parts = (["selection"] if q.group_by else []) + [name for name, kind, _ in _statistics(q) if kind != "units"
                                                        or not q.group_by]
    share = q.epsilon / len(parts) if parts else q.epsilon
    delta = q.delta if q.group_by else 0.0
    return q.epsilon, delta, [(p, share) for p in parts]


def _check_against_budget(q: DPQuery, budget: ledger.Budget) -> None:
    if q.privacy_unit_column is not None and q.privacy_unit_column.lower() != budget.privacy_unit.lower():
        raise PolicyError(f"option privacy_unit_column = {q.privacy_unit_column!r}, but the budget of "
                          f"{budget.table_name} protects {budget.privacy_unit!r}: drop the option or use that column")
    if q.group_by:
        if q.delta is None or not (0 < q.delta < 1 / budget.units):
            raise PolicyError(f"option delta = {q.delta!r}: a GROUP BY query needs delta in (0, 1/units) = "
                              f"(0, {1 / budget.units:.3g}) for the {budget.units} units of {budget.table_name} "
                              "(it pays for partition selection), e.g. delta = 1e-7")
    elif q.delta is not None and not (0 <= q.delta < 1 / budget.units):
        raise PolicyError(f"option delta = {q.delta!r}: must be in (0, 1/units) = (0, {1 / budget.units:.3g})")
    if q.group_by:
        epsilon = dict(plan_budget(q)[2])["selection"]
        threshold = mechanisms.selection_threshold(q.max_groups_contributed, epsilon, q.delta)[2]
        if threshold > budget.units:   # hostile round 4, D19: the answer could only ever be empty
            raise PolicyError(
                f"option max_groups_contributed = {q.max_groups_contributed} (with ε = {epsilon:g} for choosing "
                f"groups) sets the threshold a group's noisy count of people must pass at {threshold}, more than the "
                f"{budget.units} units of {budget.table_name}: no group could be released; give the number of groups "
                "one person may be in, or a larger epsilon (nothing was charged)")
    _check_noise_fits(q, budget)
    for a in q.aggregates:
        if a.kind == "count_distinct" and a.argument.name.lower() != budget.privacy_unit.lower():
            raise PolicyError(f"COUNT(DISTINCT {a.argument.name}) is not supported: only COUNT(DISTINCT "
                              f"{budget.privacy_unit}) (the privacy unit, counting people) is")


def _check_noise_fits(q: DPQuery, budget: ledger.Budget) -> None:
    """Refuse, before any noise, a statistic whose noise scale is not finite or whose noisy answer could leave its
    type: a count's 64-bit integer (ε = 1e-300 saturated at INT64's minimum: hostile round 6, D56) or a sum's double
    (±inf), with a group's statistic at most the table's units times one unit's per-group bound."""
    shares = dict(plan_budget(q)[2])
    groups = q.max_groups_contributed if q.group_by else 1
    for name, kind, a in _statistics(q):
        if name not in shares or kind == "quantile":   # quantiles choose a candidate: always inside the bounds
            continue
        sensitivity, share = _sensitivity(q, kind, a), shares[name]
        if not math.isfinite(sensitivity / share):
            raise mechanisms.infinite_scale_error(sensitivity, share)
        family = "count" if kind in ("count", "units", "avg_count") else "sum"
        least = mechanisms.smallest_epsilon(family, sensitivity, budget.units * sensitivity / groups)
        if share >= least:
            continue
        what = f"{a.kind.upper()} {a.alias}"
        if math.isinf(least):
            raise PolicyError(f"contribution bounds {a.bounds} of {what}: over the {budget.units} units of "
                              f"{budget.table_name} its answer could exceed a double's range whatever epsilon; "
                              "narrow the bounds (nothing was charged)")
        answer = "64-bit integer" if family == "count" else "double"
        raise PolicyError(f"option epsilon = {q.epsilon!r} is too small for {what}: noise of scale "
                          f"{sensitivity / share:.3g} would overflow its {answer} answer; the smallest epsilon for this query is {least * q.epsilon / share:.3g} "
                          "(nothing was charged)")


def _key(values) -> str:
    return json.dumps([None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values])


def quantile_score_vectors(q: DPQuery, a: Aggregate, codes: pd.DataFrame, keys: list[str]) -> list[list[int]]:
    """OpenDP's candidate scores for each group key, from build_quantile_sql's counts per code 2·k + (x = c_k):
    #(x < c_k) is the count of every code below 2k, #(x = c_k) the count of code 2k + 1."""
    candidates = _candidates(a)
    fraction = mechanisms.quantile_fraction(a.fraction)
    group_cols = [_group(i) for i in range(len(q.group_by))]
    code_keys = pd.Series([_key(row) for row in codes[group_cols].itertuples(index=False, name=None)], dtype=object)
    rows = {key: index.to_numpy() for key, index in code_keys.groupby(code_keys).groups.items()} if len(codes) else {}
    code, n = codes["__dp_code"].to_numpy(dtype=np.int64), codes["__dp_n"].to_numpy(dtype=np.int64)
    vectors = []
    for key in keys:
        counts = np.zeros(2 * len(candidates), dtype=np.int64)
        mine = rows.get(key, np.array([], dtype=np.int64))
        np.add.at(counts, code[mine], n[mine])
        per_candidate = counts[0::2] + counts[1::2]
        below = np.concatenate([[0], np.cumsum(per_candidate)[:-1]])
        vectors.append(mechanisms.quantile_scores(below, counts[1::2], int(counts.sum()), fraction))
    return vectors


def _noise(q: DPQuery, frame: pd.DataFrame, shares: dict[str, float],
           codes: dict[str, pd.DataFrame] | None = None) -> tuple[pd.DataFrame, float, float]:
    """Partition selection, then noise on every statistic of the kept groups; returns the answer and the (ε, δ)
    that OpenDP's privacy maps report (checked against the charge). `codes`: build_quantile_sql's counts per
    PERCENTILE_CONT statistic."""
    alpha = None if q.intervals is None else 1 - q.intervals
    spent_epsilon = spent_delta = 0.0
    group_cols = [_group(i) for i in range(len(q.group_by))]
    kept_keys = [_key(row) for row in frame[group_cols].itertuples(index=False, name=None)]
    if q.group_by:
        keys = kept_keys
        units = dict(zip(keys, frame[_UNITS].astype("int64")))
        selected = mechanisms.select_partitions(units, q.max_groups_contributed, shares["selection"], q.delta)
        spent_epsilon += selected.epsilon
        spent_delta += selected.delta
        keep = [k in selected.counts for k in keys]
        frame = frame.loc[keep].reset_index(drop=True)
        kept_keys = [k for k, kept in zip(keys, keep) if kept]
        noisy = {_UNITS: (pd.Series([selected.counts[k] for k in kept_keys], dtype="int64"),
                          selected.scale, "count")}
    else:
        noisy = {}
    for name, kind, a in _statistics(q):
        if name in noisy:
            continue
        if kind == "quantile":
            scores = quantile_score_vectors(q, a, codes[name], kept_keys)
            result = mechanisms.noisy_quantiles(scores, _candidates(a), a.fraction, q.max_rows_contributed,
                                                q.max_groups_contributed if q.group_by else 1, shares[name])
            noisy[name] = (pd.Series(result.values, dtype="float64"), result.scale, "quantile")
            spent_epsilon += result.epsilon
            continue
        sensitivity = _sensitivity(q, kind, a)
        if kind in ("count", "units", "avg_count"):
            result = mechanisms.noisy_counts(frame[name].astype("int64").tolist(), int(sensitivity), shares[name])
            noisy[name] = (pd.Series(result.values, dtype="int64"), result.scale, "count")
        else:
            result = mechanisms.noisy_sums(frame[name].astype("float64").tolist(), sensitivity, shares[name])
            noisy[name] = (pd.Series(result.values, dtype="float64"), result.scale, "sum")
        spent_epsilon += result.epsilon
    out = pd.DataFrame(index=frame.index)
    for output in q.outputs:
        if output[0] == "group":
            out[output[2]] = frame[_group(output[1])]
            continue
        a = output[1]
        stats = [(name, kind) for name, kind, b in _statistics(q) if b is a]
        if a.kind == "avg":
            low, high = a.bounds
            middle = (low + high) / 2
            (s, s_scale, _), (n, n_scale, _) = noisy[stats[0][0]], noisy[stats[1][0]]
            out[a.alias] = (middle + s / n.clip(lower=1)).clip(low, high)
            if alpha is not None:
                # both noises inside their (1 − α/2) half-widths ⇒ the bounded mean is inside (union bound)
                sa, na = mechanisms.sum_accuracy(s_scale, alpha / 2), mechanisms.count_accuracy(n_scale, alpha / 2)
                corners = [(s + ds) / (n + dn) for ds in (-sa, sa) for dn in (-na, na)]
                lows = pd.concat(corners, axis=1).min(axis=1) + middle
                highs = pd.concat(corners, axis=1).max(axis=1) + middle
                unknown = n - na <= 0
                out[f"{a.alias}_low"] = lows.where(~unknown, low).clip(low, high)
                out[f"{a.alias}_high"] = highs.where(~unknown, high).clip(low, high)
            continue
        values, scale, family = noisy[stats[0][0]]
        out[a.alias] = values
        if alpha is not None and family == "quantile":   # no interval for a quantile (docs/dp.md)
            out[f"{a.alias}_low"] = out[f"{a.alias}_high"] = float("nan")
        elif alpha is not None:
            width = (mechanisms.count_accuracy if family == "count" else mechanisms.sum_accuracy)(scale, alpha)
            out[f"{a.alias}_low"] = values - width
            out[f"{a.alias}_high"] = values + width
    return out, spent_epsilon, spent_delta


def _refuse_volatile_calls(con: duckdb.DuckDBPyConnection, q: DPQuery) -> None:
    """Refuse a function of the connection that may answer differently on each read (VOLATILE, with side effects, or a
    macro, whose body is not checked): the bounding plan reads a unit's rows once per pass, so such a WHERE or
    argument could let a unit reach more groups than max_groups_contributed (hostile round 6, D50)."""
    nodes = ([q.where] if q.where is not None else []) + [a.argument for a in q.aggregates if a.argument is not None]
    names = sorted({sub.name.lower() for node in nodes for sub in node.find_all(exp.Anonymous)})
    if not names:
        return
    rows = con.execute("SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE lower(function_name) IN "
                       "(SELECT unnest(?)) AND (stability IS DISTINCT FROM 'CONSISTENT' AND stability IS DISTINCT "
                       "FROM 'CONSISTENT_WITHIN_QUERY' OR has_side_effects OR function_type LIKE '%macro%')",
                       [names]).fetchall()
    if rows:
        raise PolicyError(f"{rows[0][0]}(…) in a DP query: a macro, a function with side effects or one that may "
                          "answer differently on each read (VOLATILE) is not taken (each unit's rows are read more "
                          "than once, and a row one read keeps and another drops would break "
                          "max_groups_contributed); write the expression out over the table's own values")


def _stable_rows(con: duckdb.DuckDBPyConnection, table: exp.Table) -> tuple[exp.Table, exp.Table | None]:
    """The relation every pass of the plan reads: the table itself, or for a view one TEMP copy of its rows (and
    that copy, to drop). The plan reads its relation once per pass; a view that samples or calls random() would
    give each pass other rows, and a unit could then reach more groups than max_groups_contributed (hostile
    round 7, D05). The copy sits in the query's transaction: a rollback takes it away too."""
    kind = con.execute("SELECT table_type FROM information_schema.tables WHERE table_catalog = current_database() "
                       "AND table_schema = ? AND table_name = ?", [table.db, table.name]).fetchall()
    if not kind or kind[0][0] == "BASE TABLE":
        return table, None
    scratch = exp.to_identifier(f"__anon_dp_rows_{secrets.token_hex(8)}", quoted=True)
    con.execute(exp.Create(this=exp.Table(this=scratch), kind="TABLE", properties=exp.Properties(
        expressions=[exp.TemporaryProperty()]), expression=exp.select("*").from_(table.copy()))
        .sql(dialect="duckdb"))
    rows = exp.Table(this=scratch.copy(), alias=exp.TableAlias(this=exp.to_identifier(table.name, quoted=True)))
    return rows, exp.Table(this=scratch.copy())


def dp_query(con: duckdb.DuckDBPyConnection, text: str | DPQuery) -> pd.DataFrame:
    """Answer one `SELECT WITH DIFFERENTIAL_PRIVACY ...` and charge its table's budget; the answer is recorded in
    anon.privacy_ledger in the same transaction. Not reproducible: OpenDP's noise takes no seed."""
    q = text if isinstance(text, DPQuery) else parse_dp_select(text)
    changed = changed_settings(con, zone=False)   # the DP SQL's own results (round 17, M49: default_order)
    if changed:
        raise PolicyError(f"this session's setting {', '.join(changed)} changes what SQL returns, and a DP query's "
                          "bounds are computed in SQL; nothing was answered or charged: RESET it, or run the query in "
                          "a fresh session")
    refuse_untrusted_macros(con, "a DP query")   # before anything is charged (round 8, D29: a shadowed hash)
    overloaded = overloaded_builtins(con)   # a Python UDF added to a built-in's name (hostile round 16)
    if overloaded:
        raise PolicyError(f"this process registered its own form of DuckDB's {', '.join(sorted(overloaded))}: a DP "
                          "query's SQL calls DuckDB's functions, and the process's code could answer instead; nothing "
                          "was answered or charged: run the query in a process without those functions")
    ledger.ensure_ledger(con)
    table, name = ledger.resolve_table(con, q.table)
    _refuse_volatile_calls(con, q)
    epsilon, delta, parts = plan_budget(q)
    if is_read_only(con):   # round 15, E50: DuckDB's raw UPDATE error, exit 4, before
        raise PolicyError(f"a DP query on {name} charges its budget in anon.privacy_ledger, which a read-only "
                          "database cannot record; nothing was answered or charged: open the database read-write "
                          "(without --read-only)")
    try:
        con.begin()
    except duckdb.TransactionException:
        raise PolicyError("a DP query runs in its own transaction: COMMIT or ROLLBACK the open one first") from None
    try:
        budget = ledger.active_budget(con, name, ensure=False)
        if budget is None:
            raise PrivacyRequirementError(f"{name} has no privacy budget: CREATE PRIVACY BUDGET ON {name} WITH "
                                          "(epsilon = 1.0, delta = 1e-7, privacy_unit = '<column>') first")
        ledger.require_budget_owned(con, budget, "charge")   # a budget row written by hand is no budget
        ledger.require_counters_match_ledger(con, budget)    # nor is one whose counters were reset (round 10, M17)
        _check_against_budget(q, budget)
        ledger.check_affordable(budget, epsilon, delta)
        salt = secrets.randbits(62)
        try:
            rows, scratch = _stable_rows(con, table)
            frame, counted = _statistics_frame(con, q, rows, budget.privacy_unit, salt)
            codes = {stat: con.execute(build_quantile_sql(q, a, rows, budget.privacy_unit, salt, counted)
                                       .sql(dialect="duckdb")).df()
                     for stat, kind, a in _statistics(q) if kind == "quantile"}
            if scratch is not None:
                con.execute(exp.Drop(tables=[scratch], kind="TABLE", exists=True).sql(dialect="duckdb"))
        except (duckdb.BinderException, duckdb.ConversionException, duckdb.ParserException,
                duckdb.CatalogException) as error:
            raise PolicyError(f"the DP query does not fit {name}: {str(error).splitlines()[0]}") from None
        answer, spent_epsilon, spent_delta = _noise(q, frame, dict(parts), codes)
        if spent_epsilon > epsilon * (1 + 1e-9) or spent_delta > delta * (1 + 1e-9):
            raise AnonSQLError(f"internal accounting error: OpenDP reports ({spent_epsilon}, {spent_delta}) for a "
                               f"charge of ({epsilon}, {delta}); nothing was released")
        ledger.record_spend(con, budget, q.text, epsilon, delta, len(answer))
        con.commit()
    except BaseException as err:
        con.rollback()
        ledger.raise_conflict(err)
        raise
    return answer


def run_dp_statement(con: duckdb.DuckDBPyConnection, text: str) -> pd.DataFrame:
    """Run one DP statement (CREATE / SHOW / DROP PRIVACY BUDGET, SELECT WITH DIFFERENTIAL_PRIVACY); a DataFrame
    for every one of them."""
    statement = parse_statement(text)
    if isinstance(statement, DPQuery):
        return dp_query(con, statement)
    assert isinstance(statement, BudgetStatement)
    if statement.action == "show":
        return ledger.show_budgets(con)
    if statement.action == "drop":
        budget = ledger.drop_budget(con, statement.table)
        return pd.DataFrame([{"table_name": budget.table_name, "dropped": True, "epsilon_spent": budget.spent_epsilon,
                              "queries": budget.queries}])
    options = statement.options
    budget = ledger.create_budget(con, statement.table, epsilon=options["epsilon"], delta=options["delta"],
                                  privacy_unit=options["privacy_unit"])
    return pd.DataFrame([{"table_name": budget.table_name, "privacy_unit": budget.privacy_unit, "units": budget.units,
                          "epsilon": budget.epsilon, "delta": budget.delta}])
