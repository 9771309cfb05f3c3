"""The standard privacy models: k-anonymity, l-diversity (distinct, entropy, recursive), t-closeness, Simpson, θ.

Each formula exists as a numpy test here (vectorized over classes, for searches and partitioning) and as an SQL
expression over the classes view (the independent verification); tests assert both agree with anon_sql/udfs/kernels.py.
"""
from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..sqlbuild import func, lit
from .base import EPS, ClassColumns, ClassStats, PrivacyModel, SQLCheck, per_class_sum, sorted_counts

MACRO_SCHEMA = "anon"


def _m(name: str, *args: exp.Expression) -> exp.Expression:
    return func(name, *args, schema=MACRO_SCHEMA)


class KAnonymity(PrivacyModel):
    """Every class has at least k records."""

    name = "k_anonymity"
    class_local = True

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


class _SensitiveModel(PrivacyModel):
    needs_sensitive = True

    def __init__(self, attribute: str):
        self.attribute = attribute


class DistinctLDiversity(_SensitiveModel):
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


class EntropyLDiversity(_SensitiveModel):
    """exp(entropy of the class's sensitive values) >= l (entropy in nats)."""

    name = "entropy_l_diversity"
    class_local = True
    portable = False

    def __init__(self, attribute: str, l: float):
        super().__init__(attribute)
        self.l = float(l)

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        size = per_class_sum(sc, sc.cnt, stats.n_classes)
        p = sc.cnt / size[sc.cls]
        ent = -per_class_sum(sc, p * np.log(p), stats.n_classes)
        return np.exp(ent)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) >= self.l - EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = exp.Exp(this=_m("entropy_counts", cols.counts(self.attribute)))
        return [SQLCheck(f"l_entropy__{self.attribute}", v,
                         exp.GTE(this=v, expression=lit(self.l - EPS)), f"entropy l >= {self.l} on {self.attribute}")]

    def describe(self) -> str:
        return f"entropy l-diversity (l = {self.l}) on {self.attribute}"


