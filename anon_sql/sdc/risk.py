"""Individual re-identification risk with sampling weights (Benedetti & Franconi 1998, sdcMicro's indivRisk,
method "approx") and household risk, computed in SQL over a DuckDB table (spec/10-sdc.md).

For a record in key class k: f = sample frequency, F = Σ of the class's sampling weights, p = f / F;
r = 1/f when F = f, else p/(1−p)·ln(1/p) (f = 1), p/(1−p) − (p/(1−p))²·ln(1/p) (f = 2), p/(f − (1−p)) (f > 2).
A household's risk is 1 − Π over its members of (1 − r_i), given to every member."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp

from anon_sql.errors import PolicyError, SourceError

from ._source import check_columns
from .sqlparts import DIALECT, col, ident, lit, render, table_or_subquery, table_label

_F, _FW, _R, _HR = "__anon_f", "__anon_fw", "__anon_r", "__anon_hr"
NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
           "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")

# The published formula over the two window counts; a fixed text with fixed names (no policy text reaches it).
_FORMULA = sqlglot.parse_one(f"""
    CASE
        WHEN {_FW} = {_F} THEN 1.0 / {_F}
        WHEN {_F} = 1 THEN ({_F} / {_FW}) / (1 - {_F} / {_FW}) * ln({_FW} / {_F})
        WHEN {_F} = 2 THEN ({_F} / {_FW}) / (1 - {_F} / {_FW})
                           - power(({_F} / {_FW}) / (1 - {_F} / {_FW}), 2) * ln({_FW} / {_F})
        ELSE ({_F} / {_FW}) / ({_F} - (1 - {_F} / {_FW}))
    END""", read=DIALECT)


@dataclass
class RiskResult:
    """``measures`` (flat, for ``assess``) and one row per record: its id or keys, sample_freq (f), pop_freq (F = Σ weights), risk [, household_risk]."""

    measures: dict[str, float]
    records: pd.DataFrame


def _check_weights(con, source, weights: str, types: dict[str, str]) -> None:
    if not types[weights].upper().startswith(NUMERIC):
        raise PolicyError(f"weights column {weights!r} is {types[weights]}, not a number: give the sampling weights "
                          "(inverse inclusion probabilities, each >= 1)")
    w = col(weights)
    # NaN and ±inf pass `>= 1` in DuckDB (NaN sorts above every number): counted as not finite (round 8, A2)
    finite = exp.func("isfinite", exp.Cast(this=w.copy(), to=exp.DataType.build("DOUBLE")))
    bad = exp.select(exp.func("count_if", exp.Is(this=w, expression=exp.null())),
                     exp.func("count_if", exp.LT(this=w.copy(), expression=lit(1))),
                     exp.func("count_if", exp.Not(this=finite))).from_(table_or_subquery(source))
    nulls, small, infinite = con.execute(render(bad)).fetchall()[0]
    if nulls or small or infinite:
        raise PolicyError(f"weights column {weights!r} has {nulls} NULL, {infinite} NaN or infinite and {small} "
                          f"below 1 in "
                          f"{table_label(source)}: a sampling weight is how many people a record stands for (>= 1); "
                          "fill or fix them first")


def _risk_query(source, keys: Sequence[str], weights: str | None, carry: Sequence[str]) -> exp.Select:
    part = [col(k) for k in keys]
    win = lambda f: exp.Window(this=f, partition_by=[p.copy() for p in part])  # noqa: E731
    double = lambda e: exp.Cast(this=e, to=exp.DataType.build("DOUBLE"))  # noqa: E731
    fw = win(exp.func("sum", col(weights))) if weights else win(exp.func("count", exp.Star()))
    inner = exp.select(*[col(c) for c in carry], exp.alias_(double(win(exp.func("count", exp.Star()))), ident(_F)),
                       exp.alias_(double(fw), ident(_FW))).from_(table_or_subquery(source))
    formula = _FORMULA.copy()
    for c in formula.find_all(exp.Column):
        c.replace(col(c.name))
    return exp.select(*[col(c) for c in carry], exp.alias_(col(_F), ident("sample_freq")),
                      exp.alias_(col(_FW), ident("pop_freq")), exp.alias_(formula, ident("risk"))) \
        .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("w"))))


def _measures(risk: pd.Series, threshold: float, prefix: str) -> dict[str, float]:
    return {f"{prefix}_expected_reidentifications": float(risk.sum()), f"{prefix}_global": float(risk.mean()),
            f"{prefix}_max": float(risk.max()), f"{prefix}_records_above_threshold": int((risk > threshold).sum()),
            f"{prefix}_threshold": float(threshold)}


def individual_risk(con: duckdb.DuckDBPyConnection, source: str | exp.Table, keys: Sequence[str],
                    weights: str | None = None, *, id_column: str | None = None,
                    threshold: float = 0.1) -> RiskResult:
    """Benedetti–Franconi individual risk of every record of ``source`` on its key variables ``keys`` (NULL is one
    more value), with sampling weights from column ``weights`` (None: every weight 1, so r = 1/f).

    measures: ``risk_expected_reidentifications`` (Σ r), ``risk_global`` (mean r), ``risk_max``,
    ``risk_records_above_threshold`` (r > ``threshold``), ``risk_threshold``."""
    keys = list(keys)
    if not keys:
        raise PolicyError("individual_risk: give at least one key variable (keys=[...])")
    named = {"individual_risk keys": keys} | ({"weights": [weights]} if weights else {}) \
        | ({"id_column": [id_column]} if id_column else {})
    types = check_columns(con, source, named)
    if weights:
        _check_weights(con, source, weights, types)
    carry = [id_column] if id_column else keys
    records = con.execute(render(_risk_query(source, keys, weights, carry))).df()
    if records.empty:
        raise SourceError(f"{table_label(source)} has no rows: nothing to measure")
    return RiskResult(_measures(records["risk"], threshold, "risk"), records)


def household_risk(con: duckdb.DuckDBPyConnection, source: str | exp.Table, keys: Sequence[str], household: str,
                   weights: str | None = None, *, id_column: str | None = None,
                   threshold: float = 0.1) -> RiskResult:
    """Individual risk per record, then each household's risk 1 − Π (1 − r_i) over its members (sdcMicro), given to
    every member as ``household_risk``; measures as :func:`individual_risk` plus ``household_risk_*`` (per record)
    and ``households``."""
    keys = list(keys)
    if not keys:
        raise PolicyError("household_risk: give at least one key variable (keys=[...])")
    named = {"household_risk keys": keys, "household": [household]} | ({"weights": [weights]} if weights else {}) \
        | ({"id_column": [id_column]} if id_column else {})
    types = check_columns(con, source, named)
    if household in keys:
        raise PolicyError(f"household column {household!r} is also a key variable: a household id is not something "
                          "an intruder matches on; leave it out of keys")
    nulls = con.execute(render(exp.select(exp.func("count_if", exp.Is(this=col(household), expression=exp.null())))
                               .from_(table_or_subquery(source)))).fetchall()[0][0]
    if nulls:
        raise PolicyError(f"household column {household!r} is NULL in {nulls} rows of {table_label(source)}: give "
                          "every record its household id (a person living alone is a household of one)")
    carry = ([id_column] if id_column else keys) + [household]
    if weights:
        _check_weights(con, source, weights, types)
    per_record = _risk_query(source, keys, weights, carry)
    hh = exp.Sub(this=lit(1), expression=exp.Window(
        this=exp.func("product", exp.Sub(this=lit(1), expression=col("risk"))), partition_by=[col(household)]))
    query = exp.select(exp.Star(), exp.alias_(hh, ident("household_risk"))) \
        .from_(exp.Subquery(this=per_record, alias=exp.TableAlias(this=ident("r"))))
    records = con.execute(render(query)).df()
    measures = _measures(records["risk"], threshold, "risk") \
        | _measures(records["household_risk"], threshold, "household_risk") \
        | {"households": int(records[household].nunique())}
    return RiskResult(measures, records)


__all__ = ["RiskResult", "household_risk", "individual_risk"]
