"""l-diverse slicing (seed 001 Algorithms 2–4; Li, Li, Zhang & Molloy, TKDE 2012): the column-formation pieces.

* :func:`phi2` — mean-square contingency coefficient (Cramér's V² = χ²/(N (min(d1, d2) − 1)), scipy) of two coded attributes;
* :func:`correlation_matrix` — φ² of every attribute pair from ``GROUP BY`` counts computed in DuckDB, numeric
  attributes discretized into equal-width bins;
* :func:`pam` — k-medoids (PAM build + swap) on the small attribute distance matrix 1 − φ²;
* the l-diversity check p(t, s) <= 1/l lives in the kernel ``anon_sql.udfs.slicing``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency
from sqlglot import exp

from ..errors import PolicyError, PrivacyRequirementError
from ..models import DistinctLDiversity, KAnonymity
from ..models.base import ClassStats, sorted_counts
from ..sqlbuild import alias, col, lit, render, table as table_ref
from ..udfs.slicing import slicing_max_p
from . import register
from .base import ROW_ID, AssignmentPlan, Method, MethodContext
from .local_values import load_source
from .mondrian import StatsBuilder, partition


def phi2(table: np.ndarray) -> float:
    """φ²(R1, R2) = Σ (f_ij − f_i f_j)² / (f_i f_j) / (min(d1, d2) − 1) of a contingency table of counts; 0 when an
    attribute has a single value (it carries no information about the other)."""
    t = np.asarray(table, dtype=np.float64)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    if min(t.shape) < 2:
        return 0.0
    chi2 = chi2_contingency(t, correction=False)[0]   # counts may be fractional (count column)
    return float(min(1.0, chi2 / t.sum() / (min(t.shape) - 1)))


def _binned(attr: str, numeric: bool, bins: int, lo: float | None, hi: float | None) -> exp.Expression:
    """An attribute's value for the contingency table: text, or the equal-width bin of a numeric value."""
    if not numeric or lo is None or hi is None or hi == lo:
        return exp.Cast(this=col(attr), to=exp.DataType.build("VARCHAR"))
    width = (hi - lo) / bins
    raw = exp.Floor(this=exp.Div(this=exp.Paren(this=exp.Sub(this=col(attr), expression=lit(lo))),
                                 expression=lit(width)))
    return exp.Cast(this=exp.Least(this=lit(bins - 1), expressions=[raw]), to=exp.DataType.build("VARCHAR"))


def correlation_matrix(con, relation: str, attrs: Sequence[str], numeric: Sequence[str] = (), bins: int = 10,
                       weight: str | None = None) -> np.ndarray:
    """φ² of every attribute pair of ``relation`` (one GROUP BY count query per pair, in DuckDB)."""
    table = table_ref(relation)
    bounds: dict[str, tuple[float | None, float | None]] = {}
    for a in attrs:
        if a in numeric:
            lo, hi = con.execute(render(exp.select(exp.Min(this=col(a)), exp.Max(this=col(a)))
                                        .from_(table.copy()))).fetchall()[0]
            bounds[a] = (None if lo is None else float(lo), None if hi is None else float(hi))
    w = exp.Sum(this=col(weight)) if weight else exp.Count(this=exp.Star())
    m = len(attrs)
    out = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            a, b = attrs[i], attrs[j]
            xa = _binned(a, a in numeric, bins, *bounds.get(a, (None, None)))
            xb = _binned(b, b in numeric, bins, *bounds.get(b, (None, None)))
            q = (exp.select(alias(xa, "a"), alias(xb, "b"), alias(w, "n")).from_(table.copy())
                 .group_by(xa.copy(), xb.copy()))
            rows = con.execute(render(q)).fetchall()
            ua = {v: k for k, v in enumerate(sorted({r[0] for r in rows}, key=str))}
            ub = {v: k for k, v in enumerate(sorted({r[1] for r in rows}, key=str))}
            ct = np.zeros((len(ua), len(ub)))
            ct[[ua[r[0]] for r in rows], [ub[r[1]] for r in rows]] = [float(r[2]) for r in rows]
            out[i, j] = out[j, i] = phi2(ct)
    return out


