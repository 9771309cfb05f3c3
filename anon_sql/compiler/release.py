"""The released table's query: the generalized records of the kept classes with ``ec_id`` (count column merged,
rows in a fixed order), written from the base counts, the row map, the kept tuples or the general view."""
from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from ..methods.base import LevelPlan
from ..data import base_counts
from ..common.columns import EC_ID, UNIT
from ..common.sqlbuild import alias, and_all, col, dtype, ident, lit, null_safe_eq, session_table
from .classes import classes_select, signed
from .signature import SIGNATURE, signatures_query
from .general import (base_general, base_table, level_base, level_combos, people_from_base, tuple_base,
                      tuple_join, uses_base_table, uses_tuple_map)
from .names import (KEEP, WEIGHT, CompileInput, ReleaseNames, cast_varchar, noise_flag, released_columns,
                    unit_columns)


def expands_base(ci: CompileInput, data_cols: list[str]) -> bool:
    """A level plan read from a base-count table whose released columns are all QIs / sensitive attributes: written
    from the base counts, never re-reading the source."""
    return ((uses_base_table(ci) or (ci.base is not None and isinstance(ci.plan, LevelPlan)))
            and not ci.policy.count_column and not signed(ci)
            and set(data_cols) <= set(base_counts.keys(ci.policy) + unit_columns(ci.policy)))


def carry_candidates(policy, columns: Sequence[str]) -> list[str]:
    """The released columns a level release on DuckDB may group with its base counts (resolve decides whether it
    pays): plain insensitive columns — no mask, no perturbation, not a key of the base counts — of a release with
    no count column, no privacy unit and no related tables, whose released value is the source's own."""
    if policy.count_column or policy.privacy_unit or policy.related or policy.related_sensitive:
        return []
    keyed = set(base_counts.keys(policy))
    out = []
    for c in released_columns(policy, columns):
        attr = policy.attributes.get(c)
        if c not in keyed and attr is not None and attr.role == "insensitive" and not attr.options:
            out.append(c)
    return out


def data_columns(ci: CompileInput) -> list[str]:
    """Released columns other than the count column (and the noise flag of an assignment plan, if any)."""
    cols = [c for c in released_columns(ci.policy, ci.columns) if c != ci.policy.count_column]
    return cols + ([noise_flag(ci.plan)] if noise_flag(ci.plan) else []) + unit_columns(ci.policy)


def uses_row_map(ci: CompileInput) -> bool:
    """DuckDB level plans that re-read the source (insensitive columns, a count column) join it to a temp table of
    the kept combinations (``<release>__map``): its exact, small cardinality makes it the build side of the hash
    join; inlined, its estimate is so large that DuckDB builds the hash table over the whole source instead."""
    return uses_base_table(ci) and not expands_base(ci, data_columns(ci)) and not signed(ci)


def row_map_table(release_name: str) -> exp.Table:
    """The session-temporary map original QI tuple → (released QI values, ec_id) of the kept classes."""
    return session_table(release_name + "__map")


def counted_rows_table(release_name: str) -> exp.Table:
    """DuckDB: the session-temporary table of a release's rows with their counts (``__w``), which the released
    table is written from and the checks aggregate (:func:`grouped_release`)."""
    return session_table(release_name + "__rows")


ROW_KEY = "__h"   # the row map's join key: a seeded hash of the original QI tuple


def tuple_hash(ci: CompileInput, columns: Sequence[exp.Expression]) -> exp.Expression:
    """``hash(q1, …, qn, seed)``: one 64-bit key for a QI tuple (NULLs included), seeded by the policy."""
    return exp.Anonymous(this="hash", expressions=[*columns, lit(ci.policy.seed)])


