"""Resolve: a policy against its source → one typed record, :class:`Resolved`, that every later stage reads.

The effective policy (``default_role`` applied), the source's columns and types, the record count, the method, the
taxonomies (checked to cover every value of the data) and the privacy models are worked out here once; planning,
compiling, materializing and verifying never go back to the raw policy for them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..data import base_counts
from ..common.columns import is_numeric
from ..compiler.release import carry_candidates
from ..compiler.views import CompileInput
from ..engines import DuckDBEngine, Engine
from ..errors import PolicyError, SourceError
from ..methods import Method, Plan, get_method
from ..models import PrivacyModel, build_models
from ..policy.model import Attribute, Policy, coerce_policy
from ..data.source import Source, check_count_column, refuse_shadowed_source
from ..common.sqlbuild import record_count, render
from ..data.taxonomy import Taxonomy
from ..catalog.taxonomy_lookup import resolve_taxonomies
from . import related, units
from .population import resolve_population
from .sampling import Sampling, safepub_policy, sampled_relation
from . import sdc
from .sdc import Prepared
from .sdc_engine import prepare_on_engine


@dataclass
class Resolved:
    """A policy resolved against its source: what the plan, compile, materialize and verify stages read."""

    policy: Policy                            # the effective policy: every source column has a role
    source: Source                            # relation, columns and engine types
    records: int                              # records of the source (the count column's sum, else rows)
    method: Method
    taxonomies: dict[str, Taxonomy]           # quasi-identifier → taxonomy (those that have one)
    models: list[PrivacyModel]
    numeric_sensitive: set[str] = field(default_factory=set)   # sensitive attributes with a numeric type
    base: exp.Table | None = None             # the temp base-count table resolve made (level plans, Mondrian), or None
    sampling: Sampling | None = None          # SafePub: the source is the seeded sample; ``records`` counts all
    sdc: Prepared | None = None               # the perturbed / table-masked source resolve made, or None
    units: int | None = None                  # distinct privacy units of the source (None: no privacy_unit)
    related: list = field(default_factory=list)   # the policy's related tables, checked (runner/related.py)
    varying: tuple[str, ...] = ()             # QIs varying inside a unit: classes are signatures (docs/units.md)
    unit_rows: int | None = None              # rows of the unit table when the source is its join with a related
                                              # table's sensitive values (runner/related.py), else None
    base_rows: Any = None                     # the base counts as fetched for the coverage check (Arrow), or None
    registered: Source | None = None          # the source as registered, before any sample, perturbation or join
    carried: tuple[str, ...] = ()             # released columns grouped with the base counts (``<release>__carry``)

    def compile_input(self, plan: Plan, policy: Policy | None = None, **options: Any) -> CompileInput:
        """The compiler's input for ``plan`` (``policy``: the policy as released, default the effective one)."""
        return CompileInput(policy or self.policy, self.source.relation, self.source.columns, plan, self.taxonomies,
                            self.models, numeric_sensitive=self.numeric_sensitive, base=self.base,
                            types=dict(self.source.types), sdc_prepared=self.sdc is not None, carried=self.carried,
                            **options)


def effective_policy(policy: Policy, src: Source) -> Policy:
    """Check attributes against the source's columns and apply ``default_role`` to the unmentioned ones."""
    if policy.privacy_unit and policy.privacy_unit not in policy.attributes:   # the unit is an identifier
        d = policy.to_dict()
        d["attributes"] = {c: a.to_dict() for c, a in units.with_unit_attribute(policy).items()}
        policy = Policy.from_dict(d)
    # (a recorded policy lists the related tables' sensitive columns among its attributes: they join in later)
    unknown = [a for a in policy.attributes if a not in src.columns and a not in policy.related_sensitive]
    if unknown:
        folded = {c.lower(): c for c in src.columns}
        hints = [f"{a!r} → {folded[a.lower()]!r}" for a in unknown if a.lower() in folded]
        hint = f" (names are case-sensitive; did you mean {', '.join(hints)}?)" if hints else ""
        raise PolicyError(f"the policy names column(s) {unknown} that source {src.label!r} does not have{hint}; "
                          f"its columns are {src.columns}")
    if policy.count_column and policy.count_column not in src.columns:
        raise PolicyError(f"count_column {policy.count_column!r} is not a column of {src.label!r} ({src.columns})")
    others = [c for c in src.columns if c not in policy.attributes and c != policy.count_column]
    if others and not policy.default_role:
        raise PolicyError(
            f"column(s) {others} of {src.label!r} are not in the policy: give each a role, or set "
            "default_role (e.g. default_role = \"insensitive\" releases them unchanged)"
        )
    if not policy.quasi:
        raise PolicyError("the policy has no quasi-identifier (role = \"quasi\"): nothing to anonymize")
    if not others:
        return policy
    # the policy's own attributes first, in its order (ties between plans follow it), then the defaulted ones
    attrs = dict(policy.attributes)
    attrs.update({c: Attribute(c, policy.default_role) for c in others})
    d = policy.to_dict()
    d["attributes"] = {c: a.to_dict() for c, a in attrs.items()}
    return Policy.from_dict(d)


