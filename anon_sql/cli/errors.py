"""Pieces every CLI command shares: the error boundary (one line, documented exit code), opening ``--db`` without
creating or leaving stray files, and the release printout."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

import click

from .lazy import LazyModule
from ..errors import AnonSQLError, ResourceError, SourceError, is_environment

duckdb = LazyModule("duckdb")   # `except duckdb.Error` imports it only when an error is being handled


@contextlib.contextmanager
def cli_errors():
    """Library errors → ``error: ...`` on stderr and their exit code (2 bad input, 3 privacy, 4 environment: disk,
    permissions, locks; 1 internal). An environment failure names its cause, whatever raised it (docs/testing.md)."""
    try:
        yield
    except AnonSQLError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except (duckdb.Error, OSError) as err:
        if is_environment(err):
            click.echo(f"error (environment: disk, permissions or locks): {err}", err=True)
            sys.exit(ResourceError.exit_code)
        if isinstance(err, OSError):
            raise
        # bad input is caught before it reaches DuckDB: this is a bug to report
        click.echo(f"internal error (database): {err}", err=True)
        sys.exit(1)


@contextlib.contextmanager
def database(db: str | None, *, must_exist: bool = False, read_only: bool = False
             ) -> Iterator[duckdb.DuckDBPyConnection]:
    """The ``--db`` connection (in memory without a path), closed at the end.

    ``must_exist``: commands that read a database refuse a path that does not exist (:class:`SourceError`, exit 2)
    and create nothing. Commands that may create the file remove it again when they fail, so a mistyped path
    leaves nothing behind; in an existing file without the ``anon`` catalog, a failing command removes the catalog
    it installed (:func:`anon_sql.catalog.store.undone_on_failure`)."""
    if db is None:
        con = duckdb.connect(":memory:")
        try:
            yield con
        finally:
            con.close()
        return
    path = Path(db)
    if path.is_dir():
        raise SourceError(f"--db {db!r} is a folder; give a DuckDB database file")
    created = not path.exists()
    if not created:
        require_duckdb_file(db)
    if created and must_exist:
        raise SourceError(f"database file {db!r} does not exist; check the path (this command reads a database "
                          "and never creates one)")
    try:
        con = duckdb.connect(db, read_only=read_only)
    except duckdb.Error as err:
        kind = ResourceError if is_environment(err) else SourceError
        raise kind(f"cannot open database file {db!r}: {open_failure(err)}") from None
    done = False
    try:
        if read_only:
            yield con
        else:
            from ..catalog.store import undone_on_failure

            with undone_on_failure(con):
                yield con
        done = True
    finally:
        con.close()
        if created and not done:
            for leftover in (path, Path(db + ".wal")):
                leftover.unlink(missing_ok=True)


def require_duckdb_file(db: str) -> None:
    """Refuse an existing ``--db`` that is not a DuckDB file: DuckDB 2 opens a CSV or Parquet path as a database of
    one view, so a script's writes would vanish with exit 0 (hostile round 3, F08)."""
    path = Path(db)
    if not path.is_file():
        return
    with path.open("rb") as f:
        head = f.read(12)
    if head and head[8:12] != b"DUCK":   # DuckDB's header: an 8-byte checksum, then "DUCK"
        raise SourceError(f"--db {db!r} is not a DuckDB database file (a CSV, Parquet or other file): give a "
                          ".duckdb file, and read the data in SQL (read_csv / read_parquet) or pass it as the source")


def open_failure(err: duckdb.Error) -> str:
    """Why DuckDB could not open a file, said with the fix."""
    text = str(err)
    if "lock" in text.lower():
        return "another process has it open; close that process (or its connection) first"
    if "version number" in text or "newer version" in text:
        return "it was written by a newer DuckDB than this one; open it with that DuckDB, or upgrade duckdb"
    if "not a valid DuckDB database" in text or "magic" in text.lower():
        return "it is not a DuckDB database file"
    return text.splitlines()[0]


def echo_release(rel, explain: bool = False, extra: list[str] | None = None) -> None:
    """Print a release's summary, its checks, its metrics, any ``extra`` lines and (``explain``) its SQL."""
    click.echo(rel.summary())
    click.echo("")
    click.echo(rel.checks.to_string(index=False))
    click.echo("")
    for k, v in rel.metrics.items():
        click.echo(f"{k}: {v:.6g}")
    for line in extra or []:
        click.echo(line)
    if explain:
        click.echo("")
        click.echo(";\n\n".join(rel.sql) + ";")
