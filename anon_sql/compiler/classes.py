"""The ``__classes`` and ``__checks`` views: one row per class with its size, its sensitive-value statistics and one
value and pass column per privacy model (what each model declares through its contract), plus ``ec_id`` and the
suppression decision."""
from __future__ import annotations

from sqlglot import exp

from ..errors import PolicyError
from ..methods.base import AssignmentPlan, LevelPlan
from ..models import ClassColumns, equal_distance, population_models
from ..models.population import WEIGHT as POP_WEIGHT
from . import population as population_match
from ..common.columns import EC_ID, SIZE, UNIT
from ..common.sqlbuild import alias, and_all, col, ident, lit, null_safe_eq
from .general import base_general, generalized_items, is_enum, level_base, people_from_base
from .names import (KEEP, WEIGHT, CompileInput, ReleaseNames, cast_varchar, class_level_quasi, released_columns,
                    unit_columns, weight_of)
from .signature import signature_keys, with_signatures


def class_stats_query(ci: CompileInput, relation: exp.Expression, keys: list[str], null_safe: bool,
                      weight: exp.Expression | None = None) -> exp.Select:
    """One row per class (grouped by ``keys``): size, per sensitive attribute distinct count / sorted counts /
    t-closeness distance, and one value + pass column per privacy model."""
    policy = ci.policy
    lists = ci.target.list_aggregates   # per-class count / value lists (the models' macros read them)
    w = weight if weight is not None else weight_of(policy)
    needs_values = any(m.needs_values for m in ci.models)
    ctes: list[tuple[str, exp.Expression]] = []
    key_cols = [col(k) for k in keys]

    def keys_of(t: str) -> list[exp.Expression]:
        return [col(k, t) for k in keys]

    def join_on(a: str, b: str) -> exp.Expression:
        eq = null_safe_eq if null_safe else (lambda x, y: exp.EQ(this=x, expression=y))
        return and_all(eq(col(k, a), col(k, b)) for k in keys)

    sens = policy.sensitive
    base_alias = "z"
    # with a privacy unit every count is of distinct people: the class size, and a value's count (the people of
    # the class holding it); docs/units.md
    people = exp.Count(this=exp.Distinct(expressions=[col(UNIT)])) if unit_columns(policy) else None
    if not sens:
        size = people.copy() if people is not None else exp.Sum(this=w)
        base = exp.select(*key_cols, alias(size, SIZE)).from_(relation.copy()).group_by(*key_cols)
        ctes.append(("__sz", base))
    elif people is not None:
        ctes.append(("__su", exp.select(*key_cols, alias(people.copy(), SIZE)).from_(relation.copy())
                     .group_by(*key_cols)))
    per_attr = []
    extra_cols: list[list[str]] = []
    own_distance: list[str | None] = []   # per attribute: the CTE of a model that computes the distance column
    for i, sa in enumerate(sens):
        sv, sa_q = f"__sv{i}", f"__sa{i}"
        count = people.copy() if people is not None else exp.Sum(this=w)
        grouped = (exp.select(*key_cols, alias(col(sa), "__v"), alias(count, "__c"))
                   .from_(relation.copy()).group_by(*key_cols, col(sa)))
        ctes.append((sv + "_g", grouped))
        part = exp.Window(this=exp.Sum(this=col("__c")), partition_by=[col(k) for k in keys])
        ctes.append((sv, exp.select(*key_cols, col("__v"), col("__c"), alias(part, "__m")).from_(sv + "_g")))
        total = exp.Subquery(this=exp.select(exp.Sum(this=col("__c"))).from_(sv))
        gq = f"__gq{i}"
        ctes.append((gq, exp.select(col("__v"), alias(exp.Div(this=exp.Sum(this=col("__c")), expression=total),
                                                       "__q")).from_(sv).group_by(col("__v"))))
        items = [*keys_of("x"),
                 alias(exp.Sum(this=col("__c", "x")), SIZE if i == 0 and people is None else f"__size{i}"),
                 alias(exp.Count(this=exp.Star()), f"__distinct__{sa}")]
        if lists:
            ordered = [exp.Ordered(this=col("__c", "x"), desc=True, nulls_first=False)]
            items.append(alias(exp.ArrayAgg(this=exp.Order(this=col("__c", "x"), expressions=ordered)),
                               f"__counts__{sa}"))
            if needs_values:
                items.append(alias(exp.ArrayAgg(this=cast_varchar(col("__v", "x"))), f"__values__{sa}"))
        distance = _distance_ctes(ci, i, sa, keys, sv, gq)
        own_distance.append(distance[-1][0] if distance else None)   # the model names the CTE to join
        if distance is None:
            items.append(alias(equal_distance(col("__c", "x"), col("__m", "x"), col("__q", "g")), f"__tclose__{sa}"))
        extra_cols.append([])
        for model in ci.models:   # per-class aggregates a model declares over (count, class size, table share)
            if model.attribute == sa:
                for name, agg in model.class_aggregates(col("__c", "x"), col("__m", "x"), col("__q", "g")).items():
                    items.append(alias(agg, name))
                    extra_cols[-1].append(name)
        q = (exp.select(*items).from_(exp.Table(this=ident(sv), alias=exp.TableAlias(this=ident("x"))))
             .join(exp.Table(this=ident(gq), alias=exp.TableAlias(this=ident("g"))),
                   on=null_safe_eq(col("__v", "x"), col("__v", "g")), join_type="left")
             .group_by(*keys_of("x")))
        ctes.append((sa_q, q))
        ctes.extend(distance or [])
        per_attr.append(sa_q)

    # assemble: base (first per-attribute aggregate, or sizes), joined with the other aggregates
    first = per_attr[0] if per_attr else "__sz"
    select_items: list[exp.Expression] = [*keys_of(base_alias),
                                          col(SIZE, "su" if sens and people is not None else base_alias)]
    query = exp.select().from_(exp.Table(this=ident(first), alias=exp.TableAlias(this=ident(base_alias))))
    if sens and people is not None:
        query = query.join(exp.Table(this=ident("__su"), alias=exp.TableAlias(this=ident("su"))),
                           on=join_on(base_alias, "su"))
    for i, sa_q in enumerate(per_attr):
        a = base_alias if i == 0 else f"a{i}"
        if i > 0:
            query = query.join(exp.Table(this=ident(sa_q), alias=exp.TableAlias(this=ident(a))), on=join_on(base_alias, a))
        sa = sens[i]
        select_items.append(col(f"__distinct__{sa}", a))
        if lists:
            select_items.append(col(f"__counts__{sa}", a))
            if needs_values:
                select_items.append(col(f"__values__{sa}", a))
        if own_distance[i]:
            t_alias = f"t{i}"
            query = query.join(exp.Table(this=ident(own_distance[i]), alias=exp.TableAlias(this=ident(t_alias))),
                               on=join_on(base_alias, t_alias))
            select_items.append(col(f"__tclose__{sa}", t_alias))
        else:
            select_items.append(col(f"__tclose__{sa}", a))
        select_items.extend(col(name, a) for name in extra_cols[i])
    row_aggs = {name: agg for m in ci.models for name, agg in m.row_aggregates(w).items()}
    if row_aggs:   # per-class aggregates a model declares over the class's rows (slicing's guide)
        ctes.append(("__ra", exp.select(*key_cols, *[alias(agg, name) for name, agg in row_aggs.items()])
                     .from_(relation.copy()).group_by(*key_cols)))
        query = query.join(exp.Table(this=ident("__ra"), alias=exp.TableAlias(this=ident("ra"))),
                           on=join_on(base_alias, "ra"), copy=False)
        select_items.extend(col(name, "ra") for name in row_aggs)
    pop, pop_keys = _population_classes(ci, relation, keys)
    if pop is not None:   # k-map / δ-presence: the population's records matching each class
        ctes.append(("__popc", pop))
        query = query.join(exp.Table(this=ident("__popc"), alias=exp.TableAlias(this=ident("pc"))),
                           on=and_all(null_safe_eq(col(q, base_alias), col(q, "pc")) for q in pop_keys),
                           join_type="left", copy=False)
        select_items.append(alias(exp.Coalesce(this=col("__population", "pc"), expressions=[lit(0)]),
                                  "__population"))
    inner = query.select(*select_items, copy=False)
    for name, cte in ctes:
        # DuckDB: the one aggregation over the rows is computed once, not inlined into each CTE that reads it
        inner = inner.with_(name, as_=cte, materialized=True if ci.target.materialized_ctes and name.endswith("_g") else None, copy=False)

    # outer: model checks over the class columns
    cc = ClassColumns(lambda c: col(c))
    outer_items: list[exp.Expression] = [exp.Star()]
    oks = []
    for model in ci.models:
        if not lists and not model.portable:
            raise PolicyError(
                f"{model.describe()} has no portable SQL form yet; compile for dialect 'duckdb' "
                f"(requested: {ci.dialect!r})"
            )
        for chk in model.sql_checks(cc):
            outer_items.append(alias(chk.value, f"{chk.name}_value"))
            outer_items.append(alias(chk.ok, f"{chk.name}_ok"))
            oks.append(chk.ok.copy())  # not the alias: SQLite reads an unknown "name" as a string
    outer_items.append(alias(and_all(oks), "__all_ok"))
    return exp.select(*outer_items).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("c"))))


