"""``method = "theta"``: θ-sensitive k-anonymity (Khan et al. 2020, Algorithm 1; spec/05 §3).

0. Check the capacity bound (:func:`capacity`); when it fails, suppress the fewest records that make it hold
   (:func:`suppression_needed`: the most frequent values levelled down, each from its most common QI combinations)
   within ``max_suppression`` (the run goes ahead either way, so a refusal names the whole budget that works).
1. Form classes: Mondrian partitions of similar QIs, split only while both halves keep enough distinct sensitive
   values for classes of k (depth-first), each dealt into classes that are diverse from the start — every value at
   most once per class, the duplicates concentrated on one value (:func:`deal_classes`); or the plain QI sort of
   the paper cut into classes of k (``order = "sorted"``; the last class absorbs the remainder).
2. For each class below θ(m) = μ·(m² − 1)/12, in order: swap its most frequent sensitive value with a value of a
   later class (within ``window`` classes, nearest first) that the class lacks (backCheck, trying that class's values
   by descending frequency), provided the later class stays >= θ (a later class below θ qualifies when its σ² does
   not drop: it is fixed in its own turn). The last class swaps only with the one before it, when neither's most
   frequent value occurs in the other (crossCheck). Classes at the same offset of segments longer than the window
   have disjoint windows, so they are processed in one vectorized step.
3. Classes still below θ get noise records (seeded): the fewest dummy records with a sensitive value absent from
   the class that lift σ² to θ. If some class cannot be lifted even so, the release fails closed (or, when the
   budget left covers them, those classes are suppressed whole by the release).
4. Generalize each final class locally (:mod:`local_values`), so moved records are covered.

Swaps are bookkept on the class × value count matrix (whole records move; which record of a value moves is drawn
with the policy's seed). σ² and θ come from ``udfs/kernels.py``, the kernel behind ``anon_theta_variance``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PolicyError, PrivacyRequirementError
from ..models import PrivacyModel, make_model
from ..models.base import find
from ..common.progress import Progress
from ..policy.keys import Text, choice, integer, key
from ..udfs import kernels
from ..udfs.utility import discernibility
from . import register_method
from .base import ROW_ID, AssignmentPlan, Method, MethodContext, single_record_sensitive
from .local_values import SourceData, class_values, load_source
from .mondrian import StatsBuilder, partition
from .slicing import drop_from_cells, group_codes, subset_column

_ORDERS = ("mondrian", "sorted")
_MAX_CELLS = 50_000_000  # classes × sensitive values held in the count matrix
_SEGMENT = 4             # lockstep segments span this many windows
_WINDOW = 256            # default: later classes a class may swap with (Adult resampled to 1M rows, k = 8, one
                         # formation: 64 → 569 noise records, 256 → 111, 1024 → 45; 0.8 s and 2.3 s more)
_MAX_SHAPES = 2_000_000   # class shapes max_excess may enumerate (about 0.5 s)
_RESCUE_MISSES = 32      # consecutive failed last-resort searches after which the rest is left to the report


def variances(counts: np.ndarray) -> np.ndarray:
    """σ² of every row of a class × value count matrix (the θ-variance kernel)."""
    r, v = counts.shape
    return kernels.theta_variance_segments(counts.ravel(), np.repeat(np.arange(r), v), r)


def theta_ok_rows(counts: np.ndarray, mu: float) -> np.ndarray:
    """σ² >= θ(m) for every row of a class × value count matrix (the θ kernel, tolerance included)."""
    r, v = counts.shape
    return kernels.theta_ok_segments(counts.ravel(), np.repeat(np.arange(r), v), r, mu)


@dataclass
class ThetaResult:
    """Outcome of the swap and noise phases over records in class order."""

    cls: np.ndarray          # final class of each record (position in the class order), 0-based
    noise_cls: np.ndarray    # class of each noise record
    noise_val: np.ndarray    # sensitive value code of each noise record
    counts: np.ndarray       # final class × value counts, noise included
    swaps: int
    below_before: int        # classes below θ before any swap
    unreachable: np.ndarray  # classes still below θ at the end


def _partner(C: np.ndarray, c: int, classes: np.ndarray, mu: float, ok: np.ndarray,
             batch: int = 1024) -> tuple[int, int, bool] | None:
    """backCheck over ``classes`` (in order of preference): the first class b holding a value v that class c lacks
    such that b stays >= θ after the swap (c gives its most frequent value u, b gives v); a b already below θ also
    qualifies when the swap does not lower its σ² (it is fixed in its own turn). Within b, v by descending count.
    Returns (b, v, b passes after the swap).

    When u is absent from b and v occurs once in b, b's multiset of counts is unchanged, so the swap qualifies
    without evaluating σ²; the kernel only judges the other candidates up to the first such class."""
    cc = C[c]
    u = int(np.argmax(cc))
    absent = cc == 0
    for lo in range(0, len(classes), batch):
        bs = classes[lo:lo + batch]
        block = C[bs]
        opts = (block > 0) & absent
        same = (block == 1) & opts & (block[:, u] == 0)[:, None]
        rows = np.flatnonzero(same.any(axis=1))
        stop = int(rows[0]) if len(rows) else len(bs) - 1
        other = opts[: stop + 1] & ~same[: stop + 1]
        bi, vi = np.nonzero(other)
        fine = after_ok = np.zeros(0, dtype=bool)
        if len(bi):
            cand = block[bi]
            idx = np.arange(len(bi))
            cand[idx, vi] -= 1
            cand[idx, u] += 1
            var = variances(np.vstack([cand, block[bi]]))
            after, now = var[: len(bi)], var[len(bi):]
            after_ok = after >= kernels.theta_threshold(cand.sum(axis=1), mu) - kernels.THETA_TOLERANCE
            fine = after_ok | (~ok[bs[bi]] & (after >= now - kernels.THETA_TOLERANCE))
        good = np.flatnonzero(fine)
        first_kernel = int(bi[good].min()) if len(good) else None
        if len(rows) and (first_kernel is None or stop <= first_kernel):
            r = stop
            g = good[bi[good] == r] if len(good) else good
            if len(g):   # at the same class, values b holds more than once come first (descending count)
                g = g[np.lexsort((vi[g], -block[r, vi[g]]))[0]]
                return int(bs[r]), int(vi[g]), bool(after_ok[g])
            return int(bs[r]), int(np.flatnonzero(same[r])[0]), bool(ok[bs[r]])
        if first_kernel is not None:
            g = good[bi[good] == first_kernel]
            g = g[np.lexsort((vi[g], -block[first_kernel, vi[g]]))[0]]
            return int(bs[first_kernel]), int(vi[g]), bool(after_ok[g])
    return None


def _swap(C: np.ndarray, c: int, b: int, give: int, take: int) -> None:
    C[c, give] -= 1
    C[c, take] += 1
    C[b, take] -= 1
    C[b, give] += 1


def swaps_needed(counts: np.ndarray, mu: float) -> np.ndarray:
    """Per class (rows of a count matrix): how many swaps — each takes one record of the most frequent value out
    and a value new to the class in — lift it to θ. The trajectory does not depend on the partners, so every
    class's trajectory goes through the kernel in one call (a fully diverse class always passes)."""
    counts = np.atleast_2d(counts)
    f = -np.sort(-counts, axis=1)                     # counts in descending order
    m = f.sum(axis=1)
    steps = m - (f > 0).sum(axis=1)
    top = int(steps.max()) if len(steps) else 0
    need = np.zeros(len(f), dtype=np.int64)
    if top == 0:
        return need
    state = np.hstack([f, np.zeros((len(f), top), dtype=f.dtype)])
    rows, owner = [], []
    live = np.flatnonzero(steps > 0)
    for j in range(top):
        live = live[steps[live] > j]
        first_max = np.argmax(state[live], axis=1)
        state[live, first_max] -= 1
        state[live, f.shape[1] + j] = 1
        rows.append(state[live].copy())
        owner.append(live)
    rows_all, owner_all = np.vstack(rows), np.concatenate(owner)
    step_all = np.concatenate([np.full(len(o), j + 1) for j, o in enumerate(owner)])
    passing = theta_ok_rows(rows_all, mu)
    need[:] = steps
    hit = np.flatnonzero(passing)
    np.minimum.at(need, owner_all[hit], step_all[hit])
    return need


