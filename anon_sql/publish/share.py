"""The shareable artifact of a release: the only thing anon_sql writes that may leave the data owner.

The working database is private by nature (it holds the raw source and the release's working objects). What may be
shared is what :func:`write` puts into a *new* file, and nothing else:

* ``<release>`` — the released table, without θ's noise marks (the noise records stay, unmarked);
* ``<release>__classes`` — one row per class: ``ec_id``, ``size``, released QI values and class statistics (JSON);
* ``<release>__metadata`` — one row: counts, policy, plan, checks (re-run just before writing) and metrics;
* ``<release>_<name>`` — each related table as released (docs/units.md; Parquet: ``X.<name>.parquet``).

No raw value, no source row order, no record → class mapping, no per-class method internals. A ``.duckdb`` target is
written in storage format ``STORAGE_VERSION`` so that every DuckDB 1.x client opens it; a ``.parquet`` target
becomes three files (``X.parquet``, ``X.classes.parquet``, ``X.metadata.parquet``). Only a release recorded in
``anon.releases`` can be written, only while it passes its checks, and never over an existing file.
Used by ``anon-sql release --to``, ``anon-sql export`` and :func:`anon_sql.export`.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from ..audit import recheck as audit
from ..compiler.views import EC_ID
from ..errors import PrivacyRequirementError, TargetError
from ..data.source import describe
from ..common.sqlbuild import col, ident, lit, render, scratch_name

STORAGE_VERSION = "v1.0.0"     # storage format 64: DuckDB 1.0 and every later release read it
SUFFIXES = (".duckdb", ".parquet")
_ALIAS = "__anon_share"


def targets(path: str | Path, related: tuple[str, ...] = ()) -> list[Path]:
    """The files a write to ``path`` creates, checked: a supported suffix, an existing folder, no file in the way
    (``related``: the names of the release's related tables, one more Parquet file each, ``X.<name>.parquet``).
    Raises :class:`TargetError` naming the path and the fix; call it before any work that the write concludes."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise TargetError(f"share target {str(p)!r}: use a path ending in .duckdb (one DuckDB file) or .parquet "
                          "(three Parquet files)")
    if not p.parent.is_dir():
        raise TargetError(f"share target {str(p)!r}: folder {str(p.parent)!r} does not exist; create it first")
    files = [p]
    if p.suffix.lower() == ".parquet":
        files += [p.with_name(p.stem + ".classes.parquet"), p.with_name(p.stem + ".metadata.parquet")]
        files += [p.with_name(f"{p.stem}.{n}.parquet") for n in related]
    # a dangling symlink too; a DuckDB file's write-ahead log is named as such (round 15, E42: "share.duckdb already
    # exists" when only share.duckdb.wal did)
    taken = [str(f) for f in files if f.exists() or f.is_symlink()]
    taken += [f"{f}.wal (a write-ahead log)" for f in files if str(f) not in taken and Path(str(f) + ".wal").exists()]
    if taken:
        raise TargetError(f"share target {str(p)!r}: {', '.join(taken)} already exists; anon_sql writes new files "
                          "and never overwrites one: remove it or choose another path")
    return files


def write(con: duckdb.DuckDBPyConnection, release_name: str, path: str | Path) -> list[str]:
    """Write the shareable form of recorded release ``release_name`` to ``path`` (new ``.duckdb`` or ``.parquet``);
    returns the files written. :class:`SourceError` for a name that is not a recorded release,
    :class:`PrivacyRequirementError` when the release no longer passes its checks (nothing is written)."""
    row = audit.require_recorded(con, release_name)
    related = tuple(json.loads(row["policy_json"] or "{}").get("related") or {})
    files = targets(path, related)
    checks = audit.recheck(con, release_name)
    if not checks["passed"].all():
        failed = checks.loc[~checks["passed"], "check"].tolist()
        raise PrivacyRequirementError(f"release {release_name!r} fails its checks {failed} (has it been edited "
                                      f"since it was released?); nothing was written to {str(path)!r}: "
                                      "release it again")
    queries = [_released_query(con, row), _classes_query(release_name)]
    # the related tables as released (docs/units.md): the released people's rows, keyed by the same pseudonym
    extra = {}
    for n in related:
        table = exp.Table(this=ident(f"{release_name}_{n}"))
        extra[f"{release_name}_{n}"] = _canonical_select(table, [r[0] for r in describe(con, table)])
    metadata = _metadata(con, row, checks)
    if files[0].suffix.lower() == ".duckdb":
        _write_duckdb(con, files[0], release_name, queries, metadata, extra)
    else:
        _write_parquet(con, files, queries, metadata, list(extra.values()))
    return [str(f) for f in files]


def _released_query(con, row: dict[str, Any]) -> exp.Select:
    """Every column of the released table but θ's noise mark, in the table's order, its rows in
    :func:`_canonical_select`'s order."""
    flag = json.loads(row["plan"] or "{}").get("noise_flag")
    table = exp.Table(this=ident(row["release"]))
    return _canonical_select(table, [r[0] for r in describe(con, table) if r[0] != flag])


