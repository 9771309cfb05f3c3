"""Models on a class's sensitive distribution against the table's: α-k-anonymity, β-likeness (basic and enhanced)
and δ-disclosure privacy (docs/assess.md cites the formulas).

The numpy tests are the kernels of udfs/risk_kernels.py over the classes' sparse counts; the SQL tests are per-class
aggregates over the (class, value) rows with the value's table share ``q`` (``class_aggregates``), computed in the
same per-attribute aggregate as t-closeness (compiler.class_stats_query) — or, for α, the largest count over the class
size (with a privacy unit: the people holding a value over the class's people, docs/units.md).
"""
from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import func, lit
from ..policy.keys import REQUIRED, any_of, choice, key, number, section, section_table
from ..udfs import risk_kernels as rk
from .base import EPS, WORST_LARGEST, ClassColumns, ClassStats, PrivacyModel, SQLCheck
from .registry import ModelKey, register_model_key


def _sc(stats: ClassStats, attribute: str):
    sc = stats.sensitive[attribute]
    q = sc.global_freq / sc.global_freq.sum()
    return sc, q


class _DistributionModel(PrivacyModel):
    needs_sensitive = True
    portable = False

    def __init__(self, attribute: str):
        self.attribute = attribute

    def class_aggregates(self, c: exp.Expression, m: exp.Expression, q: exp.Expression) -> dict[str, exp.Expression]:
        """Per-class aggregate columns over (class, value) rows: ``c`` the value's count, ``m`` the class size,
        ``q`` the value's share of the table."""
        return {}


def _gain(c: exp.Expression, m: exp.Expression, q: exp.Expression) -> exp.Expression:
    """max(p − q, 0) / q with p = c / m."""
    p = exp.Div(this=c.copy(), expression=m.copy())
    return exp.Div(this=exp.Greatest(this=exp.Sub(this=p, expression=q.copy()), expressions=[lit(0.0)]),
                   expression=q.copy())


class AlphaKAnonymity(_DistributionModel):
    """(α, k)-anonymity (Wong et al. 2006): no sensitive value has more than a share α of its class."""

    name = "alpha_k_anonymity"

    def __init__(self, attribute: str, alpha: float):
        super().__init__(attribute)
        self.alpha = float(alpha)

    # the share of a value is the class's members holding it over the class size: over rows the largest count over
    # the counts' sum, with a privacy unit the people holding it over the class's people (docs/units.md), which
    # the normalized count would understate when people hold several values
    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        largest = np.zeros(stats.n_classes)
        np.maximum.at(largest, sc.cls, sc.cnt)
        sizes = np.asarray(stats.sizes, dtype=float)
        return np.where(sizes > 0, largest / np.where(sizes > 0, sizes, 1.0), 0.0)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) <= self.alpha + EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = exp.Div(this=exp.Cast(this=func("list_max", cols.counts(self.attribute)), to=exp.DataType.build("DOUBLE")),
                    expression=cols.size)
        return [SQLCheck(f"alpha__{self.attribute}", v, exp.LTE(this=v.copy(), expression=lit(self.alpha + EPS)),
                         f"largest value share <= {self.alpha} on {self.attribute}", WORST_LARGEST)]

    def describe(self) -> str:
        return f"(α, k)-anonymity (α = {self.alpha}) on {self.attribute}"


class BetaLikeness(_DistributionModel):
    """β-likeness (Cao & Karras 2012): for each value more frequent in the class than in the table, the relative
    gain (p − q)/q is at most β (basic), or at most min(β, −ln q) (enhanced)."""

    name = "beta_likeness"
    monotone = False

    def __init__(self, attribute: str, beta: float, enhanced: bool = False):
        super().__init__(attribute)
        self.beta, self.enhanced = float(beta), bool(enhanced)

    @property
    def _key(self) -> str:
        return f"beta_{'enhanced' if self.enhanced else 'basic'}__{self.attribute}"

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc, q = _sc(stats, self.attribute)
        kernel = rk.beta_enhanced_segments if self.enhanced else rk.beta_segments
        return kernel(sc.cnt, sc.cls, stats.n_classes, sc.val, q)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) <= self.beta + EPS

    def class_aggregates(self, c, m, q) -> dict[str, exp.Expression]:
        gain = _gain(c, m, q)
        if self.enhanced:   # ∞ once a value's gain exceeds −ln q: no β makes the class enhanced-β-like
            over = exp.GT(this=gain.copy(), expression=exp.Add(this=exp.Neg(this=exp.Ln(this=q.copy())),
                                                               expression=lit(1e-12)))
            gain = exp.If(this=over, true=exp.Cast(this=lit("inf"), to=exp.DataType.build("DOUBLE")), false=gain)
        return {f"__{self._key}": exp.Max(this=gain)}

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.ref(f"__{self._key}")
        kind = "enhanced" if self.enhanced else "basic"
        return [SQLCheck(self._key, v, exp.LTE(this=v.copy(), expression=lit(self.beta + EPS)),
                         f"{kind} β-likeness β <= {self.beta} on {self.attribute}", WORST_LARGEST)]

    def describe(self) -> str:
        return f"{'enhanced' if self.enhanced else 'basic'} β-likeness (β = {self.beta}) on {self.attribute}"


