"""Full-domain lattice searches: ``iab`` (seed 000, Algorithm 1), ``exhaustive``, ``greedy`` and ``optimal``.

Every method evaluates nodes through :class:`anon_sql.methods.lattice.Lattice` (counts, never rows) and returns a
:class:`LevelPlan` listing every quasi-identifier, with the search statistics and trace in ``info``.
Ties between equally good nodes: fewest total levels, then the smallest level vector in policy order (spec/00).
"""
from __future__ import annotations

import heapq
import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import PolicyError, PrivacyRequirementError
from ..policy.objectives import OBJECTIVES, measure_key
from ..common.progress import Progress
from ..policy.keys import Boolean, Choice, integer, key
from . import register_method
from .base import LevelPlan, Method, MethodContext

if TYPE_CHECKING:   # the lattice (numpy, pyarrow) loads when a search runs: validating a policy must not pay for it
    from .lattice import Lattice, NodeEval

_PROGRESS_EVERY = 500


def _objective(default: str):
    return key("objective", Choice(lambda: OBJECTIVES), "what the search optimizes (anon_sql.policy.objectives.OBJECTIVES)",
               default)


def _monotone():
    return key("monotone", Boolean(), "objective = \"non_uniform_entropy\" only: ARX's monotone variant (true) or "
               "its non-monotone one (false)", False)


def _max_nodes(default: int):
    return key("max_nodes", integer(ge=1), "refuse a lattice with more nodes than this", default)


class _Trace:
    """The search trace: one entry per event (evaluated, expanded, pruned, best, moved, chosen)."""

    def __init__(self, lattice: Lattice, measure: str):
        self.lattice, self.objective, self.rows = lattice, measure, []

    def add(self, event: str, ev: NodeEval) -> None:
        score = ev.scores.get(self.objective)
        self.rows.append({"step": len(self.rows), "node": self.lattice.as_dict(ev.node), "event": event,
                          "violations": ev.violations, "distinct_rows": ev.distinct_rows, "feasible": ev.feasible,
                          "score": None if score is None else float(score)})