def _canonical_select(table: exp.Table, columns: list[str]) -> exp.Select:
    """``columns`` of ``table`` ordered by ``ec_id`` (when there is one), then every other column: an order of the
    released values alone, never the working table's storage order, which no check constrains (hostile round 11,
    M22: rows rewritten in the order of the raw SSN passed check and were exported in that order)."""
    keys = sorted(columns, key=lambda c: c != EC_ID)
    return (exp.select(*[col(c) for c in columns]).from_(table)
            .order_by(*[exp.Ordered(this=col(c), nulls_first=False) for c in keys]))


def _classes_query(release_name: str) -> exp.Select:
    return (exp.select(col(EC_ID), col("size"), col("qi_values"), col("stats"))
            .from_(exp.Table(this=ident("equivalence_classes"), db=ident("anon")))
            .where(exp.EQ(this=col("release"), expression=lit(release_name)))
            .order_by(col(EC_ID)))


def _metadata(con, row: dict[str, Any], checks: pd.DataFrame) -> pd.DataFrame:
    """The one metadata row: counts, policy (:func:`shareable_policy`: the secrets left out),
    plan (scalars only: per-class arrays, interval bounds and noise marks left out), checks and metrics as JSON."""
    from .. import __version__

    shapes = json.loads(row.get("related_tables") or "{}")
    policy = shareable_policy(row["policy_json"], shapes)
    # the policy as declared (issue 28.8: `check` derives the released one from it), left out the same way
    declared = shareable_policy(row.get("declared_policy") or row["policy_json"], shapes)
    plan = {k: v for k, v in json.loads(row["plan"] or "{}").items()
            if k != "noise_flag" and (v is None or isinstance(v, (bool, int, float, str)))}
    metrics = con.execute("SELECT metric, value, direction FROM anon.metrics WHERE release = ? ORDER BY metric",
                          [row["release"]]).df()
    checks = checks.astype(object).where(checks.notna(), None)
    return pd.DataFrame([{
        "release": row["release"], "method": row["method"], "records_in": int(row["records_in"]),
        "records_out": int(row["records_out"]), "suppressed": int(row["suppressed"]),
        "noise": int(row["noise"] or 0), "classes": int(row["classes"]), "k_achieved": int(row["k_achieved"]),
        "released_at": str(row["created_at"]), "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "anon_sql_version": __version__, "policy": json.dumps(policy, sort_keys=True),
        "declared_policy": json.dumps(declared, sort_keys=True) if row.get("declared_policy") else None,
        "plan": json.dumps(plan, sort_keys=True, default=str),
        # each related table's released columns and rows, which `check` of the shared file compares (round 7, C08)
        "related_tables": row.get("related_tables"),
        # the digest of each quasi-identifier's released values, which `check` recomputes (round 9, M9)
        "released_values": row.get("released_values"),
        "checks": json.dumps(checks.to_dict("records"), default=_plain),
        "metrics": json.dumps(metrics.to_dict("records"), default=_plain),
    }])


def shareable_policy(text: str, related: dict[str, Any] | None = None) -> dict[str, Any]:
    """A recorded policy (JSON) as a shared file may hold it: the secrets left out — an identifier's key file, a
    hash mask's salt and the ``seed`` (hostile round 8, M2: with it anyone inverts the seeded ``noise`` / ``dnoise``
    masks) — and θ's noise column; every mask's function and other parameters kept (E10b / P06b: ``check`` verifies
    the masked columns' form from them). ``related``: each related table's released columns (name, type), written
    as explicit ``[related.<name>.attributes]`` (M5: ``check`` derives the related columns from the policy)."""
    policy = json.loads(text)
    for spec in policy.get("attributes", {}).values():
        spec.pop("key_file", None)                            # a path of the data owner's
        if isinstance(spec.get("mask"), dict):
            spec["mask"].pop("salt", None)                    # a hash mask's salt is a secret of the data owner
    policy.get("method_params", {}).pop("noise_flag", None)   # the column the file does not have
    policy.pop("seed", None)   # a secret like a salt: it decides every seeded mask, shuffle, fake, PRAM and sample
    for name, spec in (policy.get("related") or {}).items():
        shape = (related or {}).get(name)
        if isinstance(shape, dict) and isinstance(shape.get("columns"), list):
            spec["attributes"] = explicit_related_attributes(policy, spec, [c[0] for c in shape["columns"]])
    return policy


