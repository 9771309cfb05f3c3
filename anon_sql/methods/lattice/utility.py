"""A lattice node's utility: the measures of its released table (NCP, DM, DM*, precision, AECS, height,
non-uniform entropy), their bounds, and the objectives a search minimizes."""
from __future__ import annotations

import numpy as np

from ...policy.objectives import MEASURES
from ...udfs.utility import discernibility, dot
from .evaluate import NodeEval


def quantize(value: float) -> float:
    """Scores compared for ties are rounded so that roll-up order cannot make equal scores differ."""
    return float(round(value, 9))


class Utility:
    """The part of :class:`~anon_sql.methods.lattice.Lattice` that measures nodes and ranks them."""

    def measure_node(self, node: tuple[int, ...], sizes: np.ndarray, reps: list[np.ndarray],
                     kept: np.ndarray | None, suppressed: float, rows: int | None) -> dict[str, float | None]:
        """The requested measures of a node's released table (``kept`` None: nothing suppressed, the bounds)."""
        n, q = self.records, len(self.quasi)
        denom = n * q if n and q else 1.0
        w = sizes if kept is None else np.where(kept, sizes, 0.0)
        out: dict[str, float | None] = {}
        for m in self.measures:
            if m == "distinct_rows":
                out[m] = None if rows is None else float(rows)
            elif m == "ncp":
                ncp = sum(dot(w, e.ncp[b][r]) for e, b, r in zip(self.enc, node, reps))
                out[m] = (ncp + suppressed * q) / denom
            elif m == "discernibility":      # ARX's DM: a suppressed record costs |D|
                out[m] = discernibility(sizes if kept is None else sizes[kept], n, suppressed)
            elif m == "dm_star":             # ARX's DM*: every class |E|², suppressed or not
                out[m] = discernibility(sizes, n, 0)
            elif m == "precision":
                level_loss = sum(b / e.height for e, b in zip(self.enc, node) if e.height)
                out[m] = 1.0 - ((n - suppressed) * level_loss + suppressed * q) / denom
            elif m == "aecs":                # ARX's AECS: suppressed records form one more class
                groups = len(sizes) if kept is None else int(np.count_nonzero(kept)) + (1 if suppressed else 0)
                out[m] = n / groups if groups else 0.0
            elif m == "height":
                out[m] = float(sum(node))
            elif m == "non_uniform_entropy_monotone":
                out[m] = self._entropy(node)
            elif m == "non_uniform_entropy":
                out[m] = self._entropy(node) + (self._entropy_suppressed(sizes, reps, kept) if suppressed else 0.0)
        return out

    def _entropy(self, node: tuple[int, ...]) -> float:
        """Non-uniform entropy of the generalization alone: Σ over attributes and records of
        log2(count of the record's generalized value / count of its value), counts over the whole table."""
        if self._entropy_levels is None:
            self._entropy_levels = []
            for j, e in enumerate(self.enc):
                leaf = np.bincount(self._base.q[j], minlength=e.cards[0],
                                   weights=self._base.w if self._base.n is None else self._base.n)
                present = leaf > 0
                per = []
                for level in range(e.height + 1):
                    up = np.bincount(e.codes[level], weights=leaf, minlength=e.cards[level])[e.codes[level]]
                    per.append(dot(leaf[present], np.log2(up[present] / leaf[present])))
                self._entropy_levels.append(per)
        return float(sum(per[b] for per, b in zip(self._entropy_levels, node)))

    def _entropy_suppressed(self, sizes: np.ndarray, reps: list[np.ndarray], kept: np.ndarray) -> float:
        """ARX's extra cost of suppression in non-monotone non-uniform entropy: per attribute, the suppressed
        records' generalized values are replaced by '*' among the suppressed, Σ_g c_g log2(S / c_g)."""
        gone = ~kept
        w = sizes[gone]
        total = float(w.sum())
        out = 0.0
        for r in reps:
            _, inv = np.unique(r[gone], return_inverse=True)
            c = np.bincount(inv, weights=w)
            c = c[c > 0]
            out += dot(c, np.log2(total / c))
        return out

    # -- objectives --------------------------------------------------------------------------------------------
    def loss(self, ev: NodeEval, objective: str, bound: bool = False) -> float:
        """A measure as a quantity to minimize (bound=True: a lower bound for the node and its generalizations)."""
        value = (ev.bounds if bound else ev.scores).get(objective)
        if value is None:
            raise ValueError(f"measure {objective!r} needs the lattice built with it (and rows=True for "
                             f"distinct_rows); this one measures {list(self.measures)}")
        return quantize(-value if MEASURES[objective] else value)

    def loss_below(self, ev: NodeEval, objective: str) -> float | None:
        """A lower bound on the loss of every feasible *specialization* of the node (its down-cone, itself
        included), or None when there is none to give. It holds when every check is suppression-monotone (with a
        budget: the records failing at a node fail at each specialization, so a specialization suppresses at least
        ``ev.need`` records) and the objective charges suppression: DM charges N per suppressed record and at least
        the smallest class size k per released one, so it is ≥ k·N + (N − k)·need; NCP charges each suppressed
        record 1 per quasi-identifier, so it is ≥ need / N."""
        if not self.allow_suppression or not self.need_nested or objective not in ("discernibility", "ncp"):
            return None
        n = self.records
        if objective == "discernibility":
            return quantize(self.min_class * n + (n - self.min_class) * ev.need)
        return quantize(ev.need / n if n else 0.0)

    def rank_key(self, ev: NodeEval, objective: str) -> tuple:
        """Sort key of a feasible node: best objective, then fewest total levels, then smallest level vector."""
        return (self.loss(ev, objective), ev.total, ev.node)

    def apriori(self, measure: str, nodes: np.ndarray) -> np.ndarray | None:
        """The loss of ``measure`` at every node of ``nodes`` without evaluating them, when it depends on the level
        vector alone (height, monotone non-uniform entropy); None otherwise."""
        if measure == "height":
            return nodes.sum(axis=1, dtype=np.int64).astype(np.float64)
        if measure == "non_uniform_entropy_monotone":
            self._entropy(self.root)
            table = self._entropy_levels or []
            out = np.zeros(len(nodes))
            for j, per in enumerate(table):
                out += np.asarray(per)[nodes[:, j]]
            return np.array([quantize(v) for v in out.tolist()])   # exactly what loss() makes of the evaluated score
        return None