def pam(dist: np.ndarray, c: int, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Partitioning around medoids (Kaufman & Rousseeuw): greedy BUILD, then SWAP while the total distance to the
    nearest medoid decreases. Returns (cluster label per point, medoid indices). Deterministic (ties: lowest index)."""
    d = np.asarray(dist, dtype=np.float64)
    m = len(d)
    if not 1 <= c <= m:
        raise ValueError(f"columns (c) must be between 1 and the number of attributes ({m}), got {c}")
    medoids = [int(np.argmin(d.sum(axis=1)))]
    while len(medoids) < c:
        near = d[:, medoids].min(axis=1)
        gain = np.maximum(near[None, :] - d, 0).sum(axis=1)   # gain[i]: cost drop when point i becomes a medoid
        gain[medoids] = -np.inf
        medoids.append(int(np.argmax(gain)))

    def cost(ms: Sequence[int]) -> float:
        return float(d[:, list(ms)].min(axis=1).sum())

    best = cost(medoids)
    for _ in range(max_iter):
        improved = False
        for pos in range(c):
            for h in range(m):
                if h in medoids:
                    continue
                trial = medoids.copy()
                trial[pos] = h
                ct = cost(trial)
                if ct < best - 1e-12:
                    best, medoids, improved = ct, trial, True
        if not improved:
            break
    medoids_arr = np.array(medoids)
    labels = np.argmin(d[:, medoids_arr], axis=1)
    return labels, medoids_arr


def form_columns(phi: np.ndarray, attrs: Sequence[str], sensitive: str, c: int, alpha: int = 2) -> list[list[str]]:
    """Column groups: PAM on 1 − φ², then the sensitive column (last) topped up to ``alpha`` attributes with the QIs
    most correlated with S. Empty groups are dropped; the order inside a group follows ``attrs``."""
    labels, _ = pam(1.0 - phi, c)
    si = list(attrs).index(sensitive)
    for j in np.argsort(-phi[si], kind="stable"):
        if int((labels == labels[si]).sum()) >= alpha:
            break
        if j != si and labels[j] != labels[si]:
            labels[j] = labels[si]
    groups = [[a for a, g in zip(attrs, labels) if g == lab] for lab in dict.fromkeys(labels.tolist())]
    sens = next(g for g in groups if sensitive in g)
    return [g for g in groups if g is not sens and g] + [sens]


def group_codes(codes: dict[str, np.ndarray], group: Sequence[str], n: int) -> np.ndarray:
    """One code per row for the value combination of ``group`` (all 0 for an empty group)."""
    if not group:
        return np.zeros(n, dtype=np.int64)
    stacked = np.stack([codes[a] for a in group], axis=1)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def permute_within_buckets(bucket: np.ndarray, seed: int, groups: int) -> list[np.ndarray]:
    """For each of ``groups`` column groups, the source row (index) whose values row i receives: an independent
    uniform permutation inside every bucket (seeded)."""
    rng = np.random.default_rng(seed)
    n = len(bucket)
    base = np.lexsort((np.arange(n), bucket))
    out = []
    for _ in range(groups):
        order = np.lexsort((rng.random(n), bucket))
        src = np.empty(n, dtype=np.int64)
        src[base] = order
        out.append(src)
    return out


class BucketFrequency(DistinctLDiversity):
    """Partitioning guide: the most frequent sensitive value holds at most 1/l of the bucket. With C_c = {S} this
    bounds every p(t, s) (a mix of bucket frequencies) by 1/l; otherwise the exact check still decides."""

    name = "slicing_bucket_frequency"

    def check(self, stats: ClassStats) -> np.ndarray:
        cls, cnt, rank = sorted_counts(stats.sensitive[self.attribute])
        top = np.bincount(cls, weights=np.where(rank == 1, cnt, 0), minlength=stats.n_classes)
        return top * self.l <= stats.sizes * (1 + 1e-12)


@register
class Slicing(Method):
    """l-diverse slicing: ``[method_params] columns`` (c, default 2), ``sensitive_column_size`` (α, default 2),
    ``bins`` (φ² discretization of numeric attributes, default 10); ``[privacy] l_diversity = { kind = "slicing",
    l = ... }`` and k = minimum bucket size."""

    name = "slicing"
    plan_kind = "assignment"
    needs_taxonomies = False
    _PARAMS = ("columns", "sensitive_column_size", "bins")
    params_allowed = _PARAMS

    def __init__(self, **params: Any):
        super().__init__(**params)
        for name, default in zip(self._PARAMS, (2, 2, 10)):
            v = params.get(name, default)
            if not isinstance(v, int) or v < 1:
                raise PolicyError(f"method_params.{name} must be a positive integer, got {v!r}")
            setattr(self, name, v)

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        policy = ctx.policy
        if len(policy.sensitive) != 1:
            raise PolicyError("method 'slicing' needs exactly one sensitive attribute (role = \"sensitive\"), "
                              f"got {list(policy.sensitive)}")
        ld = policy.privacy.l_diversity or {}
        if ld.get("kind") != "slicing":
            raise PolicyError('method \'slicing\' needs privacy.l_diversity = { kind = "slicing", l = ... }')
        if not isinstance(ld.get("l"), (int, float)) or ld["l"] < 1:
            raise PolicyError(f"privacy.l_diversity.l must be a number >= 1, got {ld.get('l')!r}")
        l, k = float(ld["l"]), int(policy.privacy.k or 1)
        sa = policy.sensitive[0]
        data = load_source(ctx)
        attrs = [*policy.quasi, sa]
        numeric = [c.name for c in data.columns if c.numeric]
        phi = correlation_matrix(ctx.con, ctx.source_view, attrs, numeric, self.bins, policy.count_column)
        groups = form_columns(phi, attrs, sa, min(self.columns, len(attrs)), self.sensitive_column_size)
        codes = {c.name: c.order for c in data.columns}
        codes[sa] = data.sensitive[sa]
        n = data.n
        gcodes = np.stack([group_codes(codes, g, n) for g in groups[:-1]], axis=1) if len(groups) > 1 \
            else np.zeros((n, 0), dtype=np.int64)
        skey = group_codes(codes, [a for a in groups[-1] if a != sa], n)
        # Mondrian under |B| >= k and a per-bucket frequency bound, verified exactly (Definition 10); a failing
        # partition is redone with a doubled minimum bucket size (fail closed at one bucket)
        kk, attempts = k, []
        while True:
            models = [KAnonymity(kk), BucketFrequency(sa, l)]
            stats = StatsBuilder.from_source(data, models)
            pid = partition(data.columns, models, stats, ctx.progress).pid if kk < n else np.zeros(n, np.int64)
            worst = float(slicing_max_p(pid, gcodes, skey, data.sensitive[sa], data.weights).max())
            attempts.append({"min_bucket": kk, "buckets": int(pid.max()) + 1, "max_p": worst})
            if worst <= 1.0 / l + 1e-12:
                break
            if kk >= n:
                raise PrivacyRequirementError(
                    f"slicing: even one bucket of all {n} rows has max p(t, s) = {worst:.4g} > 1/l = {1 / l:.4g}; "
                    f"column groups {groups}; no release was created: lower l, or keep fewer / coarser attributes in the "
                    "sensitive column (method_params.sensitive_column_size, columns; fixed-interval numeric QIs first)")
            kk = min(n, kk * 2)
        # release: original values, every non-sensitive column group permuted independently inside each bucket
        perms = permute_within_buckets(pid, policy.seed, len(groups) - 1)
        moved = [a for g in groups[:-1] for a in g]
        values = pd.DataFrame({ROW_ID: data.rows, "ec_id": pid + 1})
        if moved:
            items = [col(ROW_ID)] + [alias(exp.Cast(this=col(a), to=exp.DataType.build("VARCHAR")), a) for a in moved]
            frame = ctx.con.execute(render(exp.select(*items).from_(table_ref(ctx.source_view))
                                           .order_by(col(ROW_ID)))).df()
            for g, src in zip(groups[:-1], perms):
                for a in g:
                    values[a] = pd.Series(frame[a].to_numpy(dtype=object)[src], dtype="string")
        info = {"columns": groups, "l": l, "min_bucket": kk, "attempts": attempts, "max_p": worst,
                "phi2": {f"{a}|{b}": float(phi[i, j]) for i, a in enumerate(attrs) for j, b in enumerate(attrs)
                         if i < j},
                "released_quasi": [], "row_values": True}
        return AssignmentPlan(pd.DataFrame({ROW_ID: data.rows, "ec_id": pid + 1}), values, None, info)


__all__ = ["Slicing", "correlation_matrix", "form_columns", "group_codes", "pam", "permute_within_buckets", "phi2"]
