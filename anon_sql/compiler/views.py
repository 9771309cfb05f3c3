"""Policy + plan → sqlglot statements for the release views (``__source``, ``__general``, ``__classes``, the
release table, ``__checks``). Trees are rendered to text only at the end, in the requested dialect.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from sqlglot import exp

from ..errors import PolicyError
from ..methods.base import ROW_ID, AssignmentPlan, LevelPlan
from ..models import ClassColumns, PrivacyModel, population_models
from ..models.population import WEIGHT as POP_WEIGHT
from ..data import base_counts
from . import population as population_match
from .masks import column_mask
from ..common.columns import EC_ID, SIZE, UNIT
from ..common.sqlbuild import alias, and_all, col, dtype, ident, lit, null_safe_eq, prerendered, render
from ..data.taxonomy import TOP, Taxonomy
from ..catalog.names import COUNTED_ROWS, KEPT_WORKING, WORK_SCHEMA, WORKING, working

WEIGHT = base_counts.WEIGHT
KEEP = "__keep"
BASE_STATEMENT = "base counts"   # the runner skips it when resolve already made the table


SCHEMA_STATEMENT = "work schema"
DROP_UNIT_STATEMENT = "drop unit column"   # run after verification, not with the other statements
SOURCE_STATEMENT = "source view"
# working views the release may not need: the runner skips creating one that no later statement reads
DROPPED_VIEWS = ("generalized view", "classes view")


@dataclass
class ReleaseNames:
    """Names of the objects a release creates: the released table (in the user's schema, ``schema`` or the current
    one) and its working objects (in ``work``, the product's own schema; see :func:`working`)."""

    release: str
    schema: str | None = None
    work: str | None = WORK_SCHEMA

    def _t(self, suffix: str) -> exp.Table:
        return working(self.release, suffix, self.work)

    @property
    def table(self) -> exp.Table:
        return exp.Table(this=ident(self.release), db=ident(self.schema) if self.schema else None)

    @property
    def source(self) -> exp.Table:
        return self._t("source")

    @property
    def general(self) -> exp.Table:
        return self._t("general")

    @property
    def classes(self) -> exp.Table:
        return self._t("classes")

    @property
    def checks(self) -> exp.Table:
        return self._t("checks")

    @property
    def assignment(self) -> exp.Table:
        return self._t("assignment")

    @property
    def ec_values(self) -> exp.Table:
        return self._t("ec_values")

    @property
    def noise(self) -> exp.Table:
        return self._t("noise")

    @property
    def risk(self) -> exp.Table:
        return self._t("risk")

    @property
    def perturbed(self) -> exp.Table:
        """The source with its perturbed and table-masked columns (docs/sdc.md), which ``__source`` reads."""
        return self._t("perturbed")

    @property
    def rows(self) -> exp.Table:
        """A release of repeated rows kept as the rows it repeats with their counts (``CompileInput.counted_rows``:
        made only by an engine that keeps releases so, Spark; not one of :data:`WORKING`, which DuckDB claims)."""
        return exp.Table(this=ident(f"{self.release}__{COUNTED_ROWS}"), db=ident(self.work) if self.work else None)

    def views(self) -> list[exp.Table]:
        """The working views, dependants first."""
        return [self._t(p) for p in ("checks", "classes", "general", "source")]

    def plan_tables(self) -> list[exp.Table]:
        """The working tables of an assignment plan (and slicing's per-record risk, and the perturbed source)."""
        return [self._t(p) for p in ("assignment", "ec_values", "noise", "risk", "perturbed")]

    def source_relation(self) -> exp.Table | str:
        """What a method reads its data through: the ``__source`` view (its bare name where it is unqualified)."""
        return self.source if self.work else self.source.name


@dataclass
class CompileInput:
    """Everything the compiler needs; no connection."""

    policy: Any
    relation: exp.Expression          # the source relation (table or table function)
    columns: list[str]                # source columns in order
    plan: LevelPlan | AssignmentPlan
    taxonomies: dict[str, Taxonomy]
    models: list[PrivacyModel]
    dialect: str = "duckdb"
    schema: str | None = None
    pseudonym_function: str | None = None    # UDF that pseudonymizes identifiers (DuckDB only)
    numeric_sensitive: set[str] = field(default_factory=set)
    engine: str = "duckdb"            # what runs the SQL: Spark runs DuckDB-flavoured trees after a rewrite
    base: exp.Table | None = None     # the base counts the engine already holds (made by resolve), if any
    # the engine keeps a release written as repeated rows as the rows with their counts (``__rows``, one per source
    # combination: a released row may be in several), the table a view repeating them, and the checks aggregate the
    # counts (Spark: see SparkEngine.keeps_counted_rows)
    counted_rows: bool = False
    types: dict[str, str] = field(default_factory=dict)   # source column → engine type (a mask's cast)
    sdc_prepared: bool = False        # the relation holds the policy's perturbations and whole-column masks

    @property
    def on_duckdb(self) -> bool:
        """DuckDB SQL run by DuckDB: temp tables and ENUM types may be used."""
        return self.dialect == "duckdb" and self.engine == "duckdb"


@dataclass
class CompiledRelease:
    names: ReleaseNames
    statements: list[tuple[str, exp.Expression]]   # (description, statement)
    released_columns: list[str]
    dialect: str
    counted_rows: exp.Table | None = None   # where the released rows are kept, when not in the table itself
    _texts: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)   # renderings, unread

    def unread(self, kinds: tuple[str, ...]) -> frozenset[int]:
        """Indexes of the statements of these descriptions that create a view no later statement reads (by name,
        in any schema); computed once per compiled release."""
        key = ("unread", kinds)
        if key not in self._texts:
            found = set()
            for i, (what, stmt) in enumerate(self.statements):
                if what not in kinds:
                    continue
                name = stmt.this.name.lower()
                if not any(t.name.lower() == name for _, later in self.statements[i + 1:]
                           for t in later.find_all(exp.Table)):
                    found.add(i)
            self._texts[key] = frozenset(found)
        return self._texts[key]

    def sql(self, pretty: bool = False) -> list[str]:
        """Each statement as text, rendered once (the runner executes the pretty text it also stores)."""
        if pretty not in self._texts:
            # the statements belong to this release and are only rendered in its dialect: no defensive copies
            self._texts[pretty] = [render(s, self.dialect, pretty=pretty, copy=False) for _, s in self.statements]
        return list(self._texts[pretty])     # a list of its own: the texts are shared by the compiled releases


