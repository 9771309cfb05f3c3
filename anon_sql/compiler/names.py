"""What the compiler works with: the names of a release's objects (:class:`ReleaseNames`), its input
(:class:`CompileInput`), its output (:class:`CompiledRelease`) and the helpers every view builder shares."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from sqlglot import exp

from ..methods.base import AssignmentPlan, LevelPlan
from ..models import PrivacyModel
from ..data import base_counts
from ..common.columns import UNIT
from ..common.sqlbuild import col, dtype, ident, lit, render
from ..data.taxonomy import Taxonomy
from ..catalog.names import COUNTED_ROWS, WORK_SCHEMA, working
from .dialect import Target, dialect_target, target


WEIGHT = base_counts.WEIGHT


KEEP = "__keep"


BASE_STATEMENT = "base counts"   # the runner skips it when resolve already made the table
CARRY_STATEMENT = "carried counts"   # likewise (the base counts grouped with released non-key columns)


DROP_UNIT_STATEMENT = "drop unit column"   # run after verification, not with the other statements
SCHEMA_STATEMENT = "work schema"


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
    engine: str = "duckdb"            # what runs the SQL (the engine's own objects: compiler/dialect.py's Target)
    base: exp.Table | None = None     # the base counts the engine already holds (made by resolve), if any
    # released non-key columns resolve grouped with the base counts (``<release>__carry``: the released rows are
    # grouped from it, not from a second pass over the source); () when it made none
    carried: tuple[str, ...] = ()
    # the engine keeps a release written as repeated rows as the rows with their counts (``__rows``, one per source
    # combination: a released row may be in several), the table a view repeating them, and the checks aggregate the
    # counts (Spark: see SparkEngine.keeps_counted_rows)
    counted_rows: bool = False
    types: dict[str, str] = field(default_factory=dict)   # source column → engine type (a mask's cast)
    sdc_prepared: bool = False        # the relation holds the policy's perturbations and whole-column masks
    inline_masks: bool = False        # the engine runs the anon.* macro masks as inline expressions (Spark)
    # the engine's relation for a taxonomy level map, by its (leaf, value) rows (Spark registers each map once per
    # release as a view: anon_sql.engines.spark.maps); None: an inline VALUES relation
    level_map: Callable[[tuple[tuple[str, str], ...]], str] | None = None

    @property
    def target(self) -> Target:
        """What the SQL may use, given the dialect it is rendered in and the engine that runs it."""
        return target(self.dialect, self.engine)

    @property
    def on_duckdb(self) -> bool:
        """DuckDB SQL run by DuckDB: temp tables and ENUM types may be used."""
        return self.target.native


@dataclass
class CompiledRelease:
    names: ReleaseNames
    statements: list[tuple[str, exp.Expression]]   # (description, statement)
    released_columns: list[str]
    dialect: str
    counted_rows: exp.Table | None = None   # where the released rows are kept, when not in the table itself
    written: bool = False   # the table is also written from ``counted_rows`` (DuckDB): suppression deletes from both
    # DuckDB with a privacy unit: the session table of the kept classes' people (base counts through the row map)
    # that the checks read; the table then never holds the unit (compiler/release.py: counts_people_from_base)
    people: exp.Table | None = None
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


def weight_of(policy, table: str | None = None) -> exp.Expression:
    if policy.count_column:
        return col(policy.count_column, table)
    return lit(1)


def cast_varchar(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=dtype("VARCHAR"))


def create_view(name: exp.Table, query: exp.Expression, dialect: str = "duckdb") -> exp.Create:
    # SQLite has no CREATE OR REPLACE VIEW; its compiled script is meant for a fresh database
    return exp.Create(this=name, kind="VIEW", expression=query, replace=dialect_target(dialect).replace_view)


def noise_flag(plan) -> str | None:
    """The boolean column that marks noise records in the release (``plan.noise_flag``), if any."""
    return plan.noise_flag if isinstance(plan, AssignmentPlan) else None


def class_level_quasi(ci: CompileInput) -> list[str]:
    """Quasi-identifiers an assignment plan releases per class (from its class values, not per row: a plan with
    ``row_values`` releases none per class)."""
    plan = ci.plan
    if not isinstance(plan, AssignmentPlan) or plan.row_values:
        return []
    return [q for q in ci.policy.quasi if q in plan.class_values.columns]