def _population_classes(ci: CompileInput, relation: exp.Expression, keys: list[str]
                         ) -> tuple[exp.Select | None, list[str]]:
    """The population's records per class and the keys to join them on (None without a population model). Level
    plans: the population's quasi-identifiers through the plan's level maps, grouped (keys: the QIs). Assignment
    plans: the population records matching the released values of each class of ``relation`` (grouped by
    ``keys``; :mod:`anon_sql.compiler.population`)."""
    models = population_models(ci.models)
    if not models:
        return None, []
    population = models[0].population
    relation_pop = population.relation
    if relation_pop is None:
        raise PolicyError(f"population {population.name!r} of {models[0].name} is read and checked "
                          "against the source only with a connection: pass con= to compile, or release")
    if isinstance(ci.plan, AssignmentPlan):
        plan = ci.plan
        quasi = list(population.quasi or ci.policy.quasi)
        layout = plan.table_check or {}
        groups = ([[a for a in g if a in quasi] for g in layout.get("columns", [])]
                  if plan.row_values and layout.get("columns") else [quasi])
        query = population_match.match_counts(relation, keys, quasi, groups, relation_pop, population.types,
                                              ci.taxonomies, plan.value_intervals or {})
        return query, list(keys)
    quasi = list(ci.policy.quasi)
    items, joins = generalized_items(ci, quasi, "p")
    general = exp.select(*items, col(POP_WEIGHT, "p")).from_(
        exp.Subquery(this=relation_pop.copy(), alias=exp.TableAlias(this=ident("p"))))
    for rel, on in joins:
        general = general.join(rel, on=on, join_type="left", copy=False)
    return (exp.select(*[col(q) for q in quasi], alias(exp.Sum(this=col(POP_WEIGHT)), "__population"))
            .from_(exp.Subquery(this=general, alias=exp.TableAlias(this=ident("g"))))
            .group_by(*[col(q) for q in quasi])), quasi


