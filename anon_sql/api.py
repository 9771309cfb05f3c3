"""Public entry points beside :func:`anon_sql.runner.run.release_with_duckdb`: compile, check, export, taxonomy loading."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd
from sqlglot import exp

from .catalog import store as catalog
from .catalog.read import probed_once
from .compiler.views import CompileInput, compile_release
from .engines import DuckDBEngine
from .errors import PolicyError, SourceError, TaxonomyError
from .methods import LevelPlan, get_method
from .models import build_models
from .policy.model import Policy, coerce_policy
from .runner.run import run_resolved
from .data.source import is_path, resolve_source, table_relation
from .common.sqlbuild import col, render
from .runner.resolve import discard_resolved, resolve_release
from .data.builtin_taxonomies import load_builtin_taxonomy as builtin_taxonomy
from .data.taxonomy import Taxonomy, build_taxonomy, from_arx_csv, needs_values

if TYPE_CHECKING:
    from .runner.result import Release

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
    if policy.privacy.differential_privacy is not None and (con is None or dialect != "duckdb" or source is not None):
        raise PolicyError("a SafePub policy (privacy.differential_privacy) compiles only for dialect 'duckdb' with a "
                          "connection to its source (con=..., no source=): its sample is drawn with DuckDB's hash")
    if con is not None:
        r = resolve_release(con, policy, source, base=True)
        try:
            if r.method.plan_kind == "assignment" and dialect != "duckdb":
                raise PolicyError(f"method {policy.method!r} computes a record assignment; only dialect 'duckdb' "
                                  "can be compiled for it")
            if policy.method == "levels":
                plan = get_method("levels", policy.method_params).plan(_Ctx(r.policy, r.taxonomies))
            else:   # the method plans over the data: a dry run of the release, from the same resolved record
                rel = run_resolved(DuckDBEngine(con), r, dry_run=True)
                if r.method.plan_kind != "levels":
                    return rel.sql
                plan = LevelPlan(dict(rel.plan))
        finally:
            discard_resolved(con, r)
        eff = r.policy
        in_place = source is None and (dialect == "duckdb" or not is_path(eff.source))
        relation = r.source.relation if in_place else table_relation(eff.source)
        ci = CompileInput(eff, relation, r.source.columns, plan, r.taxonomies, r.models, dialect=dialect)
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
    """Re-verify a recorded release, tamper-evidently: every model compiled afresh from the policy stored in
    ``anon.releases`` and run over the released table, plus reconciliation with the recorded counts (see
    :mod:`anon_sql.audit.recheck`). One row per check with ``passed``; :class:`SourceError` for an unknown release."""
    from .audit.recheck import recheck

    return recheck(con, release_name)


def export(con: duckdb.DuckDBPyConnection, release_name: str, to: str | Path) -> list[str]:
    """Write a recorded release's shareable form — the released table, its class table and a metadata row, nothing
    else — to a new ``.duckdb`` file (readable by DuckDB 1.x) or ``.parquet`` files; see :mod:`anon_sql.publish.share`."""
    from .publish.share import write

    return write(con, release_name, to)


def load_taxonomy_file(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None,
                       replace: bool = False) -> Taxonomy:
    """Load an ARX-format hierarchy CSV into the catalog (``anon.taxonomies``) and return it; a stored taxonomy of
    the same name is replaced only with ``replace=True``."""
    tax = from_arx_csv(path, name)
    _claim_taxonomy_name(con, tax.name, replace)
    catalog.store_taxonomy(con, tax)
    return tax


def build_taxonomy_from_column(con: duckdb.DuckDBPyConnection, name: str, table: str, column: str,
                               spec: dict[str, Any], replace: bool = False) -> Taxonomy:
    """Build a taxonomy (interval/mask/date/top) from a column's distinct values and store it (an existing one of
    the same name only with ``replace=True``)."""
    _claim_taxonomy_name(con, name, replace, "give `taxonomy build` another NAME")
    src = resolve_source(con, table)
    if column not in src.columns:
        raise SourceError(f"{table!r} has no column {column!r}; its columns are {src.columns}")
    q = exp.select(col(column)).distinct().from_(src.relation)
    values = [r[0] for r in con.execute(render(q)).fetchall()]
    tax = build_taxonomy(name, spec, values)
    catalog.store_taxonomy(con, tax)
    return tax


def _claim_taxonomy_name(con: duckdb.DuckDBPyConnection, name: str, replace: bool,
                         another: str = "choose another name (--name)") -> None:
    """Refuse a taxonomy name already stored unless ``replace``; ``another``: how this command names another one
    (``load`` has ``--name``, ``build`` takes the name as its argument)."""
    if not replace and name in catalog.taxonomy_names(con):
        raise TaxonomyError(f"taxonomy {name!r} already exists in the catalog (anon.taxonomies); pass --replace "
                            f"(replace=True) to replace it, or {another}")


def release(con: duckdb.DuckDBPyConnection, policy: Policy | dict | str, *, to: str | Path | None = None,
            **options: Any) -> "Release":
    """``anon_sql.runner.run``: plan, compile, materialize and verify a release in one transaction (``options``:
    replace, dry_run, source, progress — see :func:`anon_sql.runner.run.release_with_duckdb`). With ``to``, the release's shareable
    form (:mod:`anon_sql.publish.share`) is also written to that new ``.duckdb`` / ``.parquet`` path, checked before any work
    is done; ``Release.info["shared"]`` lists the files."""
    from .audit.recheck import prepare_check
    from .runner.run import release_with_duckdb as release_run
    from .publish.share import targets, write

    if to is not None:
        if options.get("dry_run"):
            raise PolicyError("to= writes the release to a file, dry_run=True creates none: use one or the other")
        targets(to)
    with probed_once():
        rel = release_run(con, policy, **options)
        if not options.get("dry_run"):
            # the release's check program compiled and cached now (a few hundredths of a second, in this process
            # that has the compiler loaded), so the first `anon-sql check` / anon_sql.check of it starts at once too
            prepare_check(con, rel.name, rel.recorded)
    if to is not None:
        rel.info["shared"] = write(con, rel.name, to)
    return rel
