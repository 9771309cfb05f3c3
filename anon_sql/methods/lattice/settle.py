"""The suppression fixed point of a lattice node, as the release runs it (:func:`anon_sql.runner.suppression.settle`):
the classes failing a check are suppressed, what is left is checked again, until it passes or nothing is left."""
from __future__ import annotations

import numpy as np

from .encode import State


class Settling:
    """The part of :class:`~anon_sql.methods.lattice.Lattice` that settles a node's suppression."""

    def settle(self, sizes: np.ndarray, reps: list[np.ndarray], g_cls: np.ndarray, state: State,
               kept: np.ndarray, population: np.ndarray | None = None) -> np.ndarray:
        """The classes kept when the failing ones are suppressed to a fixed point, as the release does
        (:func:`anon_sql.runner.suppression.settle`): what is left is checked again (the SQL verification) and the
        classes failing there go too, until what is left passes or nothing is."""
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
