"""The ``anon`` catalog schema: DDL and macros from the packaged sql/ folder, UDF registration, catalog reads."""
from __future__ import annotations

import contextlib
import json
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import duckdb
from sqlglot import exp

from . import identity, owned_rows
from .read import is_installed, recorded_release  # noqa: F401  (re-exported: catalog reads)
from ..common.columns import EC_ID, SIZE
from ..common.rollback import rollback_keeping_cause
from ..common.sqlbuild import col, dtype, ident, lit, registered_frame, render
from ..data.taxonomy import Taxonomy
from ..errors import TaxonomyError

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = "anon"


def _sql_file(name: str) -> str:
    return resources.files("anon_sql.sql").joinpath(name).read_text(encoding="utf-8")


def install(con: duckdb.DuckDBPyConnection, inside: bool = False) -> None:
    """Create schema ``anon`` (catalog tables + SQL macros) and register the Python UDFs. Idempotent. ``inside``:
    the caller's transaction is open, so the catalog commits (or not) with the command that needs it (issue 28: a
    crash leaves no catalog, or the catalog with the command's result); the caller registers the UDFs before it
    (:func:`register_functions`: a registration rolled back with a transaction cannot be made again)."""
    require_own_schema(con)
    con.execute(_sql_file("catalog.sql"))
    from ..udfs import duckdb_udfs

    duckdb_udfs.install_macros(con)
    if not inside:
        duckdb_udfs.register_udfs(con)
    from ..sdc.masking import install_masking   # pandas-free import path of the CLI: loaded on use

    install_masking(con, inside)     # anon.partial, anon.hash, …: persisted macros a policy's `mask` compiles to


# the columns every anon_sql catalog's anon.releases has had: a schema anon whose releases table lacks them is a user's
_RELEASES_CORE = ("release", "policy", "method", "source", "records_in", "records_out", "status", "plan", "created_at")
_ANON_RELEASES = ("SELECT lower(column_name) FROM duckdb_columns() WHERE database_name = current_database() AND "
                  "schema_name = 'anon' AND table_name = 'releases'")
_ANON_OBJECTS = ("SELECT 'table ' || table_name FROM duckdb_tables() WHERE database_name = current_database() AND "
                 "schema_name = 'anon' UNION ALL SELECT 'view ' || view_name FROM duckdb_views() WHERE database_name = "
                 "current_database() AND schema_name = 'anon' AND NOT internal UNION ALL SELECT DISTINCT 'macro ' || "
                 "function_name FROM duckdb_functions() WHERE database_name = current_database() AND schema_name = "
                 "'anon' UNION ALL SELECT 'sequence ' || sequence_name FROM duckdb_sequences() WHERE database_name = "
                 "current_database() AND schema_name = 'anon' UNION ALL SELECT 'type ' || type_name FROM duckdb_types() "
                 "WHERE database_name = current_database() AND schema_name = 'anon' AND NOT internal ORDER BY 1")


