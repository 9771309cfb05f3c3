"""Lattice nodes over units whose quasi-identifiers vary (multi-relational k-anonymity, docs/units.md): a unit's class
is its signature, the set of its generalized QI tuples at the node.

The base table then holds the distinct (QI tuple, sensitive value, unit) rows; a node maps the tuples up, and each
unit's signature is keyed by two independent 64-bit sums over its distinct tuples (a set hash) and their count. A
collision could only merge two classes in the plan; the SQL checks group by the exact signature, so a plan bug costs
utility or a refusal, never a wrong release. Every node is evaluated from the base table (no roll-up cache: the
signatures of a finer node do not determine the rows of a coarser one without the units).
"""
from __future__ import annotations

import numpy as np

from .encode import State, combine, factorize, first_index

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray, salt: np.uint64) -> np.ndarray:
    """splitmix64 of ``x + salt``: a well-spread 64-bit value per integer (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + salt
        z = (z ^ (z >> np.uint64(30))) * _M2
        z = (z ^ (z >> np.uint64(27))) * _M3
        return z ^ (z >> np.uint64(31))


class SignatureRollup:
    """The part of :class:`~anon_sql.methods.lattice.Lattice` that evaluates a node by the units' signatures."""

    def _signature_rollup(self, node: tuple[int, ...]) -> tuple[State, np.ndarray, list[np.ndarray], np.ndarray]:
        """(group table, class sizes in units, class codes, class of group) at ``node``: the groups are the distinct
        (class, sensitive value) pairs weighted by the units of the class holding the value."""
        base, units = self._base, self._units
        q = [self._map(j, 0, b)[base.q[j]] if b else base.q[j] for j, b in enumerate(node)]
        cards = [e.cards[b] for e, b in zip(self.enc, node)]
        tup, n_tup = factorize(*combine(q, cards, len(base.w)))
        n_units = int(units.max()) + 1 if len(units) else 0
        # the distinct (unit, tuple) pairs, then per unit a set hash of its tuples (two salts) and their number
        pair, _ = factorize(units * np.int64(max(n_tup, 1)) + tup)
        first = first_index(pair, int(pair.max()) + 1 if len(pair) else 0)
        pu, pt = units[first], tup[first].astype(np.uint64)
        with np.errstate(over="ignore"):
            h1 = np.zeros(n_units, dtype=np.uint64)
            h2 = np.zeros(n_units, dtype=np.uint64)
            np.add.at(h1, pu, _mix(pt, _M1))
            np.add.at(h2, pu, _mix(pt, _M2))
        count = np.bincount(pu, minlength=n_units)
        keys = np.stack([h1.view(np.int64), h2.view(np.int64), count.astype(np.int64)], axis=1)
        _, unit_cls = np.unique(keys, axis=0, return_inverse=True)
        unit_cls = unit_cls.reshape(-1).astype(np.int64)
        n_cls = int(unit_cls.max()) + 1 if n_units else 0
        sizes = np.bincount(unit_cls, minlength=n_cls).astype(np.float64)
        # a class's codes: those of one row of one of its units (utility measures read them; they vary inside it)
        row_cls = unit_cls[units]
        rep_row = first_index(row_cls, n_cls)
        reps = [a[rep_row] for a in q]
        # (class, sensitive value) groups: the units of the class holding the value
        held, _ = factorize(units * np.int64(self.n_rest) + base.rest)
        h_first = first_index(held, int(held.max()) + 1 if len(held) else 0)
        grp_key = row_cls[h_first] * np.int64(self.n_rest) + base.rest[h_first]
        grp, n_grp = factorize(grp_key)
        g_first = first_index(grp, n_grp)
        w = np.bincount(grp, minlength=n_grp).astype(np.float64)
        g_cls = row_cls[h_first][g_first]
        state = State(node, [r[g_cls] for r in reps], base.rest[h_first][g_first], w)
        return state, sizes, reps, g_cls