# -- columns ------------------------------------------------------------------------------------------------------
def unit_columns(policy) -> list[str]:
    """``[UNIT]`` when the policy counts people (``privacy_unit``): the working views and the release as verified
    carry the unit's value in that column; ``[]`` otherwise."""
    return [UNIT] if getattr(policy, "privacy_unit", None) else []


def drop_unit_statement(names: ReleaseNames) -> exp.Alter:
    """``ALTER TABLE <release> DROP COLUMN __unit``: run once the release is verified (the checks count people
    through it; the committed release never holds it)."""
    return exp.Alter(this=names.table.copy(), kind="TABLE",
                     actions=[exp.Drop(tables=[exp.Column(this=ident(UNIT))], kind="COLUMN")])


def released_columns(policy, columns: Sequence[str]) -> list[str]:
    """Source columns that reach the release: all but dropped identifiers (a masked identifier is released masked;
    the count column is kept last)."""
    out = []
    for c in columns:
        attr = policy.attributes.get(c)
        if attr is not None and attr.role == "identifier" and attr.action == "drop" and not attr.options.get("mask"):
            continue
        out.append(c)
    return out


def _weight(policy, table: str | None = None) -> exp.Expression:
    if policy.count_column:
        return col(policy.count_column, table)
    return lit(1)


def _varchar(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=dtype("VARCHAR"))


def _mapping_relation(rows: list[tuple[str, str]], alias_name: str, dialect: str) -> exp.Expression:
    """leaf → value rows as an inline relation with columns (leaf, value); VALUES, or UNION ALL for SQLite."""
    if dialect == "sqlite":
        selects = [exp.select(alias(lit(a), "leaf"), alias(lit(b), "value")) for a, b in rows]
        union: exp.Expression = selects[0]
        for s in selects[1:]:
            union = exp.union(union, s, distinct=False)
        return exp.Subquery(this=union, alias=exp.TableAlias(this=ident(alias_name)))
    tuples = [exp.Tuple(expressions=[lit(a), lit(b)]) for a, b in rows]
    return exp.Values(expressions=tuples,
                      alias=exp.TableAlias(this=ident(alias_name), columns=[ident("leaf"), ident("value")]))


def _create_view(name: exp.Table, query: exp.Expression, dialect: str = "duckdb") -> exp.Create:
    # SQLite has no CREATE OR REPLACE VIEW; its compiled script is meant for a fresh database
    return exp.Create(this=name, kind="VIEW", expression=query, replace=dialect != "sqlite")


