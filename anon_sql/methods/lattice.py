"""The generalization lattice of a release, evaluated from counts (spec/01 §2–§5).

One DuckDB GROUP BY over the ``__source`` view builds the base table of distinct (quasi-identifier, sensitive, other
released column) combinations with their record counts. A node (one level per quasi-identifier) is evaluated by
mapping integer taxonomy codes and re-aggregating in numpy, rolled up from the smallest cached finer node: the cost of
a node is O(#distinct combinations), never a rescan of the source. Feasibility follows the compiler's semantics
exactly (one suppression round of every class failing a model or an <S,k> window, then the remainder re-checked), so
a node the lattice calls feasible is one the SQL verification accepts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..data import base_counts
from ..errors import TaxonomyError
from ..models import ClassStats, SensitiveCounts, group_rules
from ..policy.objectives import MEASURES, OBJECTIVES  # OBJECTIVES: re-exported (tests import it from here)
from ..common.sqlbuild import alias, col, dtype, record_count, render, table
from ..data.taxonomy import TOP, Taxonomy
from ..udfs.utility import discernibility, dot, ncp_categorical
from ..common.wording import counted

if TYPE_CHECKING:
    import pandas as pd

EPS = 1e-9
_CACHE_SLOTS = 64
_CACHE_GROUPS = 4_000_000
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


@dataclass
class _Encoding:
    """One quasi-identifier: leaf codes (NULL last) → code at each level, domain sizes and NCP per code."""

    name: str
    height: int
    codes: list[np.ndarray]
    cards: list[int]
    ncp: list[np.ndarray]
    leaves: list[str]
    position: dict[str, int] = field(default_factory=dict)   # leaf → its code


@dataclass
class _State:
    """A node's group table: distinct (quasi-identifier codes, rest code) with record counts."""

    node: tuple[int, ...]
    q: list[np.ndarray]
    rest: np.ndarray
    w: np.ndarray


# the base query's rendered text per shape (source or base relation, columns): a warm release renders it once
_BASE_SQL: dict[tuple, str] = {}

# a taxonomy's encoding depends on its content alone: built once per content digest (a warm release reuses it)
_ENCODINGS: dict[str, tuple] = {}
_ENCODINGS_MAX = 256


def _encode(name: str, tax: Taxonomy) -> _Encoding:
    key = tax.fingerprint()
    hit = _ENCODINGS.get(key)
    if hit is None:
        if len(_ENCODINGS) >= _ENCODINGS_MAX:
            _ENCODINGS.pop(next(iter(_ENCODINGS)))
        hit = _ENCODINGS[key] = _encode_levels(tax)
    return _Encoding(name, tax.height, *hit)


def _encode_levels(tax: Taxonomy) -> tuple:
    import pandas as pd
    lv = tax.levels
    leaves = lv["level0"].tolist()
    n = len(leaves)
    null_anc = tax.null_parent or TOP
    codes, cards, ncp = [np.arange(n + 1, dtype=np.int64)], [n + 1], [np.zeros(n + 1)]
    for level in range(1, tax.height + 1):
        inv, uniq = pd.factorize(pd.Series(lv[f"level{level}"].tolist() + [null_anc], dtype=object))
        counts = np.bincount(inv[:n], minlength=len(uniq))
        frac = np.where(counts == 0, 1.0, ncp_categorical(counts, n))  # reached only by NULL: nothing is known about the value
        codes.append(inv.astype(np.int64))
        cards.append(len(uniq))
        ncp.append(frac)
    return codes, cards, ncp, leaves, {leaf: i for i, leaf in enumerate(leaves)}


def _factorize(key: np.ndarray, radix: int | None = None) -> tuple[np.ndarray, int]:
    """Dense codes 0..m-1 of non-negative int64 keys below ``radix``: by a presence table when the key range is
    small (no hashing), else by pandas' hash table."""
    import pandas as pd
    if radix is not None and radix <= 4 * len(key) + 4096:
        present = np.zeros(radix, dtype=np.int64)
        present[key] = 1
        ids = np.cumsum(present)
        return ids[key] - 1, int(ids[-1]) if radix else 0
    codes, uniq = pd.factorize(key, sort=False)
    return codes.astype(np.int64, copy=False), len(uniq)


