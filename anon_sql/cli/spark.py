"""``anon-sql release POLICY --engine spark [--source-path data.parquet] [--output out.parquet]``."""
from __future__ import annotations

import sys

import click

from .errors import echo_release
from ..errors import AnonSQLError
from ..policy.model import coerce_policy


def release_on_spark(policy_path: str, source_path: str | None, output: str | None, *, replace: bool = False,
                     explain: bool = False, dry_run: bool = False) -> None:
    """Release on a local Spark session and print what the DuckDB command prints; exit codes as documented."""
    if dry_run:
        click.echo("error: --dry-run is not available with --engine spark (Spark has no transactions to roll "
                   "back); run without it, or with --engine duckdb", err=True)
        sys.exit(2)
    try:
        from ..runner.spark import release_with_spark
        from ..engines.spark.session import local_session

        policy = coerce_policy(policy_path)
        spark = local_session()
        rel = release_with_spark(spark, policy, source=source_path, output=output, replace=replace,
                      progress=lambda message: click.echo(message, err=True))
    except AnonSQLError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except Exception as err:  # Spark / Java errors: one line, exit 1
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        click.echo(f"error: spark: {first}", err=True)
        sys.exit(1)
    extra = [f"spark jobs: {rel.info.get('spark_jobs')}"] + ([f"wrote {output}"] if output else [])
    echo_release(rel, explain, extra)
