"""Materialize: the release's target checked, its ``__source`` view, the plan's frames as tables, and the compiled
statements run in order on the engine — inside the runner's transaction where the engine has one; then the
working objects nothing reads after the release dropped (:func:`tidy`)."""
from __future__ import annotations

from sqlglot import exp

from ..compiler.views import (BASE_STATEMENT, CARRY_STATEMENT, DROP_UNIT_STATEMENT, DROPPED_VIEWS, KEPT_WORKING,
                              SCHEMA_STATEMENT, SOURCE_STATEMENT, CompileInput, CompiledRelease, ReleaseNames,
                              source_statement, work_schema_statement)
from ..engines import Engine
from ..errors import PolicyError
from ..methods import AssignmentPlan, Plan
from ..catalog.ownership import legacy_working
from ..policy.model import Policy
from ..data.source import Source


def check_target(engine: Engine, policy: Policy, src: Source, replace: bool, dry_run: bool) -> bool:
    """Refuse a release name that is the source or in the catalog, or that exists without ``replace``; return
    whether a table of that name exists (it is replaced inside the transaction)."""
    if policy.name in (src.label,) or policy.name.startswith("anon."):
        raise PolicyError(f"release name {policy.name!r} would overwrite the source or the catalog; choose another")
    exists = engine.claim_name(policy.name, replace, dry_run)
    return exists


def create_source_view(engine: Engine, ci: CompileInput, names: ReleaseNames) -> None:
    """``<release>__source``: the source with identifiers removed, which the method reads its data through
    (row-keyed for an assignment plan, and then cached where the engine can); first the working schema, where the
    engine has one."""
    if names.work:
        engine.execute(work_schema_statement(names))
    engine.create(source_statement(ci, names), cache=isinstance(ci.plan, AssignmentPlan))


def tidy(engine: Engine, names: ReleaseNames, session_bound: bool, rows: exp.Table | None = None,
         people: exp.Table | None = None) -> None:
    """Before the commit, drop the working views nothing reads after the release: ``__general``, ``__classes``
    and ``__checks`` (``check`` recompiles every model over the released table). What stays lives in the working
    schema: the ``__source`` view (metrics compare with it) and the plan's tables (``__assignment``,
    ``__ec_values``, θ's ``__noise``, slicing's ``__risk``: self-contained, the record of how the release was made).
    When the source or the pseudonym function lives only in this session, ``__source`` goes too, so that nothing
    persisted breaks once the session ends. A replaced release made before the ``anon_work`` schema leaves its
    working objects beside its table: they go too (:func:`anon_sql.catalog.ownership.legacy_working`). (Spark's working
    objects are temporary views of the session.) ``rows``: the session table the released table was written from
    (DuckDB), dropped after the checks view that reads it; ``people``: the session table the checks counted people
    in, likewise."""
    for table in (rows, people):
        if table is not None:
            engine.drop(table)
    if not names.work:
        return
    for view in names.views():
        if view.name.removeprefix(names.release + "__") not in KEPT_WORKING or session_bound:
            engine.drop_view(view)
    # the release replaced one made before the anon_work schema: that one's working objects beside the table go
    for table, kind in legacy_working(engine.con, names.release):
        engine.drop_view(table) if kind == "view" else engine.drop(table)


def materialize(engine: Engine, compiled: CompiledRelease, plan: Plan, policy: Policy, replace: bool,
                base_made: bool) -> None:
    """The plan's frames, then every compiled statement after the source view (made before planning); the base-
    count statement is skipped when resolve already made that table (``base_made``); ``replace`` drops the existing
    table of the release's name first."""
    if isinstance(plan, AssignmentPlan):
        # Mondrian's class values as ENUMs (its tables are written from grouped rows: text cost 3x to write), when
        # nothing is suppressible: every class is then released, and the dictionary holds released values only
        engine.write_plan(compiled.names, plan, policy.quasi,
                          enum_values=policy.method == "mondrian" and policy.privacy.max_suppression <= 0)
    if replace:
        engine.drop(compiled.names.table)
    texts = compiled.sql(pretty=True)    # rendered once: the same text is stored with the release
    # the generalized and classes views that no later statement reads: tidy would drop them before the commit, and
    # nothing reads them in between (verify reads the checks view and the table), so they are not made at all (issue
    # 17.1: ~10 ms each; on Spark, seconds of planning). Without a working schema (Spark) a refusal with nothing to
    # suppress reads ``__classes`` for its lower bound (verify.failing_classes_records): then they are made, and stay
    made = not compiled.names.work and policy.privacy.max_suppression <= 0
    unread = frozenset() if made else compiled.unread(DROPPED_VIEWS)
    for i, ((what, stmt), text) in enumerate(zip(compiled.statements, texts)):
        if (what in (SCHEMA_STATEMENT, SOURCE_STATEMENT, DROP_UNIT_STATEMENT)
                or (what in (BASE_STATEMENT, CARRY_STATEMENT) and base_made)
                or i in unread):
            continue
        if stmt.key == "create":
            engine.create(stmt, text=text)
        else:
            engine.execute(stmt)
