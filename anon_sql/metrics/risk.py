"""Privacy and re-identification risk metrics (spec/06, "Privacy / risk"). Per-class formulas reuse the privacy
models' numpy measures (models/), so a metric and the check it summarizes cannot disagree."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import PolicyError
from ..models import (DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity, SimpsonDiversity, TCloseness,
        ThetaSensitivity)
from ..udfs import kernels
from ..common.columns import is_numeric
from .data import ReleaseData
from . import sizes
from .registry import register_metric

NAN = float("nan")


@register_metric("k", "risk", "min_EC |EC|", "higher")
def k_achieved(d: ReleaseData) -> float:
    return sizes.k_from_sizes(d.class_sizes)


@register_metric("records_at_risk", "risk", "Σ |EC| over ECs with |EC| < threshold (default: the policy's k)", "lower")
def records_at_risk(d: ReleaseData) -> float:
    return sizes.at_risk_from_sizes(d.class_sizes, d.params.get("risk_threshold", d.k))


@register_metric("prosecutor_risk_max", "risk", "max_EC 1/|EC|", "lower")
def prosecutor_risk_max(d: ReleaseData) -> float:
    return sizes.prosecutor_max_from_sizes(d.class_sizes)


@register_metric("prosecutor_risk_avg", "risk", "#EC / N", "lower")
def prosecutor_risk_avg(d: ReleaseData) -> float:
    return sizes.prosecutor_avg_from_sizes(len(d.class_sizes), d.class_sizes.sum())


@register_metric("sample_uniques", "risk", "#{EC : |EC| = 1} / N", "lower")
def sample_uniques(d: ReleaseData) -> float:
    n = d.class_sizes.sum()
    return float((d.class_sizes == 1).sum() / n) if n else NAN


# -- sensitive-attribute summaries (one value per attribute; the metric is the worst) ----------------------------
def _per_attribute(d: ReleaseData, name: str, measure, worst) -> dict[str, float]:
    """``name`` = the worst over sensitive attributes; ``name__<attribute>`` for each when there are several."""
    if not d.policy.sensitive:
        return {name: NAN}
    values = {}
    for sa in d.policy.sensitive:
        sc, stats, labels = d.sensitive_counts(sa)
        per_class = np.asarray(measure(sa, sc, stats, labels), dtype=float)
        per_class = per_class[~np.isnan(per_class)]
        values[sa] = float(worst(per_class)) if len(per_class) else NAN
    out = {name: float(worst(np.array(list(values.values()))))}
    if len(values) > 1:
        out.update({f"{name}__{sa}": v for sa, v in values.items()})
    return out


@register_metric("l_distinct", "risk", "min_EC #distinct S values", "higher", reads=("sensitive",))
def l_distinct(d: ReleaseData) -> dict[str, float]:
    return _per_attribute(d, "l_distinct", lambda sa, sc, st, _: DistinctLDiversity(sa, 1).measure(st), np.min)


@register_metric("l_entropy", "risk", "min_EC exp(−Σ p_s ln p_s)", "higher", reads=("sensitive",))
def l_entropy(d: ReleaseData) -> dict[str, float]:
    return _per_attribute(d, "l_entropy", lambda sa, sc, st, _: EntropyLDiversity(sa, 1).measure(st), np.min)


def _recursive_l(d: ReleaseData) -> int:
    ld = d.policy.privacy.l_diversity or {}
    return int(d.params.get("recursive_l", ld.get("l", 2) if ld.get("kind") == "recursive" else 2))


@register_metric("l_recursive", "risk", "max_EC r_1 / (r_l + r_{l+1} + …): the smallest c the release meets "
          "(c must exceed it; l from the policy, else 2; inf when a class has fewer than l values)", "lower",
          reads=("sensitive",))
def l_recursive(d: ReleaseData) -> dict[str, float]:
    l = _recursive_l(d)

    return _per_attribute(d, "l_recursive", lambda sa, sc, st, _: RecursiveCLDiversity(sa, 1.0, l).measure(st),
                          np.max)


def t_distance(d: ReleaseData, sa: str) -> str:
    """The ground distance of t-closeness: parameter, else the policy's, else ordered for numbers, equal otherwise."""
    if "t_distance" in d.params:
        dist = d.params["t_distance"]
    elif isinstance(d.policy.privacy.t_closeness, dict) and "distance" in d.policy.privacy.t_closeness:
        dist = d.policy.privacy.t_closeness["distance"]
    else:
        dist = "ordered" if is_numeric(d.source.types.get(sa, "")) else "equal"
    if dist not in ("equal", "ordered"):
        raise PolicyError(f"metrics parameter t_distance must be 'equal' or 'ordered', got {dist!r}")
    return dist


