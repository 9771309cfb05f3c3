"""`anon-sql analyze`: pre-anonymization analytics (entropy leakage, identity vulnerability, feature relevance)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .errors import require_duckdb_file
from .output import json_option, set_result
from ..errors import AnonSQLError, PolicyError, SourceError

if TYPE_CHECKING:                # imported where used: `anon-sql analyze --help` loads no pandas, duckdb or sqlglot
    import duckdb
    import pandas as pd
    from sqlglot import exp

QI_THRESHOLD = 0.3  # normalized leakage from which an attribute is suggested as a quasi-identifier
_READERS = {".csv": "ReadCSV", ".tsv": "ReadCSV", ".txt": "ReadCSV", ".parquet": "ReadParquet", ".pq": "ReadParquet"}


class _CliError(click.ClickException):
    """An anon_sql error shown as ``Error: message`` with the error's exit code (2 policy/usage, 1 other)."""

    def __init__(self, error: Exception, exit_code: int = 1) -> None:
        super().__init__(str(error))
        self.exit_code = getattr(error, "exit_code", exit_code)


def _file_reader(path: str) -> str | None:
    """The name of the sqlglot node of the DuckDB table function for a data file path (by suffix, ``.gz``
    allowed), or None for a table name."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return _READERS.get(suffixes[-1]) if suffixes else None


def _scan(reader: str, path: str) -> exp.Expression:
    """``read_csv('path')`` / ``read_parquet('path')`` with the path as a quoted literal."""
    from sqlglot import exp

    from ..common.sqlbuild import lit

    node = getattr(exp, reader)
    return node(this=lit(path)) if node is exp.ReadCSV else node(expressions=[lit(path)])


def open_source(source: str, db: str | None, read_only: bool = True) -> tuple[duckdb.DuckDBPyConnection, str]:
    """Connect (``db`` read-only unless told, else in memory) and return the table name; a CSV/Parquet path becomes
    a temp view named after the file (DuckDB sniffs delimiter, header and line ends)."""
    import duckdb
    from sqlglot import exp

    from ..common.sqlbuild import render, table as table_ref

    reader = _file_reader(source)
    if db is not None and not Path(db).is_file():
        raise SourceError(f"database file {db!r} does not exist; pass an existing DuckDB file to --db")
    if db is not None:
        require_duckdb_file(db)
    if reader is None and db is None:
        raise PolicyError(f"{source!r} is not a .csv/.parquet path, so it must be a table: pass its database with --db")
    con = duckdb.connect(db, read_only=read_only) if db is not None else duckdb.connect()
    if reader is None:
        return con, _unquoted(con, source)
    if not Path(source).is_file():
        con.close()
        raise SourceError(f"data file {source!r} does not exist; pass an existing .csv or .parquet path")
    name = Path(source).name.split(".")[0] or "source"
    view = exp.Create(this=table_ref(name), kind="VIEW", replace=True,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                      expression=exp.select(exp.Star()).from_(exp.Table(this=_scan(reader, str(source)))))
    con.execute(render(view))
    return con, name


def _unquoted(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """A table name as SQL quotes it (``"Ünï cödé"``, as the statements take it) read as the name inside the quotes,
    unless a table is named with the quotes themselves (hostile round 4, Z04b)."""
    from ..data.source import named_relation

    if len(name) > 2 and name[0] == name[-1] == '"' and named_relation(con, name) is None:
        return name[1:-1].replace('""', '"')
    return name


def _split(names: str | None) -> list[str] | None:
    """``a,b,c`` → ["a", "b", "c"] (blank entries dropped); None stays None."""
    if names is None:
        return None
    return [n.strip() for n in names.split(",") if n.strip()]


def _show(df: pd.DataFrame) -> str:
    """A result table as text: attribute sets joined with '+', floats to four decimals."""
    shown = df.copy()
    shown["attribute"] = [" + ".join(a) if isinstance(a, tuple) else a for a in shown["attribute"]]
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4f}")


@click.command("analyze")
@click.argument("table")
@click.option("--db", type=click.Path(dir_okay=False), help="DuckDB database file holding TABLE (opened read-only).")
@click.option("--leakage", "do_leakage", is_flag=True, help="Entropy leakage per attribute (default analysis).")
@click.option("--combinations", type=click.IntRange(min=1), default=1, show_default=True,
              help="Leakage of every attribute set of this size.")
@click.option("--vulnerability", "do_vulnerability", is_flag=True,
              help="Identity vulnerability of the QIs (random forest); needs --target.")
@click.option("--store", is_flag=True,
              help="Store the identity vulnerabilities in --db (anon.identity_vulnerability) for method \"adaptive\".")
@click.option("--relevance", "do_relevance", is_flag=True, help="KTFS feature relevance to --target.")
@click.option("--target", help="Sensitive/class attribute for --vulnerability and --relevance.")
@click.option("--quasi", help="Comma-separated attributes to analyze (default: every column but target and count).")
@click.option("--count-column", help="Column holding the number of records each row stands for (leakage).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random step.")
@click.option("--n-estimators", type=click.IntRange(min=1), default=100, show_default=True,
              help="Trees of the random forest (--vulnerability).")
@click.option("--delta", type=click.FloatRange(0.0, 1.0), default=0.2, show_default=True,
              help="KTFS threshold: features scoring below it are selected for anonymization.")
@click.option("--qi-threshold", type=click.FloatRange(0.0, 1.0), default=QI_THRESHOLD, show_default=True,
              help="Normalized leakage from which an attribute is suggested as a quasi-identifier.")
@click.option("--detect", "do_detect", is_flag=True,
              help="Suggest roles (identifier, quasi) from column names and value patterns, as policy lines to paste.")
@click.option("--sample", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Rows sampled (seeded by --seed) for --detect's value patterns.")
@json_option
def analyze(table: str, db: str | None, do_leakage: bool, combinations: int, do_vulnerability: bool, store: bool,
            do_relevance: bool, target: str | None, quasi: str | None, count_column: str | None, seed: int,
            n_estimators: int, delta: float, qi_threshold: float, do_detect: bool, sample: int) -> None:
    """Rank the attributes of TABLE (a table in --db, or a .csv/.parquet path) by leakage, vulnerability, relevance."""
    if (do_vulnerability or do_relevance) and not target:
        raise click.UsageError("--vulnerability and --relevance need --target COL (the sensitive or class attribute)")
    if store and not (do_vulnerability and db):
        raise click.UsageError("--store needs --vulnerability and --db FILE (the database that keeps the catalog)")
    if not (do_leakage or do_vulnerability or do_relevance or do_detect):
        do_leakage = True
    import duckdb

    from ..analytics.leakage import resolve_columns, column_types

    try:
        con, name = open_source(table, db, read_only=not store)
    except (AnonSQLError, duckdb.Error) as err:
        raise _CliError(err) from err
    try:
        columns = column_types(con, name)
        excluded = {c.lower() for c in (target, count_column) if c}
        attributes = _split(quasi) or [c for c in columns if c.lower() not in excluded]
        if not attributes:
            raise PolicyError(f"no attributes to analyze in {table!r}; name them with --quasi")
        resolve_columns(columns, attributes, table, "attribute")
        result: dict[str, object] = {"table": table, "attributes": attributes}
        if do_detect:
            result["detect"] = _print_detect(con, name, sample, seed)
        if do_leakage:
            result["leakage"] = _print_leakage(con, name, attributes, count_column, combinations, qi_threshold)
        if do_vulnerability:
            result["vulnerability"] = _print_vulnerability(con, name, attributes, target, seed, n_estimators,
                                                           count_column, store)
        if do_relevance:
            result["relevance"] = _print_relevance(con, name, attributes, target, delta, count_column)
        set_result(result)
    except (AnonSQLError, duckdb.Error) as err:
        raise _CliError(err) from err
    finally:
        con.close()


def _print_leakage(con: duckdb.DuckDBPyConnection, name: str, attributes: list[str], count_column: str | None,
                   combinations: int, qi_threshold: float) -> dict[str, object]:
    """Leakage table, highest first, and the QI suggestion line; returns both for ``--json``."""
    from ..analytics.leakage import leakage

    df = leakage(con, name, attributes, count_column=count_column, combinations=combinations)
    what = "attribute" if combinations == 1 else f"set of {combinations} attributes"
    click.echo(f"Entropy leakage per {what} (ΔS bits; normalized = ΔS / log2 n):")
    click.echo(_show(df))
    top = df[df["normalized"] >= qi_threshold]["attribute"].tolist()
    labels = [" + ".join(a) if isinstance(a, tuple) else a for a in top]
    if labels:
        click.echo(f"Suggested quasi-identifiers (normalized leakage >= {qi_threshold:.2f}): {', '.join(labels)}")
    else:
        click.echo(f"No {what} reaches normalized leakage {qi_threshold:.2f}; lower --qi-threshold to see candidates.")
    return {"table": df, "suggested_quasi": labels}


def _print_detect(con: duckdb.DuckDBPyConnection, name: str, sample: int, seed: int) -> list[dict]:
    """PII detection (anon_sql.sdc.detect, after PostgreSQL Anonymizer's anon.detect): the suggestions, then the
    policy lines to paste."""
    from ..sdc.detect import detect

    found = detect(con, name, sample=sample, seed=seed)
    if found.empty:
        click.echo("No column looks like an identifier or a quasi-identifier (names and value patterns).")
        return []
    click.echo(f"Suggested roles (confidence 0-1; values from a sample of {sample} rows, seed {seed}):")
    click.echo(found[["column", "role", "confidence", "reason"]].to_string(index=False,
                                                                          float_format=lambda v: f"{v:.2f}"))
    click.echo("\nPolicy lines to paste:\n")
    click.echo("\n\n".join(found["policy"]))
    return found.to_dict(orient="records")


def _print_vulnerability(con: duckdb.DuckDBPyConnection, name: str, attributes: list[str], target: str, seed: int,
                         n_estimators: int, count_column: str | None, store: bool = False) -> dict[str, object]:
    """Identity vulnerability table, the OOB score and any weak-estimate warning (on stderr); returns the table and
    the score for ``--json``."""
    if count_column:
        click.echo(f"note: --count-column {count_column!r} is ignored by --vulnerability (one row = one record)",
                   err=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from ..analytics.vulnerability import identity_vulnerability   # scikit-learn: only when it runs

        df = identity_vulnerability(con, name, attributes, target, seed=seed, n_estimators=n_estimators)
    click.echo(f"Identity vulnerability of the QIs for {target!r} (random forest, {n_estimators} trees, seed {seed}):")
    click.echo(_show(df))
    click.echo(f"OOB score ({df.attrs['task']}): {df.attrs['oob_score']:.4f}")
    if store:
        from ..catalog import store as catalog

        catalog.store_vulnerability(con, name, target, df)
        click.echo(f"stored in anon.identity_vulnerability (source {name!r}, target {target!r})")
    for w in caught:
        if issubclass(w.category, UserWarning):
            click.echo(f"warning: {w.message}", err=True)
    return {"table": df, "oob_score": df.attrs["oob_score"], "task": df.attrs["task"]}


def _print_relevance(con: duckdb.DuckDBPyConnection, name: str, attributes: list[str], target: str, delta: float,
                     count_column: str | None) -> dict[str, object]:
    """KTFS relevance table and the attributes selected for anonymization; returns both for ``--json``."""
    if count_column:
        click.echo(f"note: --count-column {count_column!r} is ignored by --relevance (one row = one record)", err=True)
    from ..analytics.relevance import feature_relevance   # scipy: loaded only when relevance runs

    df = feature_relevance(con, name, attributes, target, delta=delta)
    click.echo(f"Feature relevance to {target!r} (SU, |Kendall tau-b|, |Spearman rho|; delta = {delta:.2f}):")
    click.echo(_show(df))
    selected = df[df["selected_for_anonymization"]]["attribute"].tolist()
    click.echo(f"Selected for anonymization (|tau_b| < {delta:.2f}, not redundant): {', '.join(selected) or '(none)'}")
    return {"table": df, "selected_for_anonymization": selected}
