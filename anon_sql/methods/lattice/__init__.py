"""The generalization lattice of a release, evaluated from counts (spec/01 §2–§5).

One DuckDB GROUP BY over the ``__source`` view builds the base table of distinct (quasi-identifier, sensitive, other
released column) combinations with their record counts (:mod:`.encode`). A node (one level per quasi-identifier) is
evaluated by mapping integer taxonomy codes and re-aggregating in numpy, rolled up from the smallest cached finer node
(:mod:`.evaluate`): the cost of a node is O(#distinct combinations), never a rescan of the source. Feasibility follows
the release's semantics exactly: with a suppression budget, the classes failing a model or an <S,k> window are
suppressed and what is left is checked again until it passes (a fixed point, :mod:`.settle`), so a node the lattice
calls feasible is one the SQL verification accepts. Scores and bounds: :mod:`.utility`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from ...common.wording import counted
from ...data.taxonomy import Taxonomy
from ...errors import TaxonomyError
from ...models import group_rules
from ...policy.objectives import MEASURES, OBJECTIVES  # re-exported (tests import them from here)
from .encode import BaseLoading, State, encode_taxonomy
from .evaluate import CACHE_SLOTS, NodeEval, NodeEvaluation
from .settle import Settling
from .signature import SignatureRollup
from .utility import Utility, quantize


class Lattice(BaseLoading, NodeEvaluation, SignatureRollup, Settling, Utility):
    """Full-domain generalization lattice of a policy's quasi-identifiers with count-based node evaluation."""

    def __init__(self, con: Any, policy: Any, source_view: str, taxonomies: dict[str, Taxonomy],
                 models: Sequence[Any], records: int, rows: bool = True, measures: Sequence[str] | None = None,
                 base: exp.Table | None = None, varying: Sequence[str] = (), base_rows: Any = None):
        self.policy = policy
        # QIs varying inside privacy units: classes are the units' signatures (:mod:`.signature`)
        self.varying: tuple[str, ...] = tuple(varying)
        # the measures node evaluations compute (None: all of them); a search asks only for its objective's
        unknown = sorted(set(measures or ()) - set(MEASURES))
        if unknown:
            raise ValueError(f"unknown lattice measure(s) {unknown}; known: {sorted(MEASURES)}")
        self.measures: tuple[str, ...] = tuple(MEASURES if measures is None else dict.fromkeys(measures))
        self.quasi: list[str] = list(policy.quasi)
        missing = [q for q in self.quasi if q not in taxonomies]
        if missing:
            raise TaxonomyError(f"quasi-identifier(s) {missing} have no taxonomy; a lattice search needs one each")
        self.enc = [encode_taxonomy(q, taxonomies[q]) for q in self.quasi]
        self.heights = tuple(e.height for e in self.enc)
        # the class-level models; the <S,k> group rules are evaluated as windows over the classes (see _checks)
        self.models = [m for m in models if m.per_class]
        self.requirements = [([self.quasi.index(a) for a in r.quasi], r.k) for r in group_rules(models)]
        self.records = float(records)
        self.allow_suppression = policy.privacy.max_suppression > 0
        self.budget = policy.privacy.max_suppression * records
        # the checks whose failing records can only shrink under generalization (with a budget: the models whose
        # per-class pass survives merging; without one: the monotone models), and the <S,k> windows: a node whose
        # records failing them exceed the budget has every specialization infeasible too
        self.tagging: list[int] = [i for i, m in enumerate(self.models)
                                   if (m.suppression_monotone if self.allow_suppression else m.monotone)]
        self.tagging += [len(self.models) + r for r in range(len(self.requirements))]
        # entropy and recursive (c, l)-diversity need at least l distinct sensitive values per class: distinct
        # l-diversity, whose pass survives merging, is a necessary check to tag with
        self.implied_distinct = [(m.attribute, m.implied_distinct) for m in self.models if self.allow_suppression
                                 and m.implied_distinct]
        # t-closeness: a passing class's values cover at least 1 − t / (smallest ground distance) of the table's
        # distribution, a pass that survives merging (the model's ``coverage_passes``): a necessary check to tag with
        self.implied_coverage = [m for m in self.models if self.allow_suppression
                                 and getattr(m, "coverage_passes", None) is not None]
        # every released class has at least this many records (the k of k-anonymity): DM's bound uses it
        self.min_class = max([int(getattr(m, "k", 1)) for m in self.models if m.name == "k_anonymity"] + [1])
        # every check passes or fails per class on that class alone: what is left after suppressing the failing
        # classes passes them all, no re-check of the remainder needed
        self.local_checks = not self.requirements and all(getattr(m, "class_local", False) for m in self.models)
        # every check is in the tagging set: a node's failing records (``need``) fail at each of its specializations
        self.need_nested = len(self.tagging) == len(self.models) + len(self.requirements)
        self.rows = rows
        self.root = tuple(0 for _ in self.quasi)
        self.top = self.heights
        self._maps: dict[tuple[int, int, int], np.ndarray | None] = {}
        self._evals: dict[tuple[int, ...], NodeEval] = {}
        self._entropy_levels: list[list[float]] | None = None
        self.evaluations = 0
        self._base = self._load_base(con, source_view, base, base_rows)
        self._population = self._load_population(con)
        q = len(self.quasi)
        self._slots = np.full((CACHE_SLOTS, q), np.iinfo(np.int16).max, dtype=np.int16)
        self._slot_groups = np.full(CACHE_SLOTS, np.inf)
        self._slot_used = np.zeros(CACHE_SLOTS, dtype=np.int64)
        self._slot_state: list[State | None] = [None] * CACHE_SLOTS
        self._cached_groups = 0      # groups held by the cached states (bounded by CACHE_GROUPS)
        self._base_levels: dict[tuple[int, int], np.ndarray] = {}   # (attribute, level) → base table's codes
        self._clock = 0
        self._restricted = [j for j, e in enumerate(self.enc) if any(self._map(j, a, b) is None
                            for a in range(1, e.height + 1) for b in range(a + 1, e.height + 1))]

    @classmethod
    def from_context(cls, ctx: Any, rows: bool = True, measures: Sequence[str] | None = None) -> "Lattice":
        """The lattice of a method context (``ctx.source_view`` is read once)."""
        return cls(ctx.con, ctx.policy, ctx.source_view, ctx.taxonomies, ctx.models, ctx.records, rows=rows,
                   measures=measures, base=getattr(ctx, "base", None), varying=getattr(ctx, "varying", ()),
                   base_rows=getattr(ctx, "base_rows", None))

    # -- structure ---------------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return int(np.prod([h + 1 for h in self.heights], dtype=np.float64))

    def successors(self, node: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Nodes one level higher in one attribute, in attribute order."""
        return [node[:j] + (node[j] + 1,) + node[j + 1:] for j in range(len(node)) if node[j] < self.heights[j]]

    def predecessors(self, node: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [node[:j] + (node[j] - 1,) + node[j + 1:] for j in range(len(node)) if node[j] > 0]

    def all_nodes(self) -> np.ndarray:
        """Every level vector, ordered by total level, then lexicographically (the tie order of spec/00)."""
        shape = tuple(h + 1 for h in self.heights)
        nodes = np.indices(shape).reshape(len(shape), -1).T.astype(np.int16)
        return nodes[np.argsort(nodes.sum(axis=1), kind="stable")]

    def as_dict(self, node: Sequence[int]) -> dict[str, int]:
        return {q: int(level) for q, level in zip(self.quasi, node)}

    def check_node(self, node: Sequence[int]) -> tuple[int, ...]:
        node = tuple(int(x) for x in node)
        if len(node) != len(self.quasi) or any(not 0 <= x <= h for x, h in zip(node, self.heights)):
            raise ValueError(f"node {node} is not in the lattice of {self.quasi} (heights {self.heights})")
        return node

    def suppression_monotone(self) -> bool:
        """Whether the records needing suppression can only shrink under generalization (for every model)."""
        return all(m.suppression_monotone for m in self.models)

    def describe_failure(self, ev: NodeEval) -> str:
        parts = [f"{name} fails for {counted(c, 'class')} ({counted(r, 'record')})" for name, (c, r) in ev.failures.items()]
        return "; ".join(parts) or "the remainder after suppression fails a requirement"


__all__ = ["Lattice", "NodeEval", "MEASURES", "OBJECTIVES", "quantize"]
