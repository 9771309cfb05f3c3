"""The ``__general`` view and what generalizes values: level maps joined as inline relations (level plans), the
assignment or the QI-tuple map joined on the row key or the tuple (local recoding), and the aggregated base of level
plans."""
from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from ..methods.base import ROW_ID, AssignmentPlan, LevelPlan
from ..data import base_counts
from ..common.columns import EC_ID, UNIT
from ..common.sqlbuild import alias, and_all, col, dtype, ident, lit, null_safe_eq, prerendered, session_table
from ..data.taxonomy import TOP, Taxonomy
from .dialect import dialect_target
from .source import row_order
from .names import (KEEP, WEIGHT, CompileInput, ReleaseNames, cast_varchar, noise_flag, released_columns,
                    unit_columns)


def _mapping_relation(rows: list[tuple[str, str]], alias_name: str, dialect: str) -> exp.Expression:
    """leaf → value rows as an inline relation with columns (leaf, value); VALUES, or UNION ALL for SQLite."""
    if not dialect_target(dialect).values_relation:
        selects = [exp.select(alias(lit(a), "leaf"), alias(lit(b), "value")) for a, b in rows]
        union: exp.Expression = selects[0]
        for s in selects[1:]:
            union = exp.union(union, s, distinct=False)
        return exp.Subquery(this=union, alias=exp.TableAlias(this=ident(alias_name)))
    tuples = [exp.Tuple(expressions=[lit(a), lit(b)]) for a, b in rows]
    return exp.Values(expressions=tuples,
                      alias=exp.TableAlias(this=ident(alias_name), columns=[ident("leaf"), ident("value")]))


