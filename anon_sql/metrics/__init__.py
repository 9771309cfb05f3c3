"""Utility, privacy-risk and query-accuracy metrics of a release (spec/06).

    anon_sql.metrics.compute(con, "adult_k5")                      # every registered metric → {name: float}
    anon_sql.metrics.compute(con, "adult_k5", ["ncp", "k"])        # a selection
    anon_sql.metrics(con, "adult_k5")                              # the package itself is callable (= compute)
    anon_sql.metrics.REGISTRY["ncp"].formula                       # name, family, formula, direction, needs

Classification utility is separate (it needs a target): :func:`anon_sql.metrics.classification.classify`.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Iterable

from ..errors import PolicyError
from . import query, risk, utility  # noqa: F401  (register the metrics)
from .data import ReleaseData
from .registry import REGISTRY, Metric, direction

# a cheap default set for sweeps and the release hook when `compute = true`
DEFAULT = ("k", "records_at_risk", "prosecutor_risk_max", "prosecutor_risk_avg", "sample_uniques", "ncp", "precision",
           "dcp", "cavg", "l_distinct", "t_closeness")


def _names(names: Iterable[str] | str | bool | None) -> list[str]:
    if names is None or names is True or names == "all":
        return list(REGISTRY)
    if names == "default":
        return list(DEFAULT)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise PolicyError(f"unknown metric(s) {unknown}; available: {', '.join(REGISTRY)} "
                          "(or \"all\" / \"default\")")
    return names


def evaluate(data: ReleaseData, names: Iterable[str] | str | bool | None = None) -> dict[str, float]:
    """Compute the named metrics (all when None) over prepared release data; details keys follow their metric."""
    out: dict[str, float] = {}
    names = _names(names)
    data.prefetch({r for n in names for r in REGISTRY[n].reads})
    for name in names:
        value = REGISTRY[name].fn(data)
        if isinstance(value, dict):
            out.update({k: float(v) for k, v in value.items()})
        else:
            out[name] = float(value)
    return out


def compute(con, release_name: str, names: Iterable[str] | str | None = None,
            params: dict[str, Any] | None = None) -> dict[str, float]:
    """Metrics of a materialized release, read from its table, catalog rows, taxonomies and (where needed) source.

    ``params`` (also read from the policy's ``[metrics]`` table): risk_threshold, reid_quasi, recursive_l,
    t_distance, weights, iv, iv_trees, queries, query_dims, query_selectivity, query_seed, silhouette_sample.
    """
    return evaluate(ReleaseData.from_catalog(con, release_name, params), names)


def attach(con, rel, taxonomies, src) -> None:
    """The release() hook: compute the policy's ``[metrics] compute`` inside the open transaction (dry runs too)
    into ``rel.metrics``, with their directions for ``anon.metrics``."""
    spec = rel.policy.metrics.get("compute")
    try:
        values = evaluate(ReleaseData.live(con, rel, taxonomies, src), spec)
    except PolicyError as err:
        raise PolicyError(f"[metrics] compute: {err}") from None
    rel.metrics.update(values)
    rel.info.setdefault("metric_directions", {}).update({k: direction(k) for k in values})


def metrics_table() -> "Any":
    """The registry as a DataFrame: metric, family, direction, needs, formula."""
    import pandas as pd

    return pd.DataFrame([m.as_row() for m in REGISTRY.values()])


class _CallableModule(types.ModuleType):
    """``anon_sql.metrics(con, name)`` works as well as ``anon_sql.metrics.compute(con, name)``."""

    def __call__(self, con, release_name: str, names: Iterable[str] | str | None = None,
                 params: dict[str, Any] | None = None) -> dict[str, float]:
        return compute(con, release_name, names, params)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["compute", "evaluate", "attach", "REGISTRY", "Metric", "ReleaseData", "DEFAULT", "direction", "metrics_table"]
