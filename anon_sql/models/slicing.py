"""l-diverse slicing (spec/02 §2.3, Definitions 8–10): the whole-table requirement max p(t, s) <= 1/l and the
per-bucket guide the slicing method partitions under.

:class:`SlicingLDiversity` is the release's check: SQL over the materialized table (:mod:`.slicing_sql`, the twin of
the numpy kernel ``anon_sql.udfs.slicing``), asked for by the verify stage through :meth:`PrivacyModel.table_check`.
Its per-class test passes every class (p(t, s) mixes buckets); :meth:`SlicingLDiversity.guide` gives the per-bucket
model that is sufficient for it.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from sqlglot import exp

from .base import ClassStats, PrivacyModel
from .slicing_sql import verify

PAIR = "__slicing_pair"   # the ClassStats key of the guide's (C_c − {S} value, sensitive value) codes


class SlicingGuide(PrivacyModel):
    """Partitioning guide, sufficient for Definition 10: in every bucket, among the tuples sharing a (C_c − {S})
    value, one sensitive value holds at most 1/l. p(t, s) = Σ_B p(t, B) · D(t, B)[s] is a mixture of exactly these
    shares over t's matching buckets, so every p(t, s) is then <= 1/l (with C_c = {S}: a bucket's top S share).
    Its statistics: ``stats.sensitive[PAIR]``, codes ``x · n_sensitive + s``."""

    name = "slicing_guide"
    monotone = False
    needs_sensitive = True

    def __init__(self, l: float, n_sensitive: int):
        self.l, self.n_sensitive = float(l), int(n_sensitive)

    def check(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[PAIR]
        if len(sc.cls) == 0:
            return np.ones(stats.n_classes, dtype=bool)
        x = sc.val // self.n_sensitive
        nx = int(x.max()) + 1
        uniq, inv = np.unique(sc.cls * nx + x, return_inverse=True)
        total = np.bincount(inv, weights=sc.cnt)
        top = np.zeros(len(uniq))
        np.maximum.at(top, inv, sc.cnt)
        bad = top * self.l > total * (1 + 1e-12)
        return np.bincount(uniq[bad] // nx, minlength=stats.n_classes) == 0

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

    def guide(self, n_sensitive: int) -> SlicingGuide:
        """The per-bucket model sufficient for this requirement (``n_sensitive``: the sensitive attribute's codes)."""
        return SlicingGuide(self.l, n_sensitive)

    def table_check(self, con: Any, release: exp.Table, source: exp.Expression, risk: exp.Table | None,
                    layout: dict[str, Any] | None, weight: str | None, assignment: exp.Table | None = None,
                    create: Callable[[exp.Create], None] | None = None) -> dict[str, Any] | None:
        if not layout:
            return None   # a plan that does not slice (no column groups to check)
        row = verify(con, release, source, risk, {**layout, "sensitive": self.attribute, "l": self.l}, weight,
                     assignment, create=create)
        row.pop("requirement", None)
        return row

    def describe(self) -> str:
        return f"l-diverse slicing (l = {self.l:g}) on {self.attribute}"