class RecursiveCLDiversity(_SensitiveModel):
    """r_1 < c · (r_l + r_{l+1} + ...), r_i the i-th largest sensitive-value count of the class."""

    name = "recursive_cl_diversity"
    class_local = True
    portable = False

    def __init__(self, attribute: str, c: float, l: int):
        super().__init__(attribute)
        self.c, self.l = float(c), int(l)

    def check(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        cls, cnt, rank = sorted_counts(sc)
        r1 = np.bincount(cls, weights=np.where(rank == 1, cnt, 0), minlength=stats.n_classes)
        tail = np.bincount(cls, weights=np.where(rank >= self.l, cnt, 0), minlength=stats.n_classes)
        return r1 < self.c * tail

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        ok = _m("recursive_l_ok_counts", cols.counts(self.attribute), lit(self.c), lit(self.l))
        return [SQLCheck(f"l_recursive__{self.attribute}", exp.Cast(this=ok, to=exp.DataType.build("INT")), ok,
                         f"recursive (c={self.c}, l={self.l}) on {self.attribute}")]

    def describe(self) -> str:
        return f"recursive (c, l)-diversity (c = {self.c}, l = {self.l}) on {self.attribute}"


class TCloseness(_SensitiveModel):
    """Earth mover's distance between the class's and the table's sensitive distribution is at most t.

    Equal ground distance: ½ Σ |p_i − q_i|. (The ordered distance for numeric attributes is computed by the
    compiler's t-closeness subquery when ``distance = "ordered"``.)
    """

    name = "t_closeness"

    def __init__(self, attribute: str, t: float, distance: str = "equal"):
        super().__init__(attribute)
        self.t, self.distance = float(t), distance

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        q = sc.global_freq / sc.global_freq.sum()
        size = per_class_sum(sc, sc.cnt, stats.n_classes)
        p = sc.cnt / size[sc.cls]
        if self.distance == "ordered":
            m = sc.n_values
            rank = sc.value_rank if sc.value_rank is not None else np.arange(m)
            dense = np.zeros((stats.n_classes, m))
            dense[sc.cls, rank[sc.val]] = p
            qd = np.zeros(m)
            qd[rank] = q
            cum = np.cumsum(dense - qd[None, :], axis=1)
            return np.abs(cum).sum(axis=1) / max(m - 1, 1)
        inside = per_class_sum(sc, np.abs(p - q[sc.val]), stats.n_classes)
        q_inside = per_class_sum(sc, q[sc.val], stats.n_classes)
        return 0.5 * (inside + (1.0 - q_inside))

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.measure(stats) <= self.t + EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.tclose(self.attribute)
        return [SQLCheck(f"t_closeness__{self.attribute}", v, exp.LTE(this=v, expression=lit(self.t + EPS)),
                         f"t-closeness ({self.distance}) <= {self.t} on {self.attribute}")]

    def describe(self) -> str:
        return f"t-closeness (t = {self.t}, {self.distance} distance) on {self.attribute}"


class SimpsonDiversity(_SensitiveModel):
    """Simpson diversity D = 1/Σp² and evenness E = D / #distinct reach the policy's thresholds."""

    name = "simpson"
    portable = False

    def __init__(self, attribute: str, diversity: float | None = None, evenness: float | None = None):
        super().__init__(attribute)
        self.diversity, self.evenness = diversity, evenness
        # D never decreases when classes merge; E can ({a:1, b:1} and {a:10} both have E = 1, their union 0.59)
        self.monotone = evenness is None

    def values(self, stats: ClassStats) -> tuple[np.ndarray, np.ndarray]:
        sc = stats.sensitive[self.attribute]
        size = per_class_sum(sc, sc.cnt, stats.n_classes)
        p = sc.cnt / size[sc.cls]
        d = 1.0 / per_class_sum(sc, p * p, stats.n_classes)
        distinct = np.bincount(sc.cls, minlength=stats.n_classes)
        return d, d / distinct

    def check(self, stats: ClassStats) -> np.ndarray:
        d, e = self.values(stats)
        ok = np.ones(stats.n_classes, dtype=bool)
        if self.diversity is not None:
            ok &= d >= self.diversity - EPS
        if self.evenness is not None:
            ok &= e >= self.evenness - EPS
        return ok

    def measure(self, stats: ClassStats) -> np.ndarray:
        return self.values(stats)[0]

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        out = []
        counts = cols.counts(self.attribute)
        if self.diversity is not None:
            d = _m("simpson_diversity_counts", counts)
            out.append(SQLCheck(f"simpson_d__{self.attribute}", d,
                                exp.GTE(this=d, expression=lit(self.diversity - EPS)),
                                f"Simpson D >= {self.diversity} on {self.attribute}"))
        if self.evenness is not None:
            e = _m("simpson_evenness_counts", counts)
            out.append(SQLCheck(f"simpson_e__{self.attribute}", e,
                                exp.GTE(this=e, expression=lit(self.evenness - EPS)),
                                f"Simpson E >= {self.evenness} on {self.attribute}"))
        return out

    def describe(self) -> str:
        return f"Simpson diversity (D >= {self.diversity}, E >= {self.evenness}) on {self.attribute}"


class ThetaSensitivity(_SensitiveModel):
    """σ² of the frequency-rank weights of the class >= μ · (m² − 1) / 12 (spec/05)."""

    name = "theta"
    monotone = False
    portable = False

    def __init__(self, attribute: str, mu: float):
        super().__init__(attribute)
        self.mu = float(mu)

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        cls, cnt, rank = sorted_counts(sc)
        m = np.bincount(cls, weights=cnt, minlength=stats.n_classes)
        s1 = np.bincount(cls, weights=cnt * rank, minlength=stats.n_classes) / m
        s2 = np.bincount(cls, weights=cnt * rank * rank, minlength=stats.n_classes) / m
        return s2 - s1 * s1

    def check(self, stats: ClassStats) -> np.ndarray:
        m = stats.sizes.astype(float)
        return self.measure(stats) >= self.mu * (m * m - 1) / 12.0 - EPS

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = _m("theta_variance_counts", cols.counts(self.attribute))
        threshold = _m("theta_threshold", cols.size, lit(self.mu))
        ok = exp.GTE(this=v, expression=exp.Sub(this=threshold, expression=lit(EPS)))
        return [SQLCheck(f"theta__{self.attribute}", v, ok, f"θ variance >= {self.mu}·σ²_full on {self.attribute}")]

    def describe(self) -> str:
        return f"θ-sensitivity (μ = {self.mu}) on {self.attribute}"
