"""The ``anon-sql`` command line. Exit codes: 0 ok, 2 bad input (usage, policy, data, names, files), 3 privacy
requirement not met, 1 only for an internal error."""
from __future__ import annotations

import sys

import click

from .errors import cli_errors as _errors, database, echo_release
from .lazy import LazyGroup, LazyModule
from .output import ProgressLine, json_option, rows_text, set_result
from ..common.wording import counted
from ..errors import PrivacyRequirementError, TaxonomyError

# imported when a command first uses them: `anon-sql --help` must not load pandas, scikit-learn or scipy
api, catalog = LazyModule("anon_sql.api"), LazyModule("anon_sql.catalog.store")
DIALECTS = ("duckdb", "spark", "postgres", "trino", "sqlite")     # = api.DIALECTS (tested), without importing api
STAGES = ("planning", "materializing", "verifying")
# commands in modules of their own, imported only when they run: name -> (module, command, one-line help)
LAZY_COMMANDS = {
    "analyze": ("anon_sql.cli.analyze", "analyze", "Rank the attributes of TABLE (a table in --db, or a .csv/.parquet "
                                                   "path) by leakage, vulnerability, relevance."),
    "assess": ("anon_sql.cli.assess", "assess_cmd", "Measure SOURCE (a table of --db, or a .csv / .parquet file) as "
                                                    "it is: k, l, t, α, β, δ, prosecutor / journalist / marketer risk, "
                                                    "population uniqueness."),
    "report": ("anon_sql.cli.report", "report", "Print (and optionally write as HTML / JSON) the metrics report of "
                                                "a release."),
    "run": ("anon_sql.cli.sql", "run_cmd", "Run a SQL script (or - for stdin): DuckDB SQL, anonymized-view and "
                                           "DP statements; stop at the first failure."),
    "shell": ("anon_sql.cli.sql", "shell_cmd", "Interactive SQL prompt with history; accepts DuckDB SQL, the "
                                               "anonymized-view and the DP statements."),
    "sweep": ("anon_sql.cli.report", "sweep_command", "Dry-run a policy once per parameter value and tabulate the metrics "
                                              "(nothing is created)."),
}


def policy_argument(policy):
    """:func:`anon_sql.policy.model.coerce_policy`, imported on use."""
    from ..policy.model import coerce_policy as coerce

    return coerce(policy)


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="anon-sql")
def main() -> None:
    """anon_sql: privacy-preserving data publishing inside DuckDB."""


@main.command()
@click.option("--db", default=None, help="DuckDB file to write to (default: in-memory).")
@json_option
def demo(db: str | None) -> None:
    """Run the whole pipeline on built-in example data and print the verified release."""
    from .demo import run_demo

    with _errors(), database(db) as con:
        run_demo(con, echo=click.echo)


@main.command()
@click.option("--db", required=True, help="DuckDB database file.")
@json_option
def init(db: str) -> None:
    """Create the `anon` catalog schema, macros and UDFs in a database (idempotent)."""
    with _errors(), database(db) as con:
        catalog.install(con)
        click.echo(f"installed the anon catalog in {db}")
        set_result({"db": db, "installed": True})


@main.group()
def taxonomy() -> None:
    """Load, build and show generalization taxonomies (stored in anon.taxonomies)."""


@taxonomy.command("load")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--db", required=True, help="DuckDB database file.")
@click.option("--name", default=None, help="Catalog name (default: the file name).")
@json_option
@click.option("--replace", is_flag=True, help="Replace a stored taxonomy of the same name.")
def taxonomy_load(path: str, db: str, name: str | None, replace: bool) -> None:
    """Load an ARX-format hierarchy CSV (value;level1;...;*)."""
    with _errors(), database(db) as con:
        tax = api.load_taxonomy_file(con, path, name, replace=replace)
        click.echo(f"loaded taxonomy {tax.name!r}: {counted(len(tax.leaves), 'leaf', 'leaves')}, levels 0..{tax.height}")
        set_result({"taxonomy": tax.name, "leaves": len(tax.leaves), "height": tax.height})


