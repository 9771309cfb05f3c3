"""The privacy-model contract (after ARX): monotone?, which statistics it needs, a numpy test and an SQL test.

Searches and partitioning methods call :meth:`PrivacyModel.check` on :class:`ClassStats` (numpy, vectorized over
classes); the compiler puts :meth:`PrivacyModel.sql_checks` into the ``__classes`` / ``__checks`` views. Methods never
special-case a model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sqlglot import exp

EPS = 1e-9


@dataclass
class SensitiveCounts:
    """Per-class frequency of one sensitive attribute in sparse form: rows (cls, val, cnt), sorted by cls."""

    cls: np.ndarray
    val: np.ndarray
    cnt: np.ndarray
    n_values: int
    global_freq: np.ndarray | None = None  # distribution of the whole table (for t-closeness), length n_values
    value_rank: np.ndarray | None = None   # order of values for the ordered distance (rank per value code)
    labels: np.ndarray | None = None       # the value of each code (models that map values, e.g. p+-sensitivity)

    @classmethod
    def from_codes(cls, class_idx: np.ndarray, value_codes: np.ndarray, weights: np.ndarray, n_classes: int,
                   n_values: int, value_rank: np.ndarray | None = None) -> "SensitiveCounts":
        """Aggregate (class, value, weight) rows; vectorized."""
        key = class_idx.astype(np.int64) * n_values + value_codes.astype(np.int64)
        uniq, inv = np.unique(key, return_inverse=True)
        cnt = np.bincount(inv, weights=weights).astype(np.float64)
        global_freq = np.bincount(value_codes, weights=weights, minlength=n_values).astype(np.float64)
        return cls(uniq // n_values, uniq % n_values, cnt, n_values, global_freq, value_rank)


@dataclass
class ClassStats:
    """Statistics of a set of classes: record count per class and per-class sensitive-value counts."""

    sizes: np.ndarray
    sensitive: dict[str, SensitiveCounts] = field(default_factory=dict)
    population: np.ndarray | None = None   # records of the population in each class (k-map, δ-presence)

    @property
    def n_classes(self) -> int:
        return len(self.sizes)


@dataclass
class SQLCheck:
    """One model's columns in the checks view: a measured value and a pass flag, per class."""

    name: str
    value: exp.Expression
    ok: exp.Expression
    requirement: str


class ClassColumns:
    """How a model's SQL refers to the per-class aggregate columns of the classes view."""

    def __init__(self, ref: Callable[[str], exp.Expression]):
        self.ref = ref

    @property
    def size(self) -> exp.Expression:
        return self.ref("__size")

    def distinct(self, sa: str) -> exp.Expression:
        return self.ref(f"__distinct__{sa}")

    def counts(self, sa: str) -> exp.Expression:
        return self.ref(f"__counts__{sa}")

    def tclose(self, sa: str) -> exp.Expression:
        return self.ref(f"__tclose__{sa}")

    @property
    def population(self) -> exp.Expression:
        """Records of the population generalized into the class (0 when none)."""
        return self.ref("__population")


class PrivacyModel:
    """Base class: subclasses set ``name``, ``monotone``, ``needs_sensitive`` and implement the two tests."""

    name = "model"
    monotone = True
    needs_sensitive = False
    needs_population = False   # compares each class with a population table (ClassStats.population)
    portable = True  # its SQL uses only standard aggregates (runs on any sqlglot dialect)
    # whether a class's pass depends on that class alone (not on the other classes or the whole table): suppressing
    # the failing classes then cannot make a kept class fail, and the lattice skips re-checking the remainder
    class_local = False

    def check(self, stats: ClassStats) -> np.ndarray:
        """Boolean per class: does the class satisfy the model?"""
        raise NotImplementedError

    def measure(self, stats: ClassStats) -> np.ndarray:
        """The measured value per class (for reports); defaults to the pass flag."""
        return self.check(stats).astype(float)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


# -- vectorized helpers over SensitiveCounts --------------------------------------------------------------------
def per_class_sum(sc: SensitiveCounts, values: np.ndarray, n_classes: int) -> np.ndarray:
    return np.bincount(sc.cls, weights=values, minlength=n_classes)


def sorted_counts(sc: SensitiveCounts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cls, cnt, rank) with counts sorted descending inside each class and rank 1, 2, ... per class."""
    order = np.lexsort((-sc.cnt, sc.cls))
    cls, cnt = sc.cls[order], sc.cnt[order]
    if len(cls) == 0:
        return cls, cnt, np.zeros(0, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(cls)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(cls)]))
    rank = np.arange(len(cls)) - first + 1
    return cls, cnt, rank