def row_map_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Every distinct original QI tuple of the source (kept and suppressed) → released QI values, ``ec_id``, keep
    flag, keyed by :func:`tuple_hash`. The source rows join it on that one key instead of n null-safe keys (issue
    17.5: hashing and comparing n columns twice per row was half the join's cost). Exact because the map holds
    every tuple of the source and its keys are checked distinct here: two tuples with the same hash stop the
    release with an error (a policy ``seed`` changes the hashes)."""
    quasi = list(ci.policy.quasi)
    originals = [col(f"__o{i}") for i in range(len(quasi))]
    # with a unit or sensitive keys a tuple has several base rows: the distinct (original, released) tuples are read
    # once into ``__lt`` (the released values are a function of the original tuple, so these are the distinct
    # original tuples) and the hash check and the map read that, not the base rows three times (issue 24.6)
    per_tuple = not (base_counts.keys(ci.policy) == quasi and not ci.policy.privacy_unit)
    rows = "__lt" if per_tuple else "__lb"
    key = tuple_hash(ci, [col(f"__o{i}", "x") for i in range(len(quasi))])
    # the distinct (tuple hash, released values) pairs: as many as the distinct tuples when no two tuples share a
    # hash (the released values are a function of the tuple), which the scalar check below makes sure of — one
    # hash column carried to the join instead of the n original columns, and no per-tuple window (issue 17.1:
    # a COUNT(*) OVER (PARTITION BY hash) cost 60% of a warm Adult release's SQL time)
    distinct = exp.select(alias(key.copy(), ROW_KEY), *[col(q, "x") for q in quasi]).from_(
        exp.Table(this=ident(rows), alias=exp.TableAlias(this=ident("x"))))
    if not per_tuple:   # the base rows are the tuples
        distinct = distinct.distinct()
    tuples: exp.Expression = exp.Count(this=exp.Star())
    hashes = exp.Count(this=exp.Distinct(expressions=[tuple_hash(ci, [o.copy() for o in originals])]))
    unique = exp.Subquery(this=exp.select(exp.EQ(this=hashes, expression=tuples)).from_(
        exp.Table(this=ident(rows))))
    message = lit("two distinct quasi-identifier combinations of the source share one 64-bit hash; "
                  "set another seed in the policy and release again")
    checked = exp.Case(ifs=[exp.If(this=unique, true=col(ROW_KEY, "d"))],
                       default=exp.Anonymous(this="error", expressions=[message]))
    on = and_all(null_safe_eq(col(q, "d"), col(q, "c")) for q in quasi)
    query = (exp.select(*[col(q, "d") for q in quasi], col(EC_ID, "c"), col(KEEP, "c"), alias(checked, ROW_KEY))
             .from_(exp.Subquery(this=distinct, alias=exp.TableAlias(this=ident("d"))))
             .join(exp.Table(this=ident("__lc"), alias=exp.TableAlias(this=ident("c"))), on=on))
    query = query.with_("__lb", as_=level_base(ci, names, base_counts.temp_table(names.release)), copy=False)
    if per_tuple:
        query = query.with_("__lt", as_=exp.select(*originals, *[col(q) for q in quasi]).distinct().from_(
            exp.Table(this=ident("__lb"))), copy=False)
    return query.with_("__lc", as_=classes_select(ci, exp.Table(this=ident("__lb"))), copy=False)


def release_table_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The released rows: generalized records of the kept classes, with ``ec_id`` (count column merged)."""
    data_cols = data_columns(ci)
    if isinstance(ci.plan, LevelPlan):
        if uses_row_map(ci) and _groups_rows(ci):
            return _grouped_joined_release(ci, names, data_cols, row_map_table(names.release))
        if counts_people_from_base(ci):   # no unit in the table: the checks count people in the base counts
            return _class_grouped_release(ci, names, [c for c in data_cols if c != UNIT],
                                          row_map_table(names.release))
        if uses_row_map(ci) and _groups_unit_rows(ci):
            return _unit_grouped_release(ci, names, data_cols, row_map_table(names.release))
        if uses_row_map(ci):
            return _joined_release(ci, names, data_cols, row_map_table(names.release))
        base = base_table(ci, names)
        if signed(ci):
            query = _signed_release(ci, names, data_cols)
        elif expands_base(ci, data_cols):
            query = _expanded_release(ci, data_cols)
        else:
            query = _joined_release(ci, names, data_cols)
        # one aggregation of the rows feeds both the classes and the row → class map (CTE shared, not rescanned)
        query = query.with_("__lb", as_=level_base(ci, names, base), copy=False)
        return query.with_("__lc", as_=classes_select(ci, exp.Table(this=ident("__lb"))), copy=False)
    if uses_tuple_map(ci) and _expands_tuples(ci, data_cols):
        return _expanded_tuple_release(ci, names, data_cols)
    if uses_tuple_map(ci):   # the source joined to the kept tuples and the class values (no second general read)
        items = [col(c, "v") if c in ci.plan.class_values.columns and c in ci.policy.quasi else col(c, "g")
                 for c in data_cols] + [col(EC_ID, "a")]
        if counts_people_from_base(ci):   # no unit in the table: the checks count people in the base counts
            return _expanded_tuple_release(ci, names, [c for c in data_cols if c != UNIT])
        kept, on = tuple_join(ci, names, "g", "a", kept=True)
        query = (exp.select(*items)
                 .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                                  alias=exp.TableAlias(this=ident("g"))))
                 .join(kept, on=on)
                 .join(exp.Table(this=names.ec_values.this.copy(), db=names.ec_values.args.get("db"),
                                 alias=exp.TableAlias(this=ident("v"))),
                       on=exp.EQ(this=col(EC_ID, "a"), expression=col(EC_ID, "v"))))
        return _ordered_rows(ci, query, items, data_cols)
    items = [col(c, "g") for c in data_cols] + [col(EC_ID, "c")]
    query = (exp.select(*items)
             .from_(exp.Table(this=names.general.this.copy(), db=names.general.args.get("db"),
                              alias=exp.TableAlias(this=ident("g"))))
             .join(exp.Table(this=names.classes.this.copy(), db=names.classes.args.get("db"),
                             alias=exp.TableAlias(this=ident("c"))),
                   on=exp.EQ(this=col(EC_ID, "g"), expression=col(EC_ID, "c")))
             .where(col(KEEP, "c")))
    return _ordered_rows(ci, query, items, data_cols)


