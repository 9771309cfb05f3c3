"""The ``anon-sql`` command line. Exit codes: 0 ok, 1 other error, 2 usage / bad input, 3 privacy requirement not met."""
from __future__ import annotations

import sys

import click

from .cli_errors import cli_errors as _errors, echo_release
from .cli_lazy import LazyGroup, LazyModule
from .errors import AnonSQLError, PrivacyRequirementError

# imported when a command first uses them: `anon-sql --help` must not load pandas, scikit-learn or scipy
duckdb, api, catalog = LazyModule("duckdb"), LazyModule("anon_sql.api"), LazyModule("anon_sql.catalog")
DIALECTS = ("duckdb", "spark", "postgres", "trino", "sqlite")     # = api.DIALECTS (tested), without importing api
STAGES = ("planning", "materializing", "verifying")
# commands in modules of their own, imported only when they run: name -> (module, command, one-line help)
LAZY_COMMANDS = {
    "analyze": ("anon_sql.cli_analyze", "analyze", "Rank the attributes of TABLE (a table in --db, or a .csv/.parquet "
                                                   "path) by leakage, vulnerability, relevance."),
    "assess": ("anon_sql.cli_assess", "assess_cmd", "Measure SOURCE (a table of --db, or a .csv / .parquet file) as "
                                                    "it is: k, l, t, α, β, δ, prosecutor / journalist / marketer risk, "
                                                    "population uniqueness."),
    "report": ("anon_sql.cli_report", "report", "Print (and optionally write as HTML / JSON) the metrics report of "
                                                "a release."),
    "run": ("anon_sql.cli_sql", "run_cmd", "Run a SQL script (or - for stdin): DuckDB SQL and anonymized-view "
                                           "statements; stop at the first failure."),
    "shell": ("anon_sql.cli_sql", "shell_cmd", "Interactive SQL prompt with history; accepts DuckDB SQL and the "
                                               "anonymized-view statements."),
    "sweep": ("anon_sql.cli_report", "sweep", "Dry-run a policy once per parameter value and tabulate the metrics "
                                              "(nothing is created)."),
}


def coerce_policy(policy):
    """:func:`anon_sql.policy.coerce_policy`, imported on use."""
    from .policy import coerce_policy as coerce

    return coerce(policy)


def _connect(db: str | None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(db or ":memory:", read_only=read_only)


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="anon-sql")
def main() -> None:
    """anon_sql: privacy-preserving data publishing inside DuckDB."""


@main.command()
@click.option("--db", default=None, help="DuckDB file to write to (default: in-memory).")
def demo(db: str | None) -> None:
    """Run the whole pipeline on built-in example data and print the verified release."""
    from .demo import run_demo

    with _errors():
        run_demo(_connect(db), echo=click.echo)


@main.command()
@click.option("--db", required=True, help="DuckDB database file.")
def init(db: str) -> None:
    """Create the `anon` catalog schema, macros and UDFs in a database (idempotent)."""
    with _errors():
        con = _connect(db)
        catalog.install(con)
        click.echo(f"installed the anon catalog in {db}")


@main.group()
def taxonomy() -> None:
    """Load, build and show generalization taxonomies (stored in anon.taxonomies)."""


@taxonomy.command("load")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--db", required=True, help="DuckDB database file.")
@click.option("--name", default=None, help="Catalog name (default: the file name).")
def taxonomy_load(path: str, db: str, name: str | None) -> None:
    """Load an ARX-format hierarchy CSV (value;level1;...;*)."""
    with _errors():
        tax = api.load_taxonomy_file(_connect(db), path, name)
        click.echo(f"loaded taxonomy {tax.name!r}: {len(tax.leaves)} leaves, levels 0..{tax.height}")


@taxonomy.command("build")
@click.argument("name")
@click.option("--db", required=True, help="DuckDB database file.")
@click.option("--table", required=True, help="Table whose column provides the leaves.")
@click.option("--column", required=True, help="Column whose distinct values are the leaves.")
@click.option("--kind", type=click.Choice(["interval", "mask", "date", "top"]), required=True)
@click.option("--widths", default=None, help="interval: comma-separated widths per level, e.g. 5,10,20.")
@click.option("--levels", type=int, default=None, help="mask: number of masked characters at the top.")
def taxonomy_build(name: str, db: str, table: str, column: str, kind: str, widths: str | None,
                   levels: int | None) -> None:
    """Build a taxonomy from a column (interval widths, masking, dates, or a plain * top)."""
    spec: dict = {"kind": kind}
    if widths:
        spec["widths"] = [float(w) if "." in w else int(w) for w in widths.split(",")]
    if levels is not None:
        spec["levels"] = levels
    with _errors():
        tax = api.build_taxonomy_from_column(_connect(db), name, table, column, spec)
        click.echo(f"built taxonomy {tax.name!r}: {len(tax.leaves)} leaves, levels 0..{tax.height}")