# -- the views ----------------------------------------------------------------------------------------------------
def source_view(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Identifiers dropped or pseudonymized; for assignment plans a deterministic row key ``__row``."""
    policy = ci.policy
    items: list[exp.Expression] = []
    for c in released_columns(policy, ci.columns):
        attr = policy.attributes.get(c)
        masked = column_mask(policy, c, on_duckdb=ci.on_duckdb, prepared=ci.sdc_prepared,
                             column_type=ci.types.get(c))
        if masked is not None:
            items.append(alias(masked, c))
        elif attr is not None and attr.role == "identifier" and attr.options.get("mask"):
            items.append(col(c))     # shuffled or faked in the prepared relation
        elif attr is not None and attr.role == "identifier":  # pseudonymize
            if not ci.pseudonym_function:
                raise PolicyError(f"identifier {c!r}: pseudonymization needs a key (set ANON_SQL_KEY or key_file)")
            items.append(alias(exp.Anonymous(this=ci.pseudonym_function, expressions=[_varchar(col(c))]), c))
        else:
            items.append(col(c))
    if policy.privacy_unit:   # the unit's own value, for counting people (dropped before the release commits)
        items.append(alias(col(policy.privacy_unit), UNIT))
    if isinstance(ci.plan, AssignmentPlan):
        order = [exp.Ordered(this=col(c), nulls_first=True) for c in ci.columns]
        items.append(alias(exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order)), ROW_ID))
    return exp.select(*items).from_(ci.relation.copy())


def source_statement(ci: CompileInput, names: ReleaseNames) -> exp.Create:
    """``CREATE VIEW <release>__source``: the first statement, which methods read their data through."""
    return _create_view(names.source, source_view(ci, names), ci.dialect)


def work_schema_statement(names: ReleaseNames) -> exp.Create:
    """``CREATE SCHEMA IF NOT EXISTS anon_work``: where the working objects live."""
    return exp.Create(this=exp.Table(this=ident(names.work)), kind="SCHEMA", exists=True)


def general_view(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Generalized quasi-identifiers: joins to the level maps (level plans) or to the assignment (local recoding)."""
    policy = ci.policy
    cols = released_columns(policy, ci.columns) + unit_columns(policy)
    src = "s"
    if isinstance(ci.plan, LevelPlan):
        items, joins = _generalized_items(ci, cols, src)
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
        assigned, on = _tuple_join(ci, names, src, "a")
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
    return (ci.on_duckdb and isinstance(plan, AssignmentPlan) and plan.tuple_classes is not None
            and not plan.row_values)


def tuple_map_table(release_name: str, kept: bool = False) -> exp.Table:
    """The session-temporary map QI tuple → ``ec_id`` of an assignment plan (:func:`uses_tuple_map`); ``kept``: the
    same map restricted to the kept classes, which the release statement joins."""
    return exp.Table(this=ident(release_name + ("__kept" if kept else "__tuples")), db=ident("main"),
                     catalog=ident("temp"))


def _kept_tuples_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The QI tuples of the kept classes (the classes view's keep flag) with their ``ec_id``: the release joins the
    source to this small table — its exact cardinality makes it the hash join's build side — instead of joining the
    general view (every row) to the classes."""
    tuples = tuple_map_table(names.release)
    tuples.set("alias", exp.TableAlias(this=ident("a")))
    return (exp.select(exp.Column(this=exp.Star(), table=ident("a"))).from_(tuples)
            .join(exp.Table(this=names.classes.this.copy(), db=names.classes.args.get("db"),
                            alias=exp.TableAlias(this=ident("c"))),
                  on=exp.EQ(this=col(EC_ID, "a"), expression=col(EC_ID, "c")))
            .where(col(KEEP, "c")))


def _tuple_casts(ci: CompileInput, source: str) -> list[exp.Expression]:
    """The QIs of relation ``source`` cast the way ``plan.tuple_classes`` holds them (DOUBLE or VARCHAR)."""
    from ..methods.local_values import tuple_casts   # pyarrow: only for plans that carry the tuples

    return tuple_casts(ci.policy, ci.plan.tuple_classes, source)


def _tuple_join(ci: CompileInput, names: ReleaseNames, source: str, alias_name: str, kept: bool = False
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
    sorts the distinct rows, not every row (issue 17.3)."""
    cols = list(ci.columns)
    n, start, i = "__n", "__start", "__i"
    grouped = exp.select(*[col(c) for c in cols], alias(exp.Count(this=exp.Star()), n)).from_(
        ci.relation.copy()).group_by(*[col(c) for c in cols])
    order = [exp.Ordered(this=col(c), nulls_first=True) for c in cols]
    running = exp.Window(this=exp.Sum(this=col(n)), order=exp.Order(expressions=order),
                         spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                             end="CURRENT ROW"))
    started = exp.select(exp.Star(), alias(exp.Sub(this=running, expression=col(n)), start)).from_(
        exp.Subquery(this=grouped, alias=exp.TableAlias(this=ident("d"))))
    assigned, on = _tuple_join(ci, names, "r", "a")
    kept = (exp.select(col(start, "r"), col(n, "r"), col(EC_ID, "a"))
            .from_(exp.Subquery(this=started, alias=exp.TableAlias(this=ident("r"))))
            .join(assigned, on=on)
            .order_by(col(start, "r")))
    series = exp.Unnest(expressions=[exp.GenerateSeries(start=lit(1), end=col(n))])
    repeated = exp.select(col(start), col(EC_ID), alias(series, i)).from_(
        exp.Subquery(this=kept, alias=exp.TableAlias(this=ident("k"))))
    row = exp.Cast(this=exp.Add(this=col(start), expression=col(i)), to=dtype("BIGINT"))
    return exp.select(alias(row, ROW_ID), col(EC_ID)).from_(
        exp.Subquery(this=repeated, alias=exp.TableAlias(this=ident("x"))))


def _generalized_items(ci: CompileInput, cols: Sequence[str], src: str
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
        if ci.on_duckdb and all(v == fallback for v in tax.mapping(level).values()):
            # every leaf maps to the value NULL and unknown values map to (the top): a constant, no join (issue
            # 17.1: at the optimum of a wide search most columns are at the top, and each join cost binding and
            # probing time for one value)
            items.append(prerendered(("constant", tax.fingerprint(), level, c), lambda: alias(
                exp.Cast(this=lit(fallback), to=_released_domain(_rows(tax, level), fallback)), c)))
            continue
        m = f"m{len(joins)}"
        on = exp.EQ(this=_varchar(col(c, src)), expression=col("leaf", m))
        if ci.on_duckdb:   # the VALUES list and the ENUM domain rendered once per (taxonomy content, level, alias)
            fp = tax.fingerprint()
            joins.append((prerendered(("map", fp, level, m), lambda: _mapping_relation(_rows(tax, level), m, ci.dialect)),
                          on))
            items.append(prerendered(("value", fp, level, m, c), lambda: _mapped_value(tax, level, m, c, True)))
            continue
        joins.append((_mapping_relation(_rows(tax, level), m, ci.dialect), on))
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


def _is_enum(ci: CompileInput, column: str) -> bool:
    """A generalized quasi-identifier of a DuckDB level plan (released as an ENUM)."""
    return (ci.on_duckdb and isinstance(ci.plan, LevelPlan) and column in ci.policy.quasi
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


def _level_base(ci: CompileInput, names: ReleaseNames, base: exp.Table | None = None) -> exp.Select:
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
    items, joins = _generalized_items(ci, keep + unit_columns(policy), "b")
    originals = [alias(col(q, "b"), f"__o{i}") for i, q in enumerate(policy.quasi)]
    query = exp.select(*originals, *items, col(WEIGHT, "b")).from_(counts)
    for rel, on in joins:
        query = query.join(exp.Join(this=rel, on=on, side="LEFT"), copy=False)
    return query


def uses_base_table(ci: CompileInput) -> bool:
    """DuckDB level plans keep the base counts in a temp table that the release statement reads."""
    return ci.on_duckdb and isinstance(ci.plan, LevelPlan)


def base_table(ci: CompileInput, names: ReleaseNames) -> exp.Table | None:
    """Where a level plan's release statement reads the base counts: the table the engine already holds
    (``ci.base``: Spark's cached view), DuckDB's temp table (made by the script when resolve did not), else None
    (aggregated inline)."""
    if not isinstance(ci.plan, LevelPlan):
        return None
    if ci.base is not None:
        return ci.base
    return base_counts.temp_table(names.release) if uses_base_table(ci) else None


def _level_combos(ci: CompileInput, base: str, classes: str, kept_only: bool = True) -> exp.Select:
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


def noise_flag(plan) -> str | None:
    """The boolean column that marks noise records in the release (``plan.noise_flag``), if any."""
    return plan.noise_flag if isinstance(plan, AssignmentPlan) else None


def class_stats_query(ci: CompileInput, relation: exp.Expression, keys: list[str], null_safe: bool,
                      weight: exp.Expression | None = None) -> exp.Select:
    """One row per class (grouped by ``keys``): size, per sensitive attribute distinct count / sorted counts /
    t-closeness distance, and one value + pass column per privacy model."""
    policy = ci.policy
    duck = ci.dialect == "duckdb"
    w = weight if weight is not None else _weight(policy)
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
    own_distance: list[bool] = []   # per attribute: a model computes the distance column in CTEs of its own
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
        tc_equal = exp.Mul(this=lit(0.5), expression=exp.Paren(this=exp.Add(
            this=exp.Sum(this=exp.Abs(this=exp.Sub(this=exp.Div(this=col("__c", "x"), expression=col("__m", "x")),
                                                    expression=col("__q", "g")))),
            expression=exp.Sub(this=lit(1.0), expression=exp.Sum(this=col("__q", "g"))))))
        items = [*keys_of("x"),
                 alias(exp.Sum(this=col("__c", "x")), SIZE if i == 0 and people is None else f"__size{i}"),
                 alias(exp.Count(this=exp.Star()), f"__distinct__{sa}")]
        if duck:
            ordered = [exp.Ordered(this=col("__c", "x"), desc=True, nulls_first=False)]
            items.append(alias(exp.ArrayAgg(this=exp.Order(this=col("__c", "x"), expressions=ordered)),
                               f"__counts__{sa}"))
            if needs_values:
                items.append(alias(exp.ArrayAgg(this=_varchar(col("__v", "x"))), f"__values__{sa}"))
        distance = _distance_ctes(ci, i, sa, keys, sv, gq)
        own_distance.append(distance is not None)
        if distance is None:
            items.append(alias(tc_equal, f"__tclose__{sa}"))
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
        if duck:
            select_items.append(col(f"__counts__{sa}", a))
            if needs_values:
                select_items.append(col(f"__values__{sa}", a))
        if own_distance[i]:
            t_alias = f"t{i}"
            query = query.join(exp.Table(this=ident(f"__tco{i}"), alias=exp.TableAlias(this=ident(t_alias))),
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
        inner = inner.with_(name, as_=cte, materialized=True if ci.on_duckdb and name.endswith("_g") else None, copy=False)

    # outer: model checks over the class columns
    cc = ClassColumns(lambda c: col(c))
    outer_items: list[exp.Expression] = [exp.Star()]
    oks = []
    for model in ci.models:
        if not duck and not model.portable:
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
    items, joins = _generalized_items(ci, quasi, "p")
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
        return _classes_select(ci, exp.Subquery(this=_level_base(ci, names), alias=exp.TableAlias(this=ident("gb"))))
    return _classes_select(ci, names.general.copy())


def class_level_quasi(ci: CompileInput) -> list[str]:
    """Quasi-identifiers an assignment plan releases per class (from its class values, not per row: a plan with
    ``row_values`` releases none per class)."""
    plan = ci.plan
    if not isinstance(plan, AssignmentPlan) or plan.row_values:
        return []
    return [q for q in ci.policy.quasi if q in plan.class_values.columns]


def _classes_select(ci: CompileInput, relation: exp.Expression) -> exp.Select:
    """Per-class statistics of ``relation`` (level plans: the aggregated base with weights ``__w``; assignment
    plans: the generalized rows), plus ``ec_id`` and the keep flag."""
    if isinstance(ci.plan, AssignmentPlan):
        # the QIs released from the class values are constant per class: carried as keys (same classes), so the
        # requirement windows (PARTITION BY a QI subset) can see them; a QI left unchanged cannot be a key
        keys, null_safe, weight = [EC_ID, *class_level_quasi(ci)], True, None
        missing = sorted({q for m in ci.models for q in m.grouped_quasi} - set(keys))
        if missing:
            raise PolicyError(f"privacy.requirements name {missing}, which method {ci.policy.method!r} does not "
                              "release per class (they vary inside its classes); drop those requirements or "
                              "choose a method that generalizes them")
    else:
        keys, null_safe, weight = list(ci.policy.quasi), True, col(WEIGHT)
    stats = class_stats_query(ci, relation, keys, null_safe, weight=weight)
    # ec_ids follow the text order of the released values on every engine (DuckDB's ENUMs sort by position)
    order = [exp.Ordered(this=_varchar(col(k)) if _is_enum(ci, k) else col(k), nulls_first=True) for k in keys]
    items: list[exp.Expression] = [exp.Star()]
    if EC_ID not in keys:
        items.append(alias(exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order)), EC_ID))
    suppress = ci.policy.privacy.max_suppression > 0
    items.append(alias(col("__all_ok") if suppress else exp.true(), KEEP))
    return exp.select(*items).from_(exp.Subquery(this=stats, alias=exp.TableAlias(this=ident("s"))))


def _expands(ci: CompileInput, data_cols: list[str]) -> bool:
    """A level plan read from a base-count table whose released columns are all QIs / sensitive attributes: written
    from the base counts, never re-reading the source."""
    return ((uses_base_table(ci) or (ci.base is not None and isinstance(ci.plan, LevelPlan)))
            and not ci.policy.count_column
            and set(data_cols) <= set(base_counts.keys(ci.policy) + unit_columns(ci.policy)))


def _data_columns(ci: CompileInput) -> list[str]:
    """Released columns other than the count column (and the noise flag of an assignment plan, if any)."""
    cols = [c for c in released_columns(ci.policy, ci.columns) if c != ci.policy.count_column]
    return cols + ([noise_flag(ci.plan)] if noise_flag(ci.plan) else []) + unit_columns(ci.policy)


def uses_row_map(ci: CompileInput) -> bool:
    """DuckDB level plans that re-read the source (insensitive columns, a count column) join it to a temp table of
    the kept combinations (``<release>__map``): its exact, small cardinality makes it the build side of the hash
    join; inlined, its estimate is so large that DuckDB builds the hash table over the whole source instead."""
    return uses_base_table(ci) and not _expands(ci, _data_columns(ci))


def row_map_table(release_name: str) -> exp.Table:
    """The session-temporary map original QI tuple → (released QI values, ec_id) of the kept classes."""
    return exp.Table(this=ident(release_name + "__map"), db=ident("main"), catalog=ident("temp"))


ROW_KEY = "__h"   # the row map's join key: a seeded hash of the original QI tuple


def _tuple_hash(ci: CompileInput, columns: Sequence[exp.Expression]) -> exp.Expression:
    """``hash(q1, …, qn, seed)``: one 64-bit key for a QI tuple (NULLs included), seeded by the policy."""
    return exp.Anonymous(this="hash", expressions=[*columns, lit(ci.policy.seed)])


def _row_map_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Every distinct original QI tuple of the source (kept and suppressed) → released QI values, ``ec_id``, keep
    flag, keyed by :func:`_tuple_hash`. The source rows join it on that one key instead of n null-safe keys (issue
    17.5: hashing and comparing n columns twice per row was half the join's cost). Exact because the map holds
    every tuple of the source and its keys are checked distinct here: two tuples with the same hash stop the
    release with an error (a policy ``seed`` changes the hashes)."""
    quasi = list(ci.policy.quasi)
    key = _tuple_hash(ci, [col(f"__o{i}", "x") for i in range(len(quasi))])
    # the distinct (tuple hash, released values) pairs: as many as the distinct tuples when no two tuples share a
    # hash (the released values are a function of the tuple), which the scalar check below makes sure of — one
    # hash column carried to the join instead of the n original columns, and no per-tuple window (issue 17.1:
    # a COUNT(*) OVER (PARTITION BY hash) cost 60% of a warm Adult release's SQL time)
    distinct = exp.select(alias(key.copy(), ROW_KEY), *[col(q, "x") for q in quasi]).distinct().from_(
        exp.Table(this=ident("__lb"), alias=exp.TableAlias(this=ident("x"))))
    if base_counts.keys(ci.policy) == quasi and not ci.policy.privacy_unit:   # the base rows are the tuples
        tuples: exp.Expression = exp.Count(this=exp.Star())
    else:                                         # a tuple has a base row per sensitive value
        originals = exp.select(*[col(f"__o{i}") for i in range(len(quasi))]).distinct().from_(
            exp.Table(this=ident("__lb")))
        tuples = exp.Subquery(this=exp.select(exp.Count(this=exp.Star())).from_(
            exp.Subquery(this=originals, alias=exp.TableAlias(this=ident("t")))))
    hashes = exp.Count(this=exp.Distinct(expressions=[_tuple_hash(ci, [col(f"__o{i}") for i in range(len(quasi))])]))
    unique = exp.Subquery(this=exp.select(exp.EQ(this=hashes, expression=tuples)).from_(
        exp.Table(this=ident("__lb"))))
    message = lit("two distinct quasi-identifier combinations of the source share one 64-bit hash; "
                  "set another seed in the policy and release again")
    checked = exp.Case(ifs=[exp.If(this=unique, true=col(ROW_KEY, "d"))],
                       default=exp.Anonymous(this="error", expressions=[message]))
    on = and_all(null_safe_eq(col(q, "d"), col(q, "c")) for q in quasi)
    query = (exp.select(*[col(q, "d") for q in quasi], col(EC_ID, "c"), col(KEEP, "c"), alias(checked, ROW_KEY))
             .from_(exp.Subquery(this=distinct, alias=exp.TableAlias(this=ident("d"))))
             .join(exp.Table(this=ident("__lc"), alias=exp.TableAlias(this=ident("c"))), on=on))
    query = query.with_("__lb", as_=_level_base(ci, names, base_counts.temp_table(names.release)), copy=False)
    return query.with_("__lc", as_=_classes_select(ci, exp.Table(this=ident("__lb"))), copy=False)


def release_table_query(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """The released rows: generalized records of the kept classes, with ``ec_id`` (count column merged)."""
    data_cols = _data_columns(ci)
    if isinstance(ci.plan, LevelPlan):
        if uses_row_map(ci):
            return _joined_release(ci, names, data_cols, row_map_table(names.release))
        base = base_table(ci, names)
        if _expands(ci, data_cols):
            query = _expanded_release(ci, data_cols)
        else:
            query = _joined_release(ci, names, data_cols)
        # one aggregation of the rows feeds both the classes and the row → class map (CTE shared, not rescanned)
        query = query.with_("__lb", as_=_level_base(ci, names, base), copy=False)
        return query.with_("__lc", as_=_classes_select(ci, exp.Table(this=ident("__lb"))), copy=False)
    if uses_tuple_map(ci) and _expands_tuples(ci, data_cols):
        return _expanded_tuple_release(ci, names, data_cols)
    if uses_tuple_map(ci):   # the source joined to the kept tuples and the class values (no second general read)
        items = [col(c, "v") if c in ci.plan.class_values.columns and c in ci.policy.quasi else col(c, "g")
                 for c in data_cols] + [col(EC_ID, "a")]
        kept, on = _tuple_join(ci, names, "g", "a", kept=True)
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


def _expands_tuples(ci: CompileInput, data_cols: list[str]) -> bool:
    """A plan with ``tuple_classes`` whose released columns are all QIs / sensitive attributes (no count column):
    written from the kept rows grouped by class and sensitive values, not sorted row by row."""
    return not ci.policy.count_column and set(data_cols) <= set(base_counts.keys(ci.policy))


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
    kept, on = _tuple_join(ci, names, "g", "a", kept=True)
    keys = [col(EC_ID, "a"), *[col(c, "g") for c in grouped_cols]]
    grouped = (exp.select(*[k.copy() for k in keys], alias(exp.Count(this=exp.Star()), WEIGHT))
               .from_(exp.Table(this=names.source.this.copy(), db=names.source.args.get("db"),
                                alias=exp.TableAlias(this=ident("g"))))
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


def _joined_release(ci: CompileInput, names: ReleaseNames, data_cols: list[str],
                    row_map: exp.Table | None = None) -> exp.Select:
    """The source rows joined to the map original QI tuple → (released values, ec_id) of the kept classes (the
    ``row_map`` temp table, or inline from the ``__lb`` / ``__lc`` CTEs)."""
    quasi = list(ci.policy.quasi)
    items = [col(c, "k") if c in quasi else col(c, "g") for c in data_cols] + [col(EC_ID, "k")]
    if row_map is not None:   # one hash key (exact: see _row_map_query), kept classes only
        combos: exp.Expression = row_map.copy()
        combos.set("alias", exp.TableAlias(this=ident("k")))
        on = exp.EQ(this=_tuple_hash(ci, [col(q, "g") for q in quasi]), expression=col(ROW_KEY, "k"))
    else:
        combos = exp.Subquery(this=_level_combos(ci, "__lb", "__lc"), alias=exp.TableAlias(this=ident("k")))
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
    if others and ci.on_duckdb:
        order_cols.append(exp.Anonymous(this="hash", expressions=[*others, lit(policy.seed)]))
    else:
        order_cols += others
    wrapped = exp.select(exp.Star()).from_(exp.Subquery(this=query, alias=exp.TableAlias(this=ident("r"))))
    return wrapped.order_by(*[exp.Ordered(this=c, nulls_first=True) for c in order_cols])


def checks_view(ci: CompileInput, names: ReleaseNames, counted_rows: bool = False) -> exp.Select:
    """The independent verification: per released class, every model's value and pass flag (``counted_rows``:
    over the rows the release's table repeats, weighted by their counts)."""
    keys = [EC_ID, *ci.policy.quasi]
    if counted_rows:
        return class_stats_query(ci, names.rows.copy(), keys, null_safe=True, weight=col(WEIGHT))
    return class_stats_query(ci, names.table.copy(), keys, null_safe=True)


_COMPILED: dict[tuple, CompiledRelease] = {}
_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    """Built of strings, numbers, booleans and None only (tuples, lists, dicts of them): its repr is its content."""
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _compile_key(ci: CompileInput, names: ReleaseNames) -> tuple | None:
    """Everything a level plan's statements on DuckDB are built from, as plain values (the policy as JSON, the
    taxonomies by content, each model's parameters); None — not cached — for an assignment plan (data frames),
    another engine or dialect, or a model holding anything but plain parameters (a taxonomy, a table)."""
    if not isinstance(ci.plan, LevelPlan) or not ci.on_duckdb:
        return None
    models = []
    for m in ci.models:
        params = vars(m)
        if not _plain(params):
            return None
        models.append((type(m).__module__, type(m).__qualname__, repr(sorted(params.items()))))
    taxonomies = tuple((q, t.name, t.kind, repr(t.spec), t.fingerprint()) for q, t in ci.taxonomies.items())
    return (names.release, names.schema, names.work, ci.policy.to_json(), render(ci.relation), tuple(ci.columns),
            tuple(ci.plan.levels.items()), taxonomies, tuple(models), ci.dialect, ci.schema,
            ci.pseudonym_function, tuple(sorted(ci.numeric_sensitive)), ci.engine,
            render(ci.base) if ci.base is not None else None, ci.counted_rows)


def compile_release(ci: CompileInput, names: ReleaseNames | None = None) -> CompiledRelease:
    """All statements of a release, in execution order (the assignment/noise tables of local-recoding plans are
    created by the release runner before these). A level plan's release on DuckDB is compiled once per plan
    shape (:func:`_compile_key`) and its text rendered once: a warm release of the same policy reuses both
    (issue 17.1: building and rendering the trees cost a tenth of a small release)."""
    names = names or ReleaseNames(ci.policy.name, ci.schema, work=WORK_SCHEMA if ci.on_duckdb else None)
    key = _compile_key(ci, names)
    if key is not None and key in _COMPILED:
        return _COMPILED[key]
    compiled = _compile(ci, names)
    if key is not None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled


def _compile(ci: CompileInput, names: ReleaseNames) -> CompiledRelease:
    stmts: list[tuple[str, exp.Expression]] = []
    if names.work:
        stmts.append((SCHEMA_STATEMENT, work_schema_statement(names)))
    stmts += [
        (SOURCE_STATEMENT, source_statement(ci, names)),
        (DROPPED_VIEWS[0], _create_view(names.general, general_view(ci, names), ci.dialect)),
        (DROPPED_VIEWS[1], _create_view(names.classes, classes_view(ci, names), ci.dialect)),
    ]
    base = base_counts.temp_table(names.release) if uses_base_table(ci) else None
    if base is not None:
        stmts.append((BASE_STATEMENT, base_counts.create(ci.policy, names.source, base, UNIT)))
    row_map = row_map_table(names.release) if isinstance(ci.plan, LevelPlan) and uses_row_map(ci) else None
    if row_map is not None:
        stmts.append(("row map", exp.Create(this=row_map.copy(), kind="TABLE", replace=True,
                                            expression=_row_map_query(ci, names),
                                            properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
    if uses_tuple_map(ci):
        stmts.append(("kept tuples", exp.Create(this=tuple_map_table(names.release, kept=True), kind="TABLE",
                                                replace=True, expression=_kept_tuples_query(ci, names),
                                                properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
    released = release_table_query(ci, names)
    grouped = grouped_release(released) if ci.counted_rows else None
    if grouped is not None:   # kept as rows with their counts, the table a view repeating them
        stmts += [
            ("release rows", exp.Create(this=names.rows, kind="TABLE", expression=grouped[0])),
            ("release table", _create_view(names.table, repeated_rows(names.rows, grouped[1]), ci.dialect)),
            ("checks view", _create_view(names.checks, checks_view(ci, names, counted_rows=True), ci.dialect)),
        ]
    else:
        stmts += [
            ("release table", exp.Create(this=names.table, kind="TABLE", expression=released)),
            ("checks view", _create_view(names.checks, checks_view(ci, names), ci.dialect)),
        ]
    if row_map is not None:
        stmts.append(("drop row map", exp.Drop(tables=[row_map.copy()], kind="TABLE", exists=True)))
    if uses_tuple_map(ci) and ci.plan.assignment is None:
        stmts.append(("assignment", exp.Create(this=names.assignment.copy(), kind="TABLE", replace=True,
                                               expression=assignment_query(ci, names))))
    if uses_tuple_map(ci):
        stmts += [(f"drop tuple map{' (kept)' if kept else ''}",
                   exp.Drop(tables=[tuple_map_table(names.release, kept)], kind="TABLE", exists=True))
                  for kept in (True, False)]
    if base is not None:
        stmts.append(("drop base counts", base_counts.drop(base)))
    if unit_columns(ci.policy):   # last: the runner runs it once the checks (which count people) have passed
        stmts.append((DROP_UNIT_STATEMENT, drop_unit_statement(names)))
    cols = [c for c in _data_columns(ci) if c != UNIT]   # the unit column leaves once the release is verified
    cols.append(EC_ID)
    if ci.policy.count_column:
        cols.append(ci.policy.count_column)
    return CompiledRelease(names, stmts, cols, ci.dialect, names.rows if grouped is not None else None)


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