@taxonomy.command("build")
@click.argument("name")
@click.option("--db", required=True, help="DuckDB database file.")
@click.option("--table", required=True, help="Table whose column provides the leaves.")
@click.option("--column", required=True, help="Column whose distinct values are the leaves.")
@click.option("--kind", type=click.Choice(["interval", "mask", "date", "top"]), required=True)
@click.option("--widths", default=None, help="interval: comma-separated widths per level, e.g. 5,10,20.")
@click.option("--levels", type=int, default=None, help="mask: number of masked characters at the top.")
@json_option
@click.option("--replace", is_flag=True, help="Replace a stored taxonomy of the same name.")
def taxonomy_build(name: str, db: str, table: str, column: str, kind: str, widths: str | None,
                   levels: int | None, replace: bool) -> None:
    """Build a taxonomy from a column (interval widths, masking, dates, or a plain * top)."""
    spec: dict = {"kind": kind}
    if widths is not None:
        spec["widths"] = _widths(widths)
    if levels is not None:
        spec["levels"] = levels
    with _errors(), database(db, must_exist=True) as con:
        tax = api.build_taxonomy_from_column(con, name, table, column, spec, replace=replace)
        click.echo(f"built taxonomy {tax.name!r}: {counted(len(tax.leaves), 'leaf', 'leaves')}, levels 0..{tax.height}")
        set_result({"taxonomy": tax.name, "leaves": len(tax.leaves), "height": tax.height})


@taxonomy.command("drop")
@click.argument("name")
@click.option("--db", required=True, help="DuckDB database file.")
@click.option("--force", is_flag=True, help="Drop it even though a release uses it (its REFRESH then fails).")
@json_option
def taxonomy_drop(name: str, db: str, force: bool) -> None:
    """Delete a stored taxonomy (only one anon_sql stored: a row written by hand is refused, exit 2; one a release
    uses is refused without --force)."""
    with _errors(), database(db, must_exist=True) as con:
        catalog.drop_taxonomy(con, name, force=force)
        click.echo(f"dropped taxonomy {name!r}")
        set_result({"taxonomy": name, "dropped": True})


@taxonomy.command("show")
@click.argument("name", required=False)
@click.option("--db", required=True, help="DuckDB database file.")
@json_option
def taxonomy_show(name: str | None, db: str) -> None:
    """List the stored taxonomies, or print one in ARX format."""
    with _errors(), database(db, must_exist=True, read_only=True) as con:
        if not name:
            set_result({"taxonomies": catalog.taxonomy_names(con)})
            for n in catalog.taxonomy_names(con):
                click.echo(n)
            return
        tax = catalog.load_taxonomy(con, name)
        if tax is None:
            raise TaxonomyError(f"no taxonomy named {name!r} in {db!r} (stored: {catalog.taxonomy_names(con)}); "
                                "load one with `anon-sql taxonomy load`")
        set_result({"taxonomy": tax.name, "height": tax.height, "arx_csv": tax.to_arx_csv()})
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
@json_option
@click.option("--to", "to", default=None, type=click.Path(dir_okay=False),
              help="Also write the shareable release (table, classes, metadata) to this new .duckdb or .parquet file.")
def release_cmd(policy: str, db: str | None, dry_run: bool, explain: bool, replace: bool, engine: str,
                source_path: str | None, output: str | None, to: str | None) -> None:
    """Release the table a policy file (TOML or .sql) describes."""
    if engine == "spark":
        if to:
            raise click.UsageError("--to works with --engine duckdb; on Spark use --output")
        from .spark import release_on_spark
        return release_on_spark(policy, source_path, output, replace=replace, explain=explain, dry_run=dry_run)
    if to and dry_run:
        raise click.UsageError("--to writes a release, --dry-run creates none: use one or the other")
    with _errors(), database(db) as con:
        pol = policy_argument(policy)
        bar = ProgressLine(f"release {pol.name}", STAGES)   # the methods' own progress (depth, nodes, swaps)
        try:
            rel = api.release(con, pol, replace=replace, dry_run=dry_run, progress=bar, to=to)
        except BaseException:
            bar.fail()
            raise
        bar.close()                           # (api.release cached the check program: the first check starts at once)
        set_result(rel)
        echo_release(rel, explain)
        if dry_run:
            click.echo("\n(dry run: nothing was created)")
        for path in rel.info.get("shared", []):
            click.echo(f"wrote {path} (shareable: the release, its classes and metadata)")


