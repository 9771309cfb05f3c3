"""``method = "upa"``: KTFS attribute selection + clustering-based k-anonymization (seed 003, spec/04 §2).

1. Attributes: the policy's quasi-identifiers, or with ``quasi = "ktfs"`` those :func:`feature_relevance` selects
   (score < δ, or listed in ``vulnerable``); the others are released unchanged and leave the release's QI set.
2. ⌊N/k⌋ centroids by k-means|| oversampling (Bahmani et al. 2012: ⌈ln ψ⌉ ≤ 5 rounds drawing records with probability
   ℓ·D²/φ, then scikit-learn's weighted k-means++ over the candidates), or ``init = "k-means++"`` over all records.
3. Lloyd iterations (scikit-learn ``KMeans``, algorithm "lloyd") on the standardized attributes.
4. Size repair: a cluster failing a privacy model (k: fewer than k records), smallest first, is merged into the cluster
   whose union has the least NCP increase.
5. ``generalize_unique_only``: inside a cluster, a value held by >= k records becomes a class of its own and keeps its
   value; the other records stay together (see :func:`refine_unique_only`).
6. Classes with >= 2k records are halved, recursively, at the weighted median position of their widest attribute.
7. Each final class is generalized by :mod:`local_values` (numeric ``[min-max]``, categorical LCA).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import pairwise_distances_argmin_min, silhouette_score
from sklearn.preprocessing import StandardScaler

from ..errors import PolicyError
from ..models import PrivacyModel, find, group_rules
from ..udfs.utility import ncp_categorical, ncp_numeric
from ..policy.keys import ListOf, Text, any_of, choice, integer, key, number
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext
from .local_values import QIColumn, class_values, load_source
from .mondrian import StatsBuilder, all_ok, check_root
from .population_points import population_points

_KTFS = ("target", "delta", "bins", "redundancy", "score", "vulnerable")
_INITS = ("kmeans||", "k-means++")
_MAX_ROUNDS = 5            # k-means|| rounds when not given: ⌈ln ψ⌉, at most this many
_SILHOUETTE_SAMPLE = 10_000


# -- clustering --------------------------------------------------------------------------------------------------
def features(columns: Sequence[QIColumn], weights: np.ndarray) -> np.ndarray:
    """The standardized clustering matrix: numeric values (NULL → the column mean), categorical leaf-order codes."""
    parts = []
    for c in columns:
        if c.numeric:
            x = c.x.copy()
            nan = np.isnan(x)
            x[nan] = float(np.average(x[~nan], weights=weights[~nan])) if (~nan).any() else 0.0
        else:
            x = c.order.astype(np.float64)
        parts.append(x)
    return StandardScaler().fit_transform(np.column_stack(parts), sample_weight=weights)


def kmeans_parallel(X: np.ndarray, weights: np.ndarray, n_clusters: int, seed: int, oversampling: float = 2.0,
                    rounds: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """k-means|| centroids: one weighted random record, then rounds drawing each record with probability
    min(1, ℓ·w·D²/φ) (ℓ = oversampling · n_clusters); candidates are weighted by the records nearest to them and
    reduced to ``n_clusters`` centroids by scikit-learn's weighted k-means++."""
    rng = np.random.default_rng(seed)
    n = len(X)
    chosen = np.zeros(n, dtype=bool)
    first = int(rng.choice(n, p=weights / weights.sum()))
    chosen[first] = True
    d2 = np.sum((X - X[first]) ** 2, axis=1)
    psi = float(weights @ d2)
    if rounds is None:
        rounds = int(min(_MAX_ROUNDS, max(1, math.ceil(math.log(psi))))) if psi > 1 else 1
    ell = oversampling * n_clusters
    for _ in range(rounds):
        phi = float(weights @ d2)
        if phi <= 0:
            break
        draw = rng.random(n) < np.minimum(1.0, ell * weights * d2 / phi)
        new = np.flatnonzero(draw & ~chosen)
        if len(new) == 0:
            continue
        chosen[new] = True
        _, dist = pairwise_distances_argmin_min(X, X[new])
        d2 = np.minimum(d2, dist ** 2)
    cand = np.flatnonzero(chosen)
    nearest, _ = pairwise_distances_argmin_min(X, X[cand])
    cw = np.bincount(nearest, weights=weights, minlength=len(cand))
    info: dict[str, Any] = {"init": "kmeans||", "init_rounds": rounds, "init_candidates": int(len(cand))}
    if np.count_nonzero(cw) < n_clusters:
        info["init_fallback"] = "k-means++ over all records (fewer candidates than centroids)"
        centers, _ = kmeans_plusplus(X, n_clusters, sample_weight=weights, random_state=seed)
        return centers, info
    keep = cw > 0
    centers, _ = kmeans_plusplus(X[cand[keep]], n_clusters, sample_weight=cw[keep], random_state=seed)
    return centers, info