class _LatticeSearch(Method):
    """Shared parameter handling, lattice construction, result and failure reporting."""

    parameters = (_objective("distinct_rows"), _monotone())
    rows = True   # whether the search needs distinct rows / violations (the base table then keeps every column)
    reads = "base"
    plans_population = True
    counts_units = True   # the lattice counts people per class with a privacy unit (docs/units.md)
    varying_units = True  # and, with QIs varying inside units, per signature (lattice/signature.py)

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.objective = self.param("objective")
        self.monotone = self.param("monotone")
        if "monotone" in params and self.objective != "non_uniform_entropy":
            raise PolicyError(f"method_params.monotone = {self.monotone!r}: monotone is true or false and chooses "
                              "between the two variants of objective = \"non_uniform_entropy\" (ARX's monotone and "
                              "non-monotone non-uniform entropy); remove it or set that objective")
        # the measure the search optimizes (non-uniform entropy: its monotone variant when asked for)
        self.measure = measure_key(self.objective, self.monotone)

    def plan(self, ctx: MethodContext) -> LevelPlan:
        """Build the lattice (one GROUP BY over the source view), then search it."""
        t0 = time.perf_counter()
        ctx.progress(f"{self.name}: building the base table of distinct combinations")
        from .lattice import Lattice

        lattice = Lattice.from_context(ctx, rows=self.rows or self.objective == "distinct_rows",
                                       measures=[self.measure])
        ctx.progress(f"{self.name}: {lattice.base_rows} combinations, lattice of {lattice.size} nodes")
        plan = self.search(lattice, ctx)
        searched, total = plan.info["seconds"], time.perf_counter() - t0
        plan.info.update(search_seconds=searched, base_seconds=total - searched, seconds=total)
        return plan

    def search(self, lattice: Lattice, ctx: MethodContext) -> LevelPlan:
        """Search a built lattice; ``info["seconds"]`` is the search time alone."""
        raise NotImplementedError

    def _check_size(self, lat: Lattice, alternative: str) -> None:
        limit = int(self.param("max_nodes"))
        if lat.size > limit:
            raise PolicyError(f"method {self.name!r}: the lattice has {lat.size} nodes, more than "
                              f"method_params.max_nodes = {limit}; raise max_nodes or {alternative}")

    def _tick(self, ctx: MethodContext, lattice: Lattice) -> None:
        if lattice.evaluations % _PROGRESS_EVERY == 0:
            ctx.progress(Progress(f"{self.name}: {lattice.evaluations} nodes evaluated", done=lattice.evaluations,
                                  total=lattice.size, unit="nodes (at most)"))

    def _result(self, lattice: Lattice, best: NodeEval | None, trace: _Trace, t0: float, ctx: MethodContext,
                **counts: int) -> LevelPlan:
        if best is None:
            raise PrivacyRequirementError(no_feasible_message(lattice, ctx, complete=self.name != "greedy"))
        trace.add("chosen", best)
        # nodes_generated: generalized tables the search produced (the root, the input itself, is not counted)
        info = {"nodes_generated": counts.get("generated", lattice.evaluations),
                "nodes_evaluated": lattice.evaluations, "nodes_expanded": counts.get("expanded", 0),
                "seconds": time.perf_counter() - t0, "objective": self.objective,
                "score": best.scores.get(self.measure), "lattice_size": lattice.size,
                "violations": best.violations, "distinct_rows": best.distinct_rows,
                "suppressed": best.suppressed}
        if self.objective == "non_uniform_entropy":
            info["monotone"] = self.monotone
        info.update({k: v for k, v in counts.items() if k not in ("generated", "expanded")})
        ctx.progress(f"{self.name}: chose {lattice.as_dict(best.node)}")
        return LevelPlan(lattice.as_dict(best.node), info, trace=trace.rows)


def no_feasible_message(lattice: Lattice, ctx: MethodContext, complete: bool = True) -> str:
    """Name what fails even at the top of every taxonomy, and the suppression budget that would satisfy it
    (``complete``: the search covered the lattice; greedy only its path)."""
    top = lattice.evaluate(lattice.top)
    policy = ctx.policy
    what = lattice.describe_failure(top)
    frac = top.need / lattice.records if lattice.records else 0.0
    suggestion = math.ceil(frac * 1e4) / 1e4
    if top.need >= lattice.records:   # suppressing everything is no release: advise no budget
        hint = ("at the top node every record would have to be suppressed: relax k / the requirements / the "
                "models")
    elif top.need > lattice.budget:
        hint = (f"meeting it at the top node needs suppression of {top.need:g} of {lattice.records:g} records: allow "
                f"it with max_suppression = {suggestion:g} (or more), or relax k / the requirements")
    else:
        hint = ("suppressing the failing classes leaves a requirement unmet on the remainder: relax k / the "
                "requirements, or allow more suppression")
    found = (f"no generalization of {lattice.quasi} satisfies the privacy requirements" if complete else
             f"the greedy path up to the top of {lattice.quasi} met no node satisfying the privacy requirements "
             "(method = \"iab\" or \"optimal\" searches the whole lattice)")
    return f"release {policy.name!r}: {found}; at the top of every taxonomy {what}; {hint}"