def _expanded_release(ci: CompileInput, data_cols: list[str]) -> exp.Select:
    """Every released column is a quasi-identifier or sensitive attribute: a record is fully described by its base
    combination, so each kept combination, in (ec_id, sensitive values) order, is written ``__w`` times (UNNEST,
    which keeps that order) instead of re-reading, joining and sorting the source rows."""
    quasi = list(ci.policy.quasi)
    items = [col(c, "c") if c in quasi else col(c, "b") for c in data_cols] + [col(EC_ID, "c"), col(WEIGHT, "b")]
    on = and_all(null_safe_eq(col(q, "b"), col(q, "c")) for q in quasi)
    order = [col(EC_ID)] + [col(c) for c in data_cols if c not in quasi and c != UNIT]
    kept = (exp.select(*items)
            .from_(exp.Table(this=ident("__lb"), alias=exp.TableAlias(this=ident("b"))))
            .join(exp.Table(this=ident("__lc"), alias=exp.TableAlias(this=ident("c"))), on=on)
            .where(col(KEEP, "c"))
            .order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order]))
    return _each_record(kept, data_cols)


def _signed_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str]) -> exp.Select:
    """QIs varying inside units: the source rows with their own generalized QI values (each distinct original tuple
    → its released values), kept when their unit's signature class is kept, ``ec_id`` that class's."""
    quasi = list(ci.policy.quasi)
    items = [col(c, "k") if c in quasi else col(c, "g") for c in data_cols] + [col(EC_ID, "u")]
    tuples = exp.select(*[col(f"__o{i}") for i in range(len(quasi))], *[col(q) for q in quasi]).distinct().from_(
        exp.Table(this=ident("__lb")))
    sig = exp.Subquery(this=signatures_query(exp.Table(this=ident("__lb")), quasi),
                       alias=exp.TableAlias(this=ident("s")))
    units = (exp.select(col(UNIT, "s"), col(EC_ID, "c")).from_(sig)
             .join(exp.Table(this=ident("__lc"), alias=exp.TableAlias(this=ident("c"))),
                   on=exp.EQ(this=col(SIGNATURE, "s"), expression=col(SIGNATURE, "c")))
             .where(col(KEEP, "c")))
    query = (exp.select(*items)
             .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                              alias=exp.TableAlias(this=ident("g"))))
             .join(exp.Subquery(this=tuples, alias=exp.TableAlias(this=ident("k"))),
                   on=and_all(null_safe_eq(col(q, "g"), col(f"__o{i}", "k")) for i, q in enumerate(quasi)))
             .join(exp.Subquery(this=units, alias=exp.TableAlias(this=ident("u"))),
                   on=exp.EQ(this=col(UNIT, "g"), expression=col(UNIT, "u"))))
    # a class's rows differ in their QIs: those break the ties of the usual order, so the order stays fixed
    return _ordered_rows(ci, query, items, data_cols).order_by(
        *[exp.Ordered(this=cast_varchar(col(q)), nulls_first=True) for q in quasi])


