"""Slicing l-diversity kernel (Li et al., TKDE 2012, Definitions 8–10; spec/02 §2.3), vectorized.

Rows carry their bucket, one code per non-sensitive column group (the code of the row's value combination in that
group), the code of the sensitive column without S (``skey``) and the code of S. For every distinct tuple signature
t = (column codes, skey) the kernel computes p(t, s) = Σ_B p(t, B) · D(t, B)[s] with per-bucket frequency tables
joined on (value, bucket): only the buckets that hold all of t's column values are visited, never all n² pairs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["slicing_probabilities", "slicing_max_p", "slicing_diverse", "slicing_diversity_udf"]


def _counts(keys: dict[str, np.ndarray], w: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame({**keys, "__w": w})
    return frame.groupby(list(keys), sort=False, as_index=False)["__w"].sum()


def slicing_probabilities(bucket: np.ndarray, groups: np.ndarray, skey: np.ndarray, sens: np.ndarray,
                          weights: np.ndarray | None = None, n_sens: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(signature of each row, p(t, s) per signature × sensitive code).

    ``groups`` is n × (c − 1) int codes (may have zero columns), ``skey`` the (C_c − S) code (all 0 when C_c = {S}),
    ``sens`` the S code (0..n_sens−1); ``weights`` records per row (default 1)."""
    bucket, skey, sens = (np.asarray(a, dtype=np.int64) for a in (bucket, skey, sens))
    groups = np.asarray(groups, dtype=np.int64).reshape(len(bucket), -1)
    w = np.ones(len(bucket)) if weights is None else np.asarray(weights, dtype=np.float64)
    n_sens = int(sens.max()) + 1 if n_sens is None else n_sens
    cols = [f"g{i}" for i in range(groups.shape[1])] + ["skey"]
    sig_frame = pd.DataFrame(np.column_stack([groups, skey]), columns=cols)
    sig_codes, sig_uniq = pd.MultiIndex.from_frame(sig_frame).factorize()
    sigs = pd.DataFrame(list(sig_uniq), columns=cols)
    sigs["sig"] = np.arange(len(sigs))
    size = pd.Series(np.bincount(bucket, weights=w))
    # per column: fraction of the bucket's values equal to t's value; start with the most selective column
    tables = []
    for c in cols:
        t = _counts({c: sigs[c].to_numpy()[sig_codes], "b": bucket}, w)
        t["__f"] = t["__w"] / size.to_numpy()[t["b"].to_numpy()]
        tables.append((c, t[[c, "b", "__f", "__w"]]))
    tables.sort(key=lambda ct: -ct[1][ct[0]].nunique())
    c0, t0 = tables[0]
    joined = sigs[["sig", *cols]].merge(t0[[c0, "b", "__f"]], on=c0)
    for c, t in tables[1:]:
        joined = joined.merge(t[[c, "b", "__f"]].rename(columns={"__f": "__f2"}), on=[c, "b"])
        joined["__f"] *= joined.pop("__f2")
    # f(t) = Σ_B f(t, B); p(t, B) = f(t, B) / f(t)
    ft = np.bincount(joined["sig"].to_numpy(), weights=joined["__f"].to_numpy(), minlength=len(sigs))
    joined["__p"] = joined["__f"].to_numpy() / ft[joined["sig"].to_numpy()]
    # D(t, B)[s] = count(skey, B, s) / count(skey, B)
    ks = _counts({"skey": skey, "b": bucket, "s": sens}, w)
    kb = _counts({"skey": skey, "b": bucket}, w).rename(columns={"__w": "__n"})
    ks = ks.merge(kb, on=["skey", "b"])
    ks["__d"] = ks["__w"] / ks["__n"]
    full = joined[["sig", "skey", "b", "__p"]].merge(ks[["skey", "b", "s", "__d"]], on=["skey", "b"])
    p = np.zeros((len(sigs), n_sens))
    np.add.at(p, (full["sig"].to_numpy(), full["s"].to_numpy()), full["__p"].to_numpy() * full["__d"].to_numpy())
    return np.asarray(sig_codes, dtype=np.int64), p


def slicing_max_p(bucket: np.ndarray, groups: np.ndarray, skey: np.ndarray, sens: np.ndarray,
                  weights: np.ndarray | None = None) -> np.ndarray:
    """max_s p(t, s) for every row's tuple t."""
    sig, p = slicing_probabilities(bucket, groups, skey, sens, weights)
    return p.max(axis=1)[sig]


def slicing_diverse(bucket: np.ndarray, groups: np.ndarray, skey: np.ndarray, sens: np.ndarray, l: float,
                    weights: np.ndarray | None = None) -> bool:
    """Whether the sliced table is l-diverse: p(t, s) <= 1/l for every tuple t and sensitive value s."""
    return bool((slicing_max_p(bucket, groups, skey, sens, weights) <= 1.0 / l + 1e-12).all())


def _codes(values: pa.Array) -> np.ndarray:
    """Dense codes of an arrow array (NULL is a value of its own)."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    enc = pc.dictionary_encode(values, null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _rows(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def slicing_diversity_udf(buckets, groups, skeys, sens) -> pa.Array:
    """DuckDB arrow UDF ``anon_slicing_diversity(list(bucket), list([g1, g2, ...]), list(skey), list(s))``: the
    largest p(t, s) over the listed tuples (one table per input row; NULL for a NULL or empty list)."""
    b, g, k, s = (_rows(a) for a in (buckets, groups, skeys, sens))
    out = np.full(len(b), np.nan)
    for r in range(len(b)):   # one input row = one whole sliced table
        if not b[r].is_valid or len(b[r].values) == 0:
            continue
        bucket = _codes(b[r].values)
        n = len(bucket)
        inner = g[r].values
        width = len(inner[0].values) if n else 0
        flat = _codes(inner.flatten()) if width else np.zeros(0, dtype=np.int64)
        if len(flat) != n * width:
            raise ValueError("anon_slicing_diversity: every tuple needs the same number of column-group keys")
        gc = flat.reshape(n, width)
        out[r] = slicing_max_p(bucket, gc, _codes(k[r].values), _codes(s[r].values)).max()
    return pa.array(out, type=pa.float64(), mask=np.isnan(out))
