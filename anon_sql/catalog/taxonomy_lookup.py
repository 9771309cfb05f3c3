"""A policy's taxonomies: per quasi-identifier from the catalog, the built-ins, an ARX CSV file or an inline builder,
checked to cover every value of the data. Used by resolve (a release) and by metrics (a stored release)."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd
from sqlglot import exp

from . import store as catalog
from ..errors import PolicyError, TaxonomyError
from ..policy.model import Policy
from ..data.source import Source
from ..common.sqlbuild import alias, col, dtype, record_count, render
from ..data.taxonomy import Taxonomy, build_taxonomy, from_arx_csv


def resolve_taxonomies(con: Any, policy: Policy, src: Source, need: bool, catalog_con: Any = None,
                       value_counts: Callable[[str], pd.DataFrame] | None = None,
                       check: bool = True) -> dict[str, Taxonomy]:
    """Catalog, built-in, ARX file or inline taxonomy per quasi-identifier, checked to cover every value of the data.

    ``con`` answers the value-count queries (DuckDB, or the Spark wrapper); ``catalog_con`` is the DuckDB connection
    whose ``anon`` catalog holds named taxonomies (None: built-ins, files and inline specs only); ``value_counts``
    (column → frame v, n) replaces the per-column scans of the source (e.g. reads the base counts); ``check=False``
    skips the coverage check (metrics of a release that was checked), so named taxonomies read no values at all."""
    from ..data.builtin_taxonomies import load_builtin_taxonomy as load_builtin

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
    v = exp.Cast(this=col(column), to=dtype("VARCHAR"))
    q = (exp.select(alias(v, "v"), alias(record_count(count_column), "n")).from_(src.relation.copy())
         .group_by(v.copy()))
    return con.execute(render(q)).df()
