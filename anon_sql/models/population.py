"""Population-based models (after ARX's KMap and DPresence with a population table): each released class is compared
with the records of a population table — the table the source was sampled from — generalized the same way.

* k-map (Sweeney 2002; El Emam & Dankar 2008): every class matches at least k population records.
* δ-presence (Nergiz, Atzori & Clifton 2007): δ = |class| / |population class| lies in [δmin, δmax].

A population record *matches* a class when the class's released values cover its QI values (docs/assess.md): for
level plans, the population generalized with the plan's levels falls in the class. numpy: :attr:`ClassStats.population`
(filled by the lattice from the population's base counts, by the local-recoding partitioners from
``methods/population_points.py``); SQL: the compiler joins each class's matches as ``__population``
(compiler.class_stats_query; assignment plans through :mod:`anon_sql.compiler.population`).
Merging classes adds their population counts, so a k-map pass survives any merge (monotone, also with
suppression); δ of a merged class is a weighted mean of the parts' δ, so "every class passes" survives
generalization (monotone without suppression) but a passing class merged with a failing one may fail (not with
suppression) — ARX's DPresence likewise: monotonic with generalization, not with suppression.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..common.sqlbuild import lit
from ..policy.keys import REQUIRED, Text, integer, key, number, section, section_table
from .base import EPS, WORST_LARGEST, ClassColumns, ClassStats, PrivacyModel, SQLCheck
from .registry import ModelKey, register_model_key

WEIGHT = "__pw"   # the population relation's column: records each of its rows stands for


@dataclass
class Population:
    """The population a policy names; ``relation`` (its QI columns cast to the source's types, and ``__pw`` the
    records each row stands for), ``quasi`` and ``types`` are set when the release resolves it."""

    name: str
    relation: exp.Expression | None = None
    quasi: list[str] = field(default_factory=list)       # the QIs it is matched on (the source policy's)
    types: dict[str, str] = field(default_factory=dict)  # the type each QI is read as (the source's)


class PopulationModel(PrivacyModel):
    needs_population = True
    portable = False

    def __init__(self, population: Population):
        self.population = population

    def counts(self, stats: ClassStats) -> np.ndarray:
        if stats.population is None:
            raise PolicyError(f"{self.describe()} needs the population count of every class, which these class "
                              "statistics do not carry (the planner was given no population)")
        return np.asarray(stats.population, dtype=np.float64)


class KMap(PopulationModel):
    """k-map: every class matches at least k records of the population."""

    name = "k_map"
    monotone = True
    suppression_monotone = True

    def __init__(self, k: int, population: Population):
        super().__init__(population)
        self.k = int(k)

    def measure(self, stats: ClassStats) -> np.ndarray:
        return self.counts(stats)

    def check(self, stats: ClassStats) -> np.ndarray:
        return self.counts(stats) >= self.k

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        v = cols.population
        return [SQLCheck("k_map", v, exp.GTE(this=v.copy(), expression=lit(self.k)),
                         f"population records per class >= {self.k} (population {self.population.name!r})")]

    def describe(self) -> str:
        return f"k-map (k = {self.k}, population {self.population.name!r})"


class DeltaPresence(PopulationModel):
    """δ-presence: δmin <= |class| / |population records matching it| <= δmax (a class no population record matches
    has no δ and fails; resolve refuses a source that is not a subset of its population, and a class's released
    values cover its own records, so it does not arise)."""

    name = "delta_presence"
    monotone = True
    suppression_monotone = False

    def __init__(self, delta_min: float, delta_max: float, population: Population):
        super().__init__(population)
        self.delta_min, self.delta_max = float(delta_min), float(delta_max)

    def measure(self, stats: ClassStats) -> np.ndarray:
        pop = self.counts(stats)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(pop > 0, stats.sizes / np.where(pop > 0, pop, 1.0), np.inf)

    def check(self, stats: ClassStats) -> np.ndarray:
        d = self.measure(stats)
        return np.isfinite(d) & (d >= self.delta_min - EPS) & (d <= self.delta_max + EPS)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        pop = cols.population
        d = exp.Div(this=exp.Cast(this=cols.size, to=exp.DataType.build("DOUBLE")),
                    expression=exp.Nullif(this=pop, expression=lit(0)))
        ok = exp.Coalesce(this=_between(d, self.delta_min - EPS, self.delta_max + EPS), expressions=[exp.false()])
        return [SQLCheck("delta_presence", d, ok,
                         f"{self.delta_min} <= |class| / |population class| <= {self.delta_max} "
                         f"(population {self.population.name!r})", WORST_LARGEST)]

    def describe(self) -> str:
        return (f"δ-presence (δmin = {self.delta_min}, δmax = {self.delta_max}, population "
                f"{self.population.name!r})")


def _between(value: exp.Expression, low: float, high: float) -> exp.Expression:
    return exp.And(this=exp.GTE(this=value.copy(), expression=lit(low)),
                   expression=exp.LTE(this=value.copy(), expression=lit(high)))


# -- the [privacy] keys -------------------------------------------------------------------------------------------
def check_delta_range(d: Mapping[str, Any], where: str) -> None:
    """δ-presence's bounds must leave a δ a class can have."""
    lo, hi = d.get("delta_min", 0.0), d.get("delta_max", 1.0)
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
        raise PolicyError(f"{where}: delta_min = {lo} is larger than delta_max = {hi}; no class can have "
                          "delta_min <= δ <= delta_max: give delta_min <= delta_max")


POPULATION_KEY = key("population", Text(what="table, view or .csv/.parquet path"),
                     "the population the source was sampled from: a table, view or file with (at least) every "
                     "quasi-identifier column; the source must be a subset of it", REQUIRED)
K_MAP = section("privacy.k_map",
                key("k", integer(ge=1), "every released class matches >= k records of the population (records "
                    "its released values cover; docs/assess.md)", REQUIRED), POPULATION_KEY)
DELTA_PRESENCE = section("privacy.delta_presence",
                         key("delta_min", number(ge=0, le=1), "smallest δ = |class| / |population records matching "
                             "it| allowed",
                             0.0),
                         key("delta_max", number(ge=0, le=1), "largest δ allowed", REQUIRED), POPULATION_KEY,
                         rules=[check_delta_range])


def shared_population(name: str, context) -> Population:
    """The population ``name`` of this policy's models (k-map and δ-presence on one population share it)."""
    return context.populations.setdefault(name, Population(name))


register_model_key(ModelKey(
    key("k_map", section_table(K_MAP), "k-map (Sweeney 2002; ARX's KMap with a population table): each class matches "
        ">= k population records"),
    build=lambda spec, attribute, context: [KMap(spec["k"], shared_population(spec["population"], context))],
    per_attribute=False, population=True,
    sections=(("`k_map = { … }` (population-based; every method, on DuckDB and on Spark)", K_MAP),),
    classes=(KMap,), examples=({"k": 3, "population": "population"},)))
register_model_key(ModelKey(
    key("delta_presence", section_table(DELTA_PRESENCE), "δ-presence (Nergiz, Atzori & Clifton 2007): "
        "delta_min <= |class| / |population records matching it| <= delta_max"),
    build=lambda spec, attribute, context: [DeltaPresence(spec.get("delta_min", 0.0), spec["delta_max"],
                                                          shared_population(spec["population"], context))],
    per_attribute=False, population=True,
    sections=(("`delta_presence = { … }` (population-based; every method, on DuckDB and on Spark)", DELTA_PRESENCE),),
    classes=(DeltaPresence,), examples=({"delta_min": 0.05, "delta_max": 0.6, "population": "population"},)))