def general_view(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Generalized quasi-identifiers: joins to the level maps (level plans) or to the assignment (local recoding)."""
    policy = ci.policy
    cols = released_columns(policy, ci.columns) + unit_columns(policy)
    src = "s"
    if isinstance(ci.plan, LevelPlan):
        items, joins = generalized_items(ci, cols, src)
        query = exp.select(*items).from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                                                   alias=exp.TableAlias(this=ident(src))))
        for rel, on in joins:
            query = query.join(exp.Join(this=rel, on=on, side="LEFT"), copy=False)
        return query
    # assignment plan: released values per class, joined on the row key
    plan = ci.plan
    flag = noise_flag(plan)
    items = []
    row_values = plan.row_values   # per-row released values keyed by __row (slicing)
    for c in cols:
        if c in plan.class_values.columns and (c in policy.quasi or row_values):
            items.append(col(c, "v"))
        else:
            items.append(col(c, src))
    items.append(col(EC_ID, "a"))
    if flag:
        items.append(alias(exp.false(), flag))
    if uses_tuple_map(ci):   # the class is a function of the QI tuple: join on it, no __row (no sort of every row)
        assigned, on = tuple_join(ci, names, src, "a")
    else:
        assigned = exp.Table(this=names.assignment.this.copy(), db=names.assignment.args.get("db"),
                             alias=exp.TableAlias(this=ident("a")))
        on = exp.EQ(this=col(ROW_ID, src), expression=col(ROW_ID, "a"))
    query = (exp.select(*items)
             .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                              alias=exp.TableAlias(this=ident(src))))
             .join(assigned, on=on)
             .join(exp.Table(this=names.ec_values.this.copy(), db=names.ec_values.args.get("db"),
                             alias=exp.TableAlias(this=ident("v"))),
                   on=exp.EQ(this=col(ROW_ID if row_values else EC_ID, "a"),
                             expression=col(ROW_ID if row_values else EC_ID, "v"))))
    if plan.noise is not None and len(plan.noise):
        # columns the noise records do not carry are NULL (typed by the first branch of the UNION)
        noise_items = [col(c) if c in plan.noise.columns else alias(exp.null(), c) for c in cols]
        noise_items.append(col(EC_ID))
        if flag:
            noise_items.append(alias(exp.true(), flag))
        noise = exp.select(*noise_items).from_(names.noise.copy())
        return exp.union(query, noise, distinct=False)
    return query


def uses_tuple_map(ci: CompileInput) -> bool:
    """DuckDB assignment plans whose class is a function of the QI tuple (``plan.tuple_classes``): the general view
    joins the source to a temp table QI tuple → ``ec_id`` (one row per distinct tuple, written with the plan)
    instead of the assignment on ``__row``, whose window sorts every row of the source at each read (issue 17.3)."""
    plan = ci.plan
    return (ci.target.session_tables and isinstance(plan, AssignmentPlan) and plan.tuple_classes is not None
            and not plan.row_values)


def tuple_base(ci: CompileInput) -> bool:
    """An assignment plan with QI tuples whose base counts resolve made (``ci.base``; no privacy unit): its released
    rows and ``__assignment`` are written from those counts, not from another pass over the source (issue 29.2)."""
    return uses_tuple_map(ci) and ci.base is not None and not ci.policy.privacy_unit


def people_from_base(ci: CompileInput) -> bool:
    """A plan with QI tuples and a privacy unit whose base counts resolve made (one row per person and
    combination, ``ci.base``): its classes view counts people there, through the tuple map, not over every row
    of the general view (issue 24.6)."""
    return (uses_tuple_map(ci) and ci.base is not None and bool(ci.policy.privacy_unit)
            and not ci.policy.count_column)


def base_general(ci: CompileInput, names: ReleaseNames, kept: bool = False) -> exp.Subquery:
    """The general view's columns over the base counts (:func:`people_from_base`): per (combination, unit) the
    released QI values, the sensitive values, the unit, its rows ``__w`` and ``ec_id`` (``kept``: of the kept
    classes only)."""
    plan, quasi = ci.plan, list(ci.policy.quasi)
    items = [col(c, "v") if c in plan.class_values.columns and c in quasi else col(c, "b")
             for c in base_counts.keys(ci.policy)] + [col(UNIT, "b"), col(WEIGHT, "b"), col(EC_ID, "a")]
    base = ci.base.copy()
    base.set("alias", exp.TableAlias(this=ident("b")))
    assigned, on = tuple_join(ci, names, "b", "a", kept=kept)
    query = (exp.select(*items).from_(base).join(assigned, on=on)
             .join(exp.Table(this=names.ec_values.this.copy(), db=names.ec_values.args.get("db"),
                             alias=exp.TableAlias(this=ident("v"))),
                   on=exp.EQ(this=col(EC_ID, "a"), expression=col(EC_ID, "v"))))
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident("gb")))


def assignment_reads_base(ci: CompileInput) -> bool:
    """``__assignment`` is written from the base counts (:func:`tuple_base`) when their keys are every column of
    the source and each counts rows (no count column): then the base rows are the source grouped by all its
    columns."""
    return (tuple_base(ci) and not ci.policy.count_column
            and set(row_order(ci)) == set(base_counts.keys(ci.policy)))


def tuple_map_table(release_name: str, kept: bool = False) -> exp.Table:
    """The session-temporary map QI tuple → ``ec_id`` of an assignment plan (:func:`uses_tuple_map`); ``kept``: the
    same map restricted to the kept classes, which the release statement joins."""
    return session_table(release_name + ("__kept" if kept else "__tuples"))


def kept_tuples_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The QI tuples of the kept classes (the classes view's keep flag) with their ``ec_id``: the release joins the
    source to this small table — its exact cardinality makes it the hash join's build side — instead of joining the
    general view (every row) to the classes."""
    tuples = tuple_map_table(names.release)
    tuples.set("alias", exp.TableAlias(this=ident("a")))
    if ci.policy.privacy.max_suppression <= 0:
        # nothing may be suppressed: every class is kept (the classes view's keep flag is TRUE), so the map is
        # copied as it is, without the pass over every row the classes view aggregates (issue 29.2)
        return exp.select(exp.Column(this=exp.Star(), table=ident("a"))).from_(tuples)
    return (exp.select(exp.Column(this=exp.Star(), table=ident("a"))).from_(tuples)
            .join(exp.Table(this=names.classes.this.copy(), db=names.classes.args.get("db"),
                            alias=exp.TableAlias(this=ident("c"))),
                  on=exp.EQ(this=col(EC_ID, "a"), expression=col(EC_ID, "c")))
            .where(col(KEEP, "c")))


def _tuple_casts(ci: CompileInput, source: str) -> list[exp.Expression]:
    """The QIs of relation ``source`` cast the way ``plan.tuple_classes`` holds them (DOUBLE or VARCHAR)."""
    from ..methods.local_values import tuple_casts   # pyarrow: only for plans that carry the tuples

    return tuple_casts(ci.policy, ci.plan.tuple_classes, source)


def tuple_join(ci: CompileInput, names: ReleaseNames, source: str, alias_name: str, kept: bool = False
                ) -> tuple[exp.Table, exp.Expression]:
    """The temp map QI tuple → ``ec_id`` (``kept``: of the kept classes) as ``alias_name`` and the null-safe join
    of relation ``source`` to it."""
    assigned = tuple_map_table(names.release, kept)
    assigned.set("alias", exp.TableAlias(this=ident(alias_name)))
    on = and_all(null_safe_eq(c, col(f"q{i}", alias_name)) for i, c in enumerate(_tuple_casts(ci, source)))
    return assigned, on


def assignment_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The ``__assignment`` table (``__row`` → ``ec_id``) of a plan with ``tuple_classes``, without numbering every
    row: rows equal in every column are consecutive under the ``__source`` view's ``row_number()`` order, so the
    source grouped by all its columns, each group's first ``__row`` a running sum of the group sizes in that order,
    and ``generate_series`` over each group give the same pairs (the class is a function of the QI values). It
    sorts the distinct rows, not every row (issue 17.3). :func:`assignment_spans_query` then
    :func:`assignment_from_spans`, in one statement."""
    spans = exp.Subquery(this=assignment_spans_query(ci, names), alias=exp.TableAlias(this=ident("k")))
    return assignment_from_spans(spans)


SPAN_START = "__start"   # an assignment span's first ``__row`` less one; its rows are in ``WEIGHT``


def assignment_spans_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The spans of ``__row`` numbers :func:`assignment_query` expands, in ``__row`` order: each group of rows
    equal in every column (those of a person, with a unit) as (``__start``, ``ec_id``, ``__w``), its rows being
    ``__start`` + 1 … ``__start`` + ``__w``."""
    # rows equal in these columns are consecutive under __row's order; with a unit, a person's rows (the unit and
    # the QIs lead the order) are one run: one group per person instead of one per distinct row
    cols = row_order(ci)
    if ci.policy.privacy_unit:
        cols = cols[:1 + len([q for q in ci.policy.quasi if q in ci.columns])]
    n, start = "__n", SPAN_START
    if assignment_reads_base(ci):
        # every column is a key of the base counts: its rows are the source grouped by all its columns, counted
        grouped = exp.select(*[col(c) for c in cols], alias(col(WEIGHT), n)).from_(ci.base.copy())
    elif people_from_base(ci) and not ci.sdc_prepared:
        # a person's rows per QI tuple summed from the base counts (one row per person, combination and
        # sensitive values), not counted over the source's rows (issue 24.6)
        keys = [col(UNIT), *[col(c) for c in cols[1:]]]
        # no sensitive keys: the base rows are already the distinct (unit, QI tuple), their rows as they are
        once = base_counts.keys(ci.policy) == cols[1:]
        total = exp.Cast(this=col(WEIGHT) if once else exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
        grouped = exp.select(alias(col(UNIT), cols[0]), *[col(c) for c in cols[1:]], alias(total, n)).from_(
            ci.base.copy())
        if not once:
            grouped = grouped.group_by(*keys)
    else:
        grouped = exp.select(*[col(c) for c in cols], alias(exp.Count(this=exp.Star()), n)).from_(
            ci.relation.copy()).group_by(*[col(c) for c in cols])
    order = [exp.Ordered(this=col(c), nulls_first=True) for c in cols]
    running = exp.Window(this=exp.Sum(this=col(n)), order=exp.Order(expressions=order),
                         spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                             end="CURRENT ROW"))
    started = exp.select(exp.Star(), alias(exp.Sub(this=running, expression=col(n)), start)).from_(
        exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("d"))))
    assigned, on = tuple_join(ci, names, "r", "a")
    return (exp.select(col(start, "r"), col(EC_ID, "a"), alias(exp.Cast(this=col(n, "r"), to=dtype("BIGINT")),
                                                              WEIGHT))
            .from_(exp.Subquery(this=started, alias=exp.TableAlias(this=ident("r"))))
            .join(assigned, on=on)
            .order_by(col(start, "r")))


