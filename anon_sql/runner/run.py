"""Run a release: resolve → plan → compile → materialize → verify → record, on one engine.

On DuckDB everything after resolve is one transaction; on Spark a refused release drops what it created. Either way a
failed check leaves nothing half-written and the source untouched, and raises :class:`PrivacyRequirementError`.
Each stage is a module of :mod:`anon_sql.stages` (record: :mod:`anon_sql.catalog.store`); this module only orders them.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import duckdb

from . import related, sdc, suppression
from ..catalog.macro_trust import refuse_untrusted_macros
from ..catalog import versions
from ..catalog.read import probed_once
from ..common.rollback import rollback_keeping_cause
from ..compiler.views import ReleaseNames, compile_release
from ..engines import DuckDBEngine, Engine
from ..errors import PrivacyRequirementError
from ..common.columns import SIZE
from ..data.source import Source, refuse_reserved_temp, refuse_temp_shadows
from ..policy.model import Policy, coerce_policy
from .result import Release
from .materialize import check_target, create_source_view, materialize, tidy
from .digests import noise_flag_of, released_values_digest, source_digest, taxonomy_digests
from .plan import make_context, placeholder, plan_dict, released_policy, signed_plan
from .resolve import Resolved, discard_resolved, resolve_release
from .user_indexes import recreate_indexes, user_indexes
from .verify import failing_classes_records, failure_message, verify_release


def release_with_duckdb(con: duckdb.DuckDBPyConnection, policy: Policy | dict | str, *, replace: bool = False,
            dry_run: bool = False, source: Any = None, progress: Callable[[str], None] | None = None,
            before_commit: Callable[[Release], None] | None = None) -> Release:
    """Plan, compile, materialize and verify a release on a DuckDB connection, in one transaction;
    ``before_commit`` writes what must commit with it (a version row) or raises to roll it all back."""
    return release_on(DuckDBEngine(con), policy, replace=replace, dry_run=dry_run, source=source, progress=progress,
                      before_commit=before_commit)


def release_on(engine: Engine, policy: Policy | dict | str, *, replace: bool = False, dry_run: bool = False,
               source: Any = None, progress: Callable[[str], None] | None = None,
               before_commit: Callable[[Release], None] | None = None) -> Release:
    """A release on any engine: resolve, then :func:`run_resolved`."""
    t0 = time.perf_counter()
    if engine.name == "duckdb":   # the compiled SQL calls anon.* macros and built-ins a macro may shadow (round 8, M4)
        refuse_untrusted_macros(engine.con, "a release")
        if before_commit is None:   # (a statement checks before its snapshot of the previous version)
            declared = coerce_policy(policy)
            refuse_reserved_temp(engine.con, declared.name, "a release")
            # a TEMP object named like the table (or a related table) the release writes would be what its SQL reads
            # and deletes from (hostile round 21, W31: DuckDB's raw errors; the statements refuse it already)
            refuse_temp_shadows(engine.con, [declared.name, *(f"{declared.name}_{r}" for r in declared.related or {})],
                                f"release {declared.name!r}")
    with probed_once():    # the catalog is probed once per release, not once per stage that reads it
        with engine.stage("prepare"):
            resolved = resolve_release(engine, policy, source, base=True)
        return run_resolved(engine, resolved, replace=replace, dry_run=dry_run, progress=progress, t0=t0,
                   before_commit=before_commit)


def run_resolved(engine: Engine, r: Resolved, *, replace: bool = False, dry_run: bool = False,
        progress: Callable[[str], None] | None = None, t0: float | None = None,
        before_commit: Callable[[Release], None] | None = None) -> Release:
    """The stages after resolve; what resolve made (the temp base counts) is dropped whatever happens."""
    say = progress or (lambda message: None)
    t0 = time.perf_counter() if t0 is None else t0
    snapshotted = False
    try:
        names = ReleaseNames(r.policy.name, work=engine.work_schema)
        exists = check_target(engine, r.policy, r.source, replace, dry_run)
        if (exists and before_commit is None and engine.name == "duckdb" and not dry_run
                and versions.latest(engine.con, r.policy.name) is not None):
            # a replacement outside the statements (release --replace, replace=True) of a release with a version
            # history is a version too: else REFRESH re-ran the policy it replaced (hostile round 10, M16)
            before_commit, snapshotted = _replace_version(engine.con, r.policy), True
        if r.related:
            related.check_targets(engine.con, r.policy, r.related, replace, dry_run=dry_run)
        # the earlier release's related tables this policy no longer names go with the replace (round 7, X05)
        stale = (related.stale_related(engine.con, r.policy)
                 if exists and engine.name == "duckdb" and not dry_run else [])
        # a user's indexes on the table it replaces, created again on the new one (round 13, R6)
        indexes = (user_indexes(engine.con, r.policy.name)
                   if exists and engine.name == "duckdb" and not dry_run else [])
        udf = engine.pseudonym_function(r.policy)
        engine.prepare(r.models)
        options = {"dialect": engine.flavor, "engine": engine.name, "pseudonym_function": udf,
                   "counted_rows": engine.keeps_counted_rows, "level_map": engine.level_map,
                   "inline_masks": engine.inline_masks}
        policy = r.policy
        # what check recounts records_in against: the source as it is now, before anything is perturbed
        digest = (source_digest(engine.con, r.policy, r.records, resolved=r.registered)
                  if engine.name == "duckdb" and not dry_run else None)
        engine.begin()
        try:
            if r.sdc is not None:   # the perturbed source, kept as a working table __source reads
                r.source = replace_relation(r.source, sdc.persist(engine, r.sdc, names.perturbed))
            with engine.stage("plan"):
                create_source_view(engine, r.compile_input(placeholder(r), **options), names)
                say("planning")
                ctx = make_context(r, engine.con, names.source_relation(), say)
                if r.sampling is not None and r.sampling.parameters.epsilon_search > 0:   # SafePub's DP search
                    from ..methods import dp_search   # OpenDP: loaded by the releases that use it (issue 29)

                    params = r.sampling.parameters
                    plan = dp_search.search_levels(ctx, params.epsilon_search, params.k, r.sampling.sampled)
                else:
                    plan = engine.plan(r.method, ctx)
                plan = signed_plan(r, plan)
                r.base_rows = None   # coded by the search: not held while the release is written
            policy = released_policy(r.policy, plan)
            compiled = compile_release(r.compile_input(plan, policy, **options), names)
            say("materializing")
            with engine.stage("materialize"):
                materialize(engine, compiled, plan, policy, replace=exists, base_made=r.base is not None)
            say("verifying")
            with engine.stage("verify"):
                v = verify_release(engine.con, policy, compiled, r.records, plan, r.models, create=engine.create,
                           units=r.units, fetch_checks=engine.fetch_checks)
                if (v.failures and policy.privacy.max_suppression > 0
                        and suppression.settle(engine, names, compiled.counted_rows,
                                              written=compiled.written, people=compiled.people)):
                    # suppressed to a fixed point (whole-table checks move with it): verify the release as it stands
                    v = verify_release(engine.con, policy, compiled, r.records, plan, r.models, create=engine.create,
                               units=r.units, fetch_checks=engine.fetch_checks)
                if v.failures:
                    if engine.transactional or policy.privacy.max_suppression > 0:   # Spark: no trial release
                        need = _needed_suppression(engine, r, plan, policy, v, options)
                        message = failure_message(policy, plan, v, r.units or r.records, need, method=r.method)
                    else:   # no transaction to hide a trial release in (Spark, nothing may be suppressed): a lower
                            # bound, no advice
                        need = failing_classes_records(engine.con, names)   # people, with a privacy unit
                        message = failure_message(policy, plan, v, r.units or r.records, need, at_least=True,
                                                  method=r.method)
                    raise PrivacyRequirementError(message)
                if r.related:   # the rows of the released people, before the unit's values leave the release
                    tables_out = related.release_related(engine, policy, names.table, r.related, udf,
                                                          replace or dry_run)
                related.drop_stale(engine, stale)
            rel = Release(policy.name, policy, engine.script(compiled), plan_dict(plan), v.classes, v.checks,
                          v.metrics, r.records, v.records_out, v.suppressed, v.noise, materialized=not dry_run,
                          info={"seconds": time.perf_counter() - t0, **plan.details(),
                                "taxonomy_digests": taxonomy_digests(r.policy, r.taxonomies, r.source.types),
                                **({"people": v.units} if v.units is not None else {}),
                                **({"related": tables_out, "related_tables": related.released_shapes(
                                    engine.con, tables_out)} if r.related else {}),
                                **({"source_digest": digest} if digest is not None else {})},
                          declared=r.policy)
            if r.sampling is not None:   # SafePub: ε, δ, β, k and the sample's size go to anon.metrics ("info")
                rel.metrics.update(r.sampling.metrics())
                rel.info["differential_privacy"] = r.sampling.metrics()
            if r.sdc is not None:   # what was perturbed, and what it cost (docs/sdc.md)
                rel.plan["sdc"] = r.sdc.record()
                rel.metrics.update(r.sdc.metrics())
                rel.info["metric_directions"] = {**rel.info.get("metric_directions", {}),
                                                 **dict.fromkeys(r.sdc.metrics(), "lower")}
            if policy.metrics.get("compute") and engine.measures:   # measured inside the transaction
                from ..metrics import attach

                people = dict(v.metrics) if v.units is not None else None
                attach(engine.con, rel, r.taxonomies, r.source)   # the sensitive counts read the unit: people
                if people is not None:   # the size metrics count people (the verified classes' sizes)
                    rel.metrics.update(people)
                    if "sample_uniques" in rel.metrics:   # classes of one person over the people released
                        one = v.classes[SIZE].to_numpy() if len(v.classes) else []
                        rel.metrics["sample_uniques"] = (float((one == 1).sum() / one.sum()) if len(one)
                                                         else float("nan"))
            if r.unit_rows is not None:   # the related sensitive values live in <release>_<name>: one row a person
                rel.records_out = related.one_row_per_unit(engine, policy, names.table)
                rel.records_in, rel.suppressed = r.unit_rows, r.unit_rows - rel.records_out
            if r.units is not None and compiled.people is None:   # verified and measured counting people: the
                engine.drop_unit(names)                                 # unit's values leave the release
            if dry_run:
                engine.rollback()
                return rel
            if engine.name == "duckdb":   # the table as released: each QI's values with their rows, which check
                values = released_values_digest(   # (M9, M15), read from the rows it was written from
                    engine.con, names.table, list(r.policy.quasi), noise_flag_of(policy),
                    counted=compiled.counted_rows if compiled.written else None)
                if values is not None:
                    rel.info["released_values"] = values
            tidy(engine, names, session_bound=udf is not None or engine.session_bound(r.source),
                 rows=compiled.counted_rows if compiled.written else None, people=compiled.people)
            rel.recorded = engine.record(rel, plan, r.source.label)
            recreate_indexes(engine.con, r.policy.name, indexes)
            if before_commit is not None:
                before_commit(rel)
            engine.commit()
            rel.info.update(engine.info())
            return rel
        except BaseException as err:
            rollback_keeping_cause(engine.rollback, engine.errors)
            if isinstance(err, PrivacyRequirementError) and not dry_run:
                engine.record_failure(policy, r.source.label, r.records, str(err))
            raise
    finally:
        discard_resolved(engine, r)
        if snapshotted:
            versions.discard_snapshots(engine.con)


def _replace_version(con: duckdb.DuckDBPyConnection, declared: Policy) -> Callable[[Release], None]:
    """The ``before_commit`` of a replacement of a release with a version history: its ``replace`` version row,
    compared with the version it replaces (the statements' CREATE OR REPLACE does the same), in its transaction.
    Takes the snapshot the comparison reads: the caller drops it (:func:`versions.discard_snapshots`)."""
    previous = versions.snapshot(con, declared.name)

    def record(rel: Release) -> None:
        rel.info["version"] = versions.record(con, rel, "replace", json.dumps(declared.to_dict()), previous)

    return record


def _needed_suppression(engine: Engine, r: Resolved, plan, policy: Policy, v, options: dict) -> float | None:
    """Records this plan must suppress to meet every requirement: the fixed point of :func:`suppression.settle`.
    With suppression allowed it has just run; otherwise it is run on a trial release (suppression on) inside the
    transaction the refusal rolls back. None when suppression cannot help (a whole-table check still fails)."""
    if getattr(plan, "table_check", None):
        return None   # slicing advises its own budget (its suppression is the method's)
    if policy.privacy.max_suppression <= 0:
        trial_policy = policy.replace(privacy={"max_suppression": 1.0})
        names = ReleaseNames(policy.name, work=engine.work_schema)
        compiled = compile_release(r.compile_input(plan, trial_policy, **options), names)
        if r.base is not None:   # the release's last statement dropped the temp base counts: make them again
            engine.base_counts(policy, r.source.relation, r.base, r.carried)
        materialize(engine, compiled, plan, trial_policy, replace=True, base_made=r.base is not None)
        suppression.settle(engine, compiled.names, compiled.counted_rows, written=compiled.written,
                           people=compiled.people)
        v = verify_release(engine.con, trial_policy, compiled, r.records, plan, r.models, units=r.units)
    if any(f["check"] != "max_suppression" for f in v.failures):
        return None
    return float(v.suppressed if v.units is None else v.units["suppressed"])


def replace_relation(src: Source, relation) -> Source:
    """The same source read through another relation (the perturbed working table)."""
    return Source(src.label, relation, list(src.columns), dict(src.types))
