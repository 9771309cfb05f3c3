"""l-diversity: distinct, entropy and recursive (c, l) (spec 03). The numpy tests call the segmented kernels of
udfs/kernels.py over the classes' sparse counts; the SQL tests call the same formulas as macros
(sql/macros.sql), cross-tested in tests/udfs/test_kernels.py. (l-diverse slicing: models/slicing.py.)"""
from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import lit
from ..udfs import kernels
from .base import EPS, ClassColumns, ClassStats, PrivacyModel, SQLCheck, macro


class SensitiveModel(PrivacyModel):
    """A model on one sensitive attribute's values per class."""

    needs_sensitive = True

    def __init__(self, attribute: str):
        self.attribute = attribute


class DistinctLDiversity(SensitiveModel):
    """Every class has at least l distinct sensitive values."""

    name = "distinct_l_diversity"
    class_local = True

    def __init__(self, attribute: str, l: float):
        super().__init__(attribute)
        self.l = l

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return np.bincount(sc.cls, minlength=stats.n_classes).astype(float)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) >= self.l

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.distinct(self.attribute)
        return [SQLCheck(f"l_distinct__{self.attribute}", v, exp.GTE(this=v, expression=lit(self.l)),
                         f"distinct l >= {self.l} on {self.attribute}")]

    def describe(self) -> str:
        return f"distinct l-diversity (l = {self.l}) on {self.attribute}"


class EntropyLDiversity(SensitiveModel):
    """exp(entropy of the class's sensitive values) >= l (entropy in nats)."""

    name = "entropy_l_diversity"
    class_local = True
    portable = False

    def __init__(self, attribute: str, l: float):
        super().__init__(attribute)
        self.l = float(l)

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return np.exp(kernels.entropy_segments(sc.cnt, sc.cls, stats.n_classes))

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) >= self.l - EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = exp.Exp(this=macro("entropy_counts", cols.counts(self.attribute)))
        return [SQLCheck(f"l_entropy__{self.attribute}", v,
                         exp.GTE(this=v, expression=lit(self.l - EPS)), f"entropy l >= {self.l} on {self.attribute}")]

    def describe(self) -> str:
        return f"entropy l-diversity (l = {self.l}) on {self.attribute}"


class RecursiveCLDiversity(SensitiveModel):
    """r_1 < c · (r_l + r_{l+1} + ...), r_i the i-th largest sensitive-value count of the class."""

    name = "recursive_cl_diversity"
    class_local = True
    portable = False

    def __init__(self, attribute: str, c: float, l: int):
        super().__init__(attribute)
        self.c, self.l = float(c), int(l)

    def check(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return kernels.recursive_l_ok_segments(sc.cnt, sc.cls, stats.n_classes, self.c, self.l)

    def measure(self, stats: ClassStats) -> np.ndarray:
        """r_1 / (r_l + ...) per class: the class passes for every c above it."""
        sc = stats.sensitive[self.attribute]
        return kernels.recursive_ratio_segments(sc.cnt, sc.cls, stats.n_classes, self.l)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        ok = macro("recursive_l_ok_counts", cols.counts(self.attribute), lit(self.c), lit(self.l))
        return [SQLCheck(f"l_recursive__{self.attribute}", exp.Cast(this=ok, to=exp.DataType.build("INT")), ok,
                         f"recursive (c={self.c}, l={self.l}) on {self.attribute}")]

    def describe(self) -> str:
        return f"recursive (c, l)-diversity (c = {self.c}, l = {self.l}) on {self.attribute}"