def require_own_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse (:class:`~anon_sql.errors.TargetError`, exit 2) to install the catalog into a schema ``anon`` that is
    not anon_sql's: one without anon_sql's ``anon.releases`` that holds anything. Installing replaces the catalog's
    macros and adds columns to its tables (hostile round 16: a user's macro ``anon.capped_sum`` was replaced and their
    ``anon.releases`` altered, exit 0). An empty schema ``anon`` is used."""
    columns = {r[0] for r in con.execute(_ANON_RELEASES).fetchall()}
    if columns and set(_RELEASES_CORE) <= columns:
        return
    found = [r[0] for r in con.execute(_ANON_OBJECTS).fetchall()]
    if found:
        from ..errors import TargetError

        raise TargetError(f"schema anon holds {', '.join(found[:5])}{' …' if len(found) > 5 else ''}, and is not "
                          "anon_sql's catalog: anon_sql keeps its catalog in schema anon and would replace or alter "
                          "what is there; nothing was changed: move your objects to a schema of another name, or use "
                          "another database")


def upgrade(con: duckdb.DuckDBPyConnection) -> None:
    """Run the idempotent catalog DDL again: adds the tables introduced after this database's catalog was made.
    Skipped when every table and column the DDL defines is there (one catalog probe instead of a 20-statement
    script, issue 29.1): the DDL only adds what is missing, so it would change nothing."""
    expected = _catalog_columns()
    have = con.execute(_HAS_COLUMNS, {"e": list(expected)}).fetchall()[0][0]
    if have == len(expected):
        return
    con.execute(_sql_file("catalog.sql"))


# how many of the catalog DDL's ``table.column`` names the database's anon schema has
_HAS_COLUMNS = ("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = "
                "'anon' AND list_contains($e, table_name || '.' || column_name)")


@lru_cache(maxsize=1)
def _catalog_columns() -> tuple[str, ...]:
    """Every ``table.column`` the catalog DDL defines, read from a throwaway in-memory database that ran it (once
    per process)."""
    scratch = duckdb.connect()
    try:
        scratch.execute(_sql_file("catalog.sql"))
        return tuple(r[0] for r in scratch.execute(
            "SELECT DISTINCT table_name || '.' || column_name FROM duckdb_columns() WHERE schema_name = 'anon'"
        ).fetchall())
    finally:
        scratch.close()


@contextlib.contextmanager
def undone_on_failure(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Fail closed about the catalog too: when the body fails in a database that had no ``anon`` schema, the
    catalog it installed is removed again — unless it recorded something (a refused release's log row, work of a
    script's earlier statements), which stays."""
    had = _schema_exists(con, SCHEMA)
    try:
        yield
    except BaseException as err:
        if not had and not (isinstance(err, SystemExit) and not err.code):
            with contextlib.suppress(duckdb.Error):
                _remove_if_empty(con)
        raise


def _schema_exists(con: duckdb.DuckDBPyConnection, schema: str) -> bool:
    q = (exp.select(exp.Count(this=exp.Star())).from_("duckdb_schemas()")
         .where(exp.and_(exp.EQ(this=col("schema_name"), expression=lit(schema)),
                         exp.EQ(this=col("database_name"), expression=exp.func("current_database")))))
    return bool(con.execute(render(q)).fetchall()[0][0])


def _remove_if_empty(con: duckdb.DuckDBPyConnection) -> None:
    """DROP SCHEMA anon CASCADE when none of its tables holds a row."""
    q = (exp.select(col("table_name")).from_("duckdb_tables()")
         .where(exp.and_(exp.EQ(this=col("schema_name"), expression=lit(SCHEMA)),
                         exp.EQ(this=col("database_name"), expression=exp.func("current_database")))))
    for (table,) in con.execute(render(q)).fetchall():
        probe = exp.select(lit(1)).from_(exp.Table(this=ident(table), db=ident(SCHEMA))).limit(1)
        if con.execute(render(probe)).fetchall():
            return
    con.execute(render(exp.Drop(tables=[exp.Table(db=ident(SCHEMA))], kind="SCHEMA", exists=True, cascade=True)))


