"""t-closeness with the equal and the ordered ground distance (the hierarchical one: models/hierarchical.py).

The numpy test is vectorized over the classes' sparse counts; the SQL test reads the class's distance column
``__tclose__<attribute>``: the equal distance is an aggregate the classes view computes inline, the ordered one comes
from the CTEs of :meth:`TCloseness.distance_ctes` (the compiler asks the model, it never tests its type).
"""
from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import alias, and_all, col, ident, lit, null_safe_eq
from .base import EPS, WORST_LARGEST, ClassColumns, ClassStats, SQLCheck, per_class_sum
from .l_diversity import SensitiveModel


class TCloseness(SensitiveModel):
    """Earth mover's distance between the class's and the table's sensitive distribution is at most t.

    Equal ground distance: ½ Σ |p_i − q_i|; ordered (numeric attributes): Σ_i |Σ_{j<=i} (p_j − q_j)| / (m − 1).
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

    def min_ground_distance(self, n_values: int) -> float:
        """The smallest ground distance between two different values: 1 (equal), 1 / (m − 1) (ordered)."""
        return 1.0 if self.distance == "equal" else 1.0 / max(n_values - 1, 1)

    def coverage_passes(self, stats: ClassStats) -> np.ndarray | None:
        """A necessary condition of :meth:`check` whose pass survives merging classes (None: it never fails).

        The EMD moves at least the mass of the table's distribution q that the class lacks, Σ_{v: p_v = 0} q_v, by at
        least the smallest ground distance c, so a passing class has Σ_{v in the class} q_v ≥ 1 − t / c; a merged
        class holds the values of its parts, so this pass survives any merge (with a suppression budget the records
        failing it can only shrink under generalization: a tag for the lattice search, see docs/search.md)."""
        sc = stats.sensitive[self.attribute]
        slack = (self.t + EPS) / self.min_ground_distance(sc.n_values)
        if slack >= 1.0:
            return None
        q = sc.global_freq / sc.global_freq.sum()
        covered = per_class_sum(sc, q[sc.val], stats.n_classes)
        return 1.0 - covered <= slack + 1e-9

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.tclose(self.attribute)
        return [SQLCheck(f"t_closeness__{self.attribute}", v, exp.LTE(this=v, expression=lit(self.t + EPS)),
                         f"t-closeness ({self.distance}) <= {self.t} on {self.attribute}", WORST_LARGEST)]

    def distance_ctes(self, i: int, keys: list[str], sv: str, gq: str) -> list[tuple[str, exp.Expression]] | None:
        return ordered_distance_ctes(i, self.attribute, keys, sv, gq) if self.distance == "ordered" else None

    def describe(self) -> str:
        return f"t-closeness (t = {self.t}, {self.distance} distance) on {self.attribute}"


def equal_distance(c: exp.Expression, m: exp.Expression, q: exp.Expression) -> exp.Expression:
    """The equal-distance EMD of a class as an aggregate over its (value, count ``c``, class size ``m``) rows joined
    to the table's value shares ``q``: ½ (Σ |c/m − q| + 1 − Σ q), the values the class lacks moving their whole
    share. Every class of the classes view carries it as ``__tclose__<attribute>`` unless a model computes that
    column in CTEs of its own (:meth:`TCloseness.distance_ctes`)."""
    return exp.Mul(this=lit(0.5), expression=exp.Paren(this=exp.Add(
        this=exp.Sum(this=exp.Abs(this=exp.Sub(this=exp.Div(this=c, expression=m), expression=q))),
        expression=exp.Sub(this=lit(1.0), expression=exp.Sum(this=q.copy())))))


def ordered_distance_ctes(i: int, sa: str, keys: list[str], sv: str, gq: str) -> list[tuple[str, exp.Expression]]:
    """EMD with ordered ground distance: Σ_i |Σ_{j<=i} (p_j − q_j)| / (m − 1) over the ordered domain."""
    dom, grid, cum, out = f"__dom{i}", f"__grid{i}", f"__cum{i}", f"__tco{i}"
    rank = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=col("__v"))]))
    ctes: list[tuple[str, exp.Expression]] = [
        (dom, exp.select(col("__v"), col("__q"), alias(rank, "__r")).from_(gq)),
    ]
    cls = exp.select(*[col(k) for k in keys]).distinct().from_(sv)
    grid_q = (exp.select(*[col(k, "k") for k in keys], col("__v", "d"), col("__q", "d"), col("__r", "d"))
              .from_(exp.Subquery(this=cls, alias=exp.TableAlias(this=ident("k"))))
              .join(exp.Table(this=ident(dom), alias=exp.TableAlias(this=ident("d"))), join_type="cross"))
    ctes.append((grid, grid_q))
    p = exp.Coalesce(this=exp.Div(this=col("__c", "x"), expression=col("__m", "x")), expressions=[lit(0.0)])
    running = exp.Window(
        this=exp.Sum(this=exp.Sub(this=p, expression=col("__q", "gr"))),
        partition_by=[col(k, "gr") for k in keys],
        order=exp.Order(expressions=[exp.Ordered(this=col("__r", "gr"))]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"),
    )
    on = and_all([*[null_safe_eq(col(k, "gr"), col(k, "x")) for k in keys],
                  null_safe_eq(col("__v", "gr"), col("__v", "x"))])
    cum_q = (exp.select(*[col(k, "gr") for k in keys], alias(running, "__cum"))
             .from_(exp.Table(this=ident(grid), alias=exp.TableAlias(this=ident("gr"))))
             .join(exp.Table(this=ident(sv), alias=exp.TableAlias(this=ident("x"))), on=on, join_type="left"))
    ctes.append((cum, cum_q))
    m = exp.Subquery(this=exp.select(exp.Count(this=exp.Star())).from_(dom))
    denom = exp.Greatest(this=exp.Sub(this=m, expression=lit(1)), expressions=[lit(1)])
    ctes.append((out, exp.select(*[col(k) for k in keys],
                                 alias(exp.Div(this=exp.Sum(this=exp.Abs(this=col("__cum"))), expression=denom),
                                       f"__tclose__{sa}"))
                 .from_(cum).group_by(*[col(k) for k in keys])))
    return ctes
