"""`anon-sql report` and `anon-sql sweep`: metrics of a release (text / HTML / JSON) and metrics across parameters."""
from __future__ import annotations

import click

from .errors import cli_errors as _errors, database
from .output import ProgressLine, command_inputs, json_option, output_target, remember_output, set_result


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


@click.command("report")
@click.argument("release_name")
@click.option("--db", required=True, help="DuckDB database file holding the release.")
@click.option("--html", "html_path", default=None, type=click.Path(dir_okay=False), help="Write an HTML report here.")
@click.option("--metrics", default=None, help="Comma-separated metric names (default: all registered metrics).")
@click.option("--classify", "target", default=None, help="Also report classification accuracy for this target column.")
@click.option("--models", default=None, help="Classifiers for --classify (default: all): tree_gini, c45, "
                                             "naive_bayes, svm, random_forest, mlp.")
@click.option("--folds", default=10, show_default=True, help="Stratified CV folds for --classify.")
@click.option("--sample", default=10_000, show_default=True,
              help="Seeded row subsample for --classify (0 = all rows; SVM/MLP are slow on large tables).")
@json_option
def report(release_name: str, db: str, html_path: str | None, metrics: str | None,
           target: str | None, models: str | None, folds: int, sample: int) -> None:
    """Print (and optionally write as HTML / JSON) the metrics report of a release."""
    from ..report.build import render_report
    from ..publish.report import build_report

    with _errors():
        if html_path:            # before anything runs: never over the database (hostile round 10, M13)
            output_target("--html", html_path, db, command_inputs())
    with _errors(), database(db, must_exist=True, read_only=True) as con:
        options = {"models": _split(models), "folds": folds, "sample": sample or None}
        rep = build_report(con, release_name, _split(metrics), classify=target, classify_options=options)
        set_result(rep)      # --json [FILE|-]: the same report as JSON (stdout by default)
        click.echo(render_report(rep, "text"))
        if html_path:
            output_target("--html", html_path, db, command_inputs()).write_text(render_report(rep, "html"), encoding="utf-8")
            remember_output(html_path)
            click.echo(f"wrote {html_path}")


@click.command("sweep")
@click.argument("policy", type=click.Path(exists=True, dir_okay=False))
@click.option("--param", "params", required=True, multiple=True,
              help="NAME=V1,V2,... e.g. k=2,5,10 or l_diversity.l=2,3 (repeat for a grid).")
@click.option("--db", default=None, help="DuckDB database file (default: in-memory; a file source is read).")
@click.option("--metrics", default=None, help="Comma-separated metric names (default: the policy's [metrics] "
                                              "compute, else a cheap default set).")
@click.option("--csv", "csv_path", default=None, type=click.Path(dir_okay=False), help="Also write the table as CSV.")
@json_option
def sweep_command(policy: str, params: tuple[str, ...], db: str | None, metrics: str | None, csv_path: str | None) -> None:
    """Dry-run a policy once per parameter value and tabulate the metrics (nothing is created)."""
    import itertools

    import pandas as pd

    from ..policy.model import coerce_policy
    from ..report.build import parse_values, set_param
    from ..publish.report import sweep as run_sweep

    with _errors():
        if csv_path:             # before anything runs: never over the database (hostile round 10, M13)
            output_target("--csv", csv_path, db, command_inputs())
    with _errors(), database(db, must_exist=True) as con:   # dry runs only: never creates a database
        grid = []
        for p in params:
            name, sep, values = p.partition("=")
            if not sep or not name.strip():
                raise click.UsageError(f"--param {p!r}: write NAME=V1,V2,... e.g. k=2,5,10")
            grid.append((name.strip(), parse_values(values)))
        base = coerce_policy(policy)
        frames = []
        combos = list(itertools.product(*[v for _, v in grid[:-1]]))
        total, bar = len(combos) * len(grid[-1][1]), ProgressLine("sweep")
        # the last parameter is swept by report_run.sweep; the others form the outer grid (columns first)
        try:
            for i, combo in enumerate(combos):
                pol = base
                for (name, _), value in zip(grid[:-1], combo):
                    pol = set_param(pol, name, value)
                fixed = {name: value for (name, _), value in zip(grid[:-1], combo)}
                frames.append(run_sweep(con, pol, grid[-1][0], grid[-1][1], _split(metrics), progress=bar,
                                        fixed=fixed, start=i * len(grid[-1][1]), total=total))
        except BaseException:
            bar.fail()
            raise
        bar.close()
        table = pd.concat(frames, ignore_index=True)
        set_result(table)
        shown = table.drop(columns=[c for c in ("message",) if c in table])
        click.echo(shown.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
        for msg in table.get("message", pd.Series(dtype=object)).dropna().unique():
            click.echo(f"failed: {msg}", err=True)
        if csv_path:
            table.to_csv(output_target("--csv", csv_path, db, command_inputs()), index=False)
            remember_output(csv_path)
            click.echo(f"wrote {csv_path}")