def _first_index(codes: np.ndarray, n: int) -> np.ndarray:
    """Index of the first row of each code."""
    first = np.empty(n, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return first


def _combine(columns: Sequence[np.ndarray], cards: Sequence[int], length: int) -> tuple[np.ndarray, int]:
    """One int64 key per row for a tuple of code columns (re-densified before it could overflow), and its range."""
    key = np.zeros(length, dtype=np.int64)
    radix = 1
    for c, card in zip(columns, cards):
        if card == 1:
            continue        # one value (e.g. the top level): adds nothing to the key
        if radix * card >= 2 ** 62:
            key, radix = _factorize(key)
        key *= card          # in place: no temporaries per column
        key += c
        radix *= card
    return key, radix


def _fetch_arrow(con: Any, sql: str) -> pa.Table:
    """A query's result as an Arrow table (DuckDB hands it over without a pandas copy; other connections' frames
    are converted)."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        return con.sql(sql).to_arrow_table()
    return pa.Table.from_pandas(con.execute(sql).df(), preserve_index=False)


def quantize(value: float) -> float:
    """Scores compared for ties are rounded so that roll-up order cannot make equal scores differ."""
    return float(round(value, 9))


class Lattice:
    """Full-domain generalization lattice of a policy's quasi-identifiers with count-based node evaluation."""

    def __init__(self, con: Any, policy: Any, source_view: str, taxonomies: dict[str, Taxonomy],
                 models: Sequence[Any], records: int, rows: bool = True, measures: Sequence[str] | None = None,
                 base: exp.Table | None = None):
        self.policy = policy
        # the measures node evaluations compute (None: all of them); a search asks only for its objective's
        unknown = sorted(set(measures or ()) - set(MEASURES))
        if unknown:
            raise ValueError(f"unknown lattice measure(s) {unknown}; known: {sorted(MEASURES)}")
        self.measures: tuple[str, ...] = tuple(MEASURES if measures is None else dict.fromkeys(measures))
        self.quasi: list[str] = list(policy.quasi)
        missing = [q for q in self.quasi if q not in taxonomies]
        if missing:
            raise TaxonomyError(f"quasi-identifier(s) {missing} have no taxonomy; a lattice search needs one each")
        self.enc = [_encode(q, taxonomies[q]) for q in self.quasi]
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
                        if (m.suppression_monotone
                            if self.allow_suppression else m.monotone)]
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
        self._base = self._load_base(con, source_view, base)
        self._population = self._load_population(con)
        q = len(self.quasi)
        self._slots = np.full((_CACHE_SLOTS, q), np.iinfo(np.int16).max, dtype=np.int16)
        self._slot_groups = np.full(_CACHE_SLOTS, np.inf)
        self._slot_used = np.zeros(_CACHE_SLOTS, dtype=np.int64)
        self._slot_state: list[_State | None] = [None] * _CACHE_SLOTS
        self._cached_groups = 0      # groups held by the cached states (bounded by _CACHE_GROUPS)
        self._base_levels: dict[tuple[int, int], np.ndarray] = {}   # (attribute, level) → base table's codes
        self._clock = 0
        self._restricted = [j for j, e in enumerate(self.enc) if any(self._map(j, a, b) is None
                            for a in range(1, e.height + 1) for b in range(a + 1, e.height + 1))]

    @classmethod
    def from_context(cls, ctx: Any, rows: bool = True, measures: Sequence[str] | None = None) -> "Lattice":
        """The lattice of a method context (``ctx.source_view`` is read once)."""
        return cls(ctx.con, ctx.policy, ctx.source_view, ctx.taxonomies, ctx.models, ctx.records, rows=rows,
                   measures=measures, base=getattr(ctx, "base", None))

    # -- the base table ----------------------------------------------------------------------------------------
    def _load_base(self, con: Any, source_view: str, base: exp.Table | None = None) -> _State:
        """The distinct combinations with their weights, integer-coded; read from ``base`` (the release's base
        counts, already grouped by the quasi-identifiers and sensitive attributes) when every grouping column is
        there, else aggregated from the source view."""
        view = table(source_view)
        probe = con.execute(render(exp.select("*").from_(view.copy()).limit(0)))
        columns = [d[0] for d in probe.description]
        probe.fetchall()
        count = self.policy.count_column
        sens: list[str] = []
        for m in self.models:
            a = getattr(m, "attribute", None)
            if getattr(m, "needs_sensitive", False) and a is not None and a not in sens:
                sens.append(a)
        others = [c for c in columns if c not in self.quasi and c != count and c not in sens] if self.rows else []
        rest_cols = sens + others
        group_cols = self.quasi + rest_cols
        w_name = "__anon_w"
        while w_name in columns:
            w_name += "_"
        use_base = base is not None and set(group_cols) <= set(base_counts.keys(self.policy))
        # the query's text depends on these alone: rendered once per shape (a warm release reuses it)
        shape = (render(base if use_base else view), tuple(self.quasi), tuple(sens), tuple(rest_cols), count, w_name,
                 use_base and set(group_cols) == set(base_counts.keys(self.policy)))
        text = _BASE_SQL.get(shape)
        if text is None:
            if len(_BASE_SQL) >= 256:
                _BASE_SQL.clear()
            text = _BASE_SQL[shape] = render(self._base_query(view, base if use_base else None, sens, rest_cols,
                                                              w_name, shape[-1]))
        frame = _fetch_arrow(con, text)
        n = frame.num_rows
        qcodes = []
        for i, e in enumerate(self.enc):
            # dictionary-encode the column (Arrow, no Python per row), then look the few distinct values up
            values = frame.column(f"__q{i}").combine_chunks().dictionary_encode()
            distinct = values.dictionary.to_pylist()
            leaf = np.array([e.position.get(v, -1) for v in distinct], dtype=np.int64)
            if (leaf < 0).any():
                raise TaxonomyError(f"taxonomy of {e.name!r} has no leaf for value(s) "
                                    f"{sorted({str(v) for v, c in zip(distinct, leaf) if c < 0})[:10]}")
            lookup = np.append(leaf.astype(np.int64), len(e.leaves))   # NULL: the last code
            idx = pc.fill_null(values.indices, len(distinct)).to_numpy(zero_copy_only=False).astype(np.int64)
            qcodes.append(lookup[idx])
        rest = frame.column("__r").to_numpy().astype(np.int64) if rest_cols else np.zeros(n, dtype=np.int64)
        # a fixed row order (by the codes, which identify a row) makes float sums, and so scores and traces,
        # identical run to run whatever order the engine returns the groups in
        order = np.lexsort([rest, *qcodes[::-1]])
        self.n_rest = int(rest.max()) + 1 if n else 1
        self.sensitive = sens
        self.sa_of_rest, self.sa_card, self.sa_labels = [], [], []
        for i in range(len(sens)):
            s = frame.column(f"__s{i}").to_numpy().astype(np.int64)
            lookup = np.zeros(self.n_rest, dtype=np.int64)
            lookup[rest] = s
            self.sa_of_rest.append(lookup)
            self.sa_card.append(int(s.max()) + 1 if n else 0)
            labels = np.empty(self.sa_card[-1], dtype=object)  # the VARCHAR value of each code (None = NULL)
            labels[s] = np.array(frame.column(f"__v{i}").to_pylist() + [None], dtype=object)[:-1]
            self.sa_labels.append(labels)
        self.base_rows = n
        return _State(self.root, [c[order] for c in qcodes], rest[order],
                      frame.column(w_name).to_numpy().astype(np.float64)[order])

    def _base_query(self, view: exp.Table, base: exp.Table | None, sens: list[str], rest_cols: list[str],
                    w_name: str, grouped: bool) -> exp.Select:
        """SELECT the quasi-identifiers as text, the sensitive values' and the rest's dense ranks and the weight of
        each distinct combination, from the base counts (``grouped``: already grouped by exactly these columns) or
        aggregated from the source view."""
        group_cols = self.quasi + rest_cols
        weight: exp.Expression = record_count(self.policy.count_column)
        if base is not None:
            view = base.copy()
            weight = col(base_counts.WEIGHT) if grouped else exp.Sum(this=col(base_counts.WEIGHT))
        weight = exp.Cast(this=weight, to=dtype("DOUBLE"))
        inner = exp.select(*[col(c) for c in group_cols], alias(weight, w_name)).from_(view)
        if not grouped:
            inner = inner.group_by(*[col(c) for c in group_cols])

        def rank(cols: list[str]) -> exp.Expression:
            order = exp.Order(expressions=[exp.Ordered(this=col(c)) for c in cols])
            return exp.Sub(this=exp.Window(this=exp.DenseRank(), order=order), expression=exp.Literal.number(1))

        items: list[exp.Expression] = [alias(exp.Cast(this=col(c), to=dtype("VARCHAR")), f"__q{i}")
                                       for i, c in enumerate(self.quasi)]
        items += [alias(rank([s]), f"__s{i}") for i, s in enumerate(sens)]
        items += [alias(exp.Cast(this=col(s), to=dtype("VARCHAR")), f"__v{i}") for i, s in enumerate(sens)]
        if rest_cols:
            items.append(alias(rank(rest_cols), "__r"))
        items.append(col(w_name))
        return exp.select(*items).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("b"))))

    def _load_population(self, con: Any) -> tuple[list[np.ndarray], np.ndarray] | None:
        """k-map / δ-presence: the population's distinct quasi-identifier combinations as leaf codes, with their
        records (None without a population model)."""
        pops = [m.population for m in self.models if getattr(m, "needs_population", False)]
        if not pops:
            return None
        if pops[0].relation is None:
            raise TaxonomyError(f"population {pops[0].name!r} was not resolved against the source")
        from ..models.population import WEIGHT

        v = [exp.Cast(this=col(q), to=exp.DataType.build("VARCHAR")) for q in self.quasi]
        query = (exp.select(*[alias(x, f"__q{i}") for i, x in enumerate(v)], alias(exp.Sum(this=col(WEIGHT)), "__w"))
                 .from_(exp.Subquery(this=pops[0].relation.copy(), alias=exp.TableAlias(this=exp.to_identifier("p"))))
                 .group_by(*[x.copy() for x in v]))
        import pandas as pd

        frame = con.execute(render(query)).df()
        codes = []
        for i, e in enumerate(self.enc):
            values = frame[f"__q{i}"]
            c = np.asarray(pd.Categorical(values.astype(object), categories=e.leaves).codes, dtype=np.int64)
            bad = (c < 0) & values.notna().to_numpy()
            if bad.any():
                raise TaxonomyError(f"population {pops[0].name!r}: taxonomy of {e.name!r} has no leaf for value(s) "
                                    f"{sorted(set(values[bad].astype(str)))[:10]}")
            codes.append(np.where(c < 0, len(e.leaves), c))
        return codes, frame["__w"].to_numpy(np.float64)

    def _population_counts(self, node: tuple[int, ...], reps: list[np.ndarray]) -> np.ndarray | None:
        """Records of the population in each class of ``node`` (classes given by their codes ``reps``)."""
        if self._population is None:
            return None
        pq, pw = self._population
        n = len(reps[0]) if reps else 0
        merged = [np.concatenate([r, self._map(j, 0, b)[pq[j]]]) for j, (r, b) in enumerate(zip(reps, node))]
        ids, m = _factorize(*_combine(merged, [e.cards[b] for e, b in zip(self.enc, node)], n + len(pw)))
        return np.bincount(ids[n:], weights=pw, minlength=m)[ids[:n]]

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

    # -- roll-up -----------------------------------------------------------------------------------------------
    def _map(self, j: int, a: int, b: int) -> np.ndarray | None:
        """Code at level a → code at level b of attribute j (None when NULL's parent makes it not a function)."""
        e = self.enc[j]
        if a == 0:
            return e.codes[b]
        key = (j, a, b)
        if key not in self._maps:
            m = np.zeros(e.cards[a], dtype=np.int64)
            m[e.codes[a]] = e.codes[b]
            self._maps[key] = m if np.array_equal(m[e.codes[a]], e.codes[b]) else None
        return self._maps[key]

    def _source(self, node: tuple[int, ...]) -> _State:
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

    def _remember(self, state: _State) -> None:
        if len(state.w) >= len(self._base.w):
            return
        free = np.flatnonzero(~np.isfinite(self._slot_groups))
        i = int(free[0]) if len(free) else int(np.argmin(self._slot_used))
        self._store(i, state)
        while self._cached_groups > _CACHE_GROUPS:
            used = np.where(np.isfinite(self._slot_groups), self._slot_used, np.iinfo(np.int64).max)
            self._store(int(np.argmin(used)), None)

    def _store(self, i: int, state: _State | None) -> None:
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
        src = self._source(node)
        state, sizes, reps, g_cls = self._rollup(src, node)
        result = self._judge(node, sizes, reps, g_cls, state)
        if node != self.root:
            self._remember(state)
        self._evals[node] = result
        return result

    def _rollup(self, src: _State, node: tuple[int, ...]) -> tuple[_State, np.ndarray, list[np.ndarray], np.ndarray]:
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
                if src is self._base and len(codes) * (len(self._base_levels) + 1) <= _CACHE_GROUPS:
                    self._base_levels[(j, b)] = codes
                q.append(codes)
        cards = [e.cards[b] for e, b in zip(self.enc, node)]
        cls, n_cls = _factorize(*_combine(q, cards, len(src.w)))
        sizes = np.bincount(cls, weights=src.w, minlength=n_cls)
        first = _first_index(cls, n_cls)
        reps = [a[first] for a in q]
        if self.n_rest > 1:
            grp, n_grp = _factorize(cls * self.n_rest + src.rest, n_cls * self.n_rest)
            g_first = _first_index(grp, n_grp)
            state = _State(node, [a[g_first] for a in q], src.rest[g_first],
                           np.bincount(grp, weights=src.w, minlength=n_grp))
            return state, sizes, reps, cls[g_first]
        state = _State(node, reps, np.zeros(n_cls, dtype=np.int64), sizes)
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
            f, _ = _factorize(*_combine([reps[j] for j in idx], [int(reps[j].max(initial=0)) + 1 for j in idx], n))
            window = np.bincount(f, weights=stats.sizes)[f] if n else np.zeros(0)
            out.append((f"<{{{', '.join(self.quasi[j] for j in idx)}}}, {k}>", window >= k))
        return out

    def _judge(self, node: tuple[int, ...], sizes: np.ndarray, reps: list[np.ndarray], g_cls: np.ndarray,
               state: _State) -> NodeEval:
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
                kept = self._settle(sizes, reps, g_cls, state, ok, stats.population)
            suppressed = float(sizes[~kept].sum())
            feasible = within and suppressed <= self.budget + EPS
        free = self._measures(node, sizes, reps, None, 0.0, rows_before)   # as if nothing were suppressed
        if suppressed:
            rows_after = int(np.count_nonzero(kept[g_cls])) if self.rows else None
            scores = self._measures(node, sizes, reps, kept, suppressed, rows_after)
        else:
            rows_after, scores = rows_before, dict(free)
        bounds = free
        if "discernibility" in free:
            # a record of a class of size s is, in any feasible generalization, in a released class of at least
            # max(s, k) records or suppressed at cost N >= max(s, k)
            bounds["discernibility"] = dot(sizes, np.maximum(sizes, self.min_class))
        return NodeEval(node, len(sizes), violations, rows_after, rows_before, need, suppressed, within, feasible,
                        scores, bounds, failures, tagging_ok)

    def _settle(self, sizes: np.ndarray, reps: list[np.ndarray], g_cls: np.ndarray, state: _State,
                kept: np.ndarray, population: np.ndarray | None = None) -> np.ndarray:
        """The classes kept when the failing ones are suppressed to a fixed point, as the release does
        (:func:`anon_sql.runner.suppression.settle`): what is left is checked again (the SQL verification) and the classes
        failing there go too, until what is left passes or nothing is."""
        kept = kept.copy()
        while kept.any():
            idx = np.flatnonzero(kept)
            new_id = np.cumsum(kept) - 1
            g_keep = kept[g_cls]
            stats = self._stats(sizes[kept], new_id[g_cls[g_keep]], state.rest[g_keep], state.w[g_keep],
                                compact=True)
            stats.population = None if population is None else population[kept]
            passed = np.ones(len(idx), dtype=bool)
            for _, ok in self._checks(stats, [r[kept] for r in reps]):
                passed &= ok
            if passed.all():
                break
            kept[idx[~passed]] = False
        return kept

    def _measures(self, node: tuple[int, ...], sizes: np.ndarray, reps: list[np.ndarray], kept: np.ndarray | None,
                  suppressed: float, rows: int | None) -> dict[str, float | None]:
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
                leaf = np.bincount(self._base.q[j], weights=self._base.w, minlength=e.cards[0])
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

    def suppression_monotone(self) -> bool:
        """Whether the records needing suppression can only shrink under generalization (for every model)."""
        return all(m.suppression_monotone for m in self.models)

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

    def describe_failure(self, ev: NodeEval) -> str:
        parts = [f"{name} fails for {counted(c, 'class')} ({counted(r, 'record')})" for name, (c, r) in ev.failures.items()]
        return "; ".join(parts) or "the remainder after suppression fails a requirement"