def _expands_tuples(ci: CompileInput, data_cols: list[str]) -> bool:
    """A plan with ``tuple_classes`` whose released columns are all QIs / sensitive attributes (no count column):
    written from the kept rows grouped by class and sensitive values, not sorted row by row."""
    return not ci.policy.count_column and set(data_cols) <= set(base_counts.keys(ci.policy))


def release_reads_base(ci: CompileInput) -> bool:
    """A plan with QI tuples and base counts (:func:`tuple_base`) whose released rows are written from those counts
    (:func:`_expands_tuples`)."""
    return tuple_base(ci) and _expands_tuples(ci, data_columns(ci))


def _expanded_tuple_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str]) -> exp.Select:
    """The release of a plan with ``tuple_classes`` when every released column is a QI or a sensitive attribute
    (:func:`_expands_tuples`): the source rows of the kept tuples grouped by (``ec_id``, the columns not released
    per class) with their count, joined to the class values, sorted in the release order of
    :func:`_ordered_rows` (``ec_id``, then the seeded hash of the non-QI columns) and each group written ``__w``
    times (UNNEST keeps that order). Rows of a group are identical once released, so this is the table the sorted
    rows give, but the sort is over the groups, not over every row (issue 17.3)."""
    policy, plan = ci.policy, ci.plan
    per_class = [c for c in data_cols if c in plan.class_values.columns and c in policy.quasi]
    grouped_cols = [c for c in data_cols if c not in per_class]
    kept, on = tuple_join(ci, names, "g", "a", kept=True)
    keys = [col(EC_ID, "a"), *[col(c, "g") for c in grouped_cols]]
    if release_reads_base(ci):   # the base counts' combinations, summed: no second pass over the source's rows
        rows_of: exp.Expression = ci.base.copy()
        count: exp.Expression = exp.Cast(this=exp.Sum(this=col(WEIGHT, "g")), to=dtype("BIGINT"))
    elif policy.privacy_unit:
        # a person's rows share one QI tuple: the source's rows counted per (QI tuple, grouped columns) first, so
        # the null-safe join to the kept tuples probes those groups, not every row (issue 24.6: the join over
        # 10M rows was half of the statement)
        rows_of = _counted_source(ci, names, grouped_cols)
        count = exp.Cast(this=exp.Sum(this=col(WEIGHT, "g")), to=dtype("BIGINT"))
    else:
        rows_of = exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"))
        count = exp.Count(this=exp.Star())
    rows_of.set("alias", exp.TableAlias(this=ident("g")))
    grouped = (exp.select(*[k.copy() for k in keys], alias(count, WEIGHT))
               .from_(rows_of)
               .join(kept, on=on)
               .group_by(*keys))
    items = [col(c, "v") if c in per_class else col(c, "x") for c in data_cols] + [col(EC_ID, "x")]
    others = [col(c, "x") for c in data_cols if c not in policy.quasi]
    order = [col(EC_ID, "x")] + ([exp.Anonymous(this="hash", expressions=[*others, lit(policy.seed)])]
                                 if others else [])
    rows = (exp.select(*items, col(WEIGHT, "x"))
            .from_(exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("x"))))
            .join(exp.Table(this=names.ec_values.this.copy(), db=names.ec_values.args.get("db"),
                            alias=exp.TableAlias(this=ident("v"))),
                  on=exp.EQ(this=col(EC_ID, "x"), expression=col(EC_ID, "v")))
            .order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order]))
    return _each_record(rows, data_cols)


def _counted_source(ci: CompileInput, names: ReleaseNames, columns: list[str]) -> exp.Subquery:
    """The source's rows counted (``__w``) per distinct (QIs, ``columns``)."""
    keys = [col(c) for c in dict.fromkeys([*ci.policy.quasi, *columns])]
    counted = (exp.select(*keys, alias(exp.Count(this=exp.Star()), WEIGHT))
               .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db")))
               .group_by(*[k.copy() for k in keys]))
    return exp.Subquery(this=counted, alias=exp.TableAlias(this=ident("g")))


def _groups_rows(ci: CompileInput) -> bool:
    """A DuckDB level plan that re-reads the source for its other columns (no count column, no privacy unit): its
    rows are written from the source grouped by (QI tuple, other released columns) with their counts, not sorted
    row by row (issue 29: the sort of every row was four fifths of a 10M-row release)."""
    return ci.target.session_tables and not ci.policy.count_column and not ci.policy.privacy_unit