@register_method
class IAB(_LatticeSearch):
    """Intelligent Anonymity Balance (seed 000, Algorithm 1): best-first on distinct rows, pruned by monotonicity."""

    name = "iab"

    def __init__(self, **params: Any):
        super().__init__(**params)
        if self.objective != "distinct_rows":
            raise PolicyError("method 'iab' maximizes distinct rows (seed 000); for objective "
                              f"{self.objective!r} use method = \"optimal\" or \"exhaustive\"")

    def search(self, lat: Lattice, ctx: MethodContext) -> LevelPlan:
        t0 = time.perf_counter()
        trace = _Trace(lat, self.objective)
        root = lat.evaluate(lat.root)
        trace.add("evaluated", root)
        best = root if root.feasible else None
        if best is not None:
            trace.add("best", root)
        generated = {lat.root}
        heap: list[tuple] = []
        expanded = 0

        def expand(ev: NodeEval) -> None:
            nonlocal expanded
            expanded += 1
            trace.add("expanded", ev)
            for child in lat.successors(ev.node):
                if child in generated:
                    continue
                generated.add(child)
                c = lat.evaluate(child)
                self._tick(ctx, lat)
                trace.add("evaluated", c)
                if not c.feasible and best is not None and c.rows_before <= best.distinct_rows:
                    trace.add("pruned", c)  # generalizing can only shrink m: it can never beat best
                    continue
                heapq.heappush(heap, (-c.rows_before, c.violations, c.total, len(generated), child))

        expand(root)
        while heap and (best is None or -heap[0][0] > best.distinct_rows):
            ev = lat.evaluate(heapq.heappop(heap)[-1])
            if ev.feasible:
                if best is None or lat.rank_key(ev, "distinct_rows") < lat.rank_key(best, "distinct_rows"):
                    best = ev
                    trace.add("best", ev)
                # without suppression a feasible node is never expanded; with it, a generalization may keep more
                # rows (less suppression), so expand while its pre-suppression rows could still beat best
                if lat.allow_suppression and ev.rows_before > best.distinct_rows:
                    expand(ev)
            else:
                expand(ev)
        return self._result(lat, best, trace, t0, ctx, generated=len(generated) - 1, expanded=expanded)


@register_method
class Exhaustive(_LatticeSearch):
    """Evaluate every node of the lattice (seed 000, method 1): the correctness oracle of the other searches."""

    name = "exhaustive"
    parameters = (_objective("distinct_rows"), _monotone(), _max_nodes(200_000))

    def search(self, lat: Lattice, ctx: MethodContext) -> LevelPlan:
        t0 = time.perf_counter()
        self._check_size(lat, 'use method = "optimal"')
        trace = _Trace(lat, self.measure)
        best, best_key = None, None
        for node in lat.all_nodes():
            ev = lat.evaluate(tuple(int(x) for x in node))
            self._tick(ctx, lat)
            trace.add("evaluated", ev)
            if ev.feasible:
                key = lat.rank_key(ev, self.measure)
                if best_key is None or key < best_key:
                    best, best_key = ev, key
                    trace.add("best", ev)
        return self._result(lat, best, trace, t0, ctx, generated=lat.size - 1, expanded=0)


@register_method
class Greedy(_LatticeSearch):
    """From the root, move to the child with the fewest violating rows until the table is feasible (seed 000)."""

    name = "greedy"

    def search(self, lat: Lattice, ctx: MethodContext) -> LevelPlan:
        t0 = time.perf_counter()
        trace = _Trace(lat, self.measure)
        cur = lat.evaluate(lat.root)
        trace.add("evaluated", cur)
        generated = {lat.root}
        expanded = 0
        while not cur.feasible:
            children = lat.successors(cur.node)
            if not children:
                return self._result(lat, None, trace, t0, ctx)
            expanded += 1
            trace.add("expanded", cur)
            evs = []
            for child in children:
                generated.add(child)
                ev = lat.evaluate(child)
                trace.add("evaluated", ev)
                evs.append(ev)
            # fewest violating rows; ties: more distinct rows, then fewest levels / smallest vector
            cur = min(evs, key=lambda e: (e.violations, -e.rows_before, e.total, e.node))
            trace.add("moved", cur)
        return self._result(lat, cur, trace, t0, ctx, generated=len(generated) - 1, expanded=expanded)


