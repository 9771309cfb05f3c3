"""Materialize (DuckDB): the release's target checked, its ``__source`` view, the plan's frames as tables, and the
compiled statements run in order — all inside the runner's transaction."""
from __future__ import annotations

import duckdb
from sqlglot import exp

from ..compiler import BASE_STATEMENT, CompileInput, CompiledRelease, ReleaseNames, source_statement
from ..errors import PolicyError, ReleaseExistsError
from ..methods import AssignmentPlan, Plan
from ..policy import Policy
from ..source import Source, relation_exists
from ..sqlbuild import render


def check_target(con: duckdb.DuckDBPyConnection, policy: Policy, src: Source, replace: bool, dry_run: bool) -> bool:
    """Refuse a release name that is the source or in the catalog, or that exists without ``replace``; return
    whether a table of that name exists (it is replaced inside the transaction)."""
    if policy.name in (src.label,) or policy.name.startswith("anon."):
        raise PolicyError(f"release name {policy.name!r} would overwrite the source or the catalog; choose another")
    exists = relation_exists(con, policy.name)
    if exists and not replace and not dry_run:
        raise ReleaseExistsError(
            f"a table named {policy.name!r} already exists; pass replace=True (CLI: --replace) to replace it "
            "atomically, or choose another name"
        )
    return exists


def pseudonym_function(con: duckdb.DuckDBPyConnection, policy: Policy) -> str | None:
    """Register the keyed-hash UDF when an identifier is pseudonymized; its name, else None."""
    ids = [a for a in policy.attributes.values() if a.role == "identifier" and a.action == "pseudonymize"]
    if not ids:
        return None
    from .. import pseudonym

    return pseudonym.register(con, pseudonym.load_key(ids[0].options.get("key_file")))


def create_source_view(con: duckdb.DuckDBPyConnection, ci: CompileInput, names: ReleaseNames) -> None:
    """``<release>__source``: the source with identifiers removed, which the method reads its data through."""
    con.execute(render(source_statement(ci, names)))


def write_plan_tables(con: duckdb.DuckDBPyConnection, names: ReleaseNames, plan: AssignmentPlan) -> None:
    """Materialize the plan's assignment / class-value / noise frames as tables of the release."""
    for table, frame in ((names.assignment, plan.assignment), (names.ec_values, plan.class_values),
                         (names.noise, plan.noise)):
        if frame is None:
            continue
        con.register("__anon_plan_frame", frame)
        con.execute(render(exp.Create(this=table.copy(), kind="TABLE", replace=True,
                                      expression=exp.select("*").from_("__anon_plan_frame"))))
        con.unregister("__anon_plan_frame")


def materialize(con: duckdb.DuckDBPyConnection, compiled: CompiledRelease, plan: Plan, replace: bool) -> None:
    """The plan's tables, then every compiled statement in order (the base counts already exist: resolve made
    them); ``replace`` drops the existing table of the release's name first."""
    names = compiled.names
    if isinstance(plan, AssignmentPlan):
        write_plan_tables(con, names, plan)
    if replace:
        con.execute(render(exp.Drop(tables=[names.table.copy()], kind="TABLE", exists=True)))
    for what, stmt in compiled.statements:
        if what != BASE_STATEMENT:
            con.execute(render(stmt))
