"""Simpson diversity and evenness (spec 06): the numpy tests call the segmented kernels of udfs/kernels.py,
the SQL tests the same formulas as macros (cross-tested in tests/udfs/test_kernels.py)."""
from __future__ import annotations

import numpy as np

from sqlglot import exp

from ..common.sqlbuild import lit
from ..policy.keys import at_least_one_key, key, number, section, section_table
from ..udfs import kernels
from .base import EPS, ClassColumns, ClassStats, SQLCheck, macro
from .l_diversity import SensitiveModel
from .registry import ModelKey, register_model_key


class SimpsonDiversity(SensitiveModel):
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
        n = stats.n_classes
        return (kernels.simpson_diversity_segments(sc.cnt, sc.cls, n),
                kernels.simpson_evenness_segments(sc.cnt, sc.cls, n))

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
            d = macro("simpson_diversity_counts", counts)
            out.append(SQLCheck(f"simpson_d__{self.attribute}", d,
                                exp.GTE(this=d, expression=lit(self.diversity - EPS)),
                                f"Simpson D >= {self.diversity} on {self.attribute}"))
        if self.evenness is not None:
            e = macro("simpson_evenness_counts", counts)
            out.append(SQLCheck(f"simpson_e__{self.attribute}", e,
                                exp.GTE(this=e, expression=lit(self.evenness - EPS)),
                                f"Simpson E >= {self.evenness} on {self.attribute}"))
        return out

    def describe(self) -> str:
        return f"Simpson diversity (D >= {self.diversity}, E >= {self.evenness}) on {self.attribute}"


# -- the [privacy] key --------------------------------------------------------------------------------------------
SIMPSON = section("privacy.simpson", key("diversity", number(ge=1), "D = 1/Σp² >= diversity"),
                  key("evenness", number(ge=0, le=1), "E = D/#distinct >= evenness"),
                  rules=[at_least_one_key("diversity", "evenness")])

register_model_key(ModelKey(
    key("simpson", section_table(SIMPSON), "Simpson diversity D and evenness E per class"),
    build=lambda spec, attribute, context: [SimpsonDiversity(attribute, spec.get("diversity"), spec.get("evenness"))],
    sections=(("`simpson = { … }`", SIMPSON),), classes=(SimpsonDiversity,),
    examples=({"diversity": 1.8}, {"diversity": 1.5, "evenness": 0.7})))
