"""Anonymized views as database objects: create, refresh, drop, list and explain releases recorded in the catalog.

These are what the SQL statements (``CREATE / REFRESH / DROP / SHOW / EXPLAIN ANONYMIZED VIEW``) do; each version
they make is appended to ``anon.release_versions`` (:mod:`anon_sql.catalog.versions`). Only releases recorded in
``anon.releases`` are ever replaced or dropped: a user's table of the same name is refused, never touched.
"""
from __future__ import annotations

import json
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from ..catalog import store as catalog, versions
from ..compiler.views import ReleaseNames
from ..errors import AnonSQLError, ReleaseExistsError, PolicyError, PrivacyRequirementError, UnknownViewError, ViewExistsError
from ..methods import get_method
from ..catalog import identity
from ..catalog.ownership import legacy_working, require_owned
from ..catalog.read import related_tables
from ..policy.model import Policy, coerce_policy
from ..data.source import refuse_reserved_temp, relation_exists
from ..common.rollback import rollback_keeping_cause
from ..common.sqlbuild import col, ident, lit, render
from ..common.wording import counted

KEEP_PLAN = "refresh keep plan"


def require(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any]:
    """The catalog row of the anonymized view ``name``; :class:`UnknownViewError` naming the known ones if none."""
    row = versions.recorded(con, name)
    if row is None:
        known = show(con)["name"].tolist() if catalog.is_installed(con) else []
        raise UnknownViewError(f"no anonymized view named {name!r} in this database (anonymized views: {known}); "
                          "create one with CREATE ANONYMIZED VIEW")
    return row


