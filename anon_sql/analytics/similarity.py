"""Similar-user ranking and classes of k similar users by cosine similarity (seed 002, spec/03 §2).

Construction (no N×N matrix): users are encoded as vectors (:func:`encode_qis`), identical QI tuples are collapsed,
and the distinct tuples are ranked by a greedy nearest-neighbour walk on the unit sphere — start at the tuple least
similar to the mean direction, then always step to the most cosine-similar tuple not yet visited (scikit-learn
``NearestNeighbors`` on L2-normalized vectors, whose Euclidean order is the cosine order; neighbour lists are
fetched in one batch and re-queried only when a neighbourhood is used up). Records follow their tuple's rank (a
seeded shuffle among identical records) and the ranking is cut into N // k classes of k consecutive records, the last
class taking the remainder.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from ..errors import PolicyError
from ..data.taxonomy import Taxonomy

ONE_HOT_MAX = 64      # a taxonomy level with more distinct values is encoded as one ordinal (taxonomy order) feature
NEIGHBOURS = 16       # neighbours fetched per tuple in the first batch


def _scaled(x: np.ndarray) -> np.ndarray:
    """Min-max scaling to [0, 1] (NaN kept); a constant column becomes 0."""
    lo, hi = np.nanmin(x), np.nanmax(x)
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _level_block(codes: np.ndarray, n_values: int) -> np.ndarray:
    """One-hot of a level's codes (NULL = its own code), or one ordinal feature when the level has many values."""
    if n_values <= ONE_HOT_MAX:
        return np.eye(n_values, dtype=np.float64)[codes]
    return (codes / max(n_values - 1, 1)).astype(np.float64)[:, None]


def _text(values: pd.Series) -> pd.Series:
    """Values as text (object dtype), NULL as None: taxonomies match values as text."""
    s = pd.Series(values)
    return s.astype("string").astype(object).where(s.notna(), None)


def encode_qis(frame: pd.DataFrame, taxonomies: Mapping[str, Taxonomy] | None = None,
               numeric: Mapping[str, Sequence[float] | np.ndarray] | None = None, use_taxonomy: bool = True,
               weights: Mapping[str, float] | None = None) -> np.ndarray:
    """Feature vectors for cosine similarity, one row per record (spec/03 §2).

    ``frame`` holds the QI values as the taxonomies see them (text); ``numeric`` the values of the numeric QIs
    (default: the frame's numeric-dtype columns). Numeric QIs: min-max scaled value (NULL → 0 plus a NULL indicator);
    categorical QIs: one-hot of the value (ordinal in sorted order beyond ``ONE_HOT_MAX`` values). With
    ``use_taxonomy``, a QI with a taxonomy also gets the one-hot of its ancestors below the top, so users of one
    subtree are more alike. Each QI block has norm <= sqrt(weight) (weight 1 unless ``weights``), and a constant 1
    keeps every vector non-zero (and the cosine of single numbers meaningful).
    """
    taxonomies = taxonomies or {}
    if numeric is None:
        numeric = {q: frame[q] for q in frame.columns
                   if pd.api.types.is_numeric_dtype(frame[q]) and not pd.api.types.is_bool_dtype(frame[q])}
    blocks: list[np.ndarray] = [np.ones((len(frame), 1))]
    for q in frame.columns:
        parts: list[np.ndarray] = []
        text = _text(frame[q])
        if q in numeric:
            x = pd.to_numeric(pd.Series(numeric[q]), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            nan = np.isnan(x)
            parts.append(np.where(nan, 0.0, _scaled(x) if (~nan).any() else 0.0)[:, None])
            if nan.any():
                parts.append(nan.astype(np.float64)[:, None])
        else:
            codes, uniq = pd.factorize(text, sort=True, use_na_sentinel=False)
            parts.append(_level_block(codes, len(uniq)))
        tax = taxonomies.get(q) if use_taxonomy else None
        if tax is not None:
            lv = tax.levels
            pos = pd.Index(lv["level0"]).get_indexer(text.fillna("\x00"))
            for level in range(1, tax.height):   # the top level says nothing
                anc = lv[f"level{level}"].to_numpy(dtype=object)
                labels = pd.Series(np.where(pos >= 0, anc[np.clip(pos, 0, None)], None), dtype=object)
                codes, uniq = pd.factorize(labels, sort=True, use_na_sentinel=False)
                parts.append(_level_block(codes, len(uniq)))
        w = 1.0 if weights is None else float(weights.get(q, 0.0))
        scale = np.sqrt(max(w, 0.0) / len(parts))
        blocks.extend(p * scale for p in parts)
    return np.hstack(blocks)


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def similarity_ranking(features: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Rank distinct feature vectors by a greedy most-cosine-similar walk; returns the visiting order (indices)."""
    z = _unit(np.asarray(features, dtype=np.float64))
    m = len(z)
    if m <= 2:
        return np.arange(m)
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    start = int(np.argmin(z @ _unit((w @ z)[None, :])[0]))   # the tuple least like the average user
    neigh = NearestNeighbors().fit(z).kneighbors(z, n_neighbors=min(m, NEIGHBOURS), return_distance=False)
    members = np.arange(m)              # a superset of the unvisited tuples, compacted as the walk goes
    visited = np.zeros(m, dtype=bool)
    order = np.empty(m, dtype=np.int64)
    cur = start
    for i in range(m):                  # one step per distinct QI tuple (aggregated users, not rows)
        order[i] = cur
        visited[cur] = True
        if i == m - 1:
            break
        cand = neigh[cur]
        free = cand[~visited[cand]]
        if len(free):
            cur = int(free[0])
            continue
        # neighbourhood used up: exact cosine against the unvisited tuples (ties: lowest index)
        members = members[~visited[members]]
        cur = int(members[np.argmax(z[members] @ z[cur])])
    return order


def similarity_classes(features: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Class (0 .. N//k − 1) of each record: the similarity ranking cut into classes of k records (module doc)."""
    x = np.asarray(features, dtype=np.float64)
    n = len(x)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise PolicyError(f"k={k!r} must be a positive integer")
    if n < k:
        raise PolicyError(f"k = {k} is larger than the {n} records; no class of k similar users can be formed")
    rows = np.ascontiguousarray(x).view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True, return_counts=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[similarity_ranking(x[first], counts)] = np.arange(len(first))
    shuffle = np.random.default_rng(seed).permutation(n)      # order among identical users
    order = np.lexsort((shuffle, rank[inverse.ravel()]))
    cls = np.empty(n, dtype=np.int64)
    cls[order] = np.minimum(np.arange(n) // k, n // k - 1)
    return cls


def cosine_to_class(features: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Per record: cosine similarity to its class's mean direction (a diagnostic of class cohesion)."""
    z = _unit(np.asarray(features, dtype=np.float64))
    n_cls = int(cls.max()) + 1 if len(cls) else 0
    centre = np.zeros((n_cls, z.shape[1]))
    np.add.at(centre, cls, z)
    return np.einsum("ij,ij->i", z, _unit(centre)[cls])


__all__ = ["encode_qis", "similarity_ranking", "similarity_classes", "cosine_to_class"]
