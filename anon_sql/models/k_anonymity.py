"""k-anonymity and the ``<S, k>`` group rules of ``[[privacy.requirements]]``.

k-anonymity is decided per class; a group rule counts the records of every group of classes that share their values
of the quasi-identifiers S, so its SQL is a window over the classes view (PARTITION BY S) and its numpy test is the
searches' own (the lattice groups its classes by S; see :attr:`GroupKAnonymity.quasi`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import lit
from .base import ClassColumns, ClassStats, PrivacyModel, SQLCheck


class KAnonymity(PrivacyModel):
    """Every class has at least k records."""

    name = "k_anonymity"
    class_local = True
    suppression_monotone = True

    def __init__(self, k: int):
        self.k = int(k)

    def check(self, stats: ClassStats) -> np.ndarray:
        return stats.sizes >= self.k

    def measure(self, stats: ClassStats) -> np.ndarray:
        return stats.sizes.astype(float)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        return [SQLCheck("k", cols.size, exp.GTE(this=cols.size, expression=lit(self.k)), f"k >= {self.k}")]

    def describe(self) -> str:
        return f"k-anonymity (k = {self.k})"


class GroupKAnonymity(PrivacyModel):
    """``<S, k>``: every group of records sharing their released values of the quasi-identifiers S has at least k
    records (``index``: the rule's position in ``[[privacy.requirements]]``, which names its check ``req<index>``)."""

    name = "group_k_anonymity"
    per_class = False

    def __init__(self, quasi: Sequence[str], k: int, index: int = 0):
        self.quasi, self.k, self.index = list(quasi), int(k), int(index)
        self.grouped_quasi = tuple(self.quasi)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        win = exp.Window(this=exp.Sum(this=cols.size), partition_by=[cols.ref(q) for q in self.quasi])
        return [SQLCheck(f"req{self.index}", win, exp.GTE(this=win.copy(), expression=lit(self.k)),
                         f"<{{{', '.join(self.quasi)}}}, {self.k}>")]

    def describe(self) -> str:
        return f"<{{{', '.join(self.quasi)}}}, {self.k}>"


def group_rules(models: Sequence[PrivacyModel]) -> list[GroupKAnonymity]:
    """The ``<S, k>`` rules among ``models`` (what methods that honour group rules read)."""
    return [m for m in models if m.name == GroupKAnonymity.name]