def canonical_name(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """A name as DuckDB resolves it, quoted or not (DuckDB matches both case-insensitively): the recorded release
    whose name matches case-insensitively, when the exact name is not recorded and exactly one matches (else
    ``name`` unchanged)."""
    if versions.recorded(con, name) is not None or not catalog.is_installed(con):
        return name
    q = (exp.select(col("release")).distinct().from_(exp.Table(this=ident("releases"), db=ident("anon")))
         .where(exp.and_(exp.EQ(this=exp.Lower(this=col("release")), expression=lit(name.lower())),
                         exp.EQ(this=col("status"), expression=lit("released")))))
    found = [r[0] for r in con.execute(render(q)).fetchall()]
    return found[0] if len(found) == 1 else name


def _run_version(con: duckdb.DuckDBPyConnection, policy: Policy, action: str, declared: Policy, replace: bool,
                 keep_plan_of: str | None = None):
    """Release ``policy`` (replacing the recorded release when ``replace``) with its version row and the comparison
    with the previous version, in the release's one transaction (issue 28.2: both commit, or neither).
    ``keep_plan_of``: the recorded taxonomy digests the plan was made with (KEEP PLAN): a digest that no longer
    matches refuses the refresh, everything rolled back."""
    from ..runner.run import release_with_duckdb

    refuse_reserved_temp(con, policy.name, f"anonymized view {policy.name!r}")   # round 17, M48
    previous, prior = None, None
    if replace and versions.recorded(con, policy.name) is not None:
        # version 1 of a release made without a statement is copied from anon.releases before anything replaces
        # that row, whether or not its table is still there (hostile round 15, M40: a renamed table's release was
        # refreshed as a new "version 1")
        prior = versions.recorded(con, policy.name)
        if relation_exists(con, _table(policy.name)):
            require_owned(con, policy.name)       # never snapshot, compare or replace a table that is not ours
            previous = versions.snapshot(con, policy.name)

    def write_version(rel) -> None:
        if keep_plan_of is not None:
            _same_taxonomies(policy.name, keep_plan_of, rel.info.get("taxonomy_digests") or {})
        if prior is not None:
            versions.ensure_history(con, policy.name, prior)
        rel.info["version"] = versions.record(con, rel, action, _declared_json(declared), previous)

    try:
        return release_with_duckdb(con, policy, replace=replace, before_commit=write_version)
    finally:
        if previous is not None:
            versions.discard_snapshots(con)


def _taxonomy_digests_now(con: duckdb.DuckDBPyConnection, policy: Policy) -> dict:
    """The digests of the taxonomies ``policy`` reads now (as a release records them), or {} when they cannot be read
    (the release's own error then stands)."""
    from ..catalog.taxonomy_lookup import resolve_taxonomies
    from ..data.source import resolve_source
    from ..runner.digests import taxonomy_digests

    try:
        src = resolve_source(con, policy.source)
        taxonomies = resolve_taxonomies(con, policy, src, True, catalog_con=con, check=False)
        return taxonomy_digests(policy, taxonomies, src.types)
    except (AnonSQLError, duckdb.Error):
        return {}


class _TaxonomyMoved(PrivacyRequirementError):
    """KEEP PLAN refused because a taxonomy changed (exit 3)."""


def _same_taxonomies(name: str, recorded_digests: str, now: dict) -> None:
    """KEEP PLAN re-applies level numbers: refuse when a taxonomy they index was rebuilt since (issue 28.3)."""
    from ..runner import digests

    retyped = digests.retyped(recorded_digests or None, now)
    if retyped:
        raise _TaxonomyMoved(
            f"REFRESH ANONYMIZED VIEW {name} KEEP PLAN: the source column of {', '.join(retyped)} changed type since "
            "the stored plan was made, so the same levels would release values read as another type; nothing was "
            "changed: REFRESH without KEEP PLAN plans again (values are then not comparable with earlier versions: "
            "see docs/refresh.md)")
    moved = digests.changed(recorded_digests or None, now)
    if moved:
        raise _TaxonomyMoved(
            f"REFRESH ANONYMIZED VIEW {name} KEEP PLAN: the taxonomy of {', '.join(moved)} is not the one the stored "
            "plan was made with (it was rebuilt or replaced since), so the same levels would release values that "
            "mean something else; nothing was changed: REFRESH without KEEP PLAN plans again on the current "
            "taxonomies (values are then not comparable with earlier versions: see docs/refresh.md)")


def _table(name: str) -> exp.Table:
    """A release's table: its name as one identifier, dots and all (``"Sales.2024"`` is no schema)."""
    return exp.Table(this=ident(name))


def _declared_json(policy: Policy) -> str:
    """The policy as JSON in its own attribute order (Policy.to_json sorts keys; the order decides ties)."""
    return json.dumps(policy.to_dict())


def is_release(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """``name`` is an anonymized view of this database: recorded in the catalog, with its table there and anon_sql's
    own (a user's table under a release's name is refused by :func:`require_owned`, exit 2)."""
    if not catalog.is_installed(con) or versions.recorded(con, name) is None or not relation_exists(con, _table(name)):
        return False
    require_owned(con, name)
    return True


def create_anonymized_view(con: duckdb.DuckDBPyConnection, policy: Policy | dict | str, replace: bool = False):
    """``CREATE [OR REPLACE] ANONYMIZED VIEW``: release ``policy`` as version 1 (or the next version, replacing).

    ``replace`` replaces only an anonymized view recorded in the catalog; any other table or view of that name is
    refused (:class:`ViewExistsError`), as is an existing name without ``replace``."""
    policy = coerce_policy(policy)
    if relation_exists(con, _table(policy.name)):
        if not replace:
            raise ViewExistsError(f"{policy.name!r} already exists; CREATE OR REPLACE ANONYMIZED VIEW replaces an "
                                     "anonymized view, REFRESH ANONYMIZED VIEW re-runs its policy")
        if versions.recorded(con, policy.name) is None:
            raise ViewExistsError(
                f"{policy.name!r} is a table or view that is not an anonymized view (not recorded in anon.releases); "
                "OR REPLACE replaces only anonymized views: choose another name")
        require_owned(con, policy.name)
    return _run_version(con, policy, "replace" if replace and relation_exists(con, _table(policy.name)) else "create",
                        policy, replace)


def declared_policy(con: duckdb.DuckDBPyConnection, name: str) -> Policy:
    """The policy a refresh re-runs: as declared at the newest version (else as recorded in anon.releases)."""
    row = require(con, name)
    last = versions.latest(con, name)
    text = (last or {}).get("policy_json") or row["policy_json"]
    return Policy.from_dict(json.loads(text))


def refresh(con: duckdb.DuckDBPyConnection, name: str, keep_plan: bool = False):
    """``REFRESH ANONYMIZED VIEW name [KEEP PLAN]``: re-run the stored policy on the current source.

    By default the method plans again. ``keep_plan`` re-applies the current version's level plan, so released values
    keep their meaning across versions; when the new data breaks a privacy model at that plan the refresh fails
    closed (:class:`PrivacyRequirementError`, the current version untouched)."""
    row = require(con, name)
    require_owned(con, name)
    policy = declared_policy(con, name)
    if not keep_plan:
        return _run_version(con, policy, "refresh", policy, replace=True)
    if get_method(policy.method, policy.method_params).plan_kind != "levels":
        raise PolicyError(f"KEEP PLAN re-applies a level plan; {name!r} was made by method {policy.method!r}, which "
                          "assigns records to classes one by one and has no plan to re-apply to new records: "
                          "REFRESH without KEEP PLAN (it plans again)")
    stored = json.loads(row["plan"] or "{}")
    plan = {q: stored[q] for q in policy.quasi if q in stored}   # the levels (a plan also records e.g. its "sdc")
    fixed = policy.replace(method="levels", method_params={"levels": plan})
    last = versions.latest(con, name) or {}
    recorded_digests = last.get("taxonomy_digests") or row.get("taxonomy_digests") or ""
    try:
        return _run_version(con, fixed, KEEP_PLAN, policy, replace=True, keep_plan_of=recorded_digests)
    except _TaxonomyMoved:
        raise
    except PrivacyRequirementError as err:
        # a taxonomy replaced since is the cause to name, before the data (hostile round 13, T8: new bands that left a
        # class of one were reported as "the current data")
        now = _taxonomy_digests_now(con, fixed) if recorded_digests else {}
        if now:
            _same_taxonomies(name, recorded_digests, now)
        raise PrivacyRequirementError(
            f"REFRESH ANONYMIZED VIEW {name} KEEP PLAN: the stored plan {plan} no longer meets the policy on the "
            f"current data, so the current version is kept unchanged ({err}); REFRESH without KEEP PLAN plans "
            "again (values are then not comparable with earlier versions: see docs/refresh.md)") from None


def drop_anonymized_view(con: duckdb.DuckDBPyConnection, name: str, if_exists: bool = False) -> bool:
    """``DROP ANONYMIZED VIEW [IF EXISTS] name``: drop a recorded release's table, its related tables, views, plan
    tables and catalog rows in one transaction. Returns False when ``if_exists`` and there is none; a name that is not a recorded
    anonymized view is refused (a user's table is never dropped)."""
    row = versions.recorded(con, name)
    if row is None:
        if if_exists:
            return False
        require(con, name)
    require_owned(con, name)      # a user's table under the release's name (or a plan table's) is never dropped
    names = ReleaseNames(name)
    # the working objects live in the product's schema (a user's object named like one in main is never touched)
    views = [v for v in names.views() if _is(con, v, "VIEW")]
    related = [exp.Table(this=ident(t)) for t in related_tables(con, name)]   # <release>_<name> (docs/units.md)
    _require_related_marker(con, name, row)
    tables = [t for t in [names.table, *related, *names.plan_tables()] if _is(con, t, "TABLE")]
    legacy = legacy_working(con, name)     # a release made before anon_work: its working objects beside the table
    views += [t for t, kind in legacy if kind == "view"]
    tables += [t for t, kind in legacy if kind == "table"]
    con.execute("BEGIN TRANSACTION")
    try:
        for view in views:
            con.execute(render(exp.Drop(tables=[view.copy()], kind="VIEW", exists=True)))
        for table in tables:
            con.execute(render(exp.Drop(tables=[table.copy()], kind="TABLE", exists=True)))
        for table in ("releases", "equivalence_classes", "metrics", "search_trace"):
            con.execute(render(exp.delete(exp.Table(this=ident(table), db=ident("anon")),
                                          where=exp.EQ(this=col("release"), expression=lit(name)))))
        con.execute(render(exp.delete(exp.Table(this=ident("policies"), db=ident("anon")),
                                      where=exp.EQ(this=col("name"), expression=lit(name)))))
        versions.forget(con, name)
        identity.forget_identity(con, name)
        con.execute("COMMIT")
    except BaseException:
        rollback_keeping_cause(lambda: con.execute("ROLLBACK"), (duckdb.Error,))
        raise
    return True


def _require_related_marker(con: duckdb.DuckDBPyConnection, name: str, row: dict[str, Any]) -> None:
    """Refuse (nothing dropped) when a table named like one of the release's related tables exists but is not the
    one the release wrote (:func:`anon_sql.runner.related.foreign_related`: a user's table is never dropped)."""
    from ..runner.related import foreign_related

    foreign = foreign_related(con, name, list(json.loads(row.get("policy_json") or "{}").get("related") or {}))
    if foreign:
        table, why = next(iter(foreign.items()))
        raise ReleaseExistsError(
            f"table {table!r} is not the related table anon_sql released for {name!r} ({why}); anon_sql never "
            "drops a table it did not write, so nothing was changed: rename or drop that table yourself")


def _is(con: duckdb.DuckDBPyConnection, ref: exp.Table, kind: str) -> bool:
    """Is ``ref`` (in its schema, else the current one) an existing table (``kind`` TABLE) or view (VIEW)?"""
    catalog_view, column = ("duckdb_tables()", "table_name") if kind == "TABLE" else ("duckdb_views()", "view_name")
    schema = exp.Literal.string(ref.db) if ref.db else exp.func("current_schema")
    q = (exp.select(exp.Count(this=exp.Star())).from_(catalog_view)
         .where(exp.and_(exp.EQ(this=col(column), expression=lit(ref.name)),
                         exp.EQ(this=col("schema_name"), expression=schema),
                         exp.EQ(this=col("database_name"), expression=exp.func("current_database")))))
    return bool(con.execute(render(q)).fetchall()[0][0])


def show(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """``SHOW ANONYMIZED VIEWS``: one row per recorded release with its newest version number. Reads only: a
    database without the catalog shows none (nothing is installed, so it works read-only: issue 28.5)."""
    columns = ["name", "version", "method", "source", "records_in", "records_out", "suppressed", "classes", "k",
               "plan", "released_at"]
    if not catalog.is_installed(con):
        return pd.DataFrame(columns=columns)
    r = lambda c: col(c, "r")  # noqa: E731
    versions_table = (exp.Table(this=ident("release_versions"), db=ident("anon")) if versions.has_versions(con)
                      else exp.select(exp.alias_(lit(None), "release"), exp.alias_(lit(1), "version")).subquery())
    newest = (exp.select(col("release"), exp.alias_(exp.Max(this=col("version")), "version"))
              .from_(versions_table).group_by(col("release")))
    q = (exp.select(exp.alias_(r("release"), "name"),
                    exp.alias_(exp.Coalesce(this=col("version", "v"), expressions=[lit(1)]), "version"),
                    r("method"), r("source"), r("records_in"), r("records_out"), r("suppressed"), r("classes"),
                    exp.alias_(r("k_achieved"), "k"), r("plan"), exp.alias_(r("created_at"), "released_at"))
         .from_(exp.Table(this=ident("releases"), db=ident("anon"), alias=exp.TableAlias(this=ident("r"))))
         .join(newest.subquery("v"), on=exp.EQ(this=r("release"), expression=col("release", "v")), join_type="left")
         .where(exp.EQ(this=r("status"), expression=lit("released")))
         .order_by(r("release")))
    return con.execute(render(q)).df()


def explain(con: duckdb.DuckDBPyConnection, name: str) -> tuple[str, pd.DataFrame]:
    """``EXPLAIN ANONYMIZED VIEW name``: its policy, plan, checks (re-run now), versions and SQL, as text; and the
    checks frame."""
    from ..api import check

    row = require(con, name)
    policy = declared_policy(con, name)
    checks = check(con, name)
    history = versions.history(con, name)
    version = (f"version {int(history.iloc[-1]['version'])} ({history.iloc[-1]['action']}, "
               f"{history.iloc[-1]['created_at']})" if len(history) else f"released {row['created_at']}")
    parts = [
        f"anonymized view {name}: {version}, source {row['source']}, method {row['method']}",
        f"records: {row['records_in']} in, {row['records_out']} released, {row['suppressed']} suppressed, "
        f"{counted(row['classes'], 'class')}, k = {row['k_achieved']}",
        f"plan: {row['plan']}",
        "", "policy:", policy.to_sql(),
        "", "checks (re-run over the released table now):", checks.to_string(index=False),
        "", "versions:", history.drop(columns=["plan"]).to_string(index=False) if len(history)
        else "(none recorded yet: made by anon_sql.release or anon-sql release; the first refresh records them)",
        "", "SQL:", row["generated_sql"] or "",
    ]
    return "\n".join(parts), checks