class DeltaDisclosure(_DistributionModel):
    """δ-disclosure privacy (Brickell & Shmatikov 2008): |log(p/q)| < δ for every value present in the class
    (natural log; ``base = 2`` for ARX's log₂)."""

    name = "delta_disclosure"
    monotone = False

    def __init__(self, attribute: str, delta: float, base: float = math.e):
        super().__init__(attribute)
        self.delta, self.base = float(delta), float(base)

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc, q = _sc(stats, self.attribute)
        return rk.delta_segments(sc.cnt, sc.cls, stats.n_classes, sc.val, q, base=self.base)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) < self.delta

    def class_aggregates(self, c, m, q) -> dict[str, exp.Expression]:
        ratio = exp.Div(this=exp.Div(this=c.copy(), expression=m.copy()), expression=q.copy())
        value = exp.Div(this=exp.Abs(this=exp.Ln(this=ratio)), expression=lit(math.log(self.base)))
        return {f"__delta__{self.attribute}": exp.Max(this=value)}

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.ref(f"__delta__{self.attribute}")
        return [SQLCheck(f"delta__{self.attribute}", v, exp.LT(this=v.copy(), expression=lit(self.delta)),
                         f"δ-disclosure |log p/q| < {self.delta} on {self.attribute}", WORST_LARGEST)]

    def describe(self) -> str:
        return f"δ-disclosure privacy (δ = {self.delta}) on {self.attribute}"


# -- the [privacy] keys -------------------------------------------------------------------------------------------
BETA_LIKENESS = section("privacy.beta_likeness",
                        key("beta", number(gt=0), "(p − q)/q <= β for each value with p > q (q: its share of the "
                            "table)", REQUIRED),
                        key("kind", choice("basic", "enhanced"), "enhanced: <= min(β, −ln q)", "basic"))
DELTA_DISCLOSURE = section("privacy.delta_disclosure",
                           key("delta", number(gt=0), "|log(p/q)| < δ for each value in the class", REQUIRED),
                           key("log", choice("e", "2"), "the logarithm's base (`\"2\"` as ARX)", "e"))


def build_delta_disclosure(spec, attribute, context) -> list[PrivacyModel]:
    """δ-disclosure on ``attribute`` (a number is the ``delta``, natural logarithm)."""
    spec = spec if isinstance(spec, dict) else {"delta": spec}
    return [DeltaDisclosure(attribute, spec["delta"], 2.0 if str(spec.get("log", "e")) == "2" else math.e)]


register_model_key(ModelKey(
    key("alpha", number(gt=0, le=1), "(α, k)-anonymity (Wong et al. 2006): largest share of one sensitive value "
        "in a class <= α"),
    build=lambda alpha, attribute, context: [AlphaKAnonymity(attribute, alpha)], classes=(AlphaKAnonymity,),
    examples=(0.6,)))
register_model_key(ModelKey(
    key("beta_likeness", section_table(BETA_LIKENESS), "β-likeness (Cao & Karras 2012)"),
    build=lambda spec, attribute, context: [BetaLikeness(attribute, spec["beta"],
                                                         spec.get("kind", "basic") == "enhanced")],
    sections=(("`beta_likeness = { … }`", BETA_LIKENESS),), classes=(BetaLikeness,),
    examples=({"beta": 1.0}, {"beta": 1.5, "kind": "enhanced"})))
register_model_key(ModelKey(
    key("delta_disclosure", any_of(number(gt=0), section_table(DELTA_DISCLOSURE)), "δ-disclosure privacy (Brickell & "
        "Shmatikov 2008; a number is { delta = … })"),
    build=build_delta_disclosure,
    sections=(("`delta_disclosure = { … }` (or a number: the `delta`)", DELTA_DISCLOSURE),),
    classes=(DeltaDisclosure,), examples=(1.0, {"delta": 1.5, "log": "2"})))