def ensure_installed(con: duckdb.DuckDBPyConnection, inside: bool = False) -> None:
    """Install the catalog when missing (inside the caller's transaction when ``inside``: see :func:`install`),
    and register the Python UDFs (outside a transaction, unless ``inside``: then the caller has)."""
    if not is_installed(con):
        install(con, inside)
    elif not inside:
        register_functions(con)


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Register the Python UDFs on ``con`` (not stored in the file; idempotent): before a transaction that installs
    the catalog."""
    from ..udfs import duckdb_udfs

    duckdb_udfs.register_udfs(con)


def store_taxonomy(con: duckdb.DuckDBPyConnection, tax: Taxonomy, replace: bool = True) -> None:
    """Write a taxonomy to ``anon.taxonomies`` / ``anon.taxonomy_nodes``, marked as anon_sql's (issue 28.1), in one
    transaction with the catalog's first install. One of the same name is replaced when ``replace`` and anon_sql
    wrote it; otherwise :class:`TaxonomyError` (exit 2) and nothing changes."""
    frame = tax.to_frame()
    register_functions(con)
    con.execute("BEGIN TRANSACTION")
    try:
        ensure_installed(con, inside=True)
        owned_rows.ready(con, owned_rows.TAXONOMIES)
        if con.execute("SELECT count(*) FROM anon.taxonomies WHERE name = ?", [tax.name]).fetchall()[0][0]:
            if not replace:
                raise TaxonomyError(f"taxonomy {tax.name!r} already exists in the catalog (anon.taxonomies); "
                                    "pass --replace (replace=True) to replace it, or choose another name")
            require_taxonomy_owned(con, tax.name, "replace")
        con.execute("DELETE FROM anon.taxonomy_nodes WHERE taxonomy = ?", [tax.name])
        con.execute("DELETE FROM anon.taxonomies WHERE name = ?", [tax.name])
        con.execute(
            "INSERT INTO anon.taxonomies (name, kind, height, leaves, spec) VALUES (?, ?, ?, ?, ?)",
            [tax.name, tax.kind, tax.height, len(tax.leaves), json.dumps(tax.spec)],
        )
        with registered_frame(con, frame, "__anon_tax_frame") as name:
            con.execute(render(exp.insert(exp.select("taxonomy", "leaf", "level", "value").from_(
                exp.Table(this=ident(name))), exp.Table(this=ident("taxonomy_nodes"), db=ident(SCHEMA)))))
        owned_rows.mark_row(con, owned_rows.TAXONOMIES, tax.name)
        con.execute("COMMIT")
    except Exception:
        rollback_keeping_cause(lambda: con.execute("ROLLBACK"), (duckdb.Error,))
        raise


def require_taxonomy_owned(con: duckdb.DuckDBPyConnection, name: str, action: str) -> None:
    """Refuse (:class:`TaxonomyError`, exit 2) to ``action`` stored taxonomy ``name`` unless anon_sql wrote it as
    it is now (inside the writing transaction, after :func:`owned_rows.ready`)."""
    why = owned_rows.foreign(con, owned_rows.TAXONOMIES, name)
    if why is not None:
        raise TaxonomyError(
            f"taxonomy {name!r} is not one anon_sql stored: {why}; anon_sql never {action}s what it did not write, "
            f"so nothing was changed: delete its rows from anon.taxonomies and anon.taxonomy_nodes yourself, or "
            "choose another taxonomy name")


def taxonomy_users(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """The live releases whose recorded taxonomy digests name stored taxonomy ``name`` (REFRESH and KEEP PLAN of
    those need it), sorted."""
    rows = con.execute("SELECT release, taxonomy_digests FROM anon.releases "
                       "WHERE status = 'released' AND taxonomy_digests IS NOT NULL").fetchall()
    users = {release for release, recorded in rows
             if any(d.get("taxonomy") == name
                    for d in (recorded_taxonomy_digests(recorded, partial=True) or {}).values())}
    return sorted(users)


def recorded_taxonomy_digests(recorded: Any, partial: bool = False) -> dict | None:
    """Recorded taxonomy digests (``anon.releases.taxonomy_digests``: JSON text, or a dict) as a dict of QI → digest;
    None when absent or unreadable (an edited catalog: then nothing is known about what the values meant), or when a
    value is not a digest — unless ``partial``, which keeps the digests that are (who uses a taxonomy)."""
    if isinstance(recorded, dict):
        value = recorded
    else:
        try:
            value = json.loads(recorded) if recorded else None
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    if partial:
        return {k: v for k, v in value.items() if isinstance(v, dict)}
    return value if all(isinstance(v, dict) for v in value.values()) else None


def drop_taxonomy(con: duckdb.DuckDBPyConnection, name: str, force: bool = False) -> None:
    """Delete stored taxonomy ``name`` (its nodes and identity row too), in one transaction; :class:`TaxonomyError`
    (exit 2, nothing changed) when there is none, anon_sql did not write it as it is now, or a live release uses it
    and ``force`` is not given (its REFRESH would fail until the taxonomy is rebuilt: hostile round 4, X03)."""
    if not is_installed(con):
        raise TaxonomyError(f"no taxonomy named {name!r}: this database has no anon catalog")
    con.execute("BEGIN TRANSACTION")
    try:
        owned_rows.ready(con, owned_rows.TAXONOMIES)
        if not con.execute("SELECT count(*) FROM anon.taxonomies WHERE name = ?", [name]).fetchall()[0][0]:
            raise TaxonomyError(f"no taxonomy named {name!r} (stored: {taxonomy_names(con)})")
        require_taxonomy_owned(con, name, "drop")
        users = taxonomy_users(con, name)
        if users and not force:
            raise TaxonomyError(
                f"taxonomy {name!r} is used by release(s) {users}: their REFRESH and KEEP PLAN need it, so nothing "
                "was dropped; drop those releases first, or pass force (CLI: --force) to drop it anyway")
        con.execute("DELETE FROM anon.taxonomy_nodes WHERE taxonomy = ?", [name])
        con.execute("DELETE FROM anon.taxonomies WHERE name = ?", [name])
        owned_rows.forget_row(con, owned_rows.TAXONOMIES, name)
        con.execute("COMMIT")
    except Exception:
        rollback_keeping_cause(lambda: con.execute("ROLLBACK"), (duckdb.Error,))
        raise


def load_taxonomy(con: duckdb.DuckDBPyConnection, name: str) -> Taxonomy | None:
    """Read a stored taxonomy by name (None when absent)."""
    if not is_installed(con):
        return None
    meta = con.execute("SELECT kind, spec FROM anon.taxonomies WHERE name = ?", [name]).fetchall()
    if not meta:
        return None
    long = con.execute(
        "SELECT leaf, level, value FROM anon.taxonomy_nodes WHERE taxonomy = ? ORDER BY level, leaf", [name]
    ).df()
    return Taxonomy.from_frame(name, long, kind=meta[0][0], spec=json.loads(meta[0][1] or "{}"))


def load_taxonomies(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> dict[str, Taxonomy]:
    """The stored taxonomies among ``names`` (absent ones left out): two queries however many are asked for."""
    wanted = sorted(set(names))
    if not wanted or not is_installed(con):
        return {}
    meta = con.execute("SELECT name, kind, spec FROM anon.taxonomies WHERE list_contains(?, name)",
                       [wanted]).fetchall()
    if not meta:
        return {}
    # one row per leaf with its values level by level (the wide form of Taxonomy.from_frame, pivoted in SQL)
    rows = con.execute("SELECT taxonomy, list(value ORDER BY level) FROM anon.taxonomy_nodes "
                       "WHERE list_contains(?, taxonomy) GROUP BY taxonomy, leaf ORDER BY taxonomy, leaf",
                       [[m[0] for m in meta]]).fetchall()
    wide: dict[str, list[list[str]]] = {}
    for taxonomy, path in rows:      # one step per taxonomy leaf (catalog metadata), not per data row
        wide.setdefault(taxonomy, []).append(path)
    return {name: _built(name, kind, spec or "{}", tuple(map(tuple, wide[name]))).copy()
            for name, kind, spec in meta if name in wide}


@lru_cache(maxsize=128)
def _built(name: str, kind: str, spec: str, paths: tuple[tuple[str, ...], ...]) -> Taxonomy:
    """A stored taxonomy built and validated once per content (name, kind, spec and every leaf's path)."""
    import pandas as pd
    return Taxonomy(name, pd.DataFrame([list(p) for p in paths]), kind=kind, spec=json.loads(spec))


def taxonomy_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    if not is_installed(con):
        return []
    return [r[0] for r in con.execute("SELECT name FROM anon.taxonomies ORDER BY name").fetchall()]


def store_vulnerability(con: duckdb.DuckDBPyConnection, source: str, target: str, iv: pd.DataFrame,
                        transaction: bool = True) -> None:
    """Replace the stored identity vulnerability of (source, target, QI set) by ``iv`` (an identity_vulnerability
    result) in ``anon.identity_vulnerability``; ``transaction=False`` when the caller already holds one."""
    import pandas as pd
    con.execute(_sql_file("catalog.sql"))       # idempotent: creates the table in catalogs installed before it existed
    quasi = json.dumps(sorted(iv["attribute"].astype(str)))
    a = iv.attrs
    rows = [[source, target, quasi, str(r.attribute), float(r.iv), float(r.importance), float(r.importance_std),
             None if pd.isna(r.relative) else float(r.relative), a.get("oob_score"), a.get("seed"),
             a.get("n_estimators")] for r in iv.itertuples(index=False)]
    if transaction:
        con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM anon.identity_vulnerability WHERE source = ? AND target = ? AND quasi = ?",
                    [source, target, quasi])
        con.executemany("INSERT INTO anon.identity_vulnerability (source, target, quasi, attribute, iv, importance, "
                        "importance_std, relative, oob_score, seed, n_estimators) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if transaction:
            con.execute("COMMIT")
    except Exception:
        if transaction:
            rollback_keeping_cause(lambda: con.execute("ROLLBACK"), (duckdb.Error,))
        raise


def load_vulnerability(con: duckdb.DuckDBPyConnection, source: str, target: str,
                       quasi: list[str]) -> pd.DataFrame | None:
    """The stored identity vulnerability of (source, target, QI set), or None."""
    exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'anon' "
                         "AND table_name = 'identity_vulnerability'").fetchall()[0][0]
    if not exists:
        return None
    df = con.execute("SELECT * FROM anon.identity_vulnerability WHERE source = ? AND target = ? AND quasi = ? "
                     "ORDER BY attribute", [source, target, json.dumps(sorted(map(str, quasi)))]).df()
    return df if len(df) else None