def explicit_related_attributes(policy: dict[str, Any], spec: dict[str, Any], released: list[str]
                                ) -> dict[str, Any]:
    """A related table's ``attributes`` listing every ``released`` column with its role (the key as the unit's
    identifier, the rest as listed or by ``default_role``) and keeping the listed columns that were not released
    (dropped identifiers), so that ``default_role`` covers no released column."""
    listed = dict(spec.get("attributes") or {})
    unit = (policy.get("attributes") or {}).get(policy.get("privacy_unit") or "", {})
    out = {}
    for c in released:
        if c == spec.get("key"):
            out[c] = {"role": "identifier", "action": unit.get("action", "drop")}
        else:
            out[c] = listed.get(c) or {"role": spec.get("default_role") or "insensitive"}
    return {**{c: a for c, a in listed.items() if c not in out}, **out}


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def _partial(path: Path) -> Path:
    """A temporary name beside ``path`` that nothing else uses (process id and a random part: never a file of a
    crashed export, nor anyone's file, is written over)."""
    while True:
        partial = path.with_name(f".{path.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        if not partial.exists() and not Path(str(partial) + ".wal").exists():
            return partial


# the watcher of an export (issue 28.7): reads its stdin until the exporting process closes it — by finishing, failing
# or dying (kill -9 included). Without "done" first it removes every target that is a link of its partial file (a
# target this export published) and every partial file; after "done" only leftover partial files
_JANITOR = """
import json, os, sys
pairs = json.loads(sys.argv[1])
complete = sys.stdin.buffer.read().startswith(b"done")
for partial, target in pairs:
    if not complete:
        try:
            if os.path.samefile(partial, target):
                os.unlink(target)
        except OSError:
            pass
    for leftover in (partial, partial + ".wal"):
        try:
            os.unlink(leftover)
        except OSError:
            pass
"""


class _Janitor:
    """A process of its own that removes an export's files when this process ends before the export is complete:
    a killed export leaves no partial file under any name, and no incomplete set of Parquet files."""

    def __init__(self, pairs: list[tuple[Path, Path]]):
        self.pairs = pairs
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _JANITOR,
                                      json.dumps([[str(a), str(b)] for a, b in pairs])],
                                     stdin=subprocess.PIPE, start_new_session=True)

    def close(self, complete: bool) -> None:
        """Tell the watcher whether the export completed, and wait for its clean-up."""
        try:
            if complete:
                self.proc.stdin.write(b"done")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


def _publish(pairs: list[tuple[Path, Path]], janitor: _Janitor) -> None:
    """Link every finished file into place without replacing anything that appeared meanwhile; all or none (a
    failure, or this process dying, removes the targets already linked)."""
    complete = False
    try:
        for partial, path in pairs:
            try:
                os.link(partial, path)
            except FileExistsError:
                raise TargetError(f"share target {str(path)!r} appeared while writing; nothing was replaced") from None
        complete = True
    finally:
        janitor.close(complete)
        for partial, _ in pairs:
            partial.unlink(missing_ok=True)


def _write_duckdb(con, path: Path, name: str, queries: list[exp.Select], metadata: pd.DataFrame,
                  extra: dict[str, exp.Select]) -> None:
    partial = _partial(path)
    janitor = _Janitor([(partial, path)])
    share = scratch_name(_ALIAS)    # no database the user attached has it (hostile round 18, H08)
    attach = exp.Attach(this=exp.Alias(this=lit(str(partial)), alias=ident(share)), expressions=[
        exp.AttachOption(this=exp.var("STORAGE_VERSION"), expression=lit(STORAGE_VERSION)),
        exp.AttachOption(this=exp.var("READ_WRITE"))])   # explicit: a read-only connection attaches read-only
    con.execute(render(attach))
    frame = scratch_name("__anon_share_metadata")
    try:
        for table, query in ((name, queries[0]), (name + "__classes", queries[1]), *extra.items()):
            con.execute(render(exp.Create(this=exp.Table(this=ident(table), db=ident(share)), kind="TABLE",
                                          expression=query)))
        con.register(frame, metadata)
        con.execute(render(exp.Create(this=exp.Table(this=audit.metadata_table(name).this, db=ident(share)),
                                      kind="TABLE", expression=exp.select("*").from_(exp.Table(this=ident(frame))))))
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute(render(exp.Detach(this=ident(share))))
        janitor.close(False)
        raise
    finally:
        con.unregister(frame)
    try:
        con.execute(render(exp.Detach(this=ident(share))))
    except BaseException:
        janitor.close(False)
        raise
    _publish([(partial, path)], janitor)


def _write_parquet(con, files: list[Path], queries: list[exp.Select], metadata: pd.DataFrame,
                   extra: list[exp.Select]) -> None:
    frame = scratch_name("__anon_share_metadata")
    con.register(frame, metadata)
    partials = [_partial(f) for f in files]
    janitor = _Janitor(list(zip(partials, files)))
    try:
        for query, partial in zip([*queries, exp.select("*").from_(exp.Table(this=ident(frame))), *extra], partials):
            con.execute(render(exp.Copy(this=exp.Subquery(this=query), kind=False, files=[lit(str(partial))],
                                        params=[exp.CopyParameter(this=exp.var("FORMAT"),
                                                                  expression=exp.var("parquet"))])))
    except BaseException:
        janitor.close(False)
        raise
    finally:
        con.unregister(frame)
    _publish(list(zip(partials, files)), janitor)


__all__ = ["STORAGE_VERSION", "targets", "write"]