def noise_needed(counts: np.ndarray, mu: float, allowed: np.ndarray) -> np.ndarray:
    """Per class (rows of a count matrix): the fewest noise records — each a distinct ``allowed`` value absent
    from the class — that lift it to θ; −1 when even all of them fall short. One kernel call for all classes."""
    counts = np.atleast_2d(counts)
    n, nv = counts.shape
    absent = ((counts == 0) & allowed[None, :]).sum(axis=1)
    need = np.full(n, -1, dtype=np.int64)
    owner = np.repeat(np.arange(n), absent)
    if len(owner) == 0:
        return need
    j = np.arange(len(owner)) - np.repeat(np.cumsum(absent) - absent, absent) + 1   # 1..absent per class
    trials = np.hstack([counts[owner], (np.arange(nv)[None, :] < j[:, None]).astype(counts.dtype)])
    hit = np.flatnonzero(theta_ok_rows(trials, mu))
    best = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(best, owner[hit], j[hit])
    found = best < np.iinfo(np.int64).max
    need[found] = best[found]
    return need


def _fix(C: np.ndarray, c: int, need: int, partners: np.ndarray, mu: float, ok: np.ndarray,
         dirty: np.ndarray) -> int:
    """Swap class c with ``partners`` (nearest first) until it reaches θ (``need`` swaps) or no partner qualifies.
    Partners whose multiset of counts changed are marked ``dirty`` (their precomputed need is stale)."""
    done = 0
    while done < need:
        found = _partner(C, c, partners, mu, ok)
        if found is None:
            break
        b, v, b_ok = found
        if C[b, v] > 1 or C[b, int(np.argmax(C[c]))] > 0:
            dirty[b] = True
        _swap(C, c, b, int(np.argmax(C[c])), v)
        ok[b] = b_ok
        done += 1
    ok[c] = done >= need
    return done