def counts_people_from_base(ci: CompileInput) -> bool:
    """A DuckDB release with a privacy unit — a level plan that re-reads the source, or a plan with QI tuples and
    base counts (Mondrian) — with no count column, related tables, or metrics that read a sensitive value's people
    from the table: its rows are written from groups with no unit per row and its checks count people in a session
    table of the base counts (one row per person and combination) through the same map that writes the rows
    (:func:`people_query`), tied to the table by a per-class reconciliation of rows (issue 24.6: writing the unit on
    every row and re-reading it was two thirds of a 10M-row level release)."""
    policy = ci.policy
    return (bool(policy.privacy_unit)
            and ((isinstance(ci.plan, LevelPlan) and uses_row_map(ci)) or people_from_base(ci))
            and ci.target.hash_order and not policy.count_column and not policy.related and not policy.related_sensitive
            and not ((policy.metrics or {}).get("compute") and policy.sensitive))


def people_table(release_name: str) -> exp.Table:
    """The session-temporary table of a release's people per class (:func:`people_query`), which its checks read."""
    return session_table(release_name + "__people")


def people_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The base counts of the kept classes through the row map: one row per (original QI tuple, sensitive values,
    unit) with the released QI values, ``ec_id``, the unit and its rows ``__w`` — what the checks count people in
    (:func:`counts_people_from_base`); a plan with QI tuples (Mondrian) reads them through its kept tuples."""
    if not isinstance(ci.plan, LevelPlan):
        return exp.select(exp.Star()).from_(base_general(ci, names, kept=True))
    quasi = list(ci.policy.quasi)
    others = [c for c in base_counts.keys(ci.policy) if c not in quasi]
    combos = row_map_table(names.release)
    combos.set("alias", exp.TableAlias(this=ident("k")))
    base = base_counts.temp_table(names.release)
    base.set("alias", exp.TableAlias(this=ident("b")))
    return (exp.select(*[col(q, "k") for q in quasi], *[col(c, "b") for c in others], col(UNIT, "b"),
                       col(WEIGHT, "b"), col(EC_ID, "k"))
            .from_(base)
            .join(combos, on=exp.EQ(this=tuple_hash(ci, [col(q, "b") for q in quasi]), expression=col(ROW_KEY, "k")))
            .where(col(KEEP, "k")))


def _groups_unit_rows(ci: CompileInput) -> bool:
    """A DuckDB level plan with a privacy unit that re-reads the source (no count column): its rows are sorted as
    groups of released values, each with the list of its rows' units (:func:`_unit_grouped_release`)."""
    return ci.target.session_tables and ci.target.hash_order and not ci.policy.count_column \
        and bool(ci.policy.privacy_unit)


def _released_groups(ci: CompileInput, names: ReleaseNames, released: list[str], row_map: exp.Table,
                     aggregate: exp.Expression) -> exp.Select:
    """The source rows of the kept tuples joined to the row map, grouped by (released values, ``ec_id``) with one
    ``aggregate`` per group, the groups sorted in the release order of :func:`_ordered_rows` (``ec_id``, then the
    seeded hash of the other released values). Grouping after the join keys the aggregation on the released
    values, whose groups are at most those of the original tuples (a diagnosis per visit made a group of almost
    every row when grouped by the original tuple: issue 24.6)."""
    quasi = list(ci.policy.quasi)
    others = [c for c in released if c not in quasi]
    combos = row_map.copy()
    combos.set("alias", exp.TableAlias(this=ident("k")))
    keys = [col(c, "k") if c in quasi else col(c, "g") for c in released] + [col(EC_ID, "k")]
    order = [col(EC_ID)]
    if others:
        order.append(exp.Anonymous(this="hash", expressions=[*[col(c) for c in others], lit(ci.policy.seed)]))
    return (exp.select(*[k.copy() for k in keys], aggregate)
            .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                             alias=exp.TableAlias(this=ident("g"))))
            .join(combos, on=exp.EQ(this=tuple_hash(ci, [col(q, "g") for q in quasi]),
                                    expression=col(ROW_KEY, "k")))
            .where(col(KEEP, "k"))
            .group_by(*keys)
            .order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order]))


