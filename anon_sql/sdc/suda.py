"""SUDA2 special uniques (Elliot et al.; Manning, Haglin & Keane 2008; sdcMicro's suda2): minimal sample uniques
per record, SUDA and DIS-SUDA scores, MSU counts per size and per-variable contributions (spec/10-sdc.md).

The subsets of the M key variables are visited level by level; a subset's records are grouped by one factorized
integer code built from its parent's code, so each subset costs one O(n) hash group-by in numpy (O(2^M · n) in
all; Adult with 8 keys: 255 group-bys of 30,162 codes). A record's set S is an MSU when it is unique on S and on
none of S's (|S| − 1)-subsets — uniqueness only grows with S, so the immediate subsets decide."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from math import factorial
from typing import Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from anon_sql.errors import PolicyError

from ._source import check_columns, fetch

MAX_KEYS = 20          # 2^20 group-bys: beyond that the enumeration is hours, not minutes


@dataclass
class SudaResult:
    """What :func:`suda2` measured: ``measures`` (flat, for ``assess``), one row per record, one per variable."""

    measures: dict[str, float]
    records: pd.DataFrame        # [id or keys...], suda_score, dis_suda_score, msu_count, msu_min_size
    contributions: pd.DataFrame  # variable, contribution (percent of the total score; need not sum to 100)
    msus: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False)  # when keep_msus: S → records


def encode_categories(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each column as dense integer codes (NULL is one more category) and the number of categories per column."""
    codes = np.empty((frame.shape[1], len(frame)), dtype=np.int64)
    cards = np.empty(frame.shape[1], dtype=np.int64)
    for j, name in enumerate(frame.columns):
        c, uniques = pd.factorize(frame[name], use_na_sentinel=False)
        codes[j], cards[j] = c, max(len(uniques), 1)
    return codes, cards


def msus_of_codes(codes: np.ndarray, cards: np.ndarray, keep_msus: bool = False):
    """The SUDA2 core over encoded keys: per record the score Σ (M − |S|)! over its MSUs, per-size MSU counts,
    per-variable score sums, per-record MSU count and smallest MSU size (and, if asked, each S's MSU records)."""
    m, n = codes.shape
    score = np.zeros(n, dtype=np.float64)
    count = np.zeros(n, dtype=np.int64)
    min_size = np.zeros(n, dtype=np.int64)
    per_size = np.zeros(m + 1, dtype=np.int64)
    per_var = np.zeros(m, dtype=np.float64)
    kept: dict[tuple[int, ...], np.ndarray] = {}
    prev_dense: dict[tuple[int, ...], np.ndarray] = {(): np.zeros(n, dtype=np.int64)}
    prev_unique: dict[tuple[int, ...], np.ndarray] = {(): np.zeros(n, dtype=bool)}   # the empty set: never an MSU
    for k in range(1, m + 1):
        weight = float(factorial(m - k))
        dense, unique = {}, {}
        for s in combinations(range(m), k):
            combined = prev_dense[s[:-1]] * cards[s[-1]] + codes[s[-1]]
            d, _ = pd.factorize(combined)
            u = np.bincount(d)[d] == 1
            dense[s], unique[s] = d, u
            msu = u.copy()
            for drop in range(k):
                msu &= ~prev_unique[s[:drop] + s[drop + 1:]]
            hits = int(msu.sum())
            if not hits:
                continue
            per_size[k] += hits
            score[msu] += weight
            count[msu] += 1
            min_size[msu & (min_size == 0)] = k
            for v in s:
                per_var[v] += hits * weight
            if keep_msus:
                kept[s] = np.flatnonzero(msu)
        prev_dense, prev_unique = dense, unique
    return score, per_size, per_var, count, min_size, kept


