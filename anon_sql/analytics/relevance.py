"""KTFS feature relevance (seed 003, spec/04 §1): symmetrical uncertainty, Kendall tau-b redundancy, δ selection."""
from __future__ import annotations

import warnings
from typing import Sequence

import duckdb
import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import normalized_mutual_info_score
from sqlglot import exp

from .leakage import resolve_columns, column_types
from ..common.columns import is_numeric
from ..errors import PolicyError, SourceError
from ..data.source import accepts_sources
from ..common.sqlbuild import alias, col, lit, render, table as table_ref


def fetch_encoded(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, str], names: Sequence[str],
                  categorical: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Fetch only ``names`` as float arrays: numeric columns as values (NULL → NaN), others and ``categorical`` ones
    as ordinal codes (DENSE_RANK in value order, NULL its own last code); rows in a deterministic order."""
    exprs = []
    for i, name in enumerate(names):
        if is_numeric(columns[name]) and name not in categorical:
            value: exp.Expression = exp.cast(col(name), "DOUBLE")
        else:
            rank = exp.Window(this=exp.DenseRank(),
                              order=exp.Order(expressions=[exp.Ordered(this=col(name), nulls_first=False)]))
            value = exp.cast(exp.Sub(this=rank, expression=lit(1)), "DOUBLE")
        exprs.append(alias(value, f"c{i}"))
    query = exp.select(*exprs).from_(table_ref(table)).order_by(
        *[exp.Ordered(this=col(f"c{i}"), nulls_first=False) for i in range(len(names))])
    fetched = con.execute(render(query)).fetchnumpy()
    out = {}
    for i, name in enumerate(names):
        arr = fetched[f"c{i}"]
        out[name] = np.ma.filled(np.ma.asarray(arr, dtype=float), np.nan)
    return out


def _categories(values: np.ndarray, numeric: bool, bins: int) -> np.ndarray:
    """Integer labels for entropy: numeric columns with more than ``bins`` distinct values go into equal-frequency
    bins (quantile edges, ties kept together, as sklearn's KBinsDiscretizer 'quantile'); NULL is a label of its own."""
    nan = np.isnan(values)
    present = values[~nan]
    if numeric and np.unique(present).size > bins:
        edges = np.unique(np.quantile(present, np.linspace(0, 1, bins + 1)[1:-1]))
        labels = np.searchsorted(edges, np.where(nan, 0.0, values), side="right")
    else:
        _, labels = np.unique(np.where(nan, 0.0, values), return_inverse=True)
    return np.where(nan, -1, labels)


def _abs_tau(x: np.ndarray, y: np.ndarray) -> float:
    """|Kendall's tau-b| ignoring pairs with a NULL; NaN when either side is constant."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return abs(float(stats.kendalltau(x, y, nan_policy="omit").statistic))


def _abs_rho(x: np.ndarray, y: np.ndarray) -> float:
    """|Spearman's rho| ignoring pairs with a NULL; NaN when either side is constant."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return abs(float(stats.spearmanr(x, y, nan_policy="omit").statistic))


@accepts_sources
def feature_relevance(con: duckdb.DuckDBPyConnection, table: str, features: Sequence[str], target: str,
                      delta: float = 0.2, *, bins: int = 10, redundancy: float = 0.8, score: str = "kendall",
                      vulnerable: Sequence[str] = ()) -> pd.DataFrame:
    """KTFS (spec/04 §1): SU relevance to ``target``, |τ_b| and |ρ|, Kendall redundancy elimination, and the features
    to anonymize (kept and score < ``delta``, or listed in ``vulnerable``); most relevant (SU) first."""
    # Choices where the spec is silent: SU bins only numeric columns with more than ``bins`` distinct values (others
    # are categories); non-numeric columns enter τ and ρ as ordinal codes in value order, NULLs are left out of τ and
    # ρ but are a category of their own in SU; a redundant feature is eliminated from FS, so it is not selected unless
    # listed in ``vulnerable``; an undefined score (constant column) counts as 0; SU ties keep the caller's order.
    columns = column_types(con, table)
    if isinstance(features, str):
        features = [features]
    if not features:
        raise PolicyError(f"no features given; choose some of the columns of {table!r}: {', '.join(columns)}")
    feats = resolve_columns(columns, features, table, "feature")
    (tgt,) = resolve_columns(columns, [target], table, "target")
    if tgt in feats:
        raise PolicyError(f"target {target!r} is also listed as a feature; remove it from features")
    vuln = set(resolve_columns(columns, list(vulnerable), table, "vulnerable")) if vulnerable else set()
    if not vuln <= set(feats):
        raise PolicyError(f"vulnerable column(s) {', '.join(sorted(vuln - set(feats)))} are not among the features")
    if not 0.0 <= float(delta) <= 1.0:
        raise PolicyError(f"delta={delta!r} must be between 0 and 1 (paper: 0.2)")
    if not 0.0 < float(redundancy) <= 1.0:
        raise PolicyError(f"redundancy={redundancy!r} must be in (0, 1] (default 0.8)")
    if not isinstance(bins, int) or bins < 2:
        raise PolicyError(f"bins={bins!r} must be an integer >= 2 (default 10)")
    if score not in ("kendall", "spearman"):
        raise PolicyError(f"score={score!r} must be 'kendall' or 'spearman'")

    data = fetch_encoded(con, table, columns, feats + [tgt])
    y = data[tgt]
    if y.size == 0:
        raise SourceError(f"table {table!r} is empty; feature relevance needs rows")
    y_cat = _categories(y, is_numeric(columns[tgt]), bins)

    # Step 1: SU(X, Y) = 2 I(X;Y) / (H(X) + H(Y)) is scikit-learn's NMI with arithmetic averaging.
    rows = []
    for name, given in zip(feats, features):
        x = data[name]
        rows.append({
            "attribute": given,
            "su": float(normalized_mutual_info_score(y_cat, _categories(x, is_numeric(columns[name]), bins),
                                                     average_method="arithmetic")),
            "kendall_tau": _abs_tau(x, y),
            "spearman": _abs_rho(x, y),
            "_column": name,
        })
    # Step 2: sort by relevance (SU), descending; ties keep the caller's order.
    rows.sort(key=lambda r: -r["su"])
    # Step 3: redundancy — a feature is dropped when |τ_b| with an already kept (more relevant) feature >= threshold.
    kept: list[dict] = []
    for r in rows:
        r["redundant_with"] = next((k["attribute"] for k in kept
                                    if _abs_tau(data[r["_column"]], data[k["_column"]]) >= redundancy), None)
        if r["redundant_with"] is None:
            kept.append(r)
    # Step 4: kept features scoring below δ are the ones to anonymize; identity-vulnerable ones always are.
    key = "kendall_tau" if score == "kendall" else "spearman"
    for r in rows:
        value = 0.0 if np.isnan(r[key]) else r[key]
        r["selected_for_anonymization"] = bool(r["_column"] in vuln or (r["redundant_with"] is None and value < delta))
    out = pd.DataFrame(rows).drop(columns="_column")
    out["redundant_with"] = out["redundant_with"].astype(object).where(out["redundant_with"].notna(), None)
    return out[["attribute", "su", "kendall_tau", "spearman", "redundant_with", "selected_for_anonymization"]]