@register_method
class Optimal(_LatticeSearch):
    """Globally optimal full-domain search for large lattices (after ARX's Flash): binary search on chains with
    predictive tagging where feasibility is monotone, plus lower-bound pruning by the objective.

    What it relies on (each step is exact, the result equals ``exhaustive``'s):
    * objective bounds — a node's bound is a lower bound (for ``distinct_rows``: an upper bound) on the score of
      every *feasible* generalization of it: the score without suppression, and for ``discernibility`` the
      tighter Σ|E|·max(|E|, k) (a record ends in a released class of at least max(|E|, k) records or costs N).
      A generalization also has more levels, so a node whose bound cannot beat the best found prunes its up-cone.
    * tagging — the records failing the *monotone part* of the checks can only shrink under generalization:
      without suppression the monotone models (``model.monotone``), with a budget the models whose per-class
      pass survives merging (k-anonymity, distinct l-diversity), the <S,k> windows, distinct l-diversity
      implied by entropy / recursive l-diversity, and t-closeness's coverage bound (``coverage_passes``). A node where they exceed the budget is infeasible with its
      whole down-cone; Flash's binary search on chains tags the lattice with that predicate (it is feasibility
      itself when every check is monotone), then the rest is evaluated bottom-up, pruned by the bounds.
    * known losses — ``height`` and monotone non-uniform entropy depend on the level vector alone: after the
      tagging, nodes are visited in rank order and the first feasible one is the optimum.
    """

    name = "optimal"
    # max_nodes: the tags take ~(2 + 2·Σ(height+1)) bytes per node
    parameters = (_objective("discernibility"), _monotone(), _max_nodes(2_000_000))
    rows = False

    def search(self, lat: Lattice, ctx: MethodContext) -> LevelPlan:
        t0 = time.perf_counter()
        self._check_size(lat, "use fewer quasi-identifiers or shallower taxonomies")
        trace = _Trace(lat, self.measure)
        flash = _Flash(lat, self.measure, trace, lambda: self._tick(ctx, lat))
        if flash.predicate is not None:
            ctx.progress(f"optimal: classifying the lattice ({flash.predicate})")
            flash.classify()
        if flash.apriori is not None:
            flash.best_first()
        else:
            flash.sweep()
        return self._result(lat, flash.best, trace, t0, ctx, generated=flash.touched, expanded=flash.paths,
                            tagged_infeasible=int(flash.tag_false.sum()), pruned=int(flash.pruned.sum()))


