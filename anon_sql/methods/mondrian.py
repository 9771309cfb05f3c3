"""``method = "mondrian"``: strict multidimensional Mondrian (LeFevre, DeWitt & Ramakrishnan 2006).

Partitions are split recursively at the weighted median of the quasi-identifier with the widest normalized range
(numeric: (max − min) / global range; categorical: by default (leaves under the partition's lowest common ancestor
− 1) / (leaves − 1), the NCP of the value it would release). A categorical split groups the children of that
ancestor into two halves. A split is allowed only if both halves satisfy every privacy model of the policy
(``model.check`` on :class:`ClassStats`; k-map and δ-presence count the population records each half's released
values would match, :mod:`methods.population_points`). The recursion runs level by level, vectorized over all open
partitions of a level; partition ids follow the depth-first order of the split tree. Deterministic: ties go to the
earlier attribute, then the lower cut.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import PrivacyRequirementError
from ..models import ClassStats, PrivacyModel, SensitiveCounts
from ..common.progress import Progress
from ..policy.keys import choice, key
from ..udfs.utility import ncp_categorical, ncp_numeric
from . import register_method
from .base import AssignmentPlan, Method, MethodContext
from .local_values import QIColumn, SourceData, class_values, load_combinations, segment_lca, tuple_classes
from .population_points import PopulationPoints, population_points


@dataclass
class StatsBuilder:
    """Builds :class:`ClassStats` for any grouping of rows (the halves of candidate splits)."""

    weights: np.ndarray                  # each row's share of a class size (records, or people with a unit)
    sensitive: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    global_freq: dict[str, np.ndarray]
    needs_sensitive: bool
    population: PopulationPoints | None = None   # k-map / δ-presence: the population matching each class
    # with a privacy unit: the people holding each row's sensitive value (SourceData.sizes); None: ``weights``
    value_weights: np.ndarray | None = None

    @classmethod
    def from_source(cls, data: SourceData, models: Sequence[PrivacyModel],
                    population: PopulationPoints | None = None) -> "StatsBuilder":
        """Statistics of groupings of ``data``'s rows; ``population`` (:func:`population_points` over the same
        columns) gives k-map / δ-presence the population records each class matches."""
        freq = {s: np.bincount(c, weights=data.weights, minlength=len(data.sensitive_values[s]))
                for s, c in data.sensitive.items()}
        labels = {s: v.to_numpy(dtype=object) for s, v in data.sensitive_values.items()}
        if data.sizes is not None:   # people: sizes and cuts weigh people, value counts people holding it
            return cls(data.sizes, data.sensitive, labels, freq, any(m.needs_sensitive for m in models), population,
                       data.weights)
        return cls(data.weights, data.sensitive, labels, freq, any(m.needs_sensitive for m in models), population)

    def build(self, rows: np.ndarray, cls: np.ndarray, n: int) -> ClassStats:
        size = self.weights[rows]
        w = size if self.value_weights is None else self.value_weights[rows]
        sens = {}
        if self.needs_sensitive:
            for s, codes in self.sensitive.items():
                nv = len(self.labels[s])
                sc = SensitiveCounts.from_codes(cls, codes[rows], w, n, nv, value_rank=np.arange(nv))
                sc.global_freq = self.global_freq[s]
                sc.labels = self.labels[s]
                sens[s] = sc
        pop = self.population.counts(rows, cls, n) if self.population is not None else None
        return ClassStats(np.bincount(cls, weights=size, minlength=n), sens, pop)


def all_ok(models: Sequence[PrivacyModel], stats: ClassStats) -> np.ndarray:
    """Per class: does it satisfy every model?"""
    ok = np.ones(stats.n_classes, dtype=bool)
    for m in models:
        ok &= np.asarray(m.check(stats), dtype=bool)
    return ok


@dataclass
class MondrianResult:
    """Each row's partition and the shape of the split tree."""

    pid: np.ndarray      # partition of each row, 0..n_partitions-1 in depth-first order
    n_partitions: int
    depth: int