def assignment_from_spans(spans: exp.Expression) -> exp.Select:
    """``__row`` → ``ec_id`` for every row of the spans ``spans`` (a relation of :func:`assignment_spans_query`'s
    columns), in their order."""
    i = "__i"
    series = exp.Unnest(expressions=[exp.GenerateSeries(start=lit(1), end=col(WEIGHT))])
    repeated = exp.select(col(SPAN_START), col(EC_ID), alias(series, i)).from_(spans)
    row = exp.Cast(this=exp.Add(this=col(SPAN_START), expression=col(i)), to=dtype("BIGINT"))
    return exp.select(alias(row, ROW_ID), col(EC_ID)).from_(
        exp.Subquery(this=repeated, alias=exp.TableAlias(this=ident("x"))))


def generalized_items(ci: CompileInput, cols: Sequence[str], src: str
                       ) -> tuple[list[exp.Expression], list[tuple[exp.Expression, exp.Expression]]]:
    """Select items for ``cols`` of relation ``src`` with the plan's QIs mapped through their level maps, and the
    LEFT JOINs (inline leaf → value relations) that do it. NULL maps to the taxonomy's NULL parent or ``*``."""
    items: list[exp.Expression] = []
    joins: list[tuple[exp.Expression, exp.Expression]] = []
    for c in cols:
        level = ci.plan.levels.get(c, 0) if c in ci.policy.quasi else 0
        if level == 0:
            items.append(col(c, src))
            continue
        tax = ci.taxonomies[c]
        fallback = tax.null_parent or TOP
        if ci.target.enum_types and all(v == fallback for v in tax.mapping(level).values()):
            # every leaf maps to the value NULL and unknown values map to (the top): a constant, no join (issue
            # 17.1: at the optimum of a wide search most columns are at the top, and each join cost binding and
            # probing time for one value)
            items.append(prerendered(("constant", tax.fingerprint(), level, c), lambda: alias(
                exp.Cast(this=lit(fallback), to=_released_domain(_rows(tax, level), fallback)), c)))
            continue
        m = f"m{len(joins)}"
        on = exp.EQ(this=cast_varchar(col(c, src)), expression=col("leaf", m))
        if ci.target.enum_types:   # the VALUES list and the ENUM domain rendered once per (taxonomy content, level, alias)
            fp = tax.fingerprint()
            joins.append((prerendered(("map", fp, level, m), lambda: _mapping_relation(_rows(tax, level), m, ci.dialect)),
                          on))
            items.append(prerendered(("value", fp, level, m, c), lambda: _mapped_value(tax, level, m, c, True)))
            continue
        rows = _rows(tax, level)
        if ci.level_map is not None and all(isinstance(v, str) for pair in rows for v in pair):
            relation: exp.Expression = exp.Table(this=ident(ci.level_map(tuple(rows))),
                                                 alias=exp.TableAlias(this=ident(m)))
        else:
            relation = _mapping_relation(rows, m, ci.dialect)
        joins.append((relation, on))
        items.append(_mapped_value(tax, level, m, c, False))
    return items, joins


