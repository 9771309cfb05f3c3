"""Resolve: a policy against its source → one typed record, :class:`Resolved`, that every later stage reads.

The effective policy (``default_role`` applied), the source's columns and types, the record count, the method, the
taxonomies (checked to cover every value of the data) and the privacy models are worked out here once; planning,
compiling, materializing and verifying never go back to the raw policy for them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd
from sqlglot import exp

from .. import base_counts, catalog
from ..compiler import CompileInput
from ..errors import PolicyError, SourceError, TaxonomyError
from ..methods import Method, Plan, get_method
from ..models import PrivacyModel, build_models
from ..policy import Attribute, Policy, coerce_policy
from ..source import Source, resolve as resolve_source
from ..sqlbuild import alias, col, record_count, render
from ..taxonomy import Taxonomy, build as build_taxonomy, from_arx_csv

_NUMERIC = ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC")


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
    base: exp.Table | None = None             # the temp base-count table resolve made (level plans), or None

    def compile_input(self, plan: Plan, policy: Policy | None = None, **options: Any) -> CompileInput:
        """The compiler's input for ``plan`` (``policy``: the policy as released, default the effective one)."""
        return CompileInput(policy or self.policy, self.source.relation, self.source.columns, plan, self.taxonomies,
                            self.models, numeric_sensitive=self.numeric_sensitive, **options)


def effective_policy(policy: Policy, src: Source) -> Policy:
    """Check attributes against the source's columns and apply ``default_role`` to the unmentioned ones."""
    unknown = [a for a in policy.attributes if a not in src.columns]
    if unknown:
        raise PolicyError(f"the policy names column(s) {unknown} that source {src.label!r} does not have; "
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


def is_numeric(type_name: str) -> bool:
    """Whether an engine column type is numeric (a numeric sensitive attribute gets ordered t-closeness)."""
    t = type_name.upper()
    return any(x in t for x in _NUMERIC) and "[]" not in t


def resolve_taxonomies(con: Any, policy: Policy, src: Source, need: bool, catalog_con: Any = None,
                       value_counts: Callable[[str], pd.DataFrame] | None = None,
                       check: bool = True) -> dict[str, Taxonomy]:
    """Catalog, built-in, ARX file or inline taxonomy per quasi-identifier, checked to cover every value of the data.

    ``con`` answers the value-count queries (DuckDB, or the Spark wrapper); ``catalog_con`` is the DuckDB connection
    whose ``anon`` catalog holds named taxonomies (None: built-ins, files and inline specs only); ``value_counts``
    (column → frame v, n) replaces the per-column scans of the source (e.g. reads the base counts); ``check=False``
    skips the coverage check (metrics of a release that was checked), so named taxonomies read no values at all."""
    from ..taxonomies import load as load_builtin

    out: dict[str, Taxonomy] = {}
    named = [policy.attributes[q].taxonomy for q in policy.quasi if isinstance(policy.attributes[q].taxonomy, str)]
    # the catalog's taxonomies among them, in two queries (not three probes per quasi-identifier)
    stored = catalog.load_taxonomies(catalog_con, named) if catalog_con is not None and named else {}
    for q in policy.quasi:
        spec = policy.attributes[q].taxonomy
        if spec is None:
            if need:
                raise PolicyError(
                    f"quasi-identifier {q!r} has no taxonomy, and method {policy.method!r} generalizes every value "
                    "through one: give it taxonomy = \"name\" (see anon-sql taxonomy load) or an inline builder, "
                    "e.g. { kind = \"interval\", widths = [5, 10, 20] } or { kind = \"top\" }"
                )
            continue
        values = None
        if check or isinstance(spec, dict):   # inline builders are built from the data's values
            values = value_counts(q) if value_counts is not None else column_value_counts(con, src, q,
                                                                                           policy.count_column)
        if isinstance(spec, str):
            tax = stored.get(spec)
            tax = tax or load_builtin(spec)
            if tax is None and spec.endswith(".csv"):
                tax = from_arx_csv(spec, q)
            if tax is None:
                where = (f"not in the catalog (known: {catalog.taxonomy_names(catalog_con)})"
                         if catalog_con is not None else "not built in, and no catalog connection was given "
                         "(on Spark pass catalog=, a DuckDB connection with the anon catalog)")
                raise TaxonomyError(
                    f"quasi-identifier {q!r}: taxonomy {spec!r} is {where}; load it with `anon-sql taxonomy load` "
                    "or anon_sql.load_taxonomy, give an ARX CSV path, or an inline spec"
                )
        elif isinstance(spec, dict):
            tax = build_taxonomy(f"{policy.name}.{q}", spec, values["v"].tolist())
        else:
            raise PolicyError(f"quasi-identifier {q!r}: taxonomy must be a name or an inline table, got {spec!r}")
        if check:
            tax.check_covers(values["v"], values["n"], column=q)
        out[q] = tax
    return out


def column_value_counts(con: Any, src: Source, column: str, count_column: str | None) -> pd.DataFrame:
    """``v`` (the column's values as text) and ``n`` (their records) over the source."""
    v = exp.Cast(this=col(column), to=exp.DataType.build("VARCHAR"))
    q = (exp.select(alias(v, "v"), alias(record_count(count_column), "n")).from_(src.relation.copy())
         .group_by(v.copy()))
    return con.execute(render(q)).df()


def resolve(con: Any, policy: Policy | dict | str, source: pd.DataFrame | None = None,
            base: bool = False) -> Resolved:
    """Resolve a policy against a DuckDB connection's data (``source`` overrides the policy's).

    ``base``: for a level method, aggregate the source once into the release's temp base-count table
    (:mod:`anon_sql.base_counts`) and check taxonomy coverage from it; :func:`discard` drops it."""
    policy = coerce_policy(policy)
    catalog.ensure_installed(con)
    src = resolve_source(con, source if source is not None else policy.source)
    policy = effective_policy(policy, src)
    records = count_records(con, src, policy)
    check_records(policy, src, records)
    method = get_method(policy.method, policy.method_params)
    counts = None
    table = None
    if base and method.plan_kind == "levels":
        table = base_counts.temp_table(policy.name)
        con.execute(render(base_counts.create(policy, src.relation, table)))
        counts = lambda column: base_counts.value_counts(con, table, column)  # noqa: E731
    resolved = Resolved(policy, src, records, method, {}, [], base=table)
    try:
        resolved.taxonomies = resolve_taxonomies(con, policy, src, method.needs_taxonomies, catalog_con=con,
                                                 value_counts=counts)
        resolved.models = build_models(policy, con)
    except BaseException:
        discard(con, resolved)
        raise
    resolved.numeric_sensitive = {s for s in policy.sensitive if is_numeric(src.types.get(s, ""))}
    return resolved


def discard(con: Any, resolved: Resolved) -> None:
    """Drop what :func:`resolve` created in the session (the temp base counts); a no-op when it made nothing."""
    if resolved.base is not None:
        con.execute(render(base_counts.drop(resolved.base)))