def _distance_ctes(ci: CompileInput, i: int, sa: str, keys: list[str], sv: str, gq: str
                   ) -> list[tuple[str, exp.Expression]] | None:
    """The CTEs of the model on ``sa`` that computes the class's distance column itself (ordered or hierarchical
    t-closeness), or None: the equal distance computed inline."""
    for model in ci.models:
        if model.attribute == sa:
            ctes = model.distance_ctes(i, keys, sv, gq)
            if ctes is not None:
                return ctes
    return None


def classes_view(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Classes of the generalized (pre-suppression) table with an ``ec_id`` and the suppression decision."""
    if isinstance(ci.plan, LevelPlan):
        return classes_select(ci, exp.Subquery(this=level_base(ci, names), alias=exp.TableAlias(this=ident("gb"))))
    if people_from_base(ci):   # people per class from the base counts, not from every row of __general
        return classes_select(ci, base_general(ci, names), weight=col(WEIGHT))
    return classes_select(ci, names.general.copy())


def classes_select(ci: CompileInput, relation: exp.Expression, weight: exp.Expression | None = None) -> exp.Select:
    """Per-class statistics of ``relation`` (level plans: the aggregated base with weights ``__w``; assignment
    plans: the generalized rows, or ``weight``-ed rows of the base counts), plus ``ec_id`` and the keep flag."""
    if isinstance(ci.plan, AssignmentPlan):
        # the QIs released from the class values are constant per class: carried as keys (same classes), so the
        # requirement windows (PARTITION BY a QI subset) can see them; a QI left unchanged cannot be a key
        keys, null_safe = [EC_ID, *class_level_quasi(ci)], True
        missing = sorted({q for m in ci.models for q in m.grouped_quasi} - set(keys))
        if missing:
            raise PolicyError(f"privacy.requirements name {missing}, which method {ci.policy.method!r} does not "
                              "release per class (they vary inside its classes); drop those requirements or "
                              "choose a method that generalizes them")
    elif signed(ci):   # QIs vary inside units: a class is the units sharing a signature (compiler/signature.py)
        quasi = list(ci.policy.quasi)
        others = [s for s in ci.policy.sensitive if s not in quasi] + [UNIT, WEIGHT]
        keys, null_safe, weight = signature_keys(quasi), True, col(WEIGHT)
        relation = with_signatures(relation, quasi, others)
    else:
        keys, null_safe, weight = list(ci.policy.quasi), True, col(WEIGHT)
    stats = class_stats_query(ci, relation, keys, null_safe, weight=weight)
    # ec_ids follow the text order of the released values on every engine (DuckDB's ENUMs sort by position)
    order = [exp.Ordered(this=cast_varchar(col(k)) if is_enum(ci, k) and not signed(ci) else col(k),
                         nulls_first=True) for k in (keys[:1] if signed(ci) else keys)]
    items: list[exp.Expression] = [exp.Star()]
    if EC_ID not in keys:
        items.append(alias(exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order)), EC_ID))
    suppress = ci.policy.privacy.max_suppression > 0
    items.append(alias(col("__all_ok") if suppress else exp.true(), KEEP))
    return exp.select(*items).from_(exp.Subquery(this=stats, alias=exp.TableAlias(this=ident("s"))))


def signed(ci: CompileInput) -> bool:
    """A level plan over units whose QIs vary: classes are signatures (multi-relational k-anonymity)."""
    return isinstance(ci.plan, LevelPlan) and ci.plan.signatures


def checks_view(ci: CompileInput, names: ReleaseNames, counted_rows: bool = False,
                rows: exp.Table | None = None) -> exp.Select:
    """The independent verification: per released class, every model's value and pass flag (``counted_rows``:
    over the rows the release's table repeats or is written from — ``rows``, default ``names.rows`` —, weighted
    by their counts)."""
    keys = [EC_ID, *ci.policy.quasi]
    if signed(ci):   # the signatures recomputed from the released rows, never read from the plan
        quasi = list(ci.policy.quasi)
        others = [c for c in released_columns(ci.policy, ci.columns) if c not in quasi] + [UNIT, EC_ID]
        relation = with_signatures(names.table, quasi, others)
        return class_stats_query(ci, relation, [EC_ID, *signature_keys(quasi)], null_safe=True)
    if counted_rows:
        table = rows if rows is not None else names.rows
        return class_stats_query(ci, table.copy(), keys, null_safe=True, weight=col(WEIGHT))
    return class_stats_query(ci, names.table.copy(), keys, null_safe=True)
