"""Resolve the population of the population-based models (k-map, δ-presence): find the table, check it has every
quasi-identifier, that the taxonomies cover its values, and that the source is a subset of it; then give the models
the relation (QIs cast to the source's types, ``__pw`` the records per row) the lattice, the planners and the
compiler read. Every method takes them: level plans send the population through their level maps, assignment plans
match it to the released values of each class (:mod:`anon_sql.compiler.population`).

What is checked: multiset inclusion on the quasi-identifiers — every QI combination of the source has at most as
many records in the population. What is assumed (it cannot be checked without a record key): that the source's
records *are* population records (ARX's ``DataSubset``), so each class's population count includes its own records.
"""
from __future__ import annotations

from typing import Any

import duckdb
from sqlglot import exp

from ..engines import Engine
from ..errors import PolicyError, SourceError, TaxonomyError
from ..models import population_models
from ..models.population import WEIGHT
from ..data.source import Source, resolve_source
from ..common.sqlbuild import alias, and_all, col, ident, lit, null_safe_eq, record_count, render

POPULATION_SUFFIX = "__population"   # the view a population file becomes on an engine that registers one (Spark)


def resolve_population(engine: Engine, resolved: Any) -> None:
    """Validate the population of the resolved policy's population models and set their relation (fail-closed:
    PolicyError / SourceError / TaxonomyError, exit 2); a no-op without such models."""
    models = population_models(resolved.models)
    if not models:
        return
    policy = resolved.policy
    keys = "privacy model(s) " + ", ".join(m.name for m in models)
    pops = {id(m.population): m.population for m in models}
    if len(pops) > 1:
        raise PolicyError(f"k_map and delta_presence name different populations "
                          f"({sorted(p.name for p in pops.values())}); give both the same population table")
    pop = next(iter(pops.values()))
    con = engine.con
    try:   # a table or view of the engine, or a file it reads (Spark: a temporary view of the release)
        src = engine.register_source(pop.name, policy.name + POPULATION_SUFFIX)
    except SourceError as err:
        raise SourceError(f"population {pop.name!r} of {keys}: {err}") from None
    relation = population_relation(con, pop.name, policy, resolved.source.types, keys, src=src)
    check_values(con, pop.name, relation, policy, resolved.taxonomies, errors=engine.errors)
    _check_subset(con, pop.name, relation, resolved, keys)
    pop.relation, pop.quasi = relation, list(policy.quasi)
    pop.types = {q: resolved.source.types[q] for q in policy.quasi}


def population_relation(con: Any, name: str, policy: Any, types: dict[str, str], keys: str,
                        quasi: list[str] | None = None, src: Source | None = None) -> exp.Select:
    """``SELECT <QI> CAST to types[QI], <records> AS __pw FROM <population>`` after checking the population exists
    and has every quasi-identifier (``quasi``, default the policy's; the count column, when the policy has one and
    the population too, gives the records of each row; a QI without a type in ``types`` is read as it is; ``src``:
    the population as the engine registered it, else found on the DuckDB connection ``con``)."""
    if src is None:
        try:
            src = resolve_source(con, name, label=name)
        except SourceError as err:
            raise SourceError(f"population {name!r} of {keys}: {err}") from None
    quasi = list(policy.quasi) if quasi is None else list(quasi)
    missing = [q for q in quasi if q not in src.columns]
    if missing:
        raise PolicyError(f"population {name!r} of {keys} has no column(s) {missing}; it needs every "
                          f"quasi-identifier of the policy ({quasi}), its columns are {src.columns}")
    weighted = bool(policy.count_column) and policy.count_column in src.columns
    items = [alias(exp.Cast(this=col(q), to=exp.DataType.build(types[q], dialect="duckdb")) if q in types
                   else col(q), q) for q in quasi]
    items.append(alias(col(policy.count_column) if weighted else lit(1), WEIGHT))
    return exp.select(*items).from_(src.relation.copy())


def check_values(con: Any, name: str, relation: exp.Select, policy: Any, taxonomies: dict,
                 quasi: list[str] | None = None, errors: tuple[type[BaseException], ...] = (duckdb.Error,)) -> None:
    """Every population value castable to the source's type and covered by the QI's taxonomy (``quasi``: the QIs,
    default the policy's; ``errors``: what the engine raises for a value that does not cast)."""
    for q in (policy.quasi if quasi is None else quasi):
        v = exp.Cast(this=col(q), to=exp.DataType.build("VARCHAR"))
        query = (exp.select(alias(v, "v"), alias(exp.Sum(this=col(WEIGHT)), "n"))
                 .from_(exp.Subquery(this=relation.copy(), alias=exp.TableAlias(this=ident("p")))).group_by(v.copy()))
        try:
            values = con.execute(render(query)).df()
        except errors as err:   # a value that does not cast to the source's type
            raise SourceError(f"population {name!r}: column {q!r} does not read as the source's type: "
                              f"{str(err).splitlines()[0]}") from None
        tax = taxonomies.get(q)
        if tax is not None:
            try:
                tax.check_covers(values["v"], values["n"], column=q)
            except TaxonomyError as err:
                attr = policy.attributes.get(q)
                hint = (" (the inline taxonomy of this quasi-identifier is built from the source's values: give a "
                        "named or file taxonomy that covers the population)"
                        if attr is not None and isinstance(attr.taxonomy, dict) else "")
                raise TaxonomyError(f"population {name!r}: {err}{hint}") from None


def _check_subset(con: Any, name: str, relation: exp.Select, resolved: Any, keys: str) -> None:
    """Refuse a source with more records than the population in some QI combination (not a subset of it)."""
    policy = resolved.policy
    quasi = list(policy.quasi)
    src_counts = (exp.select(*[col(q) for q in quasi], alias(record_count(policy.count_column), "__n"))
                  .from_(resolved.source.relation.copy()).group_by(*[col(q) for q in quasi]))
    pop_counts = (exp.select(*[col(q) for q in quasi], alias(exp.Sum(this=col(WEIGHT)), "__n"))
                  .from_(exp.Subquery(this=relation.copy(), alias=exp.TableAlias(this=ident("p"))))
                  .group_by(*[col(q) for q in quasi]))
    pop_n = exp.Coalesce(this=col("__n", "p"), expressions=[lit(0)])
    query = (exp.select(*[col(q, "s") for q in quasi], alias(col("__n", "s"), "source_records"),
                        alias(pop_n, "population_records"))
             .from_(exp.Subquery(this=src_counts, alias=exp.TableAlias(this=ident("s"))))
             .join(exp.Subquery(this=pop_counts, alias=exp.TableAlias(this=ident("p"))),
                   on=and_all(null_safe_eq(col(q, "s"), col(q, "p")) for q in quasi), join_type="left")
             .where(exp.GT(this=col("__n", "s"), expression=pop_n.copy()))
             .order_by(*[exp.Ordered(this=col(q, "s"), nulls_first=True) for q in quasi]))
    bad = con.execute(render(query)).df()
    if len(bad):
        shown = "; ".join(", ".join(f"{q}={r[q]!r}" for q in quasi)
                          + f" ({int(r['source_records'])} in the source, {int(r['population_records'])} in the "
                          "population)" for _, r in bad.head(3).iterrows())
        raise SourceError(
            f"source {resolved.source.label!r} is not a subset of population {name!r} ({keys} need(s) the population "
            f"the source was drawn from): {len(bad)} quasi-identifier combination(s) have more records in the "
            f"source than in the population, e.g. {shown}")
