"""θ-sensitivity (spec/05): the σ² of a class's frequency-rank weights reaches μ · (m² − 1) / 12, and the two
internal split constraints the θ method's ordering Mondrian partitions under (θ-feasible, θ-capacity).

The numpy test calls the segmented kernels of udfs/kernels.py; the SQL test the same formulas as macros
(cross-tested in tests/udfs/test_kernels.py).
"""
from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import lit
from ..policy.keys import REQUIRED, key, number, section, section_table
from ..udfs import kernels
from .base import EPS, ClassColumns, ClassStats, PrivacyModel, SQLCheck, macro
from .l_diversity import SensitiveModel
from .registry import ModelKey, register_model_key


class ThetaSensitivity(SensitiveModel):
    """σ² of the frequency-rank weights of the class >= μ · (m² − 1) / 12 (spec/05)."""

    name = "theta"
    monotone = False
    portable = False

    def __init__(self, attribute: str, mu: float):
        super().__init__(attribute)
        self.mu = float(mu)

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        return kernels.theta_variance_segments(sc.cnt, sc.cls, stats.n_classes)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) >= kernels.theta_threshold(stats.sizes.astype(float), self.mu) - EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = macro("theta_variance_counts", cols.counts(self.attribute))
        threshold = macro("theta_threshold", cols.size, lit(self.mu))
        ok = exp.GTE(this=v, expression=exp.Sub(this=threshold, expression=lit(EPS)))
        return [SQLCheck(f"theta__{self.attribute}", v, ok, f"θ variance >= {self.mu}·σ²_full on {self.attribute}")]

    def describe(self) -> str:
        return f"θ-sensitivity (μ = {self.mu}) on {self.attribute}"


def slot_supply(stats: ClassStats, attribute: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per partition: the ⌊L/k⌋ classes it can form, and Σ_v min(f_v, ⌊L/k⌋) — the class slots its sensitive values
    can fill with distinct values."""
    sc = stats.sensitive[attribute]
    slots = np.floor(stats.sizes / k)
    return slots, np.bincount(sc.cls, weights=np.minimum(sc.cnt, slots[sc.cls]), minlength=stats.n_classes)


def slot_supply_sql(cols: ClassColumns, attribute: str, k: int) -> tuple[exp.Expression, exp.Expression]:
    """:func:`slot_supply` over the classes view (DuckDB list functions on the sorted counts): (slots, supply)."""
    slots = exp.Floor(this=exp.Div(this=cols.size, expression=lit(float(k))))
    return slots, macro("capped_sum", cols.counts(attribute), slots.copy())


class ThetaFeasible(PrivacyModel):
    """Internal split constraint of the ordering Mondrian: a partition of L records must hold enough distinct
    sensitive values for ⌊L/k⌋ classes of ``d`` distinct values each (Σ_v min(f_v, ⌊L/k⌋) >= d·⌊L/k⌋).
    Guides the θ method's partitioning (the release itself verifies :class:`ThetaSensitivity`)."""

    name = "theta_feasible"
    needs_sensitive = True
    portable = False

    def __init__(self, attribute: str, k: int, d: int):
        self.attribute, self.k, self.d = attribute, k, d

    def check(self, stats: ClassStats) -> np.ndarray:
        slots, supply = slot_supply(stats, self.attribute, self.k)
        return supply >= self.d * slots

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        slots, supply = slot_supply_sql(cols, self.attribute, self.k)
        ok = exp.GTE(this=supply, expression=exp.Mul(this=lit(self.d), expression=slots))
        return [SQLCheck(f"theta_feasible__{self.attribute}", supply.copy(), ok,
                         f"Σ_v min(f_v, ⌊L/{self.k}⌋) >= {self.d}·⌊L/{self.k}⌋ on {self.attribute}")]


class ThetaCapacity(PrivacyModel):
    """Internal split constraint when even :class:`ThetaFeasible` fails for the whole table: a partition of L
    records must pass the θ method's capacity bound on its own (Σ_v min(f_v, ⌊L/k⌋) + E·⌊L/k⌋ >= L, E the
    noise records a class may take), so Mondrian never cuts off a part that no classes with noise could hold."""

    name = "theta_capacity"
    needs_sensitive = True
    portable = False

    def __init__(self, attribute: str, k: int, excess: int):
        self.attribute, self.k, self.excess = attribute, k, excess

    def check(self, stats: ClassStats) -> np.ndarray:
        slots, supply = slot_supply(stats, self.attribute, self.k)
        return supply + self.excess * slots >= stats.sizes - 1e-9

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        slots, supply = slot_supply_sql(cols, self.attribute, self.k)
        total = exp.Add(this=supply, expression=exp.Mul(this=lit(self.excess), expression=slots))
        ok = exp.GTE(this=total, expression=exp.Sub(this=cols.size, expression=lit(1e-9)))
        return [SQLCheck(f"theta_capacity__{self.attribute}", supply.copy(), ok,
                         f"Σ_v min(f_v, ⌊L/{self.k}⌋) + {self.excess}·⌊L/{self.k}⌋ >= L on {self.attribute}")]


# -- the [privacy] key --------------------------------------------------------------------------------------------
THETA = section("privacy.theta", key("mu", number(gt=0, le=1), "σ² of the frequency-rank weights >= μ (m²−1)/12 "
                                     "(the paper uses 0.5–0.9)", REQUIRED))

register_model_key(ModelKey(
    key("theta", section_table(THETA), "θ-sensitivity (seed 004)"),
    build=lambda spec, attribute, context: [ThetaSensitivity(attribute, spec["mu"])],
    sections=(("`theta = { … }`", THETA),), classes=(ThetaSensitivity,), examples=({"mu": 0.5},)))