def _rows(tax: Taxonomy, level: int) -> list[tuple[str, str]]:
    """(leaf, value at ``level``) pairs of a taxonomy."""
    return list(tax.mapping(level).items())


def _mapped_value(tax: Taxonomy, level: int, m: str, c: str, enum: bool) -> exp.Expression:
    """``COALESCE(m.value, <NULL parent>) AS c`` (on DuckDB cast to the level's ENUM domain)."""
    value: exp.Expression = exp.Coalesce(this=col("value", m), expressions=[lit(tax.null_parent or TOP)])
    if enum:
        value = exp.Cast(this=value, to=_released_domain(_rows(tax, level), tax.null_parent or TOP))
    return alias(value, c)


def is_enum(ci: CompileInput, column: str) -> bool:
    """A generalized quasi-identifier of a DuckDB level plan (released as an ENUM)."""
    return (ci.target.enum_types and isinstance(ci.plan, LevelPlan) and column in ci.policy.quasi
            and ci.plan.levels.get(column, 0) > 0)


def _released_domain(rows: Sequence[tuple[str, str]], top: str) -> exp.DataType:
    """DuckDB: a generalized column's values come from a known finite set (the taxonomy's nodes at that level), so
    it is released as an ENUM — a fraction of VARCHAR's cost to write and group. Values are ordered by their first
    leaf (numerically when every leaf is a number, so intervals sort naturally), the top value last."""
    def number(leaf: str) -> float | None:
        try:
            return float(leaf)
        except ValueError:
            return None

    keys = [number(leaf) for leaf, _ in rows]
    order = (sorted(range(len(rows)), key=lambda i: keys[i]) if all(k is not None for k in keys)
             else range(len(rows)))
    distinct = list(dict.fromkeys([rows[i][1] for i in order] + [top]))
    return exp.DataType(this=exp.DataType.Type.ENUM, expressions=[lit(v) for v in distinct])