def count_records(con: Any, src: Source, policy: Policy) -> int:
    """Records of the source: the count column's sum, else its rows (``con``: DuckDB or the Spark wrapper)."""
    q = exp.select(record_count(policy.count_column)).from_(src.relation.copy())
    value = con.execute(render(q)).fetchall()[0][0]
    return int(value or 0)


def check_records(policy: Policy, src: Source, records: int) -> None:
    """Refuse an empty source, a missing k, or a k larger than the number of records."""
    if records == 0:
        raise SourceError(f"source {src.label!r} is empty: there is nothing to release")
    k = policy.privacy.k
    if k is None:
        raise PolicyError("privacy.k is required (the minimum class size, e.g. k = 5)")
    if k > records:
        raise PolicyError(f"privacy.k = {k} is larger than the {records} records of {src.label!r}; "
                          "no release can have classes that large")


def as_engine(engine: Engine | Any) -> Engine:
    """An engine as given, or a DuckDB connection as a :class:`~anon_sql.engines.DuckDBEngine`."""
    return engine if isinstance(engine, Engine) else DuckDBEngine(engine)


def resolve_release(engine: Engine | Any, policy: Policy | dict | str, source: Any = None, base: bool = False) -> Resolved:
    """Resolve a policy against an engine's data (a DuckDB connection is taken as its engine; ``source`` overrides
    the policy's).

    ``base``: for a level method (or one that plans on combinations, on an engine that keeps them for it), aggregate
    the source once into the release's temp base-count table (:mod:`anon_sql.data.base_counts`, engines that keep
    one) and check taxonomy coverage from it; :func:`discard_resolved` drops it."""
    engine = as_engine(engine)
    policy = coerce_policy(policy)
    sdc.refuse_elsewhere(engine.name, policy)   # before the engine registers anything
    if policy.related and not engine.releases_related:
        raise PolicyError(related.related_elsewhere(policy, engine.name))
    if engine.name == "duckdb" and source is None:   # round 15, M39: never a TEMP copy named like the source
        refuse_shadowed_source(engine.con, policy.source, f"release {policy.name!r}")
    src = registered = engine.register_source(source if source is not None else policy.source,
                                              policy.name + "__input")
    declared = set(policy.attributes)   # identifiers the policy names (not those default_role makes)
    policy = effective_policy(policy, src)
    if policy.count_column:   # whole numbers >= 0 on every row, or a SourceError naming the offending rows
        check_count_column(engine.con, src, policy.count_column)
    safepub = safepub_policy(policy, engine.name)
    full = None
    if safepub is not None:   # SafePub: everything after this reads the sample; the unsampled records are suppressed
        policy, params = safepub
        full = count_records(engine.con, src, policy)
        src = dataclasses.replace(src, relation=sampled_relation(src.relation, src.columns, params.beta, policy.seed))
    method = get_method(policy.method, policy.method_params)
    # a level release on DuckDB with nothing that rewrites the source first reads the unit's profile from its base
    # counts (one pass over the rows fewer); the checks and their messages are the same
    on_combinations = method.plans_combinations and engine.combination_base   # Mondrian on DuckDB
    from_base = (base and (method.plan_kind == "levels" or on_combinations) and engine.name == "duckdb"
                 and bool(policy.privacy_unit)
                 and not policy.related and not policy.related_sensitive and not policy.count_column
                 and not sdc.perturb_specs(policy) and not sdc.mask_specs(policy))
    unit_count, varying = units.resolve_units(engine.con, policy, src, method, declared, defer=from_base)
    if varying and not engine.releases_signatures:
        engine.cleanup()   # what the engine registered for this release (Spark: a path source's view)
        raise PolicyError(units.signatures_elsewhere(policy, varying, engine.name))
    tables = related.resolve_related(engine.con, policy, src) if policy.related else []
    sdc.refuse_public_seed(policy)
    if engine.name == "duckdb":
        sdc.refuse_whole_identifiers(engine.con, policy, src)
    unit_rows = None
    if policy.related_sensitive:   # a person's values live in a related table: the checks read the join
        unit_rows = related.count_rows(engine.con, src)
        policy, src = related.with_related_sensitive(policy, src, tables)
    try:
        # perturbation first: every later stage reads its values (on Spark: as the engine's views, runner/sdc_engine.py)
        prepared = (sdc.prepare(engine.con, policy, src) if engine.name == "duckdb"
                    else prepare_on_engine(engine, policy, src))
    except BaseException:
        engine.cleanup()   # what the engine registered for this release
        raise
    if prepared is not None:
        prepared, src = prepared
    counts = None
    table = None
    carried: tuple[str, ...] = ()
    try:
        # with a unit too (issue 24.6): the unit's profile, the coverage counts and Mondrian's people per
        # combination then read the base rows (one per person and combination), not the source's rows three times
        if base and (method.plan_kind == "levels" or (on_combinations and (not policy.privacy_unit or from_base))):
            table = engine.base_table(policy.name)
            # a level release also groups its plain released columns in the same pass when that groups the rows
            # at least four to one (DuckDB): its released rows are then grouped from those counts (issue 29.2)
            carried = (engine.carried_columns(policy, src.relation, carry_candidates(policy, src.columns))
                       if method.plan_kind == "levels" else ())
            counts = engine.base_counts(policy, src.relation, table, carried)
            if counts is not None and hasattr(counts, "share"):   # a search codes the rows: read them whole once
                counts.share = method.reads == "base"
            table = table if counts is not None else None
    except BaseException:
        sdc.discard_prepared(engine.con, prepared)
        raise
    resolved = Resolved(policy, src, 0, method, {}, [], base=table, sdc=prepared, units=unit_count, related=tables,
                        varying=varying, unit_rows=unit_rows, registered=registered, carried=carried)
    try:
        if from_base:
            resolved.units, resolved.varying = units.profile_units(engine.con, policy, src, method, table)
        # the records: summed from the base counts when resolve made them (a small table), else counted
        resolved.records = (base_counts.total(counts, policy) if table is not None
                            else count_records(engine.con, src, policy))
        if safepub is not None:
            resolved.sampling = Sampling(safepub[1], full, resolved.records)
            resolved.records = full
        check_records(policy, src, resolved.records)
        resolved.taxonomies = resolve_taxonomies(engine.con, policy, src, method.needs_taxonomies,
                                                 catalog_con=engine.catalog, value_counts=counts)
        resolved.models = build_models(policy, engine.catalog)
        resolved.base_rows = getattr(counts, "rows", None)
        resolve_population(engine, resolved)
    except BaseException:
        discard_resolved(engine, resolved)
        engine.cleanup()   # what the engine registered for this release (Spark: a path source's or population's view)
        raise
    resolved.numeric_sensitive = {s for s in policy.sensitive if is_numeric(src.types.get(s, ""))}
    return resolved


def discard_resolved(engine: Engine | Any, resolved: Resolved) -> None:
    """Drop what :func:`resolve` created (the temp base counts, the perturbed source); a no-op when it made
    nothing."""
    if resolved.base is not None:
        as_engine(engine).drop_base(resolved.base)
        if resolved.carried:
            as_engine(engine).drop(base_counts.carry_table(resolved.policy.name))
    if resolved.sdc is not None:
        sdc.discard_prepared(as_engine(engine).con, resolved.sdc)
