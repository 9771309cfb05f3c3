"""The engine interface: everything the runner asks of the system that holds the data and runs the SQL.

The runner (:mod:`anon_sql.runner.run`), the compiler and the methods never know which engine runs them; what differs
between DuckDB and Spark — transactions, how a table is materialized, where a plan's frames go, which connection a
method plans on, what is recorded — is a method of the engine.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import pandas as pd
from sqlglot import exp

from ..common.columns import EC_ID
from ..common.sqlbuild import create_from_frame
from ..compiler.views import CompiledRelease, ReleaseNames
from ..methods import AssignmentPlan, Method, MethodContext, Plan
from ..policy.model import Policy
from ..data.source import Source


class Engine(ABC):
    """One release's view of an engine; it remembers what this release created so that it can clean it up."""

    name: str = "engine"
    flavor: str = "duckdb"          # the dialect the compiler renders for this engine (see CompileInput.engine)
    # the engine's relation for a taxonomy level map (CompileInput.level_map); None: an inline VALUES relation
    level_map: Callable[[tuple[tuple[str, str], ...]], str] | None = None
    where: str = ""                 # how messages say where objects live, e.g. " in the Spark session"
    work_schema: str | None = None  # where the working objects live (None: unqualified, e.g. temporary views)
    transactional: bool = False     # rollback undoes everything (else: cleanup drops what the release created)
    measures: bool = False          # can compute the policy's [metrics] compute (anon_sql.metrics reads DuckDB)
    persists: bool = True           # what a release creates outlives the session (Spark: temporary views only)
    keeps_counted_rows: bool = False   # a release of repeated rows kept as counted rows (Spark)
    # the base counts also serve a method that plans on combinations (Method.plans_combinations): one aggregation
    # of the source for the coverage check, the plan and the released rows
    combination_base: bool = False
    inline_masks: bool = False      # no persisted anon.* macros: the row-local masks run as inline SQL (Spark)
    # classes of signatures (QIs varying inside a privacy unit, compiler/signature.py) need list functions
    # (list_sort over a unit's tuples) that only DuckDB has; elsewhere such a policy is refused at resolve
    releases_signatures: bool = True
    # related tables (``[related.*]``) are written with the catalog's markers in the release's transaction
    releases_related: bool = True
    errors: tuple[type[BaseException], ...] = ()   # what a query the data makes fail raises (a value that won't cast)

    def __init__(self) -> None:
        self.created: list[str] = []

    # -- SQL -------------------------------------------------------------------------------------------------------
    @property
    @abstractmethod
    def con(self) -> Any:
        """A DuckDB-connection-shaped runner: ``execute(duckdb_sql)`` → a result with ``df()`` / ``fetchall()``;
        the shared stages (resolve, verify) send their small queries through it."""

    def execute(self, stmt: exp.Expression) -> None:
        """Run one statement (rendered for this engine)."""
        self.con.execute(self.render(stmt))

    def fetch(self, query: exp.Expression) -> pd.DataFrame:
        """A query's rows as a pandas frame."""
        return self.con.execute(self.render(query)).df()

    def render(self, tree: exp.Expression) -> str:
        from ..common.sqlbuild import render

        return render(tree)

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Is there a table or view of that name?"""

    def claim_name(self, name: str, replace: bool, dry_run: bool) -> bool:
        """May a release named ``name`` be created? True when a table of that name exists and is replaced inside the
        release; refuses an existing name without ``replace``. Engines with a catalog of their releases refine this
        (DuckDB: never a table anon_sql did not create, see :mod:`anon_sql.catalog.ownership`)."""
        from ..errors import ReleaseExistsError

        exists = self.exists(name)
        if exists and not replace and not dry_run:
            how = " atomically" if self.transactional else ""
            raise ReleaseExistsError(
                f"a table named {name!r} already exists{self.where}; pass replace=True (CLI: --replace) to "
                f"replace it{how}, or choose another name")
        return exists

    # -- the source and the catalog ----------------------------------------------------------------------------------
    @abstractmethod
    def register_source(self, source: Any, label: str) -> Source:
        """The policy's source (a name, a path or a DataFrame) as a readable relation; a relation registered for
        this release (``label``) is dropped with it."""

    @property
    def catalog(self) -> Any:
        """The DuckDB connection whose ``anon`` catalog holds named taxonomies and models' tables (or None)."""
        return None

    def base_table(self, release: str) -> exp.Table:
        """Where this engine keeps a release's base counts (see :meth:`base_counts`)."""
        from ..data import base_counts

        return base_counts.temp_table(release)

    def base_counts(self, policy: Policy, relation: exp.Expression, table: exp.Table,
                    carried: Sequence[str] = ()) -> Callable[[str], pd.DataFrame] | None:
        """Aggregate the source once into ``table`` (level plans) and return a per-column value-count reader, or
        None when the engine does not keep such a table. ``carried``: released non-key columns that
        :meth:`carried_columns` chose, grouped in the same pass into the release's carried counts
        (:func:`anon_sql.data.base_counts.carry_table`)."""
        return None

    def carried_columns(self, policy: Policy, relation: exp.Expression, candidates: Sequence[str]) -> tuple[str, ...]:
        """The released non-key columns worth grouping with the base counts (none on engines that keep no base)."""
        return ()

    def drop_base(self, table: exp.Table) -> None:
        """Drop the base counts :meth:`base_counts` made, once the release no longer needs them."""
        self.drop(table)

    # -- planning --------------------------------------------------------------------------------------------------
    def prepare(self, models: list) -> None:
        """Ready the engine for the models' checks (the UDFs their checks call)."""

    def pseudonym_function(self, policy: Policy) -> str | None:
        """Register the keyed hash when an identifier is pseudonymized; its name, else None."""
        return None

    def plan(self, method: Method, ctx: MethodContext) -> Plan:
        """The method's plan over the ``__source`` view (``ctx.con`` is :attr:`con`)."""
        return method.plan(ctx)

    # -- materializing ---------------------------------------------------------------------------------------------
    @abstractmethod
    def create(self, stmt: exp.Create, cache: bool = False, text: str | None = None) -> None:
        """Run one compiled ``CREATE`` (view or table) and remember the object; ``cache``: a view whose rows are
        read many times (the row-keyed source of an assignment plan) is materialized where that helps; ``text``:
        the statement already rendered in the engine's dialect (an engine that rewrites trees may ignore it)."""

    def fetch_checks(self, compiled: CompiledRelease) -> pd.DataFrame | None:
        """The rows of the release's checks view computed the engine's own way, or None: verify reads the view."""
        return None

    def put_frame(self, frame: pd.DataFrame, name: str) -> exp.Table:
        """A pandas frame (what numpy computed from whole columns) as a table ``name`` of the release, remembered so
        that a refused release drops it."""
        table = exp.Table(this=exp.to_identifier(name, quoted=True))
        create_from_frame(self.con, frame, f"{name}__frame", lambda view: self.create(
            exp.Create(this=table.copy(), kind="TABLE", replace=True, expression=exp.select("*").from_(view))))
        return table

    @abstractmethod
    def write_plan(self, names: ReleaseNames, plan: AssignmentPlan, quasi: list[str], enum_values: bool = False
                   ) -> None:
        """The plan's assignment / class-value / noise frames as tables of the release (``enum_values``: the class
        values' text columns typed by their values, where the engine has such types: every class is released)."""

    @abstractmethod
    def drop(self, name: str | exp.Table) -> None:
        """Drop a table of that name (or reference) if it exists."""

    def drop_view(self, name: str | exp.Table) -> None:
        """Drop a view of that name if it exists."""
        self.drop(name)

    def delete_classes(self, table: exp.Table, failing: exp.Expression) -> int:
        """Delete from the released ``table`` the rows of the classes whose ``ec_id`` the query ``failing``
        selects (suppression to a fixed point, :func:`anon_sql.runner.suppression.settle`); non-zero when it deleted
        anything."""
        stmt = exp.Delete(this=table.copy(), where=exp.Where(this=exp.In(this=exp.column(EC_ID, quoted=True),
                                                                          query=exp.Subquery(this=failing.copy()))))
        return int(self.con.execute(self.render(stmt)).fetchall()[0][0])

    def drop_unit(self, names: ReleaseNames) -> None:
        """Take the privacy unit's column out of the verified release (the checks counted people through it; the
        committed release never holds it): ``ALTER TABLE <release> DROP COLUMN __unit``."""
        from ..compiler.views import drop_unit_statement

        self.execute(drop_unit_statement(names))

    def session_bound(self, src: Source) -> bool:
        """Whether the source lives only in this session (a registered DataFrame, a temporary view): a persisted
        view over it would break when the database is reopened."""
        return False

    def script(self, compiled: CompiledRelease) -> list[str]:
        """The release's SQL as stored with it."""
        return compiled.sql(pretty=True)

    # -- transaction, record, clean-up ---------------------------------------------------------------------------
    def begin(self) -> None:
        """Start the release's transaction (engines without one: nothing)."""

    def commit(self) -> None:
        """Keep what the release created."""
        self.created.clear()

    def rollback(self) -> None:
        """Undo the release: roll the transaction back, or drop everything it created."""
        self.cleanup()

    def cleanup(self) -> None:
        """Drop every object this release created, newest first."""
        for name in reversed(self.created):
            self.drop(name)
        self.created.clear()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Bracket one stage of the release (Spark counts the jobs it launches)."""
        yield

    def record(self, rel: Any, plan: Plan, source_label: str) -> dict[str, Any] | None:
        """Write the verified release's catalog rows (engines without a catalog: nothing); return what the check
        program is compiled from, as written (:func:`anon_sql.catalog.store.record_release`), or None."""
        return None

    def record_failure(self, policy: Policy, source_label: str, records: int, message: str) -> None:
        """Log a refused release in the catalog (engines without a catalog: nothing)."""

    def info(self) -> dict[str, Any]:
        """Engine facts added to ``Release.info``."""
        return {}