def _unit_grouped_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str],
                          row_map: exp.Table) -> exp.Select:
    """The release of :func:`_joined_release` with a privacy unit, sorted by groups instead of rows: the groups of
    :func:`_released_groups` with the list of their units, each group's units unnested, one row each (UNNEST keeps
    that order). The rows and their units are those of the sorted rows, and the order the same up to ties between
    rows whose released values are equal, which differ only in the unit the release drops (issue 24.6: the
    released table with every row sorted was over half of a 10M-row release with a unit)."""
    released = [c for c in data_cols if c != UNIT]
    units = alias(exp.Anonymous(this="list", expressions=[col(UNIT, "g")]), "__units")
    grouped = _released_groups(ci, names, released, row_map, units)
    items = [alias(exp.Unnest(expressions=[col("__units")]), UNIT) if c == UNIT else col(c) for c in data_cols]
    return exp.select(*items, col(EC_ID)).from_(exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("x"))))


def _class_grouped_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str],
                           row_map: exp.Table) -> exp.Select:
    """The release of :func:`_joined_release` written from the groups of :func:`_released_groups` with their counts,
    each written ``__w`` times. Rows of a group are identical once released, so this is the multiset and the order
    the sorted rows give."""
    grouped = _released_groups(ci, names, data_cols, row_map, alias(exp.Count(this=exp.Star()), WEIGHT))
    return _each_record(grouped, data_cols)


def _grouped_joined_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str],
                            row_map: exp.Table) -> exp.Select:
    """The release of :func:`_joined_release` with a row map, written from groups: the source grouped by its QI
    tuple's hash (the row map's key) and the other released columns, with their counts; the groups of the kept
    tuples joined to the map for their released QI values and ``ec_id``, sorted in the release order of
    :func:`_ordered_rows` (``ec_id``, then the seeded hash of the other columns) and each written ``__w`` times.
    Rows of a group are identical once released, so this is the multiset and the order the sorted rows give
    (rows that tie in that order are identical); the per-row work is one aggregation, the sort is over groups."""
    quasi = list(ci.policy.quasi)
    others = [c for c in data_cols if c not in quasi]
    key = tuple_hash(ci, [col(q) for q in quasi])
    if ci.carried and set(others) <= set(base_counts.keys(ci.policy)) | set(ci.carried):
        # resolve grouped these columns with the base counts (base_counts.create_carried_tables): the groups are
        # summed from those counts, not from a second pass over the source's rows (issue 29.2)
        rows_of: exp.Expression = base_counts.carry_table(names.release)
        count: exp.Expression = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
    else:
        rows_of, count = names.source.copy(), exp.Count(this=exp.Star())
    grouped = (exp.select(alias(key, ROW_KEY), *[col(c) for c in others], alias(count, WEIGHT))
               .from_(rows_of)
               .group_by(key.copy(), *[col(c) for c in others]))
    combos = row_map.copy()
    combos.set("alias", exp.TableAlias(this=ident("k")))
    items = [col(c, "k") if c in quasi else col(c, "x") for c in data_cols] + [col(EC_ID, "k"), col(WEIGHT, "x")]
    order = [col(EC_ID, "k")]
    if others:
        order.append(exp.Anonymous(this="hash", expressions=[*[col(c, "x") for c in others], lit(ci.policy.seed)]))
    rows = (exp.select(*items)
            .from_(exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("x"))))
            .join(combos, on=exp.EQ(this=col(ROW_KEY, "x"), expression=col(ROW_KEY, "k")))
            .where(col(KEEP, "k"))
            .order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order]))
    return _each_record(rows, data_cols)


def _joined_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str],
                    row_map: exp.Table | None = None) -> exp.Select:
    """The source rows joined to the map original QI tuple → (released values, ec_id) of the kept classes (the
    ``row_map`` temp table, or inline from the ``__lb`` / ``__lc`` CTEs)."""
    quasi = list(ci.policy.quasi)
    items = [col(c, "k") if c in quasi else col(c, "g") for c in data_cols] + [col(EC_ID, "k")]
    if row_map is not None:   # one hash key (exact: see row_map_query), kept classes only
        combos: exp.Expression = row_map.copy()
        combos.set("alias", exp.TableAlias(this=ident("k")))
        on = exp.EQ(this=tuple_hash(ci, [col(q, "g") for q in quasi]), expression=col(ROW_KEY, "k"))
    else:
        combos = exp.Subquery(this=level_combos(ci, "__lb", "__lc"), alias=exp.TableAlias(this=ident("k")))
        on = and_all(null_safe_eq(col(q, "g"), col(f"__o{i}", "k")) for i, q in enumerate(quasi))
    query = (exp.select(*items)
             .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                              alias=exp.TableAlias(this=ident("g"))))
             .join(combos, on=on))
    if row_map is not None:
        query = query.where(col(KEEP, "k"))
    return _ordered_rows(ci, query, items, data_cols)


