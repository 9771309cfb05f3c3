"""Utility / information-loss metrics (spec/06, "Utility"): NCP, Loss, precision, IV-weighted distortion and coverage,
discernibility, C_AVG, KL divergence, silhouette. Suppressed records count as fully generalized (`*` everywhere)."""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import PolicyError
from .data import ReleaseData
from ..udfs.utility import cavg_formula, discernibility
from .registry import register_metric

NAN = float("nan")
CLUSTERING_METHODS = ("upa", "cluster", "clustering", "kmeans", "adaptive")


def _weights(d: ReleaseData, spec, what: str) -> np.ndarray:
    """Per-QI weights normalized to Σ = 1 from a {qi: weight} mapping (missing QIs weigh 0)."""
    unknown = [q for q in spec if q not in d.quasi]
    if unknown:
        raise PolicyError(f"metrics parameter {what} names {unknown}, which are not quasi-identifiers "
                          f"of the release ({d.quasi})")
    w = np.array([max(float(spec.get(q, 0.0)), 0.0) for q in d.quasi])
    if w.sum() <= 0:
        raise PolicyError(f"metrics parameter {what} must give a positive weight to at least one quasi-identifier")
    return w / w.sum()


def record_average(d: ReleaseData, attr: str, weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Σ_r Σ_q w_q · value(r, q) / (N + suppressed) with Σ w = 1 (uniform: 1/|Q|), suppressed records counting 1;
    also the per-QI averages."""
    m = d.per_value(attr)
    n = d.tuples["n"].to_numpy(dtype=float)
    s = float(d.suppressed)
    total = n.sum() + s
    if total <= 0:
        return NAN, np.full(len(d.quasi), NAN)
    per_qi = ((n[:, None] * m).sum(axis=0) + s) / total
    w = np.full(len(d.quasi), 1.0 / len(d.quasi)) if weights is None else weights
    return float((per_qi * w).sum()), per_qi


@register_metric("ncp", "utility", "Σ_r Σ_q NCP(r, q) / (N·|Q|); numeric: (hi − lo)/(max_T − min_T), categorical: "
          "(|leaves(v)| − 1)/(|leaves(q)| − 1); suppressed = 1; optional weights per QI (+ ncp__<qi>)", "lower",
          needs="release+source")
def ncp(d: ReleaseData) -> dict[str, float]:
    spec = d.params.get("weights")
    value, per_qi = record_average(d, "ncp", _weights(d, spec, "weights") if spec else None)
    return {"ncp": value, **{f"ncp__{q}": float(v) for q, v in zip(d.quasi, per_qi)}}


@register_metric("loss", "utility", "ARX's Loss / GenILoss: NCP with taxonomy leaf counts for every QI, "
          "(|leaves(v)| − 1)/(|leaves(q)| − 1)", "lower", needs="release+source")
def loss(d: ReleaseData) -> float:
    return record_average(d, "loss")[0]


@register_metric("precision", "utility", "1 − Σ_r Σ_q (level / height_q) / (N·|Q|) (Sweeney); a [lo-hi] range outside "
          "a taxonomy counts its normalized width", "higher", needs="release+source")
def precision(d: ReleaseData) -> float:
    return 1.0 - record_average(d, "level")[0]


@register_metric("dcp", "utility", "Σ_EC |EC|² + N_in · #suppressed (discernibility with suppression penalty)", "lower")
def dcp(d: ReleaseData) -> float:
    return discernibility(d.class_sizes, d.records_in, d.suppressed)


@register_metric("cavg", "utility", "(N / #EC) / k; 1 is optimal", "lower")
def cavg(d: ReleaseData) -> float:
    return cavg_formula(d.released_records, len(d.class_sizes), d.k)


# -- identity vulnerability weights (seed 002) ---------------------------------------------------------------------
def iv_weights(d: ReleaseData) -> np.ndarray:
    """IV per QI, Σ = 1: parameter ``iv`` (a mapping, "uniform" or "forest"), attribute option ``iv``, the plan's
    ``iv``; else a seeded random forest on the source predicting the first sensitive attribute (uniform without one)."""
    if "iv" in d.cache:
        return d.cache["iv"]
    spec = d.params.get("iv")
    attr = {q: d.policy.attributes[q].options["iv"] for q in d.quasi if "iv" in d.policy.attributes[q].options}
    if spec is None:
        spec = attr or d.plan.get("iv") or ("forest" if d.policy.sensitive else "uniform")
    if isinstance(spec, dict):
        w = _weights(d, spec, "iv")
    elif spec == "uniform":
        w = np.full(len(d.quasi), 1.0 / len(d.quasi))
    elif spec == "forest":
        w = _forest_iv(d)
    else:
        raise PolicyError(f"metrics parameter iv must be a {{qi = weight}} table, \"uniform\" or \"forest\"; "
                          f"got {spec!r}")
    d.cache["iv"] = w
    return w


def _forest_iv(d: ReleaseData) -> np.ndarray:
    from ..analytics.vulnerability import identity_vulnerability
    from ..data.source import is_path, named_relation

    # the source as every command reads its name (whole first, then schema.table: issue 28.7), else the working view
    table = (None if is_path(d.source.label) else named_relation(d.con, d.source.label)) or d.names.source
    with warnings.catch_warnings():
        # a weak forest still ranks the QIs, and the report says how IV was obtained: only that warning is dropped
        warnings.filterwarnings("ignore", message="identity vulnerability", category=UserWarning)
        frame = identity_vulnerability(d.con, table, d.quasi, d.policy.sensitive[0], seed=d.policy.seed,
                                       n_estimators=int(d.params.get("iv_trees", 20)), n_repeats=2)
    iv = frame.set_index("attribute")["iv"].reindex(d.quasi).fillna(0.0).to_numpy(dtype=float)
    return iv / iv.sum() if iv.sum() > 0 else np.full(len(d.quasi), 1.0 / len(d.quasi))


@register_metric("dm_iv", "utility", "(1/N) Σ_r Σ_q (level_{r,q} / height_q) · IV_q, Σ IV = 1 (seed 002)", "lower",
          needs="release+source")
def dm_iv(d: ReleaseData) -> float:
    return record_average(d, "level", iv_weights(d))[0]


@register_metric("coverage_iv", "utility", "(1/N) Σ_r Σ_q IV_q · (coverage(v) − 1)/(base(T_q) − 1) (seed 002)", "lower",
          needs="release+source")
def coverage_iv(d: ReleaseData) -> float:
    return record_average(d, "loss", iv_weights(d))[0]


# -- distributions ---------------------------------------------------------------------------------------------------
@register_metric("kl_divergence", "utility", "Σ_x P(x) ln(P(x)/Q(x)) over original QI tuples x; Q spreads each released "
          "tuple's records uniformly over the leaf combinations it covers (suppressed records: all `*`); nats",
          "lower", needs="release+source", reads=("tuples",))
def kl_divergence(d: ReleaseData) -> float:
    n_t = d.tuples["n"].to_numpy(dtype=float)
    total = n_t.sum() + d.suppressed
    if total <= 0:
        return NAN
    cells = np.prod(d.per_value("size"), axis=1) if d.quasi else np.ones(len(n_t))
    o, q = d.coverage(d.quasi, n_t / total / cells)
    q = q + (d.suppressed / total) / np.prod([float(d.domains[x].n) for x in d.quasi])
    p = o["n"].to_numpy(dtype=float)
    p = p / p.sum()
    with np.errstate(divide="ignore"):
        return float(np.sum(p * (np.log(p) - np.log(q))))


# -- clustering ------------------------------------------------------------------------------------------------------
@register_metric("silhouette", "utility", "sklearn silhouette_score of the clustering features (QIs: numbers standardized, "
          "categories by taxonomy position scaled to [0, 1]), sampled above 10,000 records; NaN unless the "
          "method clusters", "higher", needs="release+source")
def silhouette(d: ReleaseData) -> float:
    if not (d.policy.method in CLUSTERING_METHODS or d.plan.get("clustering")):
        return NAN
    from sklearn.metrics import silhouette_score

    from .features import assignment_rows, qi_matrix

    frame = assignment_rows(d)
    labels = frame["__ec"].to_numpy()
    if len(np.unique(labels)) < 2 or len(np.unique(labels)) >= len(labels):
        return NAN
    x = qi_matrix(d, frame, standardize=True)
    limit = int(d.params.get("silhouette_sample", 10_000))
    sample = limit if len(labels) > limit else None
    return float(silhouette_score(x, labels, sample_size=sample, random_state=d.policy.seed))