class _Flash:
    """Lattice-wide state of the optimal search: node tags (predicate true / false), pruned cones, the best node."""

    def __init__(self, lat: Lattice, objective: str, trace: _Trace, tick: Any):
        self.lat, self.obj, self.trace, self.tick = lat, objective, trace, tick
        self.nodes = nodes = lat.all_nodes()
        n, self.q = nodes.shape
        shape = np.array([h + 1 for h in lat.heights])
        self.strides = np.array([int(np.prod(shape[j + 1:])) for j in range(self.q)], dtype=np.int64)
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[nodes.astype(np.int64) @ self.strides] = np.arange(n)
        self.sums = nodes.sum(axis=1)
        self.rel = np.array([1.0 / h if h else 0.0 for h in lat.heights])
        # cones as ANDs of per-attribute masks: ge[j][l] = nodes whose level j is >= l (le: <= l)
        self.ge = [[nodes[:, j] >= lvl for lvl in range(h + 1)] for j, h in enumerate(lat.heights)]
        self.le = [[nodes[:, j] <= lvl for lvl in range(h + 1)] for j, h in enumerate(lat.heights)]
        # tag by the monotone part of the checks (every check when all are monotone: then it is feasibility)
        self.predicate: str | None = ("tagging_ok" if lat.tagging or lat.implied_distinct
                                        or lat.implied_coverage else None)
        # the loss of every node without evaluating it (height, monotone entropy): nodes are then visited best first
        self.apriori = lat.apriori(objective, nodes)
        self.order = None if self.apriori is None else np.lexsort((np.arange(n), self.apriori))
        self.tag_true, self.tag_false, self.pruned, self.seen = (np.zeros(n, dtype=bool) for _ in range(4))
        # the best lower bound known for each node: the largest bound of an evaluated node it generalizes
        self.lb = np.full(n, -np.inf)
        self.ev_pos: list[int] = []                  # evaluated nodes in order; their bounds / applied flags:
        self.ev_at = np.zeros(0, dtype=np.int64)
        self.ev_bound = np.zeros(0)
        self.ev_done = np.zeros(0, dtype=bool)
        self.ev_below = np.zeros(0)                 # bound on the node's specializations (-inf: none)
        self.ev_below_done = np.zeros(0, dtype=bool)
        self.best: NodeEval | None = None
        self.key: tuple | None = None
        self.paths = self.touched = 0

    def cone(self, masks: list[list[np.ndarray]], i: int) -> np.ndarray:
        out = masks[0][self.nodes[i, 0]].copy()
        for j in range(1, self.q):
            out &= masks[j][self.nodes[i, j]]
        return out

    def _prunable(self, js: np.ndarray) -> np.ndarray:
        """Bounds that cannot beat the best (an equal bound loses on levels unless below best's level sum)."""
        if self.key is None:
            return np.zeros(len(js), dtype=bool)
        bounds, at = self.ev_bound[js], self.ev_at[js]
        return (bounds > self.key[0]) | ((bounds == self.key[0]) & (self.sums[at] >= self.key[1]))

    def _prune(self, js: np.ndarray, up: np.ndarray | None = None) -> None:
        """Prune the up-cones of evaluated nodes ``js`` (``up``: the cone of the newest one, already computed)."""
        last = len(self.ev_pos) - 1
        for j in js:
            i = self.ev_pos[j]
            self.ev_done[j] = True
            cone = up.copy() if up is not None and j == last else self.cone(self.ge, i)
            cone[i] = False
            newly = cone & ~self.pruned
            if newly.any():
                self.pruned[newly] = True
                self.trace.rows.append({"step": len(self.trace.rows), "node": self.lat.as_dict(self.nodes[i]),
                                        "event": "pruned", "violations": None, "distinct_rows": None,
                                        "feasible": None, "score": None})

    def _prune_below(self, js: np.ndarray) -> None:
        """Prune the down-cones of evaluated nodes whose bound on their specializations exceeds the best loss
        (strictly: a specialization has fewer levels and would win a tie)."""
        if self.key is None:
            return
        for j in js[self.ev_below[js] > self.key[0]]:
            self.ev_below_done[j] = True
            cone = self.cone(self.le, self.ev_pos[j])
            self.pruned[cone & ~self.seen] = True

    def visit(self, i: int) -> NodeEval:
        """Evaluate node i; update the best, the tags and the pruned cones."""
        ev = self.lat.evaluate(tuple(int(x) for x in self.nodes[i]))
        self.seen[i] = True
        self.tick()
        self.trace.add("evaluated", ev)
        improved = False
        if ev.feasible:
            key = self.lat.rank_key(ev, self.obj)
            if self.key is None or key < self.key:
                self.best, self.key, improved = ev, key, True
                self.trace.add("best", ev)
        up = self.cone(self.ge, i)
        if self.predicate is not None:
            if getattr(ev, self.predicate):
                self.tag_true |= up
            else:
                self.tag_false[self.cone(self.le, i)] = True
        j = len(self.ev_pos)
        if j == len(self.ev_bound):   # grow the per-evaluation arrays (amortized, no per-visit list conversion)
            self.ev_bound = np.concatenate([self.ev_bound, np.zeros(max(64, j))])
            self.ev_done = np.concatenate([self.ev_done, np.zeros(max(64, j), dtype=bool)])
            self.ev_at = np.concatenate([self.ev_at, np.zeros(max(64, j), dtype=np.int64)])
            self.ev_below = np.concatenate([self.ev_below, np.full(max(64, j), -np.inf)])
            self.ev_below_done = np.concatenate([self.ev_below_done, np.zeros(max(64, j), dtype=bool)])
        bound = self.lat.loss(ev, self.obj, bound=True)
        below = self.lat.loss_below(ev, self.obj)
        self.ev_pos.append(i)
        self.ev_at[j], self.ev_bound[j], self.ev_done[j] = i, bound, False
        self.ev_below[j] = -np.inf if below is None else below
        np.maximum(self.lb, bound, out=self.lb, where=up)
        # the newest bounds, and after a better best every earlier bound not yet applied
        js = np.flatnonzero(~self.ev_done[:j + 1]) if improved else np.array([j])
        self._prune(js[self._prunable(js)], up)
        if below is not None:
            self._prune_below(np.flatnonzero(~self.ev_below_done[:j + 1]) if improved else np.array([j]))
        return ev

    def _path(self, start: int, open_: np.ndarray) -> list[int]:
        """Climb from ``start`` through open nodes, raising the attribute with the lowest relative level."""
        path = [start]
        while True:
            cur = tuple(int(x) for x in self.nodes[path[-1]])
            order = sorted((j for j in range(self.q) if cur[j] < self.lat.heights[j]),
                           key=lambda j: (cur[j] * self.rel[j], j))
            nxt = None
            for j in order:
                c = int(self.pos[int(np.dot(cur, self.strides)) + int(self.strides[j])])
                if open_[c]:
                    nxt = c
                    break
            if nxt is None:
                return path
            path.append(nxt)

    def classify(self) -> None:
        """Flash: binary search for the predicate's boundary on chains of open nodes until every node is tagged."""
        while True:
            open_ = ~(self.tag_true | self.tag_false | self.pruned)
            if not open_.any():
                return
            path = self._path(int(np.argmax(open_)), open_)
            self.paths += 1
            self.touched += len(path)
            lo, hi = 0, len(path) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                i = path[mid]
                if self.pruned[i] or self.tag_true[i]:
                    hi = mid - 1
                elif self.tag_false[i]:
                    lo = mid + 1
                elif getattr(self.visit(i), self.predicate):  # type: ignore[arg-type]
                    hi = mid - 1
                else:
                    lo = mid + 1

    def best_first(self) -> None:
        """Visit nodes in rank order (loss known before evaluation, then fewest levels, then smallest vector),
        skipping those tagged infeasible or pruned: the first feasible node is the optimum. An evaluated node failing
        the monotone checks tags its down-cone."""
        for i in self.order:  # type: ignore[union-attr]
            if self.tag_false[i] or self.pruned[i]:
                continue
            if self.seen[i]:
                ev = self.lat.evaluate(tuple(int(x) for x in self.nodes[i]))   # cached
            else:
                self.touched += 1
                ev = self.visit(int(i))
            if ev.feasible:
                return

    def sweep(self) -> None:
        """Evaluate every node neither tagged infeasible, pruned nor evaluated, best lower bound first (ties:
        bottom-up): a node whose bound (inherited from the evaluated nodes below it, raised as they are evaluated)
        cannot beat the best found is skipped. The bounds only grow, so a stale heap entry is pushed back with its
        current bound; the loop ends when no open node can beat the best."""
        open_ = np.flatnonzero(~(self.tag_false | self.pruned | self.seen))
        heap = list(zip(self.lb[open_].tolist(), open_.tolist()))
        heapq.heapify(heap)
        while heap:
            bound, i = heapq.heappop(heap)
            if self.pruned[i] or self.seen[i]:
                continue
            if self.lb[i] > bound:
                heapq.heappush(heap, (float(self.lb[i]), i))
                continue
            if self.key is not None and (bound > self.key[0] or (bound == self.key[0] and self.sums[i] > self.key[1])):
                self.pruned[np.flatnonzero(~(self.tag_false | self.pruned | self.seen))] = True
                return   # every open node has at least this bound: none can beat the best
            self.touched += 1
            self.visit(i)