def _ordered_rows(ci: CompileInput, query: exp.Select, items: list[exp.Expression], data_cols: list[str]
                  ) -> exp.Select:
    """Merge rows by the count column (if any) and fix the row order: by ec_id, then — on DuckDB — a hash of the
    other released values and the policy's seed, never the source's order (quasi-identifiers are constant inside a
    class; identical rows are interchangeable, so the order depends on the released values alone). One integer key
    after ec_id instead of every released column keeps the sort cheap (issue 17.5); engines without DuckDB's
    ``hash`` order by the released columns themselves."""
    policy = ci.policy
    if policy.count_column:
        total = exp.Cast(this=exp.Sum(this=col(policy.count_column, "g")), to=dtype("BIGINT"))
        query = query.select(alias(total, policy.count_column)).group_by(*[g.copy() for g in items])
    others = [col(c) for c in data_cols if c not in policy.quasi and c != UNIT]   # never the unit's raw value
    if policy.count_column:
        others.append(col(policy.count_column))
    order_cols = [col(EC_ID)]
    if others and ci.target.hash_order:
        order_cols.append(exp.Anonymous(this="hash", expressions=[*others, lit(policy.seed)]))
    else:
        order_cols += others
    wrapped = exp.select(exp.Star()).from_(exp.Subquery(this=query, alias=exp.TableAlias(this=ident("r"))))
    return wrapped.order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order_cols])


def pieces_table(release_name: str) -> exp.Table:
    """DuckDB: the session-temporary table of a release's rows with their counts cut into pieces
    (:func:`pieces_query`), which the released table is written from; dropped once it is written."""
    return session_table(release_name + "__pieces")


# DuckDB's rows per row group, its unit of parallel work when it scans a table
ROW_GROUP_ROWS = 122_880


def pieces_query(rows: exp.Table, data_cols: Sequence[str], row_group_rows: int = ROW_GROUP_ROWS,
                 offset: str | None = None) -> exp.Select:
    """``rows`` (released values with their counts ``__w``, in release order) with each count cut into pieces of
    at most ``s`` records, in the same order: the same records, in as many rows as make two row groups per thread.
    DuckDB repeats the rows of one scanned row group on one thread, and a table of rows with counts is often a few
    thousand rows — one row group — so writing 10M released records from it ran on one thread (issue 29: 1.9 s
    against 1.0 s from the pieces, the same rows in the same order). No rows at all (:func:`written_rows` then reads
    ``rows`` itself) when cutting does not pay, as read from ``rows`` when the statement runs: fewer than four row
    groups of records, rows that fill two row groups per thread already (a copy would cost without helping), or
    no ``preserve_insertion_order`` (the pieces keep the release order only with it). ``row_group_rows``: a test's
    smaller row group, to cut small tables. ``offset``: a column of ``data_cols`` that numbers the records (the
    first ``__row`` of an assignment span), advanced in each piece by the records of the pieces before it."""
    w = col(WEIGHT)
    total = exp.Sum(this=w.copy())
    threads = exp.Cast(this=exp.Anonymous(this="current_setting", expressions=[lit("threads")]), to=dtype("BIGINT"))
    ordered = exp.Cast(this=exp.Anonymous(this="current_setting", expressions=[lit("preserve_insertion_order")]),
                       to=dtype("BOOLEAN"))
    per_thread = exp.Paren(this=exp.Mul(this=threads, expression=exp.Literal.number(2 * row_group_rows)))
    pays = exp.and_(exp.GTE(this=total.copy(), expression=exp.Literal.number(4 * row_group_rows)),
                    exp.LT(this=exp.Count(this=exp.Star()), expression=per_thread.copy()), ordered)
    # DuckDB's greatest / least skip NULLs, as written: not sqlglot's portable form
    step = exp.Anonymous(this="greatest", expressions=[exp.Literal.number(1), exp.Ceil(this=exp.Div(
        this=total.copy(), expression=per_thread.copy()))])

    def scalar(e: exp.Expression) -> exp.Expression:   # an uncorrelated scalar subquery: DuckDB computes it once
        return exp.Subquery(this=exp.select(e.copy()).from_(rows.copy()))

    size = exp.Cast(this=step, to=dtype("BIGINT"))
    kept = [col(c) for c in data_cols] + [col(EC_ID)]
    starts = exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[exp.Literal.number(0), w.copy(),
                                                                               scalar(size)])])
    cut_rows = (exp.select(*[c.copy() for c in kept], w.copy(), alias(starts, "__j")).from_(rows.copy())
                .where(scalar(pays)))
    piece = exp.Anonymous(this="least", expressions=[exp.Sub(this=w.copy(), expression=col("__j")), scalar(size)])
    out = [alias(exp.Add(this=c.copy(), expression=col("__j")), offset) if c.name == offset else c.copy()
           for c in kept]
    return exp.select(*out, alias(piece, WEIGHT)).from_(
        exp.Subquery(this=cut_rows, alias=exp.TableAlias(this=ident("p"))))