@register_metric("t_closeness", "risk", "max_EC EMD(P_EC, P_T): equal distance ½ Σ |p_i − q_i|, ordered for numeric S",
          "lower", reads=("sensitive",))
def t_closeness(d: ReleaseData) -> dict[str, float]:
    return _per_attribute(d, "t_closeness",
                          lambda sa, sc, st, _: TCloseness(sa, 1.0, t_distance(d, sa)).measure(st), np.max)


@register_metric("simpson_d", "risk", "min_EC D, D = 1 / Σ p²", "higher", reads=("sensitive",))
def simpson_d(d: ReleaseData) -> dict[str, float]:
    return _per_attribute(d, "simpson_d", lambda sa, sc, st, _: SimpsonDiversity(sa).values(st)[0], np.min)


@register_metric("simpson_e", "risk", "min_EC E, E = D / #distinct", "higher", reads=("sensitive",))
def simpson_e(d: ReleaseData) -> dict[str, float]:
    return _per_attribute(d, "simpson_e", lambda sa, sc, st, _: SimpsonDiversity(sa).values(st)[1], np.min)


@register_metric("theta", "risk", "min_EC σ²(EC) / σ²_full(|EC|), σ²_full(m) = (m² − 1)/12: the largest μ every "
          "class meets (classes of one record skipped)", "higher", reads=("sensitive",))
def theta(d: ReleaseData) -> dict[str, float]:
    def measure(sa, sc, stats, _):
        m = stats.sizes.astype(float)
        var = ThetaSensitivity(sa, 1.0).measure(stats)
        full = kernels.theta_full(m)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m >= 2, var / np.where(m >= 2, full, 1), np.nan)

    return _per_attribute(d, "theta", measure, np.min)


@register_metric("noise_records", "risk", "dummy records a method added (θ-sensitivity), from the catalog", "info")
def noise_records(d: ReleaseData) -> float:
    return float(d.noise)


# -- re-identification and leakage (need the source) --------------------------------------------------------------
@register_metric("reid_probability", "risk", "attacker knowing QI subset A (parameter reid_quasi, default all QIs): per "
          "original record 1/#{released records covering it on A} (0 when none); mean over records "
          "(+ reid_probability_std)", "lower", needs="release+source", reads=("tuples",))
def reid_probability(d: ReleaseData) -> dict[str, float]:
    quasi = list(d.params.get("reid_quasi") or d.quasi)
    unknown = [q for q in quasi if q not in d.quasi]
    if unknown or not quasi:
        raise PolicyError(f"metrics parameter reid_quasi must list quasi-identifiers of the release "
                          f"({d.quasi}); got {quasi}")
    o, covered = d.coverage(quasi, d.tuples["n"].to_numpy(dtype=float))
    p = np.where(covered > 0, 1.0 / np.where(covered > 0, covered, 1), 0.0)
    w = o["n"].to_numpy(dtype=float)
    mean = float(np.average(p, weights=w))
    std = float(np.sqrt(np.average((p - mean) ** 2, weights=w)))
    return {"reid_probability": mean, "reid_probability_std": std}


def leakage_table(d: ReleaseData) -> pd.DataFrame:
    """Seed 000's pre/post entropy leakage per quasi-identifier (analytics.leakage.compare_leakage)."""
    if "leakage" in d.cache:
        return d.cache["leakage"]
    from ..analytics.leakage import compare_leakage
    from ..data.source import is_path, named_relation

    # the source as every command reads its name (whole first, then schema.table: issue 28.7), else the working view
    before = (None if is_path(d.source.label) else named_relation(d.con, d.source.label)) or d.names.source
    d.cache["leakage"] = compare_leakage(d.con, before, d.name, d.quasi, d.policy.count_column)
    return d.cache["leakage"]


@register_metric("leakage_pre", "risk", "mean over QIs of the normalized entropy leakage ΔS/S_0 of the source (seed 000)",
          "info", needs="release+source")
def leakage_pre(d: ReleaseData) -> float:
    return float(leakage_table(d)["normalized_before"].mean())


@register_metric("leakage_post", "risk", "mean over QIs of the normalized entropy leakage ΔS/S_0 of the release "
          "(seed 000; must not exceed leakage_pre)", "lower", needs="release+source")
def leakage_post(d: ReleaseData) -> float:
    return float(leakage_table(d)["normalized_after"].mean())