def _lockstep(C: np.ndarray, mu: float, window: int, ok: np.ndarray, need: np.ndarray) -> int:
    """backCheck swaps for all classes but the last, in order within segments of ``window`` classes and in
    lockstep across segments: the classes at the same offset of every segment have disjoint windows (the next
    ``window`` classes), so their partner searches run as one vectorized step. Rules as in :func:`_partner`."""
    n, nv = C.shape
    s_len = _SEGMENT * max(window, 1)
    steps = np.arange(1, window + 1)
    swaps = 0
    dirty = np.zeros(n, dtype=bool)
    for t in range(s_len):
        cs = np.arange(t, n - 1, s_len)
        cs = cs[~ok[cs]]
        redo = cs[dirty[cs]]
        if len(redo):
            need[redo] = swaps_needed(C[redo], mu)
        done = np.zeros(len(cs), dtype=np.int64)
        while len(cs):
            a = len(cs)
            cc = C[cs]
            u = np.argmax(cc, axis=1)
            idx = cs[:, None] + steps[None, :]
            valid = idx < n
            idx = np.minimum(idx, n - 1)
            block = C[idx]                                        # classes × window × values
            opts = (block > 0) & (cc == 0)[:, None, :] & valid[:, :, None]
            u_in_b = np.take_along_axis(block, u[:, None, None], axis=2)[:, :, 0] > 0
            same = opts & (block == 1) & ~u_in_b[:, :, None]
            has_same = same.any(axis=2)
            first_same = np.where(has_same.any(axis=1), np.argmax(has_same, axis=1), window)
            ai, wi, vi = np.nonzero(opts & ~same & (steps[None, :, None] - 1 <= first_same[:, None, None]))
            # candidates: (class, offset, value, priority) — kernel-judged ones and each class's first "same" one
            if len(ai):
                cand = block[ai, wi].copy()
                r = np.arange(len(ai))
                cand[r, vi] -= 1
                cand[r, u[ai]] += 1
                var = variances(np.vstack([cand, block[ai, wi]]))
                after, now = var[: len(ai)], var[len(ai):]
                after_ok = after >= kernels.theta_threshold(cand.sum(axis=1), mu) - kernels.THETA_TOLERANCE
                later = idx[ai, wi] % s_len > t       # not processed yet in this sweep
                fine = after_ok | (~ok[idx[ai, wi]] & later & (after >= now - kernels.THETA_TOLERANCE))
                ai, wi, vi, after_ok = ai[fine], wi[fine], vi[fine], after_ok[fine]
                prio = -block[ai, wi, vi]
            else:
                prio = after_ok = np.zeros(0, dtype=np.int64)
            sa = np.flatnonzero(first_same < window)
            sv = np.argmax(same[sa, first_same[sa]], axis=1)
            ai = np.r_[ai, sa]
            wi = np.r_[wi, first_same[sa]]
            vi = np.r_[vi, sv]
            prio = np.r_[prio, np.zeros(len(sa), dtype=np.int64)]
            b_ok = np.r_[after_ok.astype(bool), ok[idx[sa, first_same[sa]]]]
            kernel = np.r_[np.ones(len(ai) - len(sa), dtype=bool), np.zeros(len(sa), dtype=bool)]
            if len(ai) == 0:
                break
            o = np.lexsort((vi, prio, wi, ai))
            pick = o[np.r_[True, ai[o][1:] != ai[o][:-1]]]
            pa, b, v = ai[pick], idx[ai[pick], wi[pick]], vi[pick]
            c, give = cs[pa], u[pa]
            dirty[b[kernel[pick]]] = True
            C[c, give] -= 1
            C[c, v] += 1
            C[b, v] -= 1
            C[b, give] += 1
            ok[b] = b_ok[pick]
            swaps += len(c)
            done[pa] += 1
            finished = done[pa] >= need[c]
            ok[c[finished]] = True
            keep = np.zeros(a, dtype=bool)
            keep[pa[~finished]] = True                            # found a partner and still needs more
            cs, done = cs[keep], done[keep]
    return swaps