def pieces_or_rows(pieces: exp.Table, rows: exp.Table, data_cols: Sequence[str]) -> exp.Subquery:
    """The pieces of :func:`pieces_query` when there are any, else ``rows`` themselves (one of the two is read,
    the other gives no row): ``data_cols``, ``ec_id`` and ``__w``, in order."""
    kept = [col(c) for c in data_cols] + [col(EC_ID), col(WEIGHT)]
    none_cut = exp.Not(this=exp.Exists(this=exp.select(exp.Literal.number(1)).from_(pieces.copy())))
    either = exp.union(exp.select(*[c.copy() for c in kept]).from_(pieces.copy()),
                       exp.select(*[c.copy() for c in kept]).from_(rows.copy()).where(none_cut), distinct=False)
    return exp.Subquery(this=either, alias=exp.TableAlias(this=ident("w")))


def written_rows(pieces: exp.Table, rows: exp.Table, data_cols: Sequence[str]) -> exp.Select:
    """The released table's statement from :func:`pieces_or_rows`: each written ``__w`` times, in order."""
    return _each_record(exp.select(exp.Star()).from_(pieces_or_rows(pieces, rows, data_cols)), data_cols)


_REPEATED = "anon_sql.repeated"   # meta key of a release query built by _each_record: its released columns


def _each_record(grouped: exp.Select, data_cols: Sequence[str]) -> exp.Select:
    """``grouped`` (released values with their records in ``__w``, in release order) as one row per record: each
    row repeated ``__w`` times by an UNNEST of a series, the order kept."""
    copies = exp.Unnest(expressions=[exp.GenerateSeries(start=lit(0), end=col(WEIGHT), is_end_exclusive=True)])
    out = [col(c) for c in data_cols] + [col(EC_ID)]
    repeated = exp.select(*out, alias(copies, "__i")).from_(
        exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("g"))))
    query = exp.select(*[c.copy() for c in out]).from_(
        exp.Subquery(this=repeated, alias=exp.TableAlias(this=ident("r"))))
    query.meta[_REPEATED] = list(data_cols)
    return query


def grouped_release(query: exp.Expression) -> tuple[exp.Select, list[str]] | None:
    """A release query that writes each row of a grouped query ``__w`` times (:func:`_each_record`): those
    rows with their counts (the query's common table expressions moved onto them) and the released columns, so
    that an engine may keep the rows once with their counts and repeat them when read (:func:`repeated_rows`);
    None for any other query."""
    data_cols = query.meta.get(_REPEATED)
    if data_cols is None:
        return None
    repeated = _from_query(query)
    grouped = _from_query(repeated).copy()
    ctes = query.args.get("with_")
    if ctes is not None:
        grouped.set("with_", ctes.copy())
    return grouped, list(data_cols)


def _from_query(select: exp.Select) -> exp.Select:
    """The query of ``select``'s FROM subquery."""
    source = select.args.get("from_") or select.args.get("from")
    return source.this.this


def repeated_rows(table: exp.Table, data_cols: Sequence[str]) -> exp.Select:
    """The released rows of a table of rows with their counts ``__w`` (:func:`grouped_release`): each
    written ``__w`` times, in the table's order."""
    return _each_record(exp.select(exp.Star()).from_(table.copy()), data_cols)
