"""Evaluating a lattice node from counts: roll the smallest cached finer node's group table up to the node through
the level maps, re-aggregate in numpy, and judge every model and <S,k> window on the classes (with the suppression
budget: the failing classes settled to a fixed point, :mod:`.settle`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ...models import ClassStats, SensitiveCounts
from ...udfs.utility import dot
from .encode import State, combine, factorize, first_index, group_first

EPS = 1e-9
CACHE_SLOTS = 64
CACHE_GROUPS = 4_000_000


@dataclass
class NodeEval:
    """What a node's table looks like: classes, violating / distinct rows, suppression, feasibility, scores.

    ``scores`` are measured on the released table (after suppression); ``bounds`` are the same measures without
    suppression, which bound the score of the node and of every generalization of it (spec/01 §5).
    """

    node: tuple[int, ...]
    classes: int
    violations: int | None           # distinct rows whose class fails a model or an <S,k> window (None: rows untracked)
    distinct_rows: int | None        # distinct released rows after suppression
    rows_before: int | None          # distinct rows before suppression
    need: float                      # records in failing classes (before suppression)
    suppressed: float
    within_budget: bool
    feasible: bool
    scores: dict[str, float | None]
    bounds: dict[str, float | None]
    failures: dict[str, tuple[int, float]] = field(default_factory=dict)  # check → (classes, records) failing
    # the records failing the monotone part of the checks (see Lattice.tagging) are within the budget: false here
    # means false at every specialization of the node, whatever the other models say
    tagging_ok: bool = True

    @property
    def total(self) -> int:
        return int(sum(self.node))


class NodeEvaluation:
    """The part of :class:`~anon_sql.methods.lattice.Lattice` that evaluates nodes (roll-up cache, checks)."""

    # -- roll-up -----------------------------------------------------------------------------------------------
    def _map(self, j: int, a: int, b: int) -> np.ndarray | None:
        """Code at level a → code at level b of attribute j (None when NULL's parent makes it not a function)."""
        e = self.enc[j]
        if a == 0:
            return e.codes[b]
        key = (j, a, b)
        if key not in self._maps:
            m = np.zeros(e.cards[a], dtype=e.codes[b].dtype)
            m[e.codes[a]] = e.codes[b]
            self._maps[key] = m if np.array_equal(m[e.codes[a]], e.codes[b]) else None
        return self._maps[key]

    def _source(self, node: tuple[int, ...]) -> State:
        """The cached state finer than ``node`` with the fewest groups (the base table if none)."""
        target = np.asarray(node, dtype=np.int16)
        ok = np.all(self._slots <= target, axis=1)
        for j in self._restricted:
            ok &= (self._slots[:, j] == 0) | (self._slots[:, j] == target[j])
        if ok.any():
            i = int(np.argmin(np.where(ok, self._slot_groups, np.inf)))
            if self._slot_groups[i] < len(self._base.w):
                self._clock += 1
                self._slot_used[i] = self._clock
                return self._slot_state[i]  # type: ignore[return-value]
        return self._base

    def _remember(self, state: State) -> None:
        if len(state.w) >= len(self._base.w):
            return
        free = np.flatnonzero(~np.isfinite(self._slot_groups))
        i = int(free[0]) if len(free) else int(np.argmin(self._slot_used))
        self._store(i, state)
        while self._cached_groups > CACHE_GROUPS:
            used = np.where(np.isfinite(self._slot_groups), self._slot_used, np.iinfo(np.int64).max)
            self._store(int(np.argmin(used)), None)

    def _store(self, i: int, state: State | None) -> None:
        if self._slot_state[i] is not None:
            self._cached_groups -= len(self._slot_state[i].w)   # type: ignore[union-attr]
        self._cached_groups += 0 if state is None else len(state.w)
        self._clock += 1
        self._slot_state[i] = state
        self._slot_used[i] = self._clock
        if state is None:
            self._slots[i] = np.iinfo(np.int16).max
            self._slot_groups[i] = np.inf
        else:
            self._slots[i] = state.node
            self._slot_groups[i] = len(state.w)

    # -- evaluation --------------------------------------------------------------------------------------------
    def evaluate(self, node: Sequence[int]) -> NodeEval:
        """Evaluate a node once (cached): classes, violations, distinct rows, suppression, feasibility, scores."""
        node = self.check_node(node)
        hit = self._evals.get(node)
        if hit is not None:
            return hit
        self.evaluations += 1
        if self.varying:   # classes are the units' signatures, evaluated from the base table
            state, sizes, reps, g_cls = self._signature_rollup(node)
            result = self._judge(node, sizes, reps, g_cls, state)
        else:
            src = self._source(node)
            state, sizes, reps, g_cls = self._rollup(src, node)
            result = self._judge(node, sizes, reps, g_cls, state)
            if node != self.root:
                self._remember(state)
        self._evals[node] = result
        return result

    def _rollup(self, src: State, node: tuple[int, ...]) -> tuple[State, np.ndarray, list[np.ndarray], np.ndarray]:
        """Map ``src`` up to ``node`` and re-aggregate: (group table, class sizes, class codes, class of group)."""
        q = []
        for j, (a, b) in enumerate(zip(src.node, node)):
            if a == b:
                q.append(src.q[j])
            elif (j, b) in self._base_levels and src is self._base:
                q.append(self._base_levels[(j, b)])
            else:
                codes = self._map(j, a, b)[src.q[j]]  # type: ignore[index]
                # most roll-ups start at the base table: its codes at each level are kept (within the cache's size)
                if src is self._base and len(codes) * (len(self._base_levels) + 1) <= CACHE_GROUPS:
                    self._base_levels[(j, b)] = codes
                q.append(codes)
        cards = [e.cards[b] for e, b in zip(self.enc, node)]
        cls, n_cls, first = group_first(*combine(q, cards, len(src.w)))
        sizes = np.bincount(cls, weights=src.w if src.n is None else src.n, minlength=n_cls)
        reps = [a[first] for a in q]
        if self.n_rest > 1:
            grp, n_grp = factorize(cls * self.n_rest + src.rest, n_cls * self.n_rest)
            g_first = first_index(grp, n_grp)
            state = State(node, [a[g_first] for a in q], src.rest[g_first],
                          np.bincount(grp, weights=src.w, minlength=n_grp),
                          None if src.n is None else np.bincount(grp, weights=src.n, minlength=n_grp))
            return state, sizes, reps, cls[g_first]
        state = State(node, reps, np.zeros(n_cls, dtype=np.int64), sizes)
        return state, sizes, reps, np.arange(n_cls, dtype=np.int64)

    def _stats(self, sizes: np.ndarray, g_cls: np.ndarray, g_rest: np.ndarray, g_w: np.ndarray,
               compact: bool) -> ClassStats:
        sens = {}
        for i, sa in enumerate(self.sensitive):
            codes, card, labels = self.sa_of_rest[i][g_rest], self.sa_card[i], self.sa_labels[i]
            if compact:  # after suppression the SQL's value domain is what remains (ordered distance's m)
                present, codes = np.unique(codes, return_inverse=True)
                card, labels = len(present), labels[present]
            sc = SensitiveCounts.from_codes(g_cls, codes, g_w, len(sizes), card)
            sc.labels = labels
            sens[sa] = sc
        return ClassStats(sizes, sens)

    def _checks(self, stats: ClassStats, reps: list[np.ndarray]) -> list[tuple[str, np.ndarray]]:
        """(name, pass per class) for every model and every <S,k> window, as the classes view computes them."""
        out = []
        n = stats.n_classes
        for m in self.models:
            out.append((m.describe(), np.asarray(m.check(stats), dtype=bool) if n else np.ones(0, dtype=bool)))
        for idx, k in self.requirements:
            f, _ = factorize(*combine([reps[j] for j in idx], [int(reps[j].max(initial=0)) + 1 for j in idx], n))
            window = np.bincount(f, weights=stats.sizes)[f] if n else np.zeros(0)
            out.append((f"<{{{', '.join(self.quasi[j] for j in idx)}}}, {k}>", window >= k))
        return out

    def _judge(self, node: tuple[int, ...], sizes: np.ndarray, reps: list[np.ndarray], g_cls: np.ndarray,
               state: State) -> NodeEval:
        stats = self._stats(sizes, g_cls, state.rest, state.w, compact=False)
        stats.population = self._population_counts(node, reps)
        ok = np.ones(len(sizes), dtype=bool)
        ok_tagging = np.ones(len(sizes), dtype=bool)
        failures = {}
        for i, (name, passed) in enumerate(self._checks(stats, reps)):
            if not passed.all():
                failures[name] = (int((~passed).sum()), float(sizes[~passed].sum()))
            ok &= passed
            if i in self.tagging:
                ok_tagging &= passed
        for a, lmin in self.implied_distinct:
            ok_tagging &= np.bincount(stats.sensitive[a].cls, minlength=len(sizes)) >= lmin
        for m in self.implied_coverage:
            covered = m.coverage_passes(stats)
            if covered is not None:
                ok_tagging &= covered
        need = float(sizes[~ok].sum())
        tagging_ok = float(sizes[~ok_tagging].sum()) <= self.budget + EPS
        rows_before = len(state.w) if self.rows else None
        violations = int(np.count_nonzero(~ok[g_cls])) if self.rows else None
        if not self.allow_suppression:
            kept, suppressed, within = np.ones(len(sizes), dtype=bool), 0.0, need == 0
            feasible = within
        else:
            within = need <= self.budget + EPS
            kept = ok
            if within and need and not self.local_checks:   # a group rule / t-closeness may fail once classes go
                kept = self.settle(sizes, reps, g_cls, state, ok, stats.population)
            suppressed = float(sizes[~kept].sum())
            feasible = within and suppressed <= self.budget + EPS
        free = self.measure_node(node, sizes, reps, None, 0.0, rows_before)   # as if nothing were suppressed
        if suppressed:
            rows_after = int(np.count_nonzero(kept[g_cls])) if self.rows else None
            scores = self.measure_node(node, sizes, reps, kept, suppressed, rows_after)
        else:
            rows_after, scores = rows_before, dict(free)
        bounds = free
        if "discernibility" in free:
            # a record of a class of size s is, in any feasible generalization, in a released class of at least
            # max(s, k) records or suppressed at cost N >= max(s, k)
            bounds["discernibility"] = dot(sizes, np.maximum(sizes, self.min_class))
        return NodeEval(node, len(sizes), violations, rows_after, rows_before, need, suppressed, within, feasible,
                        scores, bounds, failures, tagging_ok)