def swap_phase(C: np.ndarray, mu: float, window: int, ok: np.ndarray, allowed: np.ndarray | None = None) -> int:
    """Algorithm 1's swaps on the count matrix (in place); returns the number of swaps.

    Every class below θ but the last swaps with the next ``window`` classes (backCheck, :func:`_lockstep`); the
    last class crossChecks with the one before it. A class that even noise could not lift to θ (absent
    ``allowed`` values exhausted) may, as a last resort, swap with any class within ``8 · window``, nearest first."""
    n = C.shape[0]
    allowed = np.ones(C.shape[1], dtype=bool) if allowed is None else allowed
    need = np.zeros(n, dtype=np.int64)
    failing = np.flatnonzero(~ok)
    need[failing] = swaps_needed(C[failing], mu)
    swaps = _lockstep(C, mu, window, ok, need)
    c, p = n - 1, n - 2
    while n > 1 and not ok[c]:   # crossCheck: the last class with the class before it
        ms_n, ms_p = int(np.argmax(C[c])), int(np.argmax(C[p]))
        if C[p, ms_n] > 0 or C[c, ms_p] > 0:
            break
        cand = C[p].copy()
        cand[ms_p] -= 1
        cand[ms_n] += 1
        if not theta_ok_rows(cand[None, :], mu)[0]:
            break
        _swap(C, c, p, ms_n, ms_p)
        swaps += 1
        ok[[c, p]] = theta_ok_rows(C[[c, p]], mu)
    dirty = np.zeros(n, dtype=bool)
    failing = np.flatnonzero(~ok)
    misses = 0
    for c in failing[noise_needed(C[failing], mu, allowed) < 0]:
        c = int(c)
        near = np.arange(max(c - 8 * window, 0), min(c + 8 * window + 1, n))
        near = near[np.argsort(np.abs(near - c), kind="stable")][1:]
        swaps += _fix(C, c, int(swaps_needed(C[c], mu)[0]), near, mu, ok, dirty)
        misses = 0 if ok[c] or noise_needed(C[c:c + 1], mu, allowed)[0] >= 0 else misses + 1
        if misses >= _RESCUE_MISSES:   # the data cannot supply these classes: stop searching, report them
            break
    return swaps


