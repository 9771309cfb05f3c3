"""Loading and integer-coding a lattice's base table: each quasi-identifier's taxonomy as codes per level, the
distinct (quasi-identifier, sensitive, rest) combinations with their records read once from DuckDB, and the
population's combinations for k-map / δ-presence."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ...common.sqlbuild import alias, col, dtype, lit, record_count, render, table
from ...data import base_counts
from ...data.taxonomy import TOP, Taxonomy
from ...common.columns import UNIT
from ...errors import PolicyError, TaxonomyError
from ..people import SIZE_WEIGHT, people_counts
from ...udfs.utility import ncp_categorical


@dataclass
class Encoding:
    """One quasi-identifier: leaf codes (NULL last) → code at each level, domain sizes and NCP per code."""

    name: str
    height: int
    codes: list[np.ndarray]
    cards: list[int]
    ncp: list[np.ndarray]
    leaves: list[str]
    position: dict[str, int] = field(default_factory=dict)   # leaf → its code


@dataclass
class State:
    """A node's group table: distinct (quasi-identifier codes, rest code) with record counts."""

    node: tuple[int, ...]
    q: list[np.ndarray]
    rest: np.ndarray
    w: np.ndarray
    # with a privacy unit and sensitive values: each group's share of the class size (a person counts once, in one
    # of their groups), while ``w`` counts the people holding the group's value (docs/units.md); None: ``w`` is both
    n: np.ndarray | None = None


# the dtype of taxonomy codes (a few thousand values at most per level): half the memory traffic of int64 in the
# gathers of every roll-up; keys combining several attributes are int64 (:func:`combine`)
CODE = np.int32

# the base query's rendered text per shape (source or base relation, columns): a warm release renders it once
BASE_SQL: dict[tuple, str] = {}

# a taxonomy's encoding depends on its content alone: built once per content digest (a warm release reuses it)
ENCODINGS: dict[str, tuple] = {}
ENCODINGS_MAX = 256


def encode_taxonomy(name: str, tax: Taxonomy) -> Encoding:
    key = tax.fingerprint()
    hit = ENCODINGS.get(key)
    if hit is None:
        if len(ENCODINGS) >= ENCODINGS_MAX:
            ENCODINGS.pop(next(iter(ENCODINGS)))
        hit = ENCODINGS[key] = encode_levels(tax)
    return Encoding(name, tax.height, *hit)


def encode_levels(tax: Taxonomy) -> tuple:
    import pandas as pd
    lv = tax.levels
    leaves = lv["level0"].tolist()
    n = len(leaves)
    null_anc = tax.null_parent or TOP
    codes, cards, ncp = [np.arange(n + 1, dtype=CODE)], [n + 1], [np.zeros(n + 1)]
    for level in range(1, tax.height + 1):
        inv, uniq = pd.factorize(pd.Series(lv[f"level{level}"].tolist() + [null_anc], dtype=object))
        counts = np.bincount(inv[:n], minlength=len(uniq))
        frac = np.where(counts == 0, 1.0, ncp_categorical(counts, n))  # reached only by NULL: nothing is known about the value
        codes.append(inv.astype(CODE))
        cards.append(len(uniq))
        ncp.append(frac)
    return codes, cards, ncp, leaves, {leaf: i for i, leaf in enumerate(leaves)}


def presence_limit(length: int) -> int:
    """The largest key range a presence table handles for ``length`` keys: a byte per possible key, scanned once by
    a cumulative sum, is cheaper than hashing the keys up to about this range."""
    return 16 * length + 4096


def factorize(key: np.ndarray, radix: int | None = None) -> tuple[np.ndarray, int]:
    """Dense codes 0..m-1 of non-negative int64 keys below ``radix``: by a presence table when the key range is
    small (no hashing; codes in key order), else by pandas' hash table (codes in order of first appearance)."""
    import pandas as pd
    if radix is not None and radix <= presence_limit(len(key)):
        present = np.zeros(radix, dtype=bool)
        present[key] = True
        ids = np.cumsum(present, dtype=np.int64)
        return ids[key] - 1, int(ids[-1]) if radix else 0
    codes, uniq = pd.factorize(key, sort=False)
    return codes.astype(np.int64, copy=False), len(uniq)


