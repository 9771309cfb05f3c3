"""l-diverse slicing (spec/02 §2.3, Definitions 8–10): the whole-table requirement max p(t, s) <= 1/l and the
per-bucket guide the slicing method partitions under.

:class:`SlicingLDiversity` is the release's check: SQL over the materialized table (:mod:`.slicing_sql`, the twin of
the numpy kernel ``anon_sql.udfs.slicing``), asked for by the verify stage through :meth:`PrivacyModel.table_check`.
Its per-class test passes every class (p(t, s) mixes buckets); :meth:`SlicingLDiversity.guide` gives the per-bucket
model that is sufficient for it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from sqlglot import exp

from ..common.sqlbuild import col, lit
from .base import ClassColumns, ClassStats, PrivacyModel, SQLCheck, WORST_LARGEST, macro
from .slicing_sql import slicing_requirement_text, verify_slicing

PAIR = "__slicing_pair"   # the ClassStats key of the guide's (C_c − {S} value, sensitive value) codes


class SlicingGuide(PrivacyModel):
    """Partitioning guide, sufficient for Definition 10: in every bucket, among the tuples sharing a (C_c − {S})
    value, one sensitive value holds at most 1/l. p(t, s) = Σ_B p(t, B) · D(t, B)[s] is a mixture of exactly these
    shares over t's matching buckets, so every p(t, s) is then <= 1/l (with C_c = {S}: a bucket's top S share).
    Its numpy statistics: ``stats.sensitive[PAIR]``, codes ``x · n_sensitive + s``. Its SQL (``attribute`` = S,
    ``companions`` = C_c − {S}) reads each class's rows as a list of {x, s, w} and calls the macros
    ``anon.slicing_guide_share`` / ``anon.slicing_guide_ok`` (cross-tested in tests/methods/test_slicing.py)."""

    name = "slicing_guide"
    monotone = False
    needs_sensitive = True
    portable = False   # DuckDB list lambdas

    def __init__(self, l: float, n_sensitive: int, attribute: str | None = None, companions: Sequence[str] = ()):
        self.l, self.n_sensitive = float(l), int(n_sensitive)
        self.attribute, self.companions = attribute, tuple(companions)

    def _parts(self, stats: ClassStats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (class, x) present: the class, the largest count of one sensitive value, and all records."""
        sc = stats.sensitive[PAIR]
        x = sc.val // self.n_sensitive
        nx = int(x.max()) + 1 if len(x) else 1
        uniq, inv = np.unique(sc.cls * nx + x, return_inverse=True)
        total = np.bincount(inv, weights=sc.cnt, minlength=len(uniq))
        top = np.zeros(len(uniq))
        np.maximum.at(top, inv, sc.cnt)
        return uniq // nx, top, total

    def check(self, stats: ClassStats) -> np.ndarray:
        cls, top, total = self._parts(stats)
        bad = top * self.l > total * (1 + 1e-12)
        return np.bincount(cls[bad], minlength=stats.n_classes) == 0

    def measure(self, stats: ClassStats) -> np.ndarray:
        """Per class: the largest share one sensitive value holds among tuples sharing an x (NaN: no records)."""
        cls, top, total = self._parts(stats)
        out = np.full(stats.n_classes, -np.inf)
        np.maximum.at(out, cls, top / total)
        return np.where(np.isinf(out), np.nan, out)

    def row_aggregates(self, w: exp.Expression) -> dict[str, exp.Expression]:
        if self.attribute is None:
            return {}
        x: exp.Expression = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"x{i}"), expression=col(a))
                                                    for i, a in enumerate(self.companions)]) if self.companions else lit(0)
        row = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("x"), expression=x),
                                      exp.PropertyEQ(this=exp.to_identifier("s"), expression=col(self.attribute)),
                                      exp.PropertyEQ(this=exp.to_identifier("w"), expression=w.copy())])
        return {f"__slicing_guide__{self.attribute}": exp.ArrayAgg(this=row)}

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        if self.attribute is None:
            raise NotImplementedError("the slicing guide's SQL needs its sensitive attribute (and C_c − {S})")
        rows = cols.ref(f"__slicing_guide__{self.attribute}")
        return [SQLCheck(f"slicing_guide__{self.attribute}", macro("slicing_guide_share", rows),
                         macro("slicing_guide_ok", rows.copy(), lit(self.l)),
                         f"largest share of one {self.attribute} value among tuples sharing "
                         f"{list(self.companions)} <= 1/{self.l:g} per bucket", WORST_LARGEST)]

    def describe(self) -> str:
        return f"slicing guide (l = {self.l:g})"


class SlicingLDiversity(PrivacyModel):
    """``[privacy] l_diversity = { kind = "slicing", l }``: in the sliced table every original tuple t has
    max_s p(t, s) <= 1/l (a whole-table requirement, checked over the release)."""

    name = "slicing_l_diversity"
    per_class = False
    whole_table = True
    monotone = False

    def __init__(self, attribute: str, l: float):
        self.attribute, self.l = attribute, float(l)

    def sql_checks(self, cols: Any) -> list:
        return []   # not a per-class column: see table_check

    def guide(self, n_sensitive: int, companions: Sequence[str] = ()) -> SlicingGuide:
        """The per-bucket model sufficient for this requirement (``n_sensitive``: the sensitive attribute's codes;
        ``companions``: the other attributes of its column group)."""
        return SlicingGuide(self.l, n_sensitive, self.attribute, companions)

    def table_check(self, con: Any, release: exp.Table, source: exp.Expression, risk: exp.Table | None,
                    layout: dict[str, Any] | None, weight: str | None, assignment: exp.Table | None = None,
                    create: Callable[[exp.Create], None] | None = None) -> dict[str, Any] | None:
        if not layout:
            return None   # a plan that does not slice (no column groups to check)
        row = verify_slicing(con, release, source, risk, {**layout, "sensitive": self.attribute, "l": self.l}, weight,
                     assignment, create=create)
        row.pop("requirement", None)
        return row

    def table_requirement(self) -> str | None:
        return slicing_requirement_text(self.l)

    def describe(self) -> str:
        return f"l-diverse slicing (l = {self.l:g}) on {self.attribute}"
