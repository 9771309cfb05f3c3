"""One error boundary for every CLI command: a one-line message and the documented exit code."""
from __future__ import annotations

import contextlib
import sys

import click
import duckdb

from .errors import AnonSQLError


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