def lloyd(X: np.ndarray, weights: np.ndarray, k: int, seed: int, init: str = "kmeans||", oversampling: float = 2.0,
          rounds: int | None = None, max_iter: int = 300, tol: float = 1e-4) -> tuple[np.ndarray, dict[str, Any]]:
    """Cluster labels (0..m−1) from ⌊W/k⌋ centroids (W = total weight; at most the number of distinct records)."""
    distinct = len(np.unique(X, axis=0))
    n_clusters = int(max(1, min(weights.sum() // k, distinct)))
    if n_clusters == 1:
        return np.zeros(len(X), dtype=np.int64), {"init": init, "centroids": 1, "kmeans_iterations": 0}
    if init == "kmeans||":
        centers, info = kmeans_parallel(X, weights, n_clusters, seed, oversampling, rounds)
    else:
        centers, info = "k-means++", {"init": "k-means++"}
    km = KMeans(n_clusters, init=centers, n_init=1, max_iter=max_iter, tol=tol, random_state=seed,
                algorithm="lloyd").fit(X, sample_weight=weights)
    _, labels = np.unique(km.labels_, return_inverse=True)
    info.update(centroids=n_clusters, kmeans_iterations=int(km.n_iter_))
    return labels.astype(np.int64), info


# -- NCP of classes ----------------------------------------------------------------------------------------------
@dataclass
class Summary:
    """What NCP needs of a class on one attribute: numeric min/max value and NULL/non-NULL flags, categorical the
    min/max leaf rank (leaves are in depth-first order, so their LCA is that of the two)."""

    lo: np.ndarray
    hi: np.ndarray
    nul: np.ndarray | None = None
    val: np.ndarray | None = None

    def take(self, idx) -> "Summary":
        pick = (lambda a: None if a is None else a[idx])
        return Summary(self.lo[idx], self.hi[idx], pick(self.nul), pick(self.val))

    def union(self, other: "Summary") -> "Summary":
        if self.nul is not None:
            return Summary(np.fmin(self.lo, other.lo), np.fmax(self.hi, other.hi), self.nul | other.nul,
                           self.val | other.val)
        return Summary(np.minimum(self.lo, other.lo), np.maximum(self.hi, other.hi))


def summarize_segments(columns: Sequence[QIColumn], rows: np.ndarray, starts: np.ndarray) -> list[Summary]:
    """Per attribute, the summary of each segment of ``rows`` (rows grouped contiguously, ``starts`` offsets)."""
    out = []
    for c in columns:
        if c.numeric:
            x = c.x[rows]
            nan = np.isnan(x).astype(np.int8)
            with np.errstate(invalid="ignore"):
                out.append(Summary(np.fmin.reduceat(x, starts), np.fmax.reduceat(x, starts),
                                   np.maximum.reduceat(nan, starts) > 0, np.minimum.reduceat(nan, starts) == 0))
        else:
            o = c.order[rows]
            out.append(Summary(np.minimum.reduceat(o, starts), np.maximum.reduceat(o, starts)))
    return out


def ncp_penalties(columns: Sequence[QIColumn], summaries: Sequence[Summary], spans: Sequence[float] | None = None) -> np.ndarray:
    """Normalized certainty penalty per class and attribute (classes × attributes): numeric (max − min) / global range
    (1 when NULL and non-NULL mix, as the class is then released as ``*``); categorical (leaves under the LCA − 1) /
    (leaves − 1). ``spans``: the global ranges, when already known."""
    cols = []
    spans = [c.span for c in columns] if spans is None else spans
    for c, s, span in zip(columns, summaries, spans):
        if c.numeric:
            with np.errstate(invalid="ignore"):
                cols.append(ncp_numeric(s.hi - s.lo, span, s.nul & s.val))
        else:
            level, code = c.lca(s.lo, s.hi)
            leaves = np.empty(len(level), dtype=np.float64)
            for lv in np.unique(level):
                m = level == lv
                leaves[m] = c.leaves[lv][code[m]]
            cols.append(ncp_categorical(leaves, c.total_leaves))
    return np.column_stack(cols) if cols else np.zeros((0, 0))


def _segments(cls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by class (stable): (rows, class of each segment, segment starts)."""
    rows = np.argsort(cls, kind="stable")
    c = cls[rows]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    return rows, c[starts], starts


# -- size repair -------------------------------------------------------------------------------------------------
def merge_failing(cls: np.ndarray, columns: Sequence[QIColumn], weights: np.ndarray,
                  models: Sequence[PrivacyModel], stats: StatsBuilder) -> tuple[np.ndarray, int]:
    """Merge every class that fails a model (smallest first, ties: lowest id) into the class whose union has the
    least increase of total NCP (|G| · Σ NCP); ties go to the lowest class id. Returns (classes, merges)."""
    cls = np.unique(cls, return_inverse=True)[1].reshape(-1).astype(np.int64)   # 0..m−1, none empty
    rows, _, starts = _segments(cls)
    m = int(cls.max()) + 1
    summ = summarize_segments(columns, rows, starts)
    size = np.bincount(cls, weights=weights, minlength=m)
    spans = [c.span for c in columns]
    total = size * ncp_penalties(columns, summ, spans).sum(axis=1)
    ok = all_ok(models, stats.build(np.arange(len(cls)), cls, m))
    alive = np.ones(m, dtype=bool)
    merges = 0
    while True:
        bad = np.flatnonzero(alive & ~ok)
        if len(bad) == 0 or alive.sum() == 1:
            break
        g = int(bad[np.argmin(size[bad])])
        idx = np.flatnonzero(alive)
        idx = idx[idx != g]
        union = [s.take(idx).union(s.take(np.full(len(idx), g))) for s in summ]
        grown = (size[idx] + size[g]) * ncp_penalties(columns, union, spans).sum(axis=1)
        best = int(idx[np.argmin(grown - total[idx] - total[g])])
        for j, s in enumerate(summ):
            u = union[j].take(np.flatnonzero(idx == best))
            s.lo[best], s.hi[best] = u.lo[0], u.hi[0]
            if s.nul is not None:
                s.nul[best], s.val[best] = u.nul[0], u.val[0]
        cls[cls == g] = best
        size[best] += size[g]
        total[best] = size[best] * ncp_penalties(columns, [s.take([best]) for s in summ], spans).sum()
        alive[g] = False
        members = np.flatnonzero(cls == best)
        ok[best] = all_ok(models, stats.build(members, np.zeros(len(members), dtype=np.int64), 1))[0]
        merges += 1
    _, cls = np.unique(cls, return_inverse=True)
    return cls.astype(np.int64), merges


def split_large(cls: np.ndarray, columns: Sequence[QIColumn], weights: np.ndarray, k: int,
                models: Sequence[PrivacyModel], stats: StatsBuilder) -> tuple[np.ndarray, int]:
    """Halve every class with >= 2k records at the weighted median position along its widest attribute (largest NCP,
    ties: the earlier attribute; equal values ordered by row), recursively, vectorized over the classes of a level;
    a halving whose halves fail a model is not made. Returns (classes, splits)."""
    cls = cls.copy()
    done = np.zeros(int(cls.max()) + 1, dtype=bool)
    spans = [c.span for c in columns]
    splits = 0
    while True:
        m = int(cls.max()) + 1
        done = np.r_[done, np.zeros(m - len(done), dtype=bool)]
        size = np.bincount(cls, weights=weights, minlength=m)
        is_open = (size >= 2 * k) & ~done
        if not is_open.any() or not columns:
            break
        sel = np.flatnonzero(is_open[cls])
        rows = sel[np.argsort(cls[sel], kind="stable")]
        c = cls[rows]
        starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        ids = c[starts]
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(rows)]))
        attr = np.argmax(ncp_penalties(columns, summarize_segments(columns, rows, starts), spans), axis=1)
        key = np.empty(len(rows), dtype=np.int64)
        for j in np.unique(attr):
            on = attr[seg] == j
            key[on] = columns[j].order[rows[on]]
        o = np.lexsort((rows, key, seg))
        rows, seg = rows[o], seg[o]
        wt = weights[rows]
        cum = np.cumsum(wt)
        first = np.r_[0, np.flatnonzero(np.diff(seg)) + 1]
        offset = (cum[first] - wt[first])[seg]
        before = cum - wt - offset
        half = np.bincount(seg, weights=wt) / 2.0
        right = (before >= half[seg]).astype(np.int64)
        ok = all_ok(models, stats.build(rows, seg * 2 + right, 2 * len(starts))).reshape(-1, 2).all(axis=1)
        done[ids[~ok]] = True
        move = (right == 1) & ok[seg]
        cls[rows[move]] = m + seg[move]
        splits += int(ok.sum())
    _, cls = np.unique(cls, return_inverse=True)
    return cls.astype(np.int64), splits


# -- generalize_unique_only --------------------------------------------------------------------------------------
def refine_unique_only(cls: np.ndarray, codes: np.ndarray, weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Split each class by one attribute's value codes: a value held by >= k records of the class becomes a class of
    its own (its records keep the value); the other records stay together as the class's rest. When the rest would
    hold fewer than k records (but some), kept values rejoin it — fewest records first, then lowest code — until it
    holds k. Returns (new class of each row, 0..m'−1 in (class, code) order; whether the row's value is kept)."""
    cls = np.asarray(cls, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    m = int(cls.max()) + 1
    nv = int(codes.max()) + 1
    key = cls * nv + codes
    uniq, inv = np.unique(key, return_inverse=True)
    pcls, pcode = uniq // nv, uniq % nv
    pcnt = np.bincount(inv, weights=weights)
    kept = pcnt >= k
    size = np.bincount(cls, weights=weights, minlength=m)
    rest = size - np.bincount(pcls, weights=np.where(kept, pcnt, 0.0), minlength=m)
    short = (rest > 0) & (rest < k)
    cand = np.flatnonzero(kept & short[pcls])
    if len(cand):
        o = cand[np.lexsort((pcode[cand], pcnt[cand], pcls[cand]))]
        cum = np.cumsum(pcnt[o])
        first = np.r_[0, np.flatnonzero(np.diff(pcls[o])) + 1]
        start = np.repeat(cum[first] - pcnt[o][first], np.diff(np.r_[first, len(o)]))
        before = cum - pcnt[o] - start
        kept[o[before < k - rest[pcls[o]]]] = False
    row_kept = kept[inv]
    # rest of class c → (c, −1) sorts before its kept values (c, code)
    sub = np.where(row_kept, codes, -1)
    _, new = np.unique(np.column_stack([cls, sub]), axis=0, return_inverse=True)
    return new.reshape(-1).astype(np.int64), row_kept


# -- the method ----------------------------------------------------------------------------------------------------
def _jsonable(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for rec in frame.to_dict("records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else
                        v.item() if hasattr(v, "item") else v) for k, v in rec.items()})
    return out


@register_method
class UPA(Method):
    """Clustering-based k-anonymization with optional KTFS attribute selection (see the module docstring)."""

    name = "upa"
    parameters = (
        key("quasi", choice("policy", "ktfs"), "generalize every quasi-identifier (`policy`) or those KTFS feature "
            "relevance chooses (`ktfs`)", "policy"),
        key("target", Text(what="column name"), "KTFS: the class attribute whose relevance decides (quasi = \"ktfs\")"),
        key("delta", number(ge=0, le=1), "KTFS: features with relevance score < delta are generalized", 0.2),
        key("bins", integer(ge=2), "KTFS: equal-frequency bins of numeric columns for symmetrical uncertainty", 10),
        key("redundancy", number(gt=0, le=1), "KTFS: |τ_b| at which a feature is redundant", 0.8),
        key("score", choice("kendall", "spearman"), "KTFS: the relevance score", "kendall"),
        key("vulnerable", ListOf(Text(what="column name")), "KTFS: features generalized whatever their score"),
        key("generalize_unique_only", any_of(Text(what="column name"), ListOf(Text(what="column name"))),
            "attributes generalized only in classes where they are unique"),
        key("init", choice(*_INITS), "k-means initialisation", "kmeans||"),
        key("oversampling", number(gt=0), "k-means|| oversampling factor", 2.0),
        key("rounds", integer(ge=1), "k-means|| rounds (default ⌈ln ψ⌉, at most 5)"),
        key("max_iter", integer(ge=1), "k-means iterations", 300),
        key("tol", number(ge=0), "k-means tolerance", 1e-4),
    )
    plan_kind = "assignment"
    needs_taxonomies = False
    plans_population = True

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.quasi = self.param("quasi")
        given = [p for p in _KTFS if p in params]
        if self.quasi != "ktfs" and given:
            raise PolicyError(f"method 'upa': {given} only apply with method_params.quasi = \"ktfs\"; add it or "
                              "remove them")
        if self.quasi == "ktfs" and "target" not in params:
            raise PolicyError("method 'upa': quasi = \"ktfs\" needs method_params.target, the class attribute whose "
                              "relevance decides which quasi-identifiers are generalized (e.g. target = \"class\")")
        self.delta = self.param("delta")
        self.ktfs = {p: params[p] for p in ("bins", "redundancy", "score", "vulnerable") if p in params}
        unique_only = params.get("generalize_unique_only", [])
        self.unique_only = list(dict.fromkeys([unique_only] if isinstance(unique_only, str) else unique_only))
        self.init, self.oversampling, self.rounds = self.param("init"), self.param("oversampling"), self.param("rounds")
        self.max_iter, self.tol = self.param("max_iter"), self.param("tol")

    def select(self, ctx: MethodContext) -> tuple[list[str], list[dict[str, Any]] | None]:
        """The quasi-identifiers to generalize (policy order) and, for KTFS, the relevance table."""
        policy = ctx.policy
        if self.quasi == "policy":
            return list(policy.quasi), None
        from ..analytics.relevance import feature_relevance

        table = feature_relevance(ctx.con, ctx.source_view, policy.quasi, self.params["target"], self.delta,
                                  **self.ktfs)
        chosen = set(table.loc[table["selected_for_anonymization"], "attribute"])
        selected = [q for q in policy.quasi if q in chosen]
        if not selected:
            raise PolicyError(f"method 'upa': KTFS selected no quasi-identifier (every score >= delta = {self.delta}"
                              " or redundant); raise delta, list attributes in vulnerable, or use quasi = \"policy\"")
        return selected, _jsonable(table.rename(columns={"selected_for_anonymization": "selected"}))

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        policy, k, seed = ctx.policy, find(ctx.models, "k_anonymity").k, int(ctx.policy.seed)
        selected, relevance = self.select(ctx)
        outside = [a for a in self.unique_only if a not in selected]
        if outside:
            raise PolicyError(f"method 'upa': generalize_unique_only names {outside}, which are not generalized "
                              f"(generalized: {selected}); list them in vulnerable = [...] or remove them")
        for r in group_rules(ctx.models):
            if set(r.quasi) - set(selected):
                raise PolicyError(f"privacy.requirements names {sorted(set(r.quasi) - set(selected))}, which UPA "
                                  f"releases unchanged (generalized: {selected}); drop the requirement or those names")
        data = load_source(ctx)
        columns = [c for c in data.columns if c.name in selected]
        # k-map / δ-presence: the population matched on the generalized QIs (the unchanged ones are checked, as
        # released, by the verification)
        stats = StatsBuilder.from_source(data, ctx.models, population_points(ctx, columns))
        check_root(ctx.models, stats)
        ctx.progress("upa: clustering")
        X = features(columns, data.weights)
        labels, info = lloyd(X, data.weights, k, seed, self.init, self.oversampling, self.rounds, self.max_iter,
                             self.tol)
        ctx.progress("upa: size repair")
        cls, merges = merge_failing(labels, columns, data.weights, ctx.models, stats)
        kept_info = {}
        for name in self.unique_only:
            c = next(col for col in columns if col.name == name)
            new, kept = refine_unique_only(cls, c.order, data.weights, k)
            fail = ~all_ok(ctx.models, stats.build(np.arange(data.n), new, int(new.max()) + 1))
            if fail.any():   # a class whose refinement fails a model stays whole
                kept &= ~np.isin(cls, np.unique(cls[fail[new]]))
                new = np.unique(np.column_stack([cls, np.where(kept, c.order, -1)]), axis=0,
                                return_inverse=True)[1].reshape(-1)
            kept_info[name] = {"records_kept": int(data.weights[kept].sum()),
                               "values_kept": int(len(np.unique(np.column_stack([cls[kept], c.order[kept]]), axis=0)))}
            cls = new.astype(np.int64)
        clusters_before_split = int(cls.max()) + 1
        cls, splits = split_large(cls, columns, data.weights, k, ctx.models, stats)
        # ec ids 1.. in the order of each class's first row
        _, first = np.unique(cls, return_index=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        ec = rank[cls] + 1
        sizes = np.bincount(ec, weights=data.weights)[1:]
        info.update(
            released_unchanged=[q for q in policy.quasi if q not in selected],
            selection=self.quasi,
            merges=merges,
            splits=splits,
            clusters=int(len(sizes)),
            clusters_before_split=clusters_before_split,
            cluster_size={"min": float(sizes.min()), "median": float(np.median(sizes)), "max": float(sizes.max())},
            silhouette=_silhouette(X, ec, seed),
        )
        if relevance is not None:
            info.update(relevance=relevance, delta=self.delta)
        if kept_info:
            info["unique_only"] = kept_info
        assignment = pd.DataFrame({ROW_ID: data.rows, "ec_id": ec})
        return AssignmentPlan(assignment, class_values(ec, columns), None, info, released_quasi=selected)


def _silhouette(X: np.ndarray, labels: np.ndarray, seed: int) -> float | None:
    """scikit-learn's silhouette (Euclidean, standardized attributes), on a seeded sample above 10,000 records."""
    n_labels = len(np.unique(labels))
    if not 2 <= n_labels <= len(X) - 1:
        return None
    sample = _SILHOUETTE_SAMPLE if len(X) > _SILHOUETTE_SAMPLE else None
    return float(silhouette_score(X, labels, sample_size=sample, random_state=seed))


__all__ = ["UPA", "features", "kmeans_parallel", "lloyd", "merge_failing", "ncp_penalties", "refine_unique_only",
           "split_large", "summarize_segments"]
