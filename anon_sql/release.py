"""Run a release: resolve → plan → compile → materialize → verify → record, in one transaction.

Verification is independent of the method: the checks run as SQL over the materialized table; a failure rolls
everything back (nothing half-written, the source untouched) and raises :class:`PrivacyRequirementError`.
Each stage is a module of :mod:`anon_sql.stages` (record: :mod:`anon_sql.catalog`); this module only orders them.
"""
from __future__ import annotations

import time
from typing import Callable

import duckdb
import pandas as pd

from . import catalog
from .compiler import ReleaseNames, compile_release
from .errors import PrivacyRequirementError
from .policy import Policy
from .result import Release
from .stages.materialize import check_target, create_source_view, materialize, pseudonym_function
from .stages.plan import make_plan, placeholder, plan_dict, released_policy
from .stages.resolve import Resolved, discard, resolve
from .stages.verify import failure_message, verify


def release(con: duckdb.DuckDBPyConnection, policy: Policy | dict | str, *, replace: bool = False,
            dry_run: bool = False, source: pd.DataFrame | None = None,
            progress: Callable[[str], None] | None = None) -> Release:
    """Plan, compile, materialize and verify a release in one transaction; see the module docstring."""
    t0 = time.perf_counter()
    return run(con, resolve(con, policy, source, base=True), replace=replace, dry_run=dry_run, progress=progress,
               t0=t0)


def run(con: duckdb.DuckDBPyConnection, r: Resolved, *, replace: bool = False, dry_run: bool = False,
        progress: Callable[[str], None] | None = None, t0: float | None = None) -> Release:
    """The stages after resolve; what resolve made in the session (the temp base counts) is dropped whatever
    happens, since it outlives a rollback."""
    say = progress or (lambda message: None)
    t0 = time.perf_counter() if t0 is None else t0
    try:
        names = ReleaseNames(r.policy.name)
        exists = check_target(con, r.policy, r.source, replace, dry_run)
        udf = pseudonym_function(con, r.policy)
        policy = r.policy
        con.execute("BEGIN TRANSACTION")
        try:
            create_source_view(con, r.compile_input(placeholder(r), pseudonym_function=udf), names)
            say("planning")
            plan = make_plan(con, r, names.source.name, say)
            policy = released_policy(r.policy, plan)
            compiled = compile_release(r.compile_input(plan, policy, pseudonym_function=udf), names)
            say("materializing")
            materialize(con, compiled, plan, replace=exists)
            say("verifying")
            v = verify(con, policy, compiled, r.records, plan)
            if v.failures:
                raise PrivacyRequirementError(failure_message(con, policy, compiled, v, r.records))
            rel = Release(policy.name, policy, compiled.sql(pretty=True), plan_dict(plan), v.classes, v.checks,
                          v.metrics, r.records, v.records_out, v.suppressed, v.noise, materialized=not dry_run,
                          info={"seconds": time.perf_counter() - t0, **getattr(plan, "info", {})})
            if policy.metrics.get("compute"):   # [metrics] compute = [...]: measured inside the transaction
                from .metrics import attach

                attach(con, rel, r.taxonomies, r.source)
            if dry_run:
                con.execute("ROLLBACK")
                return rel
            catalog.record_release(con, rel, r.source.label)
            con.execute("COMMIT")
            return rel
        except BaseException as err:
            con.execute("ROLLBACK")
            if isinstance(err, PrivacyRequirementError) and not dry_run:
                catalog.record_failure(con, policy, r.source.label, r.records, str(err))
            raise
    finally:
        discard(con, r)
