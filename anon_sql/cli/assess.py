"""`anon-sql assess`: the risk measures of an existing table or file, without a release (read-only)."""
from __future__ import annotations

from pathlib import Path

import click

from .errors import cli_errors, require_duckdb_file
from .output import command_inputs, json_option, output_target, remember_output, set_result
from ..errors import PolicyError


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _taxonomies(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        attr, sep, spec = item.partition("=")
        if not sep or not attr or not spec:
            raise PolicyError(f"--taxonomy {item!r}: write ATTRIBUTE=FILE (an ARX hierarchy) or ATTRIBUTE=NAME")
        out[attr.strip()] = spec.strip()
    return out


@click.command("assess")
@click.argument("source")
@click.option("--quasi", required=True, help="Quasi-identifiers, comma-separated.")
@click.option("--sensitive", default=None, help="Sensitive attributes, comma-separated.")
@click.option("--population", default=None,
              help="Population size (a number), or a table / .csv / .parquet holding the population.")
@click.option("--sampling-fraction", type=float, default=None, help="n / population size (instead of --population).")
@click.option("--threshold", type=float, default=0.2, show_default=True,
              help="Highest acceptable prosecutor risk (records_at_risk).")
@click.option("--taxonomy", "taxonomy", multiple=True,
              help="ATTRIBUTE=FILE|NAME: taxonomy of a sensitive attribute (t_hierarchical); repeatable.")
@click.option("--combinations", type=int, default=1, show_default=True,
              help="Distinction / separation for QI combinations of up to this many QIs.")
@click.option("--count-column", default=None, help="Column giving the records each row stands for.")
@click.option("--privacy-unit", default=None,
              help="Column identifying the person when a person has several rows: every measure counts people.")
@click.option("--suda", is_flag=True, help="SUDA2 special uniques over the quasi-identifiers (suda_msus_size_*, "
              "DIS-SUDA, per-attribute contributions).")
@click.option("--dis-fraction", type=float, default=0.01, show_default=True,
              help="Sampling fraction of DIS-SUDA (with --suda).")
@click.option("--weights", default=None, help="Column of sampling weights: Benedetti–Franconi individual risk.")
@click.option("--household", default=None, help="Household id column: household risk 1 − Π(1 − r).")
@click.option("--db", default=None, help="DuckDB file holding SOURCE (opened read-only).")
@click.option("--html", "html_path", default=None, type=click.Path(dir_okay=False),
              help="Also write the assessment as an HTML page.")
@json_option
def assess_cmd(source: str, quasi: str, sensitive: str | None, population: str | None,
               sampling_fraction: float | None, threshold: float, taxonomy: tuple[str, ...], combinations: int,
               count_column: str | None, privacy_unit: str | None, suda: bool, dis_fraction: float,
               weights: str | None, household: str | None, db: str | None, html_path: str | None) -> None:
    """Measure SOURCE (a table of --db, or a .csv / .parquet file) as it is: k, l, t, α, β, δ, prosecutor /
    journalist / marketer risk, population uniqueness. Nothing is written to the database."""
    import duckdb

    from ..assessment.measures import assess

    with cli_errors():
        if html_path:            # before anything runs: never over the database (hostile round 10, M13)
            output_target("--html", html_path, db, command_inputs())
        if db is not None and not Path(db).exists():
            raise PolicyError(f"--db {db!r} does not exist (assess opens it read-only)")
        if db is not None:
            require_duckdb_file(db)
        con = duckdb.connect(db, read_only=True) if db else duckdb.connect()
        pop: object = population
        if population is not None:
            try:
                pop = float(population)
            except ValueError:
                pop = population
        a = assess(con, source, _split(quasi), _split(sensitive), population=pop,
                   sampling_fraction=sampling_fraction, threshold=threshold, taxonomies=_taxonomies(taxonomy),
                   combination_size=combinations, count_column=count_column, privacy_unit=privacy_unit,
                   suda=suda, dis_fraction=dis_fraction, weights=weights, household=household)
        set_result(a.to_dict())
        click.echo(a.report("text"))
        if html_path:
            output_target("--html", html_path, db, command_inputs()).write_text(a.report("html"), encoding="utf-8")
            remember_output(html_path)
            click.echo(f"\nwrote {html_path}")