def noise_phase(C: np.ndarray, mu: float, ok: np.ndarray, weights: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """addNoise: for each class below θ, the fewest absent values that lift it to θ, drawn without replacement with
    probability ∝ ``weights`` (an exponential race on seeded uniforms)."""
    fail = np.flatnonzero(~ok)
    allowed = weights > 0
    need = noise_needed(C[fail], mu, allowed)
    fail, need = fail[need > 0], need[need > 0]
    if len(fail) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ci, vi = np.nonzero((C[fail] == 0) & allowed[None, :])
    race = -np.log(rng.random(len(ci))) / weights[vi]
    o = np.lexsort((vi, race, ci))
    ci, vi = ci[o], vi[o]
    first = np.flatnonzero(np.r_[True, ci[1:] != ci[:-1]])
    rank = np.arange(len(ci)) - np.repeat(first, np.diff(np.r_[first, len(ci)]))
    take = rank < need[ci]
    cls, val = fail[ci[take]], vi[take]
    np.add.at(C, (cls, val), 1)
    ok[fail] = True
    return cls.astype(np.int64), val.astype(np.int64)


def realize_moves(cls0: np.ndarray, values: np.ndarray, before: np.ndarray, after: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """Turn the count changes into record moves: per value, the records a class lost (drawn with the seed) go to
    the classes that gained it, matched in class order so records travel as little as possible."""
    n, v = before.shape
    delta = (after - before).ravel()
    o = np.lexsort((rng.random(len(values)), values, cls0))
    g = cls0[o] * v + values[o]
    first = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    rank = np.arange(len(o)) - np.repeat(first, np.diff(np.r_[first, len(o)]))
    movers = o[rank < np.maximum(-delta, 0)[g]]
    gain = np.repeat(np.arange(n * v), np.maximum(delta, 0))
    mo = np.lexsort((cls0[movers], values[movers]))
    ro = np.lexsort((gain // v, gain % v))
    cls = cls0.copy()
    cls[movers[mo]] = gain[ro] // v
    return cls


def theta_anonymize(values: np.ndarray, n_values: int, k: int, mu: float, window: int = _WINDOW,
                    seed: int = 0, noise_weights: np.ndarray | None = None,
                    classes: np.ndarray | None = None) -> ThetaResult:
    """θ-sensitive classes over sensitive-value codes given in class order (steps 1–3 of the module docstring);
    ``classes``: the initial class of each record (non-decreasing, each class >= k records), else chunks of k."""
    values = np.asarray(values, dtype=np.int64)
    if classes is None:
        n_classes = max(len(values) // k, 1)
        cls0 = np.minimum(np.arange(len(values)) // k, n_classes - 1)
    else:
        cls0 = np.asarray(classes, dtype=np.int64)
        n_classes = int(cls0.max()) + 1 if len(cls0) else 1
    if n_classes * n_values > _MAX_CELLS:
        raise PolicyError(f"method 'theta': {n_classes} classes × {n_values} sensitive values is too large for the "
                          "swap phase; use a larger k or coarsen the sensitive attribute")
    before = np.bincount(cls0 * n_values + values, minlength=n_classes * n_values).reshape(n_classes, n_values)
    C = before.copy()
    ok = theta_ok_rows(C, mu)
    below = int((~ok).sum())
    rng = np.random.default_rng(seed)
    weights = (np.bincount(values, minlength=n_values).astype(float) if noise_weights is None
               else np.asarray(noise_weights, dtype=float))
    swaps = swap_phase(C, mu, window, ok, weights > 0)
    cls = realize_moves(cls0, values, before, C, rng)
    noise_c, noise_v = noise_phase(C, mu, ok, weights, rng)
    return ThetaResult(cls, noise_c, noise_v, C, swaps, below, np.flatnonzero(~ok))


def deal_classes(pid: np.ndarray, values: np.ndarray, k: int, n_values: int, grow: bool = True) -> np.ndarray:
    """Initial classes (0-based) of rows given in (partition, value, QI) order; every partition holds >= k rows.

    A partition of L records becomes n = ⌊L/k⌋ classes. With ``grow``, up to min(L mod k, n) of them take k + 1
    records (only as many as get one more distinct value, unless the partition has a distinct value for every
    record); the other records of L mod k form classes of k placed first, so they have the most later classes to
    swap with. Each value's first min(f, n) records are "singles", dealt column-major (values by descending
    frequency), so a class gets each value at most once that way; a value's further records (its excess) fill
    the remaining cells row-major, so a class's duplicates concentrate on one value — for a given number of
    distinct values the shape with the largest σ² (spec/05 §1: rank 1 carries the duplicates)."""
    n = len(pid)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    group = pid * n_values + values
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    gsize = np.diff(np.r_[first, n])
    g = np.repeat(np.arange(len(first)), gsize)
    i = np.arange(n) - first[g]                                # rank within (partition, value), QI order
    gp = pid[first]
    parts = int(pid.max()) + 1
    size = np.bincount(pid, minlength=parts)
    rows = np.maximum(size // k, 1)
    single_n = np.minimum(gsize, rows[gp])
    S = np.bincount(gp, weights=single_n, minlength=parts).astype(np.int64)
    # a class of k + 1 records needs one more distinct value: only classes that get one more single grow
    extra = np.minimum(np.maximum(size - rows * k, 0), rows) if grow else np.zeros(parts, dtype=np.int64)
    extra = np.where(S >= rows * k, extra, np.minimum(extra, S % rows))
    cells = rows * k + extra
    o = np.lexsort((values[first], -gsize, gp))                # values of a partition by descending frequency
    before = np.empty((2, len(first)), dtype=np.int64)
    for j, cnt in enumerate((single_n, gsize - single_n)):
        run = np.cumsum(cnt[o]) - cnt[o]
        before[j, o] = run - run[np.searchsorted(gp[o], gp[o])]   # exclusive sum within the partition
    A = np.minimum(S, cells)                                   # single cells; the other cells take excess
    F, a_mod = A // rows, A % rows
    # per class: capacity k (+1 for the first `extra`), singles F (+1 for the first A mod n), block = the rest
    base = np.cumsum(rows) - rows
    cls_p = np.repeat(np.arange(parts), rows)
    r = np.arange(int(rows.sum())) - base[cls_p]
    block = k + (r < extra[cls_p]) - F[cls_p] - (r < a_mod[cls_p])
    block_end = np.cumsum(block)
    block_start = block_end - block
    p = pid
    single = i < single_n[g]
    c = before[0, g] + i                                       # index among the partition's singles
    e = before[1, g] + i - single_n[g]                         # index among its excess records
    out = np.full(n, -1, dtype=np.int64)
    sc = single & (c < A[p])
    full = c < F[p] * rows[p]                                  # the full columns, then the partial one
    out[sc & full] = (base[p] + c % rows[p])[sc & full]
    out[sc & ~full] = (base[p] + c - F[p] * rows[p])[sc & ~full]
    bc = ~single & (e < (cells - A)[p])
    out[bc] = np.searchsorted(block_end, block_start[base[p[bc]]] + e[bc], side="right")
    left = out < 0                    # records beyond the partition's cells: classes of k that come first,
    m = int(left.sum())               # so they have the most later classes to swap with
    if m < k:
        out[left] = 0
        return out
    pool = m // k
    out[~left] += pool
    out[left] = np.minimum(np.arange(m) // k, pool - 1)
    return out


def min_distinct(k: int, mu: float, n_values: int) -> int:
    """The fewest distinct values a class of k records needs to reach θ(k): its best shape with d values is one
    value k − d + 1 times and d − 1 singletons (the kernel judges each d)."""
    top = min(k, n_values)
    rows = np.zeros((top, top), dtype=np.int64)
    for d in range(1, top + 1):
        rows[d - 1, 0] = k - d + 1
        rows[d - 1, 1:d] = 1
    good = np.flatnonzero(theta_ok_rows(rows, mu))
    return int(good[0]) + 1 if len(good) else top


def max_excess(k: int, mu: float, n_values: int) -> int | None:
    """The most records beyond its distinct values (r − d) that a class of r >= k real records can hold and still
    reach θ, noise records (each a distinct absent value) allowed; −1 when no class of >= k records can; None when
    the shapes are too many to enumerate (thousands of sensitive values).

    Over the best shapes: one value r − d + 1 times, d − 1 + j singletons (j noise records), which put the
    duplicates on rank 1 (tests/methods/test_theta.py checks this against every shape for 14 values). Classes of
    r records with θ(r) above (n − 1)²/4, the largest variance of ranks 1..n (Popoviciu), cannot pass."""
    v = n_values
    r_max = k
    while kernels.theta_threshold(r_max, mu) <= (v - 1) ** 2 / 4 + kernels.THETA_TOLERANCE:
        r_max += 1
    if (r_max - k) * v * v > _MAX_SHAPES:
        return None
    r, d, j = (a.ravel() for a in np.meshgrid(np.arange(k, r_max), np.arange(1, v + 1), np.arange(v),
                                               indexing="ij"))
    keep = (d <= r) & (d + j <= v)
    r, d, j = r[keep], d[keep], j[keep]
    a, top, m = r - d + 1, d + j, (r + j).astype(float)
    s1 = a + top * (top + 1) / 2 - 1                      # Σ f·x over ranks 1..top
    s2 = a + top * (top + 1) * (2 * top + 1) / 6 - 1      # Σ f·x²
    ok = s2 / m - (s1 / m) ** 2 >= kernels.theta_threshold(m, mu) - kernels.THETA_TOLERANCE
    return int((r - d)[ok].max()) if ok.any() else -1


def capacity(freq: np.ndarray, k: int, mu: float) -> int:
    """An upper bound on the records that classes of >= k real records reaching θ can hold, given the sensitive
    values' frequencies: with n <= ⌊N/k⌋ classes, value v occurs in at most min(f_v, n) of them, and a class holds
    at most :func:`max_excess` records beyond its distinct values, so N <= Σ_v min(f_v, n) + E·n is necessary."""
    freq = np.asarray(freq, dtype=np.int64)
    n = int(freq.sum()) // k
    e = max_excess(k, mu, int((freq > 0).sum()))
    if e is None:
        return int(freq.sum())     # no bound computed: claim nothing
    if e < 0 or n == 0:
        return 0
    return int(np.minimum(freq, n).sum()) + e * n


def level_take(freq: np.ndarray, r: int) -> np.ndarray:
    """Per value, the records to remove so that ``r`` records go from the most frequent values, levelling them
    down (water-filling; at the final level the values by descending frequency, then code, give one more)."""
    freq = np.asarray(freq, dtype=np.int64)
    take = np.zeros(len(freq), dtype=np.int64)
    if r <= 0:
        return take
    levels = np.arange(int(freq.max()) + 1)
    excess = np.maximum(freq[None, :] - levels[:, None], 0).sum(axis=1)   # records above each level
    level = int(levels[np.argmax(excess <= r)])                          # the lowest level not above r
    take = np.maximum(freq - level, 0)
    extra = r - int(take.sum())
    at = np.flatnonzero(freq - take >= max(level, 1))
    at = at[np.lexsort((at, -freq[at]))][:extra]
    take[at] += 1
    return take


def suppression_needed(freq: np.ndarray, k: int, mu: float, limit: int) -> tuple[int, np.ndarray] | None:
    """The fewest records r (<= ``limit``), taken from the most frequent values (:func:`level_take`), after which
    the :func:`capacity` bound no longer excludes the rest: N − r <= capacity(f − take). None when no r <= limit
    does. capacity(f − take(r)) does not grow with r, so N − capacity is a monotone map whose least fixed point is
    reached by iterating it from 0 (as for slicing's share suppression)."""
    freq = np.asarray(freq, dtype=np.int64)
    n = int(freq.sum())
    r = 0
    while r <= min(limit, n - k):
        take = level_take(freq, r)
        need = n - capacity(freq - take, k, mu)
        if need <= r:
            return r, take
        r = need
    return None


def class_order(data: SourceData, k: int, order: str, sa: str,
                mu: float) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Candidate class formations: (row indices in class order, initial class of each; None = chunks of k).

    ``mondrian``: Mondrian partitions whose every split keeps both halves θ-feasible (:class:`ThetaFeasible`), in
    depth-first order, each dealt into classes by :func:`deal_classes` — once with classes of k + 1 where they
    help and once with classes of k only (the caller keeps the one needing less noise, then the lower DCP).
    ``sorted``: the records sorted on the QIs, cut into classes of k (the paper)."""
    keys = [c.order for c in reversed(data.columns)]
    if order == "sorted":
        return [((np.lexsort(keys) if keys else np.arange(data.n)), None)]
    values = data.sensitive[sa]
    nv = len(data.sensitive_values[sa])
    stats = StatsBuilder(data.weights, {sa: values}, {sa: data.sensitive_values[sa].to_numpy()},
                         {sa: np.bincount(values, minlength=nv).astype(float)}, True)
    models: list[PrivacyModel] = [make_model("k_anonymity", k),
                                  make_model("theta_feasible", sa, k, min_distinct(k, mu, nv))]
    n = data.n
    whole = stats.build(np.arange(n), np.zeros(n, dtype=np.int64), 1)
    if not models[1].check(whole)[0]:
        # the whole table is not θ-feasible without noise: split only while both halves pass the capacity bound
        # (noise included), else keep QI locality alone and let swaps and noise do the rest
        e = max_excess(k, mu, nv)
        models = models[:1]
        capacity = make_model("theta_capacity", sa, k, e) if e is not None and e >= 0 else None
        if capacity is not None and capacity.check(whole)[0]:
            models.append(capacity)
    pid = partition(data.columns, models, stats).pid
    o = np.lexsort(keys + [values, pid])           # rows of each (partition, value) in QI order
    out = []
    for grow in (True, False):
        cls = deal_classes(pid[o], values[o], k, nv, grow)
        by = np.argsort(cls, kind="stable")
        out.append((o[by], cls[by]))
    return out


@register_method
class ThetaSensitive(Method):
    """θ-sensitive k-anonymity; ``[method_params]`` window (int, 256), order ("mondrian" | "sorted"), noise_flag."""

    name = "theta"
    parameters = (key("window", integer(ge=1), "later classes a class may swap records with", _WINDOW),
                  key("order", choice(*_ORDERS), "how records are ordered into classes", "mondrian"),
                  key("noise_flag", Text(what="column name"), "a released column marking the noise records"))
    plan_kind = "assignment"
    needs_taxonomies = False

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.window, self.order, self.noise_flag = (self.param(n) for n in ("window", "order", "noise_flag"))

    def _validate(self, ctx: MethodContext) -> tuple[float, int, str]:
        policy = ctx.policy
        theta = find(ctx.models, "theta")
        if theta is None:
            raise PolicyError("method 'theta' needs the threshold factor: [privacy] theta = { mu = 0.6 }")
        k = find(ctx.models, "k_anonymity").k
        if k < 2:
            raise PolicyError(f"method 'theta' needs privacy.k >= 2 (Algorithm 1 refuses smaller k), got {k!r}")
        sensitive = single_record_sensitive(policy, "theta", "protects", "moves single records between classes")
        if self.noise_flag and self.noise_flag in policy.attributes:
            raise PolicyError(f"method_params.noise_flag {self.noise_flag!r} is already a column of the source; "
                              "choose another name")
        return theta.mu, int(k), sensitive

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        mu, k, sa = self._validate(ctx)
        data = load_source(ctx)
        n_in = data.n
        freq = np.bincount(data.sensitive[sa], minlength=len(data.sensitive_values[sa]))
        cap = capacity(freq, k, mu)
        budget = int(np.floor(ctx.policy.privacy.max_suppression * data.n + 1e-9))
        suppressed: dict[str, Any] = {}
        if cap < data.n:
            data, suppressed = self._suppress(ctx, data, freq, cap, mu, k, sa)
        ctx.progress("theta: ordering records")
        candidates = class_order(data, k, self.order, sa, mu)
        uniques = data.sensitive_values[sa]
        weights = np.bincount(data.sensitive[sa], minlength=len(uniques)).astype(float)
        weights[uniques.isna().to_numpy()] = 0.0          # never invent NULL sensitive values
        ctx.progress("theta: swaps and noise")
        best: tuple[tuple[int, int, int], np.ndarray, ThetaResult, int] | None = None
        for i, (order, classes) in enumerate(candidates):
            ctx.progress(Progress("theta: swaps and noise", done=i, total=len(candidates), unit="candidate orders"))
            res = theta_anonymize(data.sensitive[sa][order], len(uniques), k, mu, self.window, ctx.policy.seed,
                                  weights, classes)
            sizes = res.counts.sum(axis=1)
            score = (len(res.unreachable), len(res.noise_cls), int(discernibility(sizes, 0, 0)))   # Σ |EC|²
            if best is None or score < best[0]:
                best = (score, order, res, i)
        _, order, res, chosen = best
        used = suppressed.get("records", 0)
        records = int(res.counts[res.unreachable].sum())
        if used and used + records > budget:
            raise PrivacyRequirementError(self._budget_message(ctx, freq, cap, n_in, mu, k, sa, used, res, budget))
        if len(res.unreachable) and (ctx.policy.privacy.max_suppression == 0 or records > budget):
            raise PrivacyRequirementError(self._unreachable_message(res, mu, k, sa, len(uniques), n_in))
        ec = np.empty(data.n, dtype=np.int64)
        ec[order] = res.cls + 1
        values = class_values(ec, data.columns)
        noise = self._noise_frame(values, res, uniques, sa)
        return AssignmentPlan(pd.DataFrame({ROW_ID: data.rows, "ec_id": ec}), values, noise,
                              {**self._info(res, mu, k), **suppressed,
                               "formation": ["classes of k and k + 1", "classes of k"][chosen] if len(candidates) > 1
                               else "chunks of k"}, noise_flag=self.noise_flag or None)

    def _suppress(self, ctx: MethodContext, data: SourceData, freq: np.ndarray, cap: int, mu: float, k: int,
                  sa: str) -> tuple[SourceData, dict[str, Any]]:
        """The fewest records after which the capacity bound admits the rest (:func:`suppression_needed`), taken
        from the most frequent values and, within a value, from its most common QI combinations (seeded); the
        source without them and the suppression summary (the budget is checked after the run, see :meth:`plan`)."""
        n = data.n
        found = suppression_needed(freq, k, mu, n)
        if found is None:
            raise PrivacyRequirementError(self._bound_message(freq, cap, n, mu, k, sa) + "; suppression cannot "
                                          "help (no number of suppressed records fits the bound)")
        r, take = found
        labels = data.sensitive_values[sa]
        cell = group_codes({c.name: c.order for c in data.columns}, [c.name for c in data.columns], n)
        drop = drop_from_cells(data.sensitive[sa], cell, take, ctx.policy.seed)
        ctx.progress(f"theta: suppressing {r} records of over-represented {sa!r} values (capacity bound)")
        keep = ~drop
        data = replace(data, rows=data.rows[keep], weights=data.weights[keep],
                       sensitive={a: v[keep] for a, v in data.sensitive.items()},
                       columns=[subset_column(c, keep) for c in data.columns])
        return data, {"records": r, "suppressed_by_value": {str(labels.iloc[i]): int(take[i])
                                                            for i in np.flatnonzero(take)},
                      "suppression": ("capacity bound: the fewest records, levelling the most frequent values of "
                                      f"{sa!r}, each from its most common QI combinations (seeded)")}

    @staticmethod
    def _bound_message(freq: np.ndarray, cap: int, n: int, mu: float, k: int, sa: str) -> str:
        v = int((freq > 0).sum())
        e = max_excess(k, mu, v)
        return (f"θ-sensitivity (μ = {mu}) with k = {k} is impossible on this data, even with noise records: "
                f"{n} records need {n // k} or fewer classes of >= {k}; each value of {sa!r} occurs in at most "
                f"min(its frequency, {n // k}) classes and a class reaching θ holds at most {e} records beyond its "
                f"distinct values, so at most {cap} of the {n} records fit ({n - cap} too many). No release was "
                "created; lower k or μ, or allow suppression (max_suppression)")

    def _budget_message(self, ctx: MethodContext, freq: np.ndarray, cap: int, n: int, mu: float, k: int, sa: str,
                        used: int, res: ThetaResult, budget: int) -> str:
        """The bound's refusal with the suppression the run needed: for the bound, then for classes left below θ."""
        records = int(res.counts[res.unreachable].sum())
        total = used + records
        frac = np.ceil(total / n * 1e4) / 1e4           # rounded up, so that it covers the records
        left = (f", then {len(res.unreachable)} of {len(res.counts)} classes ({records} records) stay below θ after "
                f"{res.swaps} swaps and noise and are suppressed whole" if records else "")
        head = self._bound_message(freq, cap, n, mu, k, sa).split(" No release was created")[0]
        return (f"{head} With suppression the release needs {total} of {n} records suppressed: {used} of the most "
                f"frequent values of {sa!r} for the bound{left}; privacy.max_suppression = "
                f"{ctx.policy.privacy.max_suppression:g} allows {budget}. No release was created: allow it with "
                f"max_suppression = {frac:.4g} (or more), or lower k or μ")

    @staticmethod
    def _unreachable_message(res: ThetaResult, mu: float, k: int, sa: str, n_values: int, n_in: int = 0) -> str:
        records = int(res.counts[res.unreachable].sum())
        return (f"θ-sensitivity (μ = {mu}) cannot be reached for {len(res.unreachable)} of {len(res.counts)} classes "
                f"({records} records) even after {res.swaps} swaps and noise: a class of {k} records needs at least "
                f"{min_distinct(k, mu, n_values)} distinct values of {sa!r} without noise"
                + (f", at least {k - e} with noise" if (e := max_excess(k, mu, n_values)) is not None else "")
                + f" (it has {n_values}). No release was created; lower k "
                f"or μ, or allow the suppression of those records (max_suppression >= "
                f"{np.ceil(records / max(n_in or len(res.cls), 1) * 1e4) / 1e4:.4g})")

    @staticmethod
    def _noise_frame(values: pd.DataFrame, res: ThetaResult, uniques: pd.Series, sa: str) -> pd.DataFrame | None:
        """Dummy records: the class's released QI values and a sensitive value absent from the class."""
        if len(res.noise_cls) == 0:
            return None
        ec = res.noise_cls + 1
        frame = values.set_index("ec_id").loc[ec].reset_index()
        frame[sa] = uniques.iloc[res.noise_val].reset_index(drop=True)
        return frame

    def _info(self, res: ThetaResult, mu: float, k: int) -> dict[str, Any]:
        sizes = res.counts.sum(axis=1)
        var = variances(res.counts)
        theta = kernels.theta_threshold(sizes, mu)
        info: dict[str, Any] = {
            "mu": mu, "order": self.order, "window": self.window,
            "classes_below_theta_before": res.below_before, "swaps": res.swaps,
            "noise_records": int(len(res.noise_cls)), "noise_classes": int(len(np.unique(res.noise_cls))),
            "classes_below_theta_after": int(len(res.unreachable)),
            "theta_by_size": {int(m): float(kernels.theta_threshold(m, mu)) for m in np.unique(sizes)},
            "variance_min": float(var.min()), "variance_mean": float(var.mean()),
            "min_variance_margin": float((var - theta).min()),
        }
        if len(sizes) <= 50:
            info["variance"] = [round(float(v), 6) for v in var]
            info["theta"] = [round(float(t), 6) for t in theta]
        return info


__all__ = ["ThetaResult", "ThetaSensitive", "capacity", "class_order", "deal_classes",
           "max_excess", "min_distinct", "noise_needed",
           "noise_phase", "realize_moves", "swap_phase", "swaps_needed", "theta_anonymize", "theta_ok_rows", "variances"]
