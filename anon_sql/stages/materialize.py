"""Materialize: the release's target checked, its ``__source`` view, the plan's frames as tables, and the compiled
statements run in order on the engine — inside the runner's transaction where the engine has one."""
from __future__ import annotations

from ..compiler import BASE_STATEMENT, CompileInput, CompiledRelease, ReleaseNames, source_statement
from ..engines import Engine
from ..errors import PolicyError
from ..methods import AssignmentPlan, Plan
from ..policy import Policy
from ..source import Source


def check_target(engine: Engine, policy: Policy, src: Source, replace: bool, dry_run: bool) -> bool:
    """Refuse a release name that is the source or in the catalog, or that exists without ``replace``; return
    whether a table of that name exists (it is replaced inside the transaction)."""
    if policy.name in (src.label,) or policy.name.startswith("anon."):
        raise PolicyError(f"release name {policy.name!r} would overwrite the source or the catalog; choose another")
    exists = engine.claim_name(policy.name, replace, dry_run)
    return exists


def create_source_view(engine: Engine, ci: CompileInput, names: ReleaseNames) -> None:
    """``<release>__source``: the source with identifiers removed, which the method reads its data through
    (row-keyed for an assignment plan, and then cached where the engine can)."""
    engine.create(source_statement(ci, names), cache=isinstance(ci.plan, AssignmentPlan))


def tidy(engine: Engine, names: ReleaseNames, session_bound: bool) -> None:
    """When the source or the pseudonym function lives only in this session, drop (before the commit) the views that
    read it — ``__classes``, ``__general``, ``__source`` — so that nothing persisted breaks once the session ends.
    The release, its ``__checks`` view and the plan's tables (``__assignment``, ``__ec_values``, ``__noise``) are
    self-contained and stay. An engine whose objects all end with the session (Spark) keeps them: its released table
    is a cached view that still reads them."""
    if session_bound and engine.persists:
        for view in (names.classes, names.general, names.source):
            engine.drop_view(view.name)


def materialize(engine: Engine, compiled: CompiledRelease, plan: Plan, policy: Policy, replace: bool,
                base_made: bool) -> None:
    """The plan's frames, then every compiled statement after the source view (made before planning); the base-
    count statement is skipped when resolve already made that table (``base_made``); ``replace`` drops the existing
    table of the release's name first."""
    if isinstance(plan, AssignmentPlan):
        engine.write_plan(compiled.names, plan, policy.quasi)
    if replace:
        engine.drop(policy.name)
    for what, stmt in compiled.statements[1:]:
        if what == BASE_STATEMENT and base_made:
            continue
        if stmt.key == "create":
            engine.create(stmt)
        else:
            engine.execute(stmt)
