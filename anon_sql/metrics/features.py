"""Numeric encodings of original and released quasi-identifier values in one space, for classifiers and silhouette:
numbers by value (a generalized cell by its interval midpoint), categories by taxonomy position (a generalized value
by the mean position of its leaves, so siblings stay close)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ..compiler.views import EC_ID
from ..methods.base import ROW_ID
from ..common.sqlbuild import alias, col, render, table
from ..data.taxonomy import TOP
from .data import ReleaseData, varchar
from .values import cover


def encode_original(d: ReleaseData, q: str, values: Sequence) -> np.ndarray:
    """Original values of QI ``q`` (text or None) → number (numeric QIs) or taxonomy position (categorical)."""
    dom = d.domains[q]
    codes = dom.codes(values)
    pos = np.where(codes >= 0, codes, 0)
    out = (dom.x if dom.numeric else dom.order.astype(float))[pos]
    return np.where(codes >= 0, out, np.nan)


def encode_released(d: ReleaseData, q: str, values: Sequence) -> np.ndarray:
    """Released values of QI ``q`` → interval midpoint (numeric QIs) or mean taxonomy position of the leaves."""
    level = d.plan.get(q) if d.is_levels and q in d.taxonomies and isinstance(d.plan.get(q), int) else None
    series = pd.Series(values, dtype=object)
    c = cover(d.domains[q], series.dropna().unique().tolist() + ([None] if series.isna().any() else []), level)
    return c.mid[c.index(series)]


def generalize(d: ReleaseData, q: str, values: pd.Series) -> pd.Series:
    """Level plans: the released value of each original value of ``q`` at the plan's level (vectorized map)."""
    level = int(d.plan.get(q, 0))
    if level == 0 or q not in d.taxonomies:
        return values
    tax = d.taxonomies[q]
    mapped = values.map(tax.mapping(level))
    return mapped.where(values.notna(), tax.null_parent or TOP).astype(object)


def assignment_rows(d: ReleaseData, extra: Sequence[str] = ()) -> pd.DataFrame:
    """Local-recoding releases: each source row's original QI values (text, q0..qn), ``extra`` columns and its class
    ``__ec`` (rows of suppressed classes left out), read through the ``__source`` and ``__assignment`` tables."""
    s, a = "s", "a"
    items = [alias(varchar(col(q, s)), f"q{i}") for i, q in enumerate(d.quasi)]
    items += [alias(col(c, s), f"x{i}") for i, c in enumerate(extra)]
    items.append(alias(col(EC_ID, a), "__ec"))
    released = exp.select(col(EC_ID)).distinct().from_(d.names.table.copy())
    query = (exp.select(*items)
             .from_(table(d.names.source, alias=s))
             .join(table(d.names.assignment, alias=a),
                   on=exp.EQ(this=col(ROW_ID, s), expression=col(ROW_ID, a)))
             .where(exp.In(this=col(EC_ID, a), query=released.subquery()))
             .order_by(col(ROW_ID, s)))
    return d.con.execute(render(query)).df()


def qi_matrix(d: ReleaseData, frame: pd.DataFrame, standardize: bool = True) -> np.ndarray:
    """Original QI values of ``frame`` (columns q0..qn) as features: numbers standardized, categories by taxonomy
    position scaled to [0, 1]; NULL → the column mean."""
    cols = []
    for i, q in enumerate(d.quasi):
        v = encode_original(d, q, frame[f"q{i}"])
        if not d.domains[q].numeric:
            v = v / max(d.domains[q].n - 1, 1)
        elif standardize:
            sd = np.nanstd(v)
            v = (v - np.nanmean(v)) / (sd if sd > 0 else 1.0)
        cols.append(np.where(np.isnan(v), np.nanmean(v) if np.isfinite(v).any() else 0.0, v))
    return np.column_stack(cols)