def level_base(ci: CompileInput, names: ReleaseNames, base: exp.Table | None = None) -> exp.Select:
    """Level plans: the source aggregated once to distinct (QI, sensitive) combinations with their record counts,
    then generalized — classes are computed from these counts, never from a second pass over the rows. ``base``:
    read the counts from that table (DuckDB's temp base table) instead of aggregating inline."""
    policy = ci.policy
    keep = base_counts.keys(policy)
    if base is None:
        counts: exp.Expression = exp.Subquery(this=base_counts.query(policy, names.source, UNIT),
                                              alias=exp.TableAlias(this=ident("b")))
    else:
        counts = base.copy()
        counts.set("alias", exp.TableAlias(this=ident("b")))
    items, joins = generalized_items(ci, keep + unit_columns(policy), "b")
    originals = [alias(col(q, "b"), f"__o{i}") for i, q in enumerate(policy.quasi)]
    query = exp.select(*originals, *items, col(WEIGHT, "b")).from_(counts)
    for rel, on in joins:
        query = query.join(exp.Join(this=rel, on=on, side="LEFT"), copy=False)
    return query


def uses_base_table(ci: CompileInput) -> bool:
    """DuckDB level plans keep the base counts in a temp table that the release statement reads."""
    return ci.target.session_tables and isinstance(ci.plan, LevelPlan)


def base_table(ci: CompileInput, names: ReleaseNames) -> exp.Table | None:
    """Where a level plan's release statement reads the base counts: the table the engine already holds
    (``ci.base``: Spark's cached view), DuckDB's temp table (made by the script when resolve did not), else None
    (aggregated inline)."""
    if not isinstance(ci.plan, LevelPlan):
        return None
    if ci.base is not None:
        return ci.base
    return base_counts.temp_table(names.release) if uses_base_table(ci) else None


def level_combos(ci: CompileInput, base: str, classes: str, kept_only: bool = True) -> exp.Select:
    """Level plans: each distinct original QI tuple → its released QI values and ``ec_id``, for kept classes only
    (``kept_only=False``: every tuple, with the keep flag); built from the aggregated base (no second pass over the
    rows)."""
    quasi = list(ci.policy.quasi)
    originals = [col(f"__o{i}", "x") for i in range(len(quasi))]
    distinct = exp.select(*originals, *[col(q, "x") for q in quasi]).distinct().from_(
        exp.Table(this=ident(base), alias=exp.TableAlias(this=ident("x"))))
    on = and_all(null_safe_eq(col(q, "d"), col(q, "c")) for q in quasi)
    query = (exp.select(*[col(f"__o{i}", "d") for i in range(len(quasi))], *[col(q, "d") for q in quasi],
                        col(EC_ID, "c"))
             .from_(exp.Subquery(this=distinct, alias=exp.TableAlias(this=ident("d"))))
             .join(exp.Table(this=ident(classes), alias=exp.TableAlias(this=ident("c"))), on=on))
    return query.where(col(KEEP, "c")) if kept_only else query.select(col(KEEP, "c"))
