"""The metric registry: every metric's name, formula, direction, what it needs, and the function computing it.

A metric function takes a :class:`~anon_sql.metrics.data.ReleaseData` and returns a float, or a dict of floats whose
first key is the metric itself and whose others are details (e.g. per sensitive attribute, ``l_distinct__salary``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

DIRECTIONS = ("lower", "higher", "info")
NEEDS = ("release", "release+source")
READS = ("sensitive", "tuples")    # shared aggregates worth reading first (see ReleaseData.prefetch)


@dataclass(frozen=True)
class Metric:
    """One registered metric (after ARX: the formula, its direction, and the data it reads)."""

    name: str
    family: str            # risk | utility | query
    formula: str
    direction: str         # lower / higher is better, or info
    needs: str             # "release" (release + catalog + taxonomies) or "release+source"
    fn: Callable[[Any], float | dict[str, float]]
    reads: tuple[str, ...] = ()   # "sensitive": per-class sensitive counts; "tuples": the original QI tuples

    def as_row(self) -> dict[str, str]:
        return {"metric": self.name, "family": self.family, "direction": self.direction, "needs": self.needs,
                "formula": self.formula}


REGISTRY: dict[str, Metric] = {}


def register_metric(name: str, family: str, formula: str, direction: str, needs: str = "release",
             reads: tuple[str, ...] = ()):
    """Decorator: add a metric function to :data:`REGISTRY` under ``name``."""
    if any(r not in READS for r in reads):
        raise ValueError(f"metric {name!r}: reads must be among {READS}")
    if direction not in DIRECTIONS:
        raise ValueError(f"metric {name!r}: direction must be one of {DIRECTIONS}")
    if needs not in NEEDS:
        raise ValueError(f"metric {name!r}: needs must be one of {NEEDS}")

    def wrap(fn: Callable[[Any], float | dict[str, float]]):
        REGISTRY[name] = Metric(name, family, formula, direction, needs, fn, tuple(reads))
        return fn

    return wrap


def lookup(name: str) -> Metric | None:
    """The metric a result key belongs to: ``ncp`` itself, ``ncp__age`` (a detail), ``query_error_median``."""
    base = name.split("__", 1)[0]
    if base in REGISTRY:
        return REGISTRY[base]
    return next((m for m in REGISTRY.values() if base.startswith(m.name + "_")), None)


def direction(name: str) -> str:
    """Direction of a metric or of one of its detail keys (``l_distinct__salary`` → that of ``l_distinct``)."""
    metric = lookup(name)
    return metric.direction if metric else "info"