def group_first(key: np.ndarray, radix: int | None = None) -> tuple[np.ndarray, int, np.ndarray]:
    """:func:`factorize` and :func:`first_index` at once. Hashed codes come in order of first appearance, so a row
    opens a new code exactly where the running maximum of the codes grows: three sequential passes instead of a
    scatter over every row (the search's roll-ups spend a tenth of their time there)."""
    import pandas as pd
    if radix is not None and radix <= presence_limit(len(key)):
        codes, n = factorize(key, radix)
        return codes, n, first_index(codes, n)
    codes, uniq = pd.factorize(key, sort=False)
    codes = codes.astype(np.int64, copy=False)
    if not len(codes):
        return codes, 0, np.zeros(0, dtype=np.int64)
    top = np.maximum.accumulate(codes)
    opens = np.empty(len(codes), dtype=bool)
    opens[0] = True
    np.greater(top[1:], top[:-1], out=opens[1:])
    return codes, len(uniq), np.flatnonzero(opens)


def first_index(codes: np.ndarray, n: int) -> np.ndarray:
    """Index of the first row of each code."""
    first = np.empty(n, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return first


def combine(columns: Sequence[np.ndarray], cards: Sequence[int], length: int) -> tuple[np.ndarray, int]:
    """One int64 key per row for a tuple of code columns, and its range. Before a column would take the range past
    what a presence table handles (or near overflow), the key so far is re-densified: by a presence table while its
    range allows, so that the grouping of the whole key can often skip hashing too (:func:`group_first`)."""
    key: np.ndarray | None = None
    radix = 1
    limit = presence_limit(length)
    for c, card in zip(columns, cards):
        if card == 1:
            continue        # one value (e.g. the top level): adds nothing to the key
        if key is None:
            key, radix = c.astype(np.int64), card
            continue
        if (radix * card > limit and radix <= limit) or radix * card >= 2 ** 62:
            key, radix = factorize(key, radix if radix <= limit else None)
        key *= card          # in place: no temporaries per column
        key += c
        radix *= card
    if key is None:
        return np.zeros(length, dtype=np.int64), 1
    return key, radix


def fetch_arrow(con: Any, sql: str) -> pa.Table:
    """A query's result as an Arrow table (DuckDB hands it over without a pandas copy; other connections' frames
    are converted)."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        return con.sql(sql).to_arrow_table()
    return pa.Table.from_pandas(con.execute(sql).df(), preserve_index=False)


class BaseLoading:
    """The part of :class:`~anon_sql.methods.lattice.Lattice` that reads the base table and the population."""

    # -- the base table ----------------------------------------------------------------------------------------
    def _load_base(self, con: Any, source_view: str, base: exp.Table | None = None, base_rows: Any = None) -> State:
        """The distinct combinations with their weights, integer-coded; read from ``base`` (the release's base
        counts, already grouped by the quasi-identifiers and sensitive attributes) when every grouping column is
        there, else aggregated from the source view. ``base_rows``: those base counts as resolve fetched them
        (:class:`anon_sql.data.base_counts.Reader`), used as they are when they are exactly the rows needed."""
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
        unit = getattr(self.policy, "privacy_unit", None)
        if unit and len(sens) > 1:
            raise PolicyError(f"a lattice search with privacy_unit counts people per sensitive value of one "
                              f"attribute; the policy's models read {sens}: use method 'levels' (its checks count "
                              "people per attribute) or one sensitive attribute")
        others = ([c for c in columns if c not in self.quasi and c != count and c not in sens and c != UNIT]
                  if self.rows and not unit else [])
        rest_cols = sens + others
        group_cols = self.quasi + rest_cols
        w_name = "__anon_w"
        while w_name in columns:
            w_name += "_"
        use_base = base is not None and set(group_cols) <= set(base_counts.keys(self.policy))
        # the query's text depends on these alone: rendered once per shape (a warm release reuses it)
        signed = bool(self.varying)   # QIs vary inside units: one row per (tuple, value, unit), signature.py
        shape = (render(base if use_base else view), tuple(self.quasi), tuple(sens), tuple(rest_cols), count, w_name,
                 use_base and set(group_cols) == set(base_counts.keys(self.policy)) and not unit, bool(unit), signed)
        keys = base_counts.keys(self.policy)
        if base_rows is not None and shape[-3] and not sens and not rest_cols and not signed:
            # grouped by exactly the quasi-identifiers: the fetched rows are this query's rows, renamed
            frame = pa.table({**{f"__q{i}": base_rows.column(f"__v{keys.index(q)}") for i, q in enumerate(self.quasi)},
                              w_name: pc.cast(base_rows.column(base_counts.WEIGHT), pa.float64())})
            return self._code_base(frame, sens, rest_cols, w_name, unit, signed)
        text = BASE_SQL.get(shape)
        if text is None:
            if len(BASE_SQL) >= 256:
                BASE_SQL.clear()
            text = BASE_SQL[shape] = render(self._base_query(view, base if use_base else None, sens, rest_cols,
                                                              w_name, shape[-3], bool(unit), signed))
        return self._code_base(fetch_arrow(con, text), sens, rest_cols, w_name, unit, signed)

    def _code_base(self, frame: pa.Table, sens: list[str], rest_cols: list[str], w_name: str, unit: Any,
                   signed: bool = False) -> State:
        """The base rows (``__q<i>`` as text, ranks, weight ``w_name``) integer-coded against the taxonomies."""
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
            lookup = np.append(leaf, len(e.leaves)).astype(CODE)   # NULL: the last code
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
        people = (frame.column(SIZE_WEIGHT).to_numpy().astype(np.float64)[order] if unit and sens and not signed
                  else None)
        self._units = frame.column("__u").to_numpy().astype(np.int64)[order] if signed else None
        return State(self.root, [c[order] for c in qcodes], rest[order],
                     frame.column(w_name).to_numpy().astype(np.float64)[order], people)

    def _base_query(self, view: exp.Table, base: exp.Table | None, sens: list[str], rest_cols: list[str],
                    w_name: str, grouped: bool, people: bool = False, signed: bool = False) -> exp.Select:
        """SELECT the quasi-identifiers as text, the sensitive values' and the rest's dense ranks and the weight of
        each distinct combination, from the base counts (``grouped``: already grouped by exactly these columns) or
        aggregated from the source view. ``people``: weights count distinct units (:func:`people_counts`)."""
        group_cols = self.quasi + rest_cols
        weight: exp.Expression = record_count(self.policy.count_column)
        if base is not None:
            view = base.copy()
            weight = col(base_counts.WEIGHT) if grouped else exp.Sum(this=col(base_counts.WEIGHT))
        weight = exp.Cast(this=weight, to=dtype("DOUBLE"))
        if signed:   # every (QI tuple, value, unit) once: the units are kept for their signatures
            inner = exp.select(*[col(c) for c in group_cols], col(UNIT),
                               alias(exp.Cast(this=lit(1), to=dtype("DOUBLE")), w_name)).distinct().from_(view)
        elif people:
            inner = people_counts(view, group_cols, sens, w_name)
        else:
            inner = exp.select(*[col(c) for c in group_cols], alias(weight, w_name)).from_(view)
        if not grouped and not people and not signed:
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
        if signed:
            items.append(alias(rank([UNIT]), "__u"))
        elif people and sens:
            items.append(col(SIZE_WEIGHT))
        return exp.select(*items).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("b"))))

    def _load_population(self, con: Any) -> tuple[list[np.ndarray], np.ndarray] | None:
        """k-map / δ-presence: the population's distinct quasi-identifier combinations as leaf codes, with their
        records (None without a population model)."""
        pops = [m.population for m in self.models if getattr(m, "needs_population", False)]
        if not pops:
            return None
        if pops[0].relation is None:
            raise TaxonomyError(f"population {pops[0].name!r} was not resolved against the source")
        from ...models.population import WEIGHT

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
        ids, m = factorize(*combine(merged, [e.cards[b] for e, b in zip(self.enc, node)], n + len(pw)))
        return np.bincount(ids[n:], weights=pw, minlength=m)[ids[:n]]