def released_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the releases recorded as ``released`` in this database, sorted."""
    if not is_installed(con):
        return []
    return [r[0] for r in con.execute("SELECT DISTINCT release FROM anon.releases WHERE status = 'released' "
                                      "ORDER BY 1").fetchall()]


def releases(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    ensure_installed(con)
    return con.execute("SELECT * FROM anon.releases ORDER BY created_at").df()


# -- recording a release (every anon.* write of a release lives here) ---------------------------------------------
METRIC_DIRECTIONS = {"k": "higher", "records_at_risk": "lower", "prosecutor_risk_max": "lower",
                     "prosecutor_risk_avg": "lower", "suppressed_fraction": "lower", "cavg": "lower",
                     "discernibility": "lower", "avg_class_size": "lower", "classes": "higher"}


def _replaced_rows(release: str, policy: str) -> list[tuple[str, str, str]]:
    """(table, key column, value) of each catalog row a release of this name replaces."""
    return [("equivalence_classes", "release", release), ("metrics", "release", release),
            ("releases", "release", release), ("search_trace", "release", release), ("policies", "name", policy)]


def record_release(con: duckdb.DuckDBPyConnection, rel: Any, source_label: str,
                   trace: list[dict[str, Any]] | None = None, ec_stats: pd.DataFrame | None = None
                   ) -> dict[str, Any]:
    """``rel``: an :class:`anon_sql.runner.result.Release` (not imported: the result sits above the catalog). Rows in anon.releases / anon.policies / anon.equivalence_classes / anon.metrics / anon.search_trace for a
    verified release (inside the release's transaction; a release of the same name is replaced); ``trace``: a
    search's steps, ``ec_stats``: a method's per-class statistics (the plan's typed fields). Returns what the check
    program is compiled from, as written: the row's ``plan``, ``policy_json``, ``declared_policy`` and
    ``source_digest``, and the released table's ``columns`` (so the release compiles it without reading them back).
    """
    policy = rel.policy
    recorded = {"plan": json.dumps(rel.plan, default=str), "policy_json": policy.to_json(),
                "declared_policy": (getattr(rel, "declared", None) or policy).to_json(),
                "source_digest": _info_json(rel, "source_digest")}
    upgrade(con)    # a catalog from before a column or table this release writes: added inside the transaction
    # the rows of an earlier release of this name go in one script (one call, not five: issue 29.1)
    # (the search trace of a numbered version stays: anon.search_trace.version, hostile round 5 R11)
    con.execute(";\n".join(render(exp.delete(exp.Table(this=ident(table), db=ident(SCHEMA)), where=exp.and_(
        exp.EQ(this=col(key), expression=lit(value)),
        *([exp.Is(this=col("version"), expression=exp.Null())] if table == "search_trace" else []))))
                            for table, key, value in _replaced_rows(rel.name, policy.name)))
    con.execute(
        "INSERT INTO anon.releases (release, policy, method, source, records_in, records_out, suppressed, noise, "
        "k_achieved, classes, status, message, plan, policy_json, generated_sql, taxonomy_digests, declared_policy, "
        "source_digest, related_tables, released_values) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'released', NULL, ?, ?, ?, "
        "?, ?, ?, ?, ?)",
        [rel.name, policy.name, policy.method, source_label, rel.records_in, rel.records_out, rel.suppressed,
         rel.noise, int(rel.metrics["k"]), len(rel.classes), recorded["plan"], recorded["policy_json"],
         ";\n".join(rel.sql) + ";", _info_json(rel, "taxonomy_digests"), recorded["declared_policy"],
         recorded["source_digest"], _info_json(rel, "related_tables"), _info_json(rel, "released_values")],
    )
    con.execute("INSERT INTO anon.policies (name, policy_toml, policy_json) VALUES (?, ?, ?)",
                [policy.name, policy.to_toml(), policy.to_json()])
    stats_cols = [c for c in rel.classes.columns if c.endswith("_value") or c.startswith("__distinct__")]
    # the verified per-class frame is already in hand: insert from it rather than re-aggregating the release
    with registered_frame(con, _scannable(rel.classes), "__anon_classes_frame") as frame_name:
        ins = exp.insert(
            exp.select(lit(rel.name), col(EC_ID), col(SIZE), _json_struct(policy.quasi), _json_struct(stats_cols))
            .from_(exp.Table(this=ident(frame_name))),
            exp.Table(this=ident("equivalence_classes"), db=ident(SCHEMA)),
            columns=["release", "ec_id", "size", "qi_values", "stats"],
        )
        con.execute(render(ins))
    if ec_stats is not None and len(ec_stats):
        _merge_ec_stats(con, rel.name, ec_stats)
    directions = {**rel.info.get("metric_directions", {}), **METRIC_DIRECTIONS}
    rows = [[rel.name, k, float(v), directions.get(k, "info")] for k, v in rel.metrics.items()]
    if rows:   # one statement (executemany runs one per row)
        con.execute("INSERT INTO anon.metrics VALUES " + ", ".join(["(?, ?, ?, ?)"] * len(rows)),
                    [v for row in rows for v in row])
    if trace:
        import pyarrow as pa

        # an Arrow table of the columns (a pandas frame cost twice as much to build and register; issue 17.1)
        frame = pa.table({
            "release": [rel.name] * len(trace), "step": [int(t.get("step", i)) for i, t in enumerate(trace)],
            "node": [json.dumps(t.get("node"), default=str) for t in trace],
            **{c: _column([t.get(c) for t in trace]) for c in ("event", "violations", "distinct_rows", "feasible",
                                                               "score")}})
        names = ["release", "step", "node", "event", "violations", "distinct_rows", "feasible", "score"]
        with registered_frame(con, frame, "__anon_trace_frame") as frame_name:
            con.execute(render(exp.insert(exp.select(*names).from_(exp.Table(this=ident(frame_name))),
                                          exp.Table(this=ident("search_trace"), db=ident(SCHEMA)), columns=names)))
    # the related tables <release>_<name> are marked too (hostile round 7, X07: a fixed comment could be forged)
    recorded["columns"] = identity.mark(con, rel.name, [f"{rel.name}_{n}" for n in policy.related])
    return recorded


def _info_json(rel: Any, key: str) -> str | None:
    """A digest the release computed, ``rel.info[key]``, as JSON: ``taxonomy_digests`` (what each taxonomy level
    meant) or ``source_digest`` (rows, content hash: runner/digests.py); None when the engine did not compute it."""
    value = rel.info.get(key)
    return None if value is None else json.dumps(value, sort_keys=True)


def _scannable(frame: pd.DataFrame) -> Any:
    """The classes frame as DuckDB scans it fastest: an Arrow table when every column is text, categorical, boolean
    or numeric (a third of the cost of scanning the pandas frame; issue 17.1), else the frame itself (dates, mixed
    objects, categories of numbers: converted by DuckDB's pandas scan as before)."""
    import pandas as pd
    import pyarrow as pa

    simple = all(isinstance(t, pd.StringDtype) or t.kind in "biuf"
                 or (isinstance(t, pd.CategoricalDtype) and isinstance(t.categories.dtype, pd.StringDtype))
                 for t in frame.dtypes)
    if not simple or not frame.columns.is_unique:
        return frame
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return frame


def _column(values: list[Any]) -> Any:
    """One trace column as an Arrow array: its own type, or text when the values mix types (NULLs aside)."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def record_failure(con: duckdb.DuckDBPyConnection, policy: Any, source_label: str, records: int,
                   message: str) -> None:
    """A ``failed`` row in anon.releases (after the release's rollback); best effort: never masks the failure. A
    database whose catalog went with the rollback gets it back in the row's own transaction."""
    insert = ("INSERT INTO anon.releases (release, policy, method, source, records_in, status, message, "
              "policy_json) VALUES (?, ?, ?, ?, ?, 'failed', ?, ?)")
    values = [policy.name, policy.name, policy.method, source_label, records, message, policy.to_json()]
    try:
        if is_installed(con):
            con.execute(insert, values)
            return
        con.execute("BEGIN TRANSACTION")
        try:
            install(con, inside=True)
            con.execute(insert, values)
            con.execute("COMMIT")
        except duckdb.Error:
            con.execute("ROLLBACK")
            raise
    except duckdb.Error:
        pass


def _json_struct(columns: list[str], table_alias: str | None = None) -> exp.Expression:
    fields = [exp.PropertyEQ(this=exp.Literal.string(c), expression=col(c, table_alias)) for c in columns]
    if not fields:   # an empty struct literal `{}` parses only from DuckDB 2.0 on
        return exp.Cast(this=lit("{}"), to=dtype("JSON"))
    return exp.Anonymous(this="to_json", expressions=[exp.Struct(expressions=fields)])


def _merge_ec_stats(con: duckdb.DuckDBPyConnection, release: str, frame: pd.DataFrame) -> None:
    """Merge a method's own per-class statistics (``plan.ec_stats``: ec_id + flat columns, e.g. adaptive's
    Simpson D/E and levels) into the JSON ``stats`` of ``anon.equivalence_classes``."""
    with registered_frame(con, frame, "__anon_ec_stats") as stats:
        _merge_registered_stats(con, release, frame, stats)


def _merge_registered_stats(con: duckdb.DuckDBPyConnection, release: str, frame: pd.DataFrame, stats: str) -> None:
    merged = exp.Anonymous(this="json_merge_patch", expressions=[
        col("stats", "e"), _json_struct([c for c in frame.columns if c != EC_ID], "x")])
    on = exp.and_(exp.EQ(this=col(EC_ID, "e"), expression=col(EC_ID, "x")),
                  exp.EQ(this=col("release", "e"), expression=lit(release)))
    upd = exp.Update(this=exp.Table(this=ident("equivalence_classes"), db=ident(SCHEMA),
                                    alias=exp.TableAlias(this=ident("e"))),
                     expressions=[exp.EQ(this=col("stats"),
                                         expression=exp.Cast(this=merged, to=dtype("VARCHAR")))],
                     from_=exp.From(this=exp.Table(this=ident(stats), alias=exp.TableAlias(this=ident("x")))),
                     where=exp.Where(this=on))
    con.execute(render(upd))


__all__ = ["install", "ensure_installed", "register_functions", "store_taxonomy", "require_taxonomy_owned",
           "drop_taxonomy", "taxonomy_users", "recorded_taxonomy_digests", "load_taxonomy", "taxonomy_names",
           "releases", "recorded_release", "released_names", "store_vulnerability", "load_vulnerability",
           "record_release", "record_failure", "lit"]