@taxonomy.command("show")
@click.argument("name", required=False)
@click.option("--db", required=True, help="DuckDB database file.")
def taxonomy_show(name: str | None, db: str) -> None:
    """List the stored taxonomies, or print one in ARX format."""
    with _errors():
        con = _connect(db)
        if not name:
            for n in catalog.taxonomy_names(con):
                click.echo(n)
            return
        tax = catalog.load_taxonomy(con, name)
        if tax is None:
            raise AnonSQLError(f"no taxonomy named {name!r} (known: {catalog.taxonomy_names(con)})")
        click.echo(tax.to_arx_csv(), nl=False)


@main.command("release")
@click.argument("policy", type=click.Path(exists=True, dir_okay=False))
@click.option("--db", default=None, help="DuckDB database file (default: in-memory; a file source is read).")
@click.option("--dry-run", is_flag=True, help="Plan, materialize and verify inside a transaction, then roll back.")
@click.option("--explain", is_flag=True, help="Print the generated SQL statements.")
@click.option("--replace", is_flag=True, help="Replace an existing release table atomically.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="spark: run on a local Spark session (needs the spark extra; see docs/spark.md).")
@click.option("--source-path", default=None, help="spark: read this Parquet/CSV instead of the policy's source.")
@click.option("--output", default=None, help="spark: write the released rows as Parquet to this path.")
def release_cmd(policy: str, db: str | None, dry_run: bool, explain: bool, replace: bool, engine: str,
                source_path: str | None, output: str | None) -> None:
    """Release the table a policy file (TOML or .sql) describes."""
    if engine == "spark":
        from .spark.cli import release_on_spark
        return release_on_spark(policy, source_path, output, replace=replace, explain=explain, dry_run=dry_run)
    from .release import release

    with _errors():
        con = _connect(db)
        pol = coerce_policy(policy)
        with click.progressbar(length=len(STAGES), label=f"release {pol.name}", file=sys.stderr,
                               show_eta=False) as bar:
            def progress(message: str) -> None:
                if message in STAGES:
                    bar.update(1)
            rel = release(con, pol, replace=replace, dry_run=dry_run, progress=progress)
        echo_release(rel, explain)
        if dry_run:
            click.echo("\n(dry run: nothing was created)")


@main.command("sql")
@click.argument("policy", type=click.Path(exists=True, dir_okay=False))
@click.option("--dialect", default="duckdb", type=click.Choice(DIALECTS), show_default=True)
@click.option("--db", default=None, help="Database with the source and catalog (needed for searches).")
def sql_cmd(policy: str, dialect: str, db: str | None) -> None:
    """Print the SQL a policy compiles to, for an engine dialect."""
    with _errors():
        con = _connect(db) if db else None
        for stmt in api.compile(policy, dialect=dialect, con=con, pretty=True):
            click.echo(stmt + ";\n")


@main.command("check")
@click.argument("release_name")
@click.option("--db", required=True, help="DuckDB database file holding the release.")
def check_cmd(release_name: str, db: str) -> None:
    """Re-run the privacy checks of a materialized release; exit 3 when one fails."""
    with _errors():
        frame = api.check(_connect(db), release_name)
        click.echo(frame.to_string(index=False))
        if not frame["passed"].all():
            failed = frame.loc[~frame["passed"], "check"].tolist()
            click.echo(f"FAILED: {failed}", err=True)
            sys.exit(PrivacyRequirementError.exit_code)
        click.echo("all checks passed")


@main.command("export")
@click.argument("release_name")
@click.option("--db", required=True, help="DuckDB database file holding the release.")
@click.option("--to", "to", required=True, help="Target: file.parquet or a new file.duckdb.")
def export_cmd(release_name: str, db: str, to: str) -> None:
    """Write the released table and its EC table (and nothing else) to Parquet or a new DuckDB file."""
    with _errors():
        for path in api.export(_connect(db), release_name, to):
            click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