WIDTHS = ("leaves", "distinct", "mixed")
_DENSE_CELLS = 20_000_000   # the largest dense (segment × value) histogram, in cells
_DENSE_PER_ROW = 4          # and at most this many cells per row it counts (at least _DENSE_MIN)
_DENSE_MIN = 65_536


def _dense(cells: int, rows: int) -> bool:
    """Count per segment with a dense (segment × value) histogram rather than by sorting the rows: when the
    histogram is small, and not much larger than the rows it counts — a 20M-cell histogram over 31,500 QI tuples cost
    0.8 s of a 1M-people partition that sorting does in 0.07 s (issue 29). Both give the same counts."""
    return cells <= min(_DENSE_CELLS, max(_DENSE_PER_ROW * rows, _DENSE_MIN))


def _distinct(order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Distinct values per segment of a (segment-grouped) code array."""
    seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    span = int(order.max()) + 1 if len(order) else 1
    if _dense(len(starts) * span, len(order)):
        present = np.bincount(seg * span + order, minlength=len(starts) * span) > 0
        return present.reshape(len(starts), span).sum(axis=1)
    return np.bincount(np.unique(seg * span + order) // span, minlength=len(starts))


def _widths(columns: Sequence[QIColumn], rows: np.ndarray, starts: np.ndarray,
            categorical: str = "leaves") -> tuple[np.ndarray, np.ndarray, dict]:
    """Normalized width of every open partition on every QI, a tie-break per QI, and the LCA level of the
    categorical ones.

    Categorical width: ``leaves`` = (leaves under the LCA − 1)/(leaves − 1), the NCP of the released value;
    ``distinct`` = (distinct values − 1)/(values − 1); ``mixed`` = their mean. Equal widths are frequent with
    ``leaves`` (every QI whose LCA is the top has width 1); they go to the larger distinct share (numeric QIs: their
    width), then to the earlier QI."""
    widths = np.zeros((len(starts), len(columns)))
    ties = np.zeros((len(starts), len(columns)))
    lcas: dict[int, np.ndarray] = {}
    for j, c in enumerate(columns):
        if c.numeric:
            x = c.x[rows]
            with np.errstate(invalid="ignore"):
                span = np.fmax.reduceat(x, starts) - np.fmin.reduceat(x, starts)
            nan = np.isnan(x).astype(np.int8)
            mixed = np.maximum.reduceat(nan, starts) != np.minimum.reduceat(nan, starts)
            widths[:, j] = ties[:, j] = numeric_width(c, span, mixed)
        else:
            level, code = segment_lca(c, rows, starts)
            widths[:, j], ties[:, j] = categorical_width(c, level, code, _distinct(c.order[rows], starts), categorical)
            lcas[j] = level
    return widths, ties, lcas


def numeric_width(c: QIColumn, span: np.ndarray, mixed: np.ndarray) -> np.ndarray:
    """Per partition: the NCP of its range, (max − min) / the column's span (:func:`ncp_numeric`), plus 1 where
    NULLs and values mix (split off first). One formula for the DuckDB and Spark engines."""
    return ncp_numeric(span, c.span) + mixed


def categorical_width(c: QIColumn, level: np.ndarray, code: np.ndarray, distinct: np.ndarray,
                      mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Per partition: a categorical QI's width under ``mode`` (see :func:`_widths`) from its LCA (level, code) and
    its number of distinct leaves, and the tie-break (the distinct share). One formula for both engines."""
    leaves = np.empty(len(level), dtype=np.float64)
    for lv in np.unique(level):
        m = level == lv
        leaves[m] = c.leaves[lv][code[m]]
    w = ncp_categorical(leaves, c.total_leaves)
    d = (np.asarray(distinct, dtype=np.float64) - 1) / max(c.total_leaves - 1, 1)
    if mode != "leaves":
        w = d if mode == "distinct" else (w + d) / 2
    return w, d


def median_cut(seg: np.ndarray, key: np.ndarray, w: np.ndarray, m: int) -> np.ndarray:
    """Per segment: the key value whose cut (key <= cut | key > cut) splits the weight closest to half (ties: the
    lower cut). Every segment given has at least two distinct keys."""
    kmax = int(key.max()) + 1
    if _dense(m * kmax, len(key)):   # histogram per segment
        hist = np.bincount(seg * kmax + key, weights=w, minlength=m * kmax).reshape(m, kmax)
        present = np.bincount(seg * kmax + key, minlength=m * kmax).reshape(m, kmax) > 0
        cum = np.cumsum(hist, axis=1)
        total = cum[:, -1:]
        last = np.cumsum(present, axis=1) == present.sum(axis=1, keepdims=True)
        dist = np.where(present & ~last, np.abs(cum - total / 2.0), np.inf)
        return np.argmin(dist, axis=1)
    o = np.argsort(seg * kmax + key, kind="stable")
    sg, k, wt = seg[o], key[o], w[o]
    cum = np.cumsum(wt)
    new_seg = np.r_[True, sg[1:] != sg[:-1]]
    first = np.flatnonzero(new_seg)
    cin = cum - (cum[first] - wt[first])[np.cumsum(new_seg) - 1]
    total = np.bincount(sg, weights=wt, minlength=m)
    last_of_key = np.r_[(k[1:] != k[:-1]) | (sg[1:] != sg[:-1]), True]
    last_of_seg = np.r_[sg[1:] != sg[:-1], True]
    vi = np.flatnonzero(last_of_key & ~last_of_seg)
    dist = np.abs(cin[vi] - total[sg[vi]] / 2.0)
    oo = np.lexsort((vi, dist, sg[vi]))
    sv = sg[vi][oo]
    pick = np.r_[True, sv[1:] != sv[:-1]]
    cut = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    cut[sv[pick]] = k[vi][oo][pick]
    return cut


def _reorder(perm: np.ndarray, seg: np.ndarray, side: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Rows of the kept segments, each segment's left rows before its right rows (stable, no sort)."""
    sel = keep[seg]
    rows, sg, left = perm[sel], seg[sel], side[sel] == 0
    if len(rows) == 0:
        return rows
    first = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
    g = np.cumsum(np.r_[True, sg[1:] != sg[:-1]]) - 1
    c0, c1 = np.cumsum(left), np.cumsum(~left)
    before0, before1 = c0[first] - left[first], c1[first] - ~left[first]
    n_left = np.diff(np.r_[before0, c0[-1]])
    rank = np.where(left, c0 - 1 - before0[g], n_left[g] + c1 - 1 - before1[g])
    out = np.empty(len(rows), dtype=np.int64)
    out[first[g] + rank] = rows
    return out


def partition(columns: Sequence[QIColumn], models: Sequence[PrivacyModel], stats: StatsBuilder,
              progress=None, categorical_width: str = "leaves") -> MondrianResult:
    """Strict Mondrian over all rows: returns each row's partition (see the module docstring and :func:`_widths`)."""
    n = len(stats.weights)
    q = len(columns)
    pid = np.zeros(n, dtype=np.int64)
    perm = np.arange(n)          # rows of the open partitions, grouped by partition in depth-first order
    n_parts, depth = 1, 0
    while len(perm) and q:
        p = pid[perm]
        starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        parts = p[starts]
        m = len(parts)
        seg = np.repeat(np.arange(m), np.diff(np.r_[starts, len(perm)]))
        widths, ties, lcas = _widths(columns, perm, starts, categorical_width)
        ranked = np.lexsort((-ties, -widths), axis=1)   # widest first; ties: larger distinct share, earlier QI
        decided = np.zeros(m, dtype=bool)
        side = np.zeros(len(perm), dtype=np.int64)
        for r in range(q):
            attr = ranked[:, r]
            cand = ~decided & (widths[np.arange(m), attr] > 0)
            if not cand.any():
                continue
            cr = np.flatnonzero(cand[seg])
            cseg = seg[cr]
            a_row = attr[cseg]
            key = np.empty(len(cr), dtype=np.int64)
            for j in np.unique(attr[cand]):
                sel = a_row == j
                rr = perm[cr[sel]]
                c = columns[j]
                key[sel] = c.order[rr] if c.numeric else c.tree[c.order[rr], lcas[j][cseg[sel]] - 1]
            cut = median_cut(cseg, key, stats.weights[perm[cr]], m)
            s = (key > cut[cseg]).astype(np.int64)
            cidx = np.flatnonzero(cand)
            remap = np.full(m, -1, dtype=np.int64)
            remap[cidx] = np.arange(len(cidx))
            ok = all_ok(models, stats.build(perm[cr], remap[cseg] * 2 + s, 2 * len(cidx)))
            ok = ok.reshape(-1, 2).all(axis=1)
            decided[cidx[ok]] = True
            take = ok[remap[cseg]]
            side[cr[take]] = s[take]
        split = np.zeros(n_parts, dtype=bool)
        split[parts[decided]] = True
        inc = 1 + split.astype(np.int64)
        base = np.cumsum(inc) - inc
        pid = base[pid]
        pid[perm] += side
        n_parts = int(inc.sum())
        perm = _reorder(perm, seg, side, decided)
        if decided.any():
            depth += 1
            if progress:
                progress(Progress(f"mondrian: depth {depth}", done=n_parts, unit="partitions"))
    return MondrianResult(pid, n_parts, depth)


def check_root(models: Sequence[PrivacyModel], stats: StatsBuilder) -> None:
    """Fail early when the whole table, as one class, already violates a model (no partition can satisfy it)."""
    n = len(stats.weights)
    root = stats.build(np.arange(n), np.zeros(n, dtype=np.int64), 1)
    failing = [m.describe() for m in models if not bool(np.asarray(m.check(root))[0])]
    if failing:
        raise PrivacyRequirementError(
            f"the whole table, taken as a single class, does not satisfy {', '.join(failing)}; no partition "
            "can, so no release was created: relax the requirement (smaller k / l, larger t) or use more data"
        )


@register_method
class Mondrian(Method):
    """Strict multidimensional Mondrian local recoding; ``[method_params] categorical_width`` = "leaves" (default),
    "distinct" or "mixed" chooses how a categorical QI's width is measured (:func:`_widths`)."""

    name = "mondrian"
    parameters = (key("categorical_width", choice(*WIDTHS), "how a categorical QI's width is measured: taxonomy "
                      "leaves, distinct values, or leaves where a taxonomy exists", "leaves"),)
    plan_kind = "assignment"
    needs_taxonomies = False
    plans_population = True
    plans_combinations = True
    counts_units = True   # partitions people: combinations weighted by people (methods/people.py, docs/units.md)

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.categorical_width = self.param("categorical_width")

    def plan(self, ctx: MethodContext) -> AssignmentPlan:
        # a row's partition depends only on its QI values and on weighted statistics of sets of rows, so the
        # partition runs over the distinct (QI, sensitive) combinations with their record counts: the same plan in
        # the size of the combinations; the per-row assignment is then a join in the engine
        data, combinations = load_combinations(ctx)
        stats = StatsBuilder.from_source(data, ctx.models, population_points(ctx, data.columns))
        check_root(ctx.models, stats)
        result = partition(data.columns, ctx.models, stats, ctx.progress, self.categorical_width)
        ec = result.pid + 1
        # splits compare a QI's value with a cut, so all rows of one QI tuple share a partition
        tuples = tuple_classes(combinations, ec)
        if tuples is None:
            raise RuntimeError("mondrian: rows with the same quasi-identifier values fell into different classes; "
                               "no release was created (please report this policy)")
        # no per-row assignment here: the compiled release writes it from the tuples (compiler.assignment_query)
        info: dict[str, Any] = {"partitions": result.n_partitions, "depth": result.depth}
        if self.categorical_width != "leaves":
            info["categorical_width"] = self.categorical_width
        return AssignmentPlan(None, class_values(ec, data.columns), None, info, tuple_classes=tuples)


__all__ = ["WIDTHS", "Mondrian", "MondrianResult", "StatsBuilder", "all_ok", "categorical_width", "check_root",
           "numeric_width", "partition"]
