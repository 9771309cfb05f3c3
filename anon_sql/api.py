"""Public entry points beside :func:`anon_sql.release`: compile, check, export, taxonomy loading."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from . import catalog
from .compiler import CompileInput, ReleaseNames, compile_release
from .errors import AnonSQLError, PolicyError, SourceError
from .methods import LevelPlan, get_method
from .models import build_models
from .policy import Policy, coerce_policy
from .source import is_path, relation_exists, table_relation
from .sqlbuild import col, ident, lit, render
from .taxonomies import load as builtin_taxonomy
from .taxonomy import Taxonomy, build as build_taxonomy, from_arx_csv, needs_values

DIALECTS = ("duckdb", "spark", "postgres", "trino", "sqlite")


def compile(policy: Policy | dict | str, dialect: str = "duckdb", con: duckdb.DuckDBPyConnection | None = None,
            pretty: bool = False, source: Any = None) -> list[str]:
    """The release's SQL statements for ``dialect``; running them in order creates the released table.

    Without a connection the policy must be self-contained (file or mapping taxonomies, every column declared,
    ``method = "levels"``). With one, the plan is computed first (searches run on the connection's data, or on
    ``source``: a DataFrame, Arrow table, relation, ... in place of the policy's ``source``). The statements read
    the policy's ``source`` by name, as the engine that runs them knows it.
    """
    if dialect not in DIALECTS:
        raise PolicyError(f"dialect {dialect!r} is not one of {', '.join(DIALECTS)}")
    policy = coerce_policy(policy)
    if con is not None:
        from .release import prepare, release

        eff, src, taxonomies, models, records, method = prepare(con, policy, source)
        if method.plan_kind == "assignment" and dialect != "duckdb":
            raise PolicyError(f"method {policy.method!r} computes a record assignment; only dialect 'duckdb' "
                              "can be compiled for it")
        if policy.method == "levels":
            plan = get_method("levels", policy.method_params).plan(_Ctx(eff, taxonomies))
        else:
            rel = release(con, policy, dry_run=True, source=source)
            plan = LevelPlan(dict(rel.plan)) if method.plan_kind == "levels" else None
            if plan is None:
                return rel.sql
        in_place = source is None and (dialect == "duckdb" or not is_path(eff.source))
        relation = src.relation if in_place else table_relation(eff.source)
        ci = CompileInput(eff, relation, src.columns, plan, taxonomies, models, dialect=dialect)
        return compile_release(ci).sql(pretty=pretty)
    if policy.method != "levels":
        raise PolicyError(f"compiling method {policy.method!r} needs a connection to the data (con=...)")
    taxonomies: dict[str, Taxonomy] = {}
    for q in policy.quasi:
        spec = policy.attributes[q].taxonomy
        if isinstance(spec, dict) and not needs_values(spec):
            taxonomies[q] = build_taxonomy(f"{policy.name}.{q}", spec)
        elif isinstance(spec, str) and spec.endswith(".csv"):
            taxonomies[q] = from_arx_csv(spec, q)
        elif isinstance(spec, str) and builtin_taxonomy(spec) is not None:
            taxonomies[q] = builtin_taxonomy(spec)
        elif spec is not None:
            raise PolicyError(f"quasi-identifier {q!r}: taxonomy {spec!r} needs the data or the catalog; "
                              "pass con= to compile")
    if policy.default_role:
        raise PolicyError("a policy with default_role needs the source's columns; pass con= to compile")
    columns = list(policy.attributes) + ([policy.count_column] if policy.count_column else [])
    plan = get_method("levels", policy.method_params).plan(_Ctx(policy, taxonomies))
    ci = CompileInput(policy, table_relation(policy.source), columns, plan, taxonomies, build_models(policy),
                      dialect=dialect)
    return compile_release(ci).sql(pretty=pretty)


class _Ctx:
    def __init__(self, policy, taxonomies):
        self.policy, self.taxonomies = policy, taxonomies


def check(con: duckdb.DuckDBPyConnection, release_name: str) -> pd.DataFrame:
    """Re-run the privacy checks of a materialized release; one row per check with ``passed``."""
    names = ReleaseNames(release_name)
    if not relation_exists(con, release_name + "__checks"):
        raise SourceError(f"{release_name!r} is not a release of this database (no {release_name}__checks view)")
    from .release import check_summary

    frame = con.execute(render(exp.select("*").from_(names.checks.copy()))).df()
    rows = check_summary(frame)
    rows += _whole_table_checks(con, names)
    return pd.DataFrame(rows)


def _whole_table_checks(con: duckdb.DuckDBPyConnection, names: ReleaseNames) -> list[dict]:
    """Checks that are not per class (slicing's l-diversity), re-run in SQL from the plan stored in the catalog."""
    import json

    found = con.execute(render(exp.select(col("plan"), col("policy_json"))
                               .from_(exp.Table(this=ident("releases"), db=ident("anon")))
                               .where(exp.EQ(this=col("release"), expression=lit(names.release))))).fetchall()
    if not found or not found[0][0]:
        return []
    spec = json.loads(found[0][0]).get("slicing_check")
    if not spec:
        return []
    from .methods.slicing_sql import verify

    weight = json.loads(found[0][1] or "{}").get("count_column")
    row = verify(con, names.table, names.source, None, spec, weight, names.assignment)
    row.pop("requirement", None)
    return [row]


def export(con: duckdb.DuckDBPyConnection, release_name: str, to: str | Path) -> list[str]:
    """Write the released table and its EC table — and nothing else — to Parquet files or a new DuckDB file."""
    if not relation_exists(con, release_name):
        raise SourceError(f"release {release_name!r} does not exist in this database")
    to = Path(to)
    release_q = exp.select("*").from_(exp.Table(this=ident(release_name)))
    classes_q = (exp.select("*").from_(exp.Table(this=ident("equivalence_classes"), db=ident("anon")))
                 .where(exp.EQ(this=col("release"), expression=lit(release_name))))
    if to.suffix == ".parquet":
        classes_path = to.with_name(to.stem + ".classes.parquet")
        for q, path in ((release_q, to), (classes_q, classes_path)):
            stmt = exp.Copy(this=exp.Subquery(this=q), kind=False, files=[lit(str(path))],
                            params=[exp.CopyParameter(this=exp.var("FORMAT"), expression=exp.var("parquet"))])
            con.execute(render(stmt))
        return [str(to), str(classes_path)]
    if to.suffix == ".duckdb":
        if to.exists():
            raise AnonSQLError(f"{str(to)!r} exists; export writes a new file (remove it first)")
        alias_name = "__anon_export"
        con.execute(render(exp.Attach(this=exp.Alias(this=lit(str(to)), alias=ident(alias_name)))))
        try:
            for q, name in ((release_q, release_name), (classes_q, release_name + "__classes")):
                con.execute(render(exp.Create(this=exp.Table(this=ident(name), db=ident(alias_name)),
                                              kind="TABLE", expression=q)))
        finally:
            con.execute(render(exp.Detach(this=ident(alias_name))))
        return [str(to)]
    raise AnonSQLError(f"export target {str(to)!r}: use a .parquet or a .duckdb path")


def load_taxonomy_file(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None) -> Taxonomy:
    """Load an ARX-format hierarchy CSV into the catalog (``anon.taxonomies``) and return it."""
    tax = from_arx_csv(path, name)
    catalog.store_taxonomy(con, tax)
    return tax


def build_taxonomy_from_column(con: duckdb.DuckDBPyConnection, name: str, table: str, column: str,
                               spec: dict[str, Any]) -> Taxonomy:
    """Build a taxonomy (interval/mask/date/top) from a column's distinct values and store it."""
    q = exp.select(col(column)).distinct().from_(table_relation(table))
    values = [r[0] for r in con.execute(render(q)).fetchall()]
    tax = build_taxonomy(name, spec, values)
    catalog.store_taxonomy(con, tax)
    return tax
