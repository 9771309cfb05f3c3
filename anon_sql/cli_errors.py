"""Pieces every CLI command shares: the error boundary (one line, documented exit code) and the release printout."""
from __future__ import annotations

import contextlib
import sys

import click

from .cli_lazy import LazyModule
from .errors import AnonSQLError

duckdb = LazyModule("duckdb")   # `except duckdb.Error` imports it only when an error is being handled


@contextlib.contextmanager
def cli_errors():
    """Library errors → ``error: ...`` on stderr and their exit code (2 bad input, 3 privacy, 1 other)."""
    try:
        yield
    except AnonSQLError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except duckdb.Error as err:
        click.echo(f"error: database: {err}", err=True)
        sys.exit(1)


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
