"""The privacy-model contract (after ARX): monotone?, which statistics it needs, a numpy test and an SQL test.

Searches and partitioning methods call :meth:`PrivacyModel.check` on :class:`ClassStats` (numpy, vectorized over
classes); the compiler puts :meth:`PrivacyModel.sql_checks` into the ``__classes`` / ``__checks`` views and asks the
model for any extra per-class aggregates or distance subqueries it needs; the verify stage asks it for a whole-table
check. Neither methods nor the compiler test a model's type: they read this contract (and find a model by ``name``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import kernel_call

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


WORST_SMALLEST, WORST_LARGEST = "smallest", "largest"


@dataclass
class SQLCheck:
    """One model's columns in the checks view: a measured value and a pass flag, per class. ``worst``: which class
    value a summary reports as the check's worst — ``"smallest"`` for a bound from below (k, l, θ variance …),
    ``"largest"`` for a bound from above (a distance, a share, δ)."""

    name: str
    value: exp.Expression
    ok: exp.Expression
    requirement: str
    worst: str = WORST_SMALLEST

    def __post_init__(self) -> None:
        if self.worst not in (WORST_SMALLEST, WORST_LARGEST):
            raise ValueError(f"SQLCheck {self.name!r}: worst must be {WORST_SMALLEST!r} or {WORST_LARGEST!r}")


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
    """Base class: subclasses set ``name``, ``monotone``, ``needs_sensitive`` and implement the two tests.

    ``per_class``: the model is decided class by class. A model whose requirement spans classes (an ``<S, k>`` group
    rule, slicing's whole-table l-diversity) sets it False: its :meth:`check` passes every class, the SQL decides
    (a window over the classes view, or :meth:`table_check` over the release), and methods that can honour it read
    its parameters."""

    name = "model"
    monotone = True
    needs_sensitive = False
    needs_population = False   # compares each class with a population table (ClassStats.population)
    needs_values = False   # the classes view carries each class's sensitive values (``__values__<attribute>``)
    portable = True  # its SQL uses only standard aggregates (runs on any sqlglot dialect)
    per_class = True
    whole_table = False                   # checked over the whole release by :meth:`table_check`
    attribute: str | None = None          # the sensitive attribute it constrains, if any
    grouped_quasi: tuple[str, ...] = ()   # quasi-identifiers its SQL reads as class columns (group rules)
    # whether a class's pass depends on that class alone (not on the other classes or the whole table): suppressing
    # the failing classes then cannot make a kept class fail, and the lattice skips re-checking the remainder
    class_local = False
    # whether a class's pass survives merging with any other class (passing or not): the records needing suppression
    # can then only shrink under generalization, and a search with a suppression budget may prune on it
    suppression_monotone = False
    # the distinct sensitive values every passing class has at least (0: none implied): distinct l-diversity, whose
    # pass survives merging, is then a necessary check a search may prune with
    implied_distinct = 0

    def check(self, stats: ClassStats) -> np.ndarray:
        """Boolean per class: does the class satisfy the model?"""
        if not self.per_class:
            return np.ones(stats.n_classes, dtype=bool)
        raise NotImplementedError

    def measure(self, stats: ClassStats) -> np.ndarray:
        """The measured value per class (for reports); defaults to the pass flag."""
        return self.check(stats).astype(float)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        """The model's value and pass columns in the checks view (over the per-class columns ``cols``)."""
        raise NotImplementedError

    def class_aggregates(self, c: exp.Expression, m: exp.Expression, q: exp.Expression) -> dict[str, exp.Expression]:
        """Extra per-class aggregate columns over the (class, value) rows of its attribute: ``c`` the value's count,
        ``m`` the class size, ``q`` the value's share of the table (name → aggregate); none by default."""
        return {}

    def row_aggregates(self, w: exp.Expression) -> dict[str, exp.Expression]:
        """Extra per-class aggregate columns over the class's rows (``w`` the row's records: the count column, the
        base's weight or 1), name → aggregate; none by default."""
        return {}

    def distance_ctes(self, i: int, keys: list[str], sv: str, gq: str) -> list[tuple[str, exp.Expression]] | None:
        """CTEs (name, query) whose last (one row per class of ``keys``) gives the class's distance column
        ``__tclose__<attribute>``; the compiler joins that last CTE by the name the model gives it. They read ``sv``
        (keys, __v, __c, __m) and ``gq`` (__v, __q); ``i`` numbers the attribute so that CTE names stay distinct.
        None: the class reads the equal distance (:func:`anon_sql.models.t_closeness.equal_distance`)."""
        return None

    def table_check(self, con: Any, release: exp.Table, source: exp.Expression, risk: exp.Table | None,
                    layout: dict[str, Any] | None, weight: str | None, assignment: exp.Table | None = None,
                    create: Callable[[exp.Create], None] | None = None) -> dict[str, Any] | None:
        """A whole-table check over the materialized ``release`` (one summary row: check, classes, failing_classes,
        failing_records, worst_value, passed), or None when the model has none. ``layout``: what the plan released
        that the check reads (``AssignmentPlan.table_check``, e.g. slicing's column groups), None if nothing;
        ``source``: the rows as released from; ``risk``: a table to write per-row risks to (None: write nothing), with the engine's ``create`` when given."""
        return None

    def table_requirement(self) -> str | None:
        """What :meth:`table_check` requires, in words (the ``required`` that ``check`` shows beside its worst
        value); None for a model with no whole-table check."""
        return None

    def describe(self) -> str:
        return self.name


def find(models: Sequence[PrivacyModel], name: str, attribute: str | None = None) -> PrivacyModel | None:
    """The first model called ``name`` (on ``attribute`` when given), or None: how methods reach a model."""
    return next((m for m in models if m.name == name and (attribute is None or m.attribute == attribute)), None)


def largest_is_worst(models: Sequence[PrivacyModel]) -> frozenset[str]:
    """The checks of ``models`` whose worst class is the one with the largest value (``SQLCheck.worst``): what
    :func:`anon_sql.compiler.checks_summary.summarize_checks` needs to know of the models."""
    cols = ClassColumns(lambda c: exp.column(c))
    return frozenset(chk.name for m in models if not m.whole_table for chk in m.sql_checks(cols)
                     if chk.worst == WORST_LARGEST)


def requirement_texts(models: Sequence[PrivacyModel]) -> dict[str, str]:
    """Check name → what it requires for the checks of ``models``: ``SQLCheck.requirement`` (e.g. ``k >= 5``) per
    class, :meth:`PrivacyModel.table_requirement` for a whole-table check: what ``check`` shows beside each worst
    value (hostile round 5, C02 / C06; a whole-table model showed ``-`` before mends 12)."""
    cols = ClassColumns(lambda c: exp.column(c))
    texts = {chk.name: chk.requirement for m in models if not m.whole_table for chk in m.sql_checks(cols)}
    texts.update({m.name: m.table_requirement() for m in models if m.whole_table and m.table_requirement()})
    return texts


def macro(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of one of the package's kernels (``anon.<name>`` on DuckDB; each dialect spells it: KernelCall)."""
    return kernel_call(name, *args)


# -- vectorized helpers over SensitiveCounts --------------------------------------------------------------------
def per_class_sum(sc: SensitiveCounts, values: np.ndarray, n_classes: int) -> np.ndarray:
    return np.bincount(sc.cls, weights=values, minlength=n_classes)
