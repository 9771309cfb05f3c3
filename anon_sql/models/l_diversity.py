"""l-diversity: distinct, entropy and recursive (c, l) (spec 03). The numpy tests call the segmented kernels of
udfs/kernels.py over the classes' sparse counts; the SQL tests call the same formulas as macros
(sql/macros.sql), cross-tested in tests/udfs/test_kernels.py. (l-diverse slicing: models/slicing.py.)"""
from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import lit
from ..policy.keys import REQUIRED, Tagged, choice, integer, key, number, section
from ..udfs import kernels
from .base import EPS, ClassColumns, ClassStats, PrivacyModel, SQLCheck, macro
from .registry import ModelKey, register_model_key
from .slicing import SlicingLDiversity


class SensitiveModel(PrivacyModel):
    """A model on one sensitive attribute's values per class."""

    needs_sensitive = True

    def __init__(self, attribute: str):
        self.attribute = attribute


# A value every member of a class holds is disclosed whatever else they hold: with a privacy unit a person's several
# rows can make such a class look diverse (docs/units.md, the flu case), so l >= 2 also requires that the largest
# count of a value (people holding it) be below the class size (people). Over rows this is implied by l >= 2.
def _no_value_held_by_all(stats: ClassStats, attribute: str, l: float) -> np.ndarray:
    """Per class: no value's count reaches the class size (always true for l < 2)."""
    if l < 2:
        return np.ones(stats.n_classes, dtype=bool)
    sc = stats.sensitive[attribute]
    largest = np.zeros(stats.n_classes)
    np.maximum.at(largest, sc.cls, sc.cnt)
    return largest < np.asarray(stats.sizes, dtype=float) - EPS


def _largest_column(attribute: str) -> str:
    return f"__largest__{attribute}"


def _largest_aggregate(attribute: str, c: exp.Expression) -> dict[str, exp.Expression]:
    """The per-class aggregate the SQL rule reads: the largest count of a value (people holding it)."""
    return {_largest_column(attribute): exp.Max(this=c.copy())}


def _sql_rule(cols: ClassColumns, attribute: str, l: float, ok: exp.Expression) -> exp.Expression:
    """``ok AND largest < size`` for l >= 2 (the rule of :func:`_no_value_held_by_all`), else ``ok``."""
    if l < 2:
        return ok
    return exp.and_(ok, exp.LT(this=cols.ref(_largest_column(attribute)), expression=cols.size))