@main.command("sql")
@click.argument("policy", type=click.Path(exists=True, dir_okay=False))
@click.option("--dialect", default="duckdb", type=click.Choice(DIALECTS), show_default=True)
@click.option("--db", default=None, help="Database with the source and catalog (needed for searches).")
@json_option
def sql_cmd(policy: str, dialect: str, db: str | None) -> None:
    """Print the SQL a policy compiles to, for an engine dialect."""
    with _errors(), database(db, must_exist=True) as con:
        statements = api.compile(policy, dialect=dialect, con=con if db else None, pretty=True)
        set_result({"dialect": dialect, "statements": statements})
        for stmt in statements:
            click.echo(stmt + ";\n")


@main.command("check")
@click.argument("release_name")
@click.option("--db", required=True, help="DuckDB database file holding the release.")
@json_option
def check_cmd(release_name: str, db: str) -> None:
    """Re-verify a release from its stored policy, trusting nothing in the file but the table; exit 3 when a check
    fails (or the table was edited since it was released)."""
    from ..audit.program import cached_rows, rederives_masks, rederives_pseudonyms   # no sqlglot, numpy, compiler
    from ..catalog.read import related_tables

    with _errors(), database(db, must_exist=True, read_only=True) as con:
        rows = cached_rows(con, release_name)
        # related tables, pseudonyms and masks re-derived from the source: their checks run every time
        if (rows is None or related_tables(con, release_name) or rederives_pseudonyms(con, release_name)
                or rederives_masks(con, release_name)):
            from ..audit.recheck import recheck_rows      # not api: check must start without pandas

            rows = recheck_rows(con, release_name, cached=rows)   # the cache asked once: its program runs once
        passed = all(r["passed"] for r in rows)
        set_result({"release": release_name, "passed": passed, "checks": rows})
        click.echo(rows_text(rows))
        if not passed:
            click.echo(f"FAILED: {[r['check'] for r in rows if not r['passed']]}", err=True)
            for r in rows:   # why a check could not be run (a forged layout or policy, a source gone)
                if not r["passed"] and r.get("message"):
                    click.echo(f"{r['check']}: {r['message']}", err=True)
            sys.exit(PrivacyRequirementError.exit_code)
        click.echo("all checks passed")


@main.command("export")
@click.argument("release_name")
@click.option("--db", required=True, help="DuckDB database file holding the release.")
@click.option("--to", "to", required=True, help="Target: a new file.duckdb (DuckDB 1.x readable) or file.parquet.")
@json_option
def export_cmd(release_name: str, db: str, to: str) -> None:
    """Write a release's shareable form (the released table, its classes, a metadata row; nothing else) to a new
    DuckDB file or Parquet files. Only releases recorded in anon.releases; exit 3 if it no longer passes its checks."""
    with _errors(), database(db, must_exist=True, read_only=True) as con:   # export only reads it
        paths = api.export(con, release_name, to)
        set_result({"release": release_name, "wrote": paths})
        for path in paths:
            click.echo(f"wrote {path}")


def _widths(text: str) -> list[int | float]:
    """``--widths 5,10,20`` → [5, 10, 20]; anything else is a usage error naming the bad item."""
    out: list[int | float] = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise click.BadParameter(f"{item.strip()!r} is not a number; give positive widths separated by commas, "
                                     "e.g. --widths 5,10,20", param_hint="--widths") from None
        if not value > 0 or value == float("inf"):
            raise click.BadParameter(f"{item.strip()!r} is not a positive width; e.g. --widths 5,10,20",
                                     param_hint="--widths")
        out.append(int(value) if value.is_integer() and "." not in item else value)
    return out


if __name__ == "__main__":  # pragma: no cover
    main()