def dis_scores(score: np.ndarray, uniques: int, pairs: int, m: int, dis_fraction: float) -> np.ndarray:
    """DIS-SUDA (spec/10-sdc.md): Dis = Uf / (Uf + P(1 − f)); Q = 1 + (8 − M)/20; A = Σ_{score>0} 1/score^Q;
    DIS(r) = 1 / (1 + (U/Dis − U) / (score(r)^Q · A)), 0 where score = 0 (U = 0 implies every score is 0)."""
    out = np.zeros_like(score, dtype=np.float64)
    positive = score > 0
    if not positive.any():
        return out
    q = 1 + (8 - m) / 20
    a = float(np.sum(1.0 / score[positive] ** q))
    dis = uniques * dis_fraction / (uniques * dis_fraction + pairs * (1 - dis_fraction))
    out[positive] = 1.0 / (1.0 + (uniques / dis - uniques) / (score[positive] ** q * a))
    return out


def suda2(con, source: str | exp.Table, keys: Sequence[str], *, dis_fraction: float = 0.01,
          id_column: str | None = None, keep_msus: bool = False) -> SudaResult:
    """SUDA2 over the key variables ``keys`` of a DuckDB table or view (NULL counts as one more value).

    measures: ``suda_msus_size_1`` … ``suda_msus_size_M`` (MSUs of each size over all records),
    ``suda_records_at_risk`` (records with an MSU), ``suda_score_max``, ``suda_dis_max``, ``suda_dis_mean``,
    ``suda_uniques`` (U), ``suda_pairs`` (P: classes of size 2 on all keys), ``suda_dis_fraction``;
    records: ``suda_score`` and ``dis_suda_score`` per record (with ``id_column``, or the key values, to identify it);
    contributions: per variable, the scores of the MSUs containing it over the total score, in percent."""
    keys = list(keys)
    if not keys:
        raise PolicyError("suda2: give at least one key variable (keys=[...])")
    if len(keys) > MAX_KEYS:
        raise PolicyError(f"suda2: {len(keys)} key variables is too many (at most {MAX_KEYS}: the cost doubles with "
                          "each key); keep the quasi-identifiers an intruder could know")
    if not (isinstance(dis_fraction, (int, float)) and 0 < dis_fraction < 1):
        raise PolicyError(f"suda2: dis_fraction is the sampling fraction, a number in (0, 1), got {dis_fraction!r}")
    named = {"suda2 keys": keys} | ({"suda2 id_column": [id_column]} if id_column else {})
    check_columns(con, source, named)
    frame = fetch(con, source, keys + ([id_column] if id_column and id_column not in keys else []))
    codes, cards = encode_categories(frame[keys])
    m = len(keys)
    score, per_size, per_var, count, min_size, kept = msus_of_codes(codes, cards, keep_msus)
    full = _full_code(codes, cards)
    sizes = np.bincount(full)
    uniques, pairs = int((sizes == 1).sum()), int((sizes == 2).sum())
    dis = dis_scores(score, uniques, pairs, m, float(dis_fraction))
    total = float(score.sum())
    records = frame[[id_column]].copy() if id_column else frame[keys].copy()
    records["suda_score"], records["dis_suda_score"] = score, dis
    records["msu_count"], records["msu_min_size"] = count, min_size
    contributions = pd.DataFrame({"variable": keys,
                                  "contribution": per_var / total * 100 if total else np.zeros(m)})
    measures: dict[str, float] = {f"suda_msus_size_{k}": int(per_size[k]) for k in range(1, m + 1)}
    measures |= {"suda_records_at_risk": int((score > 0).sum()), "suda_score_max": float(score.max()),
                 "suda_dis_max": float(dis.max()), "suda_dis_mean": float(dis.mean()), "suda_uniques": uniques,
                 "suda_pairs": pairs, "suda_dis_fraction": float(dis_fraction)}
    named_msus = {tuple(keys[i] for i in s): rows for s, rows in kept.items()}
    return SudaResult(measures, records, contributions, named_msus)


def _full_code(codes: np.ndarray, cards: np.ndarray) -> np.ndarray:
    dense = np.zeros(codes.shape[1], dtype=np.int64)
    for j in range(codes.shape[0]):
        dense = pd.factorize(dense * cards[j] + codes[j])[0]
    return dense


__all__ = ["SudaResult", "dis_scores", "encode_categories", "msus_of_codes", "suda2"]