class DistinctLDiversity(SensitiveModel):
    """Every class has at least l distinct sensitive values."""

    name = "distinct_l_diversity"
    class_local = True
    suppression_monotone = True

    def __init__(self, attribute: str, l: float):
        super().__init__(attribute)
        self.l = l

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return np.bincount(sc.cls, minlength=stats.n_classes).astype(float)

    def check(self, stats: ClassStats) -> np.ndarray:
        return (self.measure(stats) >= self.l) & _no_value_held_by_all(stats, self.attribute, self.l)

    def class_aggregates(self, c: exp.Expression, m: exp.Expression, q: exp.Expression) -> dict[str, exp.Expression]:
        return _largest_aggregate(self.attribute, c) if self.l >= 2 else {}

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.distinct(self.attribute)
        ok = _sql_rule(cols, self.attribute, self.l, exp.GTE(this=v, expression=lit(self.l)))
        return [SQLCheck(f"l_distinct__{self.attribute}", v, ok, f"distinct l >= {self.l} on {self.attribute}")]

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
        self.implied_distinct = math.ceil(self.l - EPS)   # exp(entropy) <= #distinct

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return np.exp(kernels.entropy_segments(sc.cnt, sc.cls, stats.n_classes))

    def check(self, stats: ClassStats) -> np.ndarray:
        return (self.measure(stats) >= self.l - EPS) & _no_value_held_by_all(stats, self.attribute, self.l)

    def class_aggregates(self, c: exp.Expression, m: exp.Expression, q: exp.Expression) -> dict[str, exp.Expression]:
        return _largest_aggregate(self.attribute, c) if self.l >= 2 else {}

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = exp.Exp(this=macro("entropy_counts", cols.counts(self.attribute)))
        ok = _sql_rule(cols, self.attribute, self.l, exp.GTE(this=v, expression=lit(self.l - EPS)))
        return [SQLCheck(f"l_entropy__{self.attribute}", v, ok, f"entropy l >= {self.l} on {self.attribute}")]

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
        self.implied_distinct = math.ceil(self.l - EPS)   # r_l exists only with l distinct values

    def check(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return (kernels.recursive_l_ok_segments(sc.cnt, sc.cls, stats.n_classes, self.c, self.l)
                & _no_value_held_by_all(stats, self.attribute, self.l))

    def class_aggregates(self, c: exp.Expression, m: exp.Expression, q: exp.Expression) -> dict[str, exp.Expression]:
        return _largest_aggregate(self.attribute, c) if self.l >= 2 else {}

    def measure(self, stats: ClassStats) -> np.ndarray:
        """r_1 / (r_l + ...) per class: the class passes for every c above it."""
        sc = stats.sensitive[self.attribute]
        return kernels.recursive_ratio_segments(sc.cnt, sc.cls, stats.n_classes, self.l)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        ok = _sql_rule(cols, self.attribute, self.l,
                       macro("recursive_l_ok_counts", cols.counts(self.attribute), lit(self.c), lit(self.l)))
        return [SQLCheck(f"l_recursive__{self.attribute}", exp.Cast(this=ok, to=exp.DataType.build("INT")), ok,
                         f"recursive (c={self.c}, l={self.l}) on {self.attribute}")]

    def describe(self) -> str:
        return f"recursive (c, l)-diversity (c = {self.c}, l = {self.l}) on {self.attribute}"


# -- the [privacy] key --------------------------------------------------------------------------------------------
L_KINDS = ("distinct", "entropy", "recursive", "slicing")
L_DIVERSITY = Tagged("kind", {
    "distinct": section("privacy.l_diversity kind = \"distinct\"", key("kind", choice("distinct"), "", "distinct"),
                        key("l", integer(ge=1), "distinct sensitive values per class", REQUIRED),
                        doc="#distinct sensitive values >= l"),
    "entropy": section("privacy.l_diversity kind = \"entropy\"", key("kind", choice("entropy"), "", REQUIRED),
                       key("l", number(ge=1), "exp(entropy) per class", REQUIRED), doc="exp(−Σ p ln p) >= l"),
    "recursive": section("privacy.l_diversity kind = \"recursive\"", key("kind", choice("recursive"), "", REQUIRED),
                         key("c", number(gt=0), "the constant c", REQUIRED),
                         key("l", integer(ge=1), "the rank l", REQUIRED), doc="r1 < c (r_l + r_{l+1} + …)"),
    "slicing": section("privacy.l_diversity kind = \"slicing\"", key("kind", choice("slicing"), "", REQUIRED),
                       key("l", number(ge=1), "bucket diversity (method `slicing` / `attribute_focused`)", REQUIRED),
                       doc="l-diverse slicing: no sensitive value has probability > 1/l in a bucket"),
}, default="distinct", noun="table")


def build_l_diversity(spec, attribute, context) -> list[PrivacyModel]:
    """The l-diversity model of ``kind`` (distinct by default) on ``attribute``."""
    kind, l = spec.get("kind", "distinct"), spec["l"]
    if kind == "distinct":
        return [DistinctLDiversity(attribute, l)]
    if kind == "entropy":
        return [EntropyLDiversity(attribute, l)]
    if kind == "recursive":
        return [RecursiveCLDiversity(attribute, spec["c"], l)]
    return [SlicingLDiversity(attribute, l)]   # a whole-table requirement, checked over the sliced release


register_model_key(ModelKey(
    key("l_diversity", L_DIVERSITY, "l-diversity of each sensitive attribute"), build=build_l_diversity,
    sections=(("`l_diversity = { kind = …, … }` (kind defaults to `\"distinct\"`)", L_DIVERSITY),),
    classes=(DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity, SlicingLDiversity),
    examples=({"l": 2}, {"kind": "entropy", "l": 1.8}, {"kind": "recursive", "c": 2.0, "l": 2},
              {"kind": "slicing", "l": 2})))
