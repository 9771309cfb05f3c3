"""Numpy kernels of the risk measures of an assessment (docs/assess.md cites every formula): one source of truth each.

Two inputs, both produced by one GROUP BY in the engine:

* the **class-size histogram** ``(sizes, freqs)``: ``freqs[i]`` classes have ``sizes[i]`` records (ARX's
  ``RiskModelHistogram``). Every re-identification measure (k, prosecutor / journalist / marketer risk, sample
  uniques, records at risk, distinction, population uniqueness) is a function of it;
* **segmented sensitive counts** ``(counts, seg, n, val, q)`` as in udfs/kernels.py: per class (segment) the count of
  each sensitive value present (code ``val``), and ``q[val]`` the value's share of the whole table. The
  sensitive-attribute measures (α, β, δ, recursive c, hierarchical t) are vectorized over classes.

The persisted SQL macros (sql/macros.sql: ``anon.k_anonymity``, ``anon.alpha_counts``, ...) state the same formulas in
SQL; tests/assessment/test_assess.py cross-checks them.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = [
    "alpha_segments", "beta_segments", "beta_enhanced_segments", "delta_segments", "distinction", "histogram",
    "population_uniques", "recursive_c_segments", "separation", "size_measures", "t_hierarchical_segments",
    "pitman_parameters", "pitman_uniques", "zayatz_uniques", "snb_uniques", "dankar_uniques",
]


# -- class-size histogram -------------------------------------------------------------------------------------------
def histogram(class_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, freqs) of an array of class sizes, sizes ascending."""
    sizes, freqs = np.unique(np.asarray(class_sizes, dtype=np.int64), return_counts=True)
    return sizes, freqs.astype(np.int64)


def size_measures(sizes: np.ndarray, freqs: np.ndarray, threshold: float) -> dict[str, float]:
    """k, classes, records and the sample-based risks of a class-size histogram (``threshold``: the highest
    acceptable prosecutor risk; a record is at risk when 1/|EC| > threshold, as ARX's records-at-risk)."""
    s = np.asarray(sizes, dtype=np.float64)
    f = np.asarray(freqs, dtype=np.float64)
    keep = (s > 0) & (f > 0)
    s, f = s[keep], f[keep]
    n, c = float((s * f).sum()), float(f.sum())
    if n == 0:
        nan = float("nan")
        return {"k": nan, "classes": 0.0, "records": 0.0, "sample_uniques": nan, "records_at_risk": nan,
                "records_at_risk_count": 0.0, "prosecutor_risk_lowest": nan, "prosecutor_risk_avg_records": nan,
                "prosecutor_risk_avg_classes": nan, "prosecutor_risk_highest": nan}
    at_risk = float((s * f)[1.0 / s > threshold].sum())
    return {
        "k": float(s.min()),
        "classes": c,
        "records": n,
        "sample_uniques": float(f[s == 1].sum() / n),
        "records_at_risk": at_risk / n,
        "records_at_risk_count": at_risk,
        "prosecutor_risk_lowest": float(1.0 / s.max()),
        "prosecutor_risk_avg_records": c / n,                     # Σ_records 1/|EC(r)| / n = #EC / n
        "prosecutor_risk_avg_classes": float((f / s).sum() / c),  # mean over classes of 1/|EC|
        "prosecutor_risk_highest": float(1.0 / s.min()),
    }


def distinction(sizes: np.ndarray, freqs: np.ndarray) -> float:
    """Distinction of an attribute combination: #distinct value tuples / n (ARX's RiskModelAttributes)."""
    s, f = np.asarray(sizes, dtype=np.float64), np.asarray(freqs, dtype=np.float64)
    n = (s * f).sum()
    return float(f.sum() / n) if n else float("nan")


def separation(sizes: np.ndarray, freqs: np.ndarray) -> float:
    """Separation: the share of record pairs that differ on the combination, 1 − Σ |E|(|E|−1) / (n(n−1))."""
    s, f = np.asarray(sizes, dtype=np.float64), np.asarray(freqs, dtype=np.float64)
    n = (s * f).sum()
    if n < 2:
        return float("nan")
    return float(1.0 - (f * s * (s - 1)).sum() / (n * (n - 1)))


# -- population uniqueness (Hoshino 2001; Zayatz 1991; Chen & Keller-McNulty 1998; Dankar et al. 2012) ------------
def _check_population(n: float, population: float) -> float:
    if not population >= n:
        raise ValueError(f"population size {population} is smaller than the sample ({n} records)")
    return n / population


def zayatz_uniques(sizes: np.ndarray, freqs: np.ndarray, population: float) -> float:
    """Zayatz's estimate of the number of population uniques: f1 · P(unique in population | unique in sample) / π,
    the conditional probability from hypergeometric draws of n out of N with the sample's class-size distribution."""
    from scipy.stats import hypergeom

    s, f = np.asarray(sizes, dtype=np.int64), np.asarray(freqs, dtype=np.float64)
    n = int((s * f).sum())
    pi = _check_population(n, population)
    f1 = float(f[s == 1].sum())
    if f1 == 0:
        return 0.0
    big_n = int(round(population))
    c = f.sum()
    p1 = hypergeom.pmf(1, big_n, s, n)          # P(1 of an s-sized class drawn), per size
    total = float((f / c * p1).sum())
    cond = (f1 / c) * float(hypergeom.pmf(1, big_n, 1, n)) / total
    return f1 * cond / pi


def pitman_parameters(sizes: np.ndarray, freqs: np.ndarray, population: float) -> tuple[float, float]:
    """Maximum-likelihood (θ, α) of the Pitman sampling formula for a class-size histogram (Hoshino 2001), solved
    from ARX's starting point; (NaN, NaN) when the solver does not converge (ARX keeps any α ≠ 0)."""
    from scipy.optimize import fsolve
    from scipy.special import digamma

    s, f = np.asarray(sizes, dtype=np.float64), np.asarray(freqs, dtype=np.float64)
    n = float((s * f).sum())
    _check_population(n, population)
    u = float(f.sum())
    c1 = float(f[s == 1].sum())
    c2 = float(f[s == 2].sum()) or 1.0
    c = c1 * (c1 - 1) / c2
    t0 = (n * u * c - c1 * (n - 1) * (2 * u + c)) / (2 * c1 * u + c1 * c - n * c)
    a0 = (t0 * (c1 - n) + (n - 1) * c1) / (n * u)
    big = s > 1

    def equations(x: np.ndarray) -> list[float]:
        t, a = x
        r = t / a
        d = digamma(r + u) - digamma(r + 1.0)           # Σ_{i=1}^{u−1} a/(t + i a) · (1/a)·a  (closed form)
        o1 = d / a                                       # Σ_{i<u} 1/(t + i·a)
        o2 = digamma(n + t) - digamma(t + 1.0)           # Σ_{i<n} 1/(t + i)
        o3 = ((u - 1) * a - t * d) / (a * a)             # Σ_{i<u} i/(t + i·a)
        o4 = float((f[big] * (digamma(s[big] - a) - digamma(1.0 - a))).sum())  # Σ_k f_k Σ_{j<k} 1/(j − a)
        return [o1 - o2, o3 - o4]

    with np.errstate(all="ignore"):
        sol, info, ier, _ = fsolve(equations, [t0, a0], full_output=True, xtol=1e-12)
    t, a = float(sol[0]), float(sol[1])
    if ier != 1 or not (math.isfinite(t) and math.isfinite(a)) or a == 0 or t + a <= 0:
        return float("nan"), float("nan")
    return t, a


def pitman_uniques(sizes: np.ndarray, freqs: np.ndarray, population: float) -> float:
    """Pitman's model (Hoshino 2001): population uniques ≈ Γ(θ+1)/Γ(θ+α) · N^α with (θ, α) of
    :func:`pitman_parameters`. NaN when the solver does not converge or the value is outside [0, N]."""
    from scipy.special import gammaln

    s, f = np.asarray(sizes, dtype=np.float64), np.asarray(freqs, dtype=np.float64)
    if f[s == 1].sum() == 0:
        return 0.0
    t, a = pitman_parameters(s, f, population)
    if math.isnan(t):
        return float("nan")
    value = math.exp(gammaln(t + 1.0) - gammaln(t + a) + a * math.log(population))
    return value if 0 <= value <= population else float("nan")


def _shlosser_classes(s: np.ndarray, f: np.ndarray, pi: float, arx: bool) -> float:
    """Shlosser's estimate of the number of non-empty population classes (Haas & Stokes 1998):
    u + f1 · Σ i π²(1−π²)^{i−1} f_i / Σ ((1+π)^i − 1)(1−π)^i f_i · (Σ (1−π)^i f_i / Σ i π (1−π)^{i−1} f_i)².
    ``arx``: the second sum as ARX's ModelSNB computes it, Σ ((1−π)^i f_i (1+π)^i − 1)."""
    u, f1 = f.sum(), f[s == 1].sum()
    q2 = pi * pi
    with np.errstate(all="ignore"):
        num1 = (s * q2 * (1 - q2) ** (s - 1) * f).sum()
        den1 = ((1 - pi) ** s * f * (1 + pi) ** s - 1).sum() if arx else (((1 + pi) ** s - 1) * (1 - pi) ** s * f).sum()
        num2 = ((1 - pi) ** s * f).sum()
        den2 = (s * pi * (1 - pi) ** (s - 1) * f).sum()
        return float(u + f1 * (num1 / den1) * (num2 / den2) ** 2)


def snb_uniques(sizes: np.ndarray, freqs: np.ndarray, population: float, arx: bool = True) -> float:
    """The slide negative binomial model (Chen & Keller-McNulty 1998): fit (α, β) to the numbers of sample classes
    of size 1 and 2 given K non-empty population classes (Shlosser), then population uniques = K · β^α.

    E[f_1] = Kπ(β/(1−d))^α (αd/(1−d) + 1) and E[f_2] = Kαβ^α π²(1−β)/2 · (1−d)^e (2 − (1−α)d), d = (1−π)(1−β),
    with e = −(α+2) from the negative binomial's generating function, or e = +(α+2) and ARX's Shlosser sum as ARX's
    ModelSNB writes them (``arx = True``, the default: the value ARX reports and Dankar's rule uses). NaN when the
    solver finds no root with α > 0 and 0 < β <= 1."""
    from scipy.optimize import fsolve

    s, f = np.asarray(sizes, dtype=np.float64), np.asarray(freqs, dtype=np.float64)
    n = float((s * f).sum())
    pi = _check_population(n, population)
    c1, c2 = float(f[s == 1].sum()), float(f[s == 2].sum())
    if c1 == 0:
        return 0.0
    if pi >= 1:                                     # the sample is the population: its uniques are the uniques
        return c1
    k = _shlosser_classes(s, f, pi, arx)
    if not math.isfinite(k):
        return float("nan")
    sign = 1.0 if arx else -1.0

    def equations(x: np.ndarray) -> list[float]:
        a, b = x
        d = (1 - pi) * (1 - b)
        e1 = k * pi * (b / (1 - d)) ** a * (a * d / (1 - d) + 1) - c1
        e2 = k * a * b ** a * pi * pi * (1 - b) / 2 * (1 - d) ** (sign * (a + 2)) * (2 - (1 - a) * d) - c2
        return [e1, e2]

    for start in ((1.0, 0.5), (0.5, 0.01), (1.0, 0.05), (2.0, 0.2), (0.1, 0.001)):  # first root with α > 0, β ∈ (0, 1]
        with np.errstate(all="ignore"):
            sol, _, ier, _ = fsolve(equations, start, full_output=True, xtol=1e-12)
        a, b = float(sol[0]), float(sol[1])
        if ier == 1 and math.isfinite(a) and math.isfinite(b) and a > 0 and 0 < b <= 1:
            value = k * b ** a
            return value if 0 <= value <= population else float("nan")
    return float("nan")


def dankar_uniques(pitman: float, zayatz: float, snb: float, sampling_fraction: float) -> tuple[float, str]:
    """Dankar et al.'s decision rule: π <= 0.1 → Pitman (Zayatz when Pitman has no estimate); else the smaller of
    Zayatz and SNB (Zayatz when SNB has none). Returns (estimate, model name)."""
    def ok(v: float) -> bool:
        return math.isfinite(v) and v != 0

    if sampling_fraction <= 0.1:
        return (pitman, "pitman") if ok(pitman) else (zayatz, "zayatz")
    if ok(snb) and snb <= zayatz:
        return snb, "snb"
    return zayatz, "zayatz"


def population_uniques(sizes: np.ndarray, freqs: np.ndarray, population: float) -> dict[str, float | str]:
    """Share of population records that are unique on the quasi-identifiers, per estimator and by Dankar's rule."""
    s, f = np.asarray(sizes), np.asarray(freqs)
    n = float((s * f).sum())
    pi = _check_population(n, population)
    if not (f[s == 1].sum() > 0):
        return {"population_uniques_pitman": 0.0, "population_uniques_zayatz": 0.0,
                "population_uniques_snb": 0.0, "population_uniques_snb_nb": 0.0, "population_uniques_dankar": 0.0,
                "population_uniques_dankar_model": "none (no sample uniques)"}
    p, z, b = pitman_uniques(s, f, population), zayatz_uniques(s, f, population), snb_uniques(s, f, population)
    d, model = dankar_uniques(p, z, b, pi)
    return {"population_uniques_pitman": p / population, "population_uniques_zayatz": z / population,
            "population_uniques_snb": b / population, "population_uniques_dankar": d / population,
            "population_uniques_dankar_model": model,
            "population_uniques_snb_nb": snb_uniques(s, f, population, arx=False) / population}


# -- per class, over segmented sensitive counts ---------------------------------------------------------------------
def _shares(counts: np.ndarray, seg: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = np.asarray(counts, dtype=np.float64)
    seg = np.asarray(seg, dtype=np.int64)
    m = np.bincount(seg, weights=c, minlength=n)
    return c / m[seg], seg, m


def _seg_max(values: np.ndarray, seg: np.ndarray, n: int, empty: float = np.nan) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, seg, values)
    return np.where(np.isneginf(out), empty, out)


def alpha_segments(counts: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    """α of each class: the largest share of one sensitive value (α-k-anonymity holds for α >= it)."""
    p, seg, _ = _shares(counts, seg, n)
    return _seg_max(p, seg, n)


def beta_segments(counts: np.ndarray, seg: np.ndarray, n: int, val: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Basic β of each class: max over values with p > q of the relative gain (p − q) / q (0 when none)."""
    p, seg, _ = _shares(counts, seg, n)
    qv = np.asarray(q, dtype=np.float64)[np.asarray(val, dtype=np.int64)]
    return _seg_max(np.maximum((p - qv) / qv, 0.0), seg, n)


def beta_enhanced_segments(counts: np.ndarray, seg: np.ndarray, n: int, val: np.ndarray,
                           q: np.ndarray) -> np.ndarray:
    """Enhanced β of each class: the smallest β with (p − q)/q <= min(β, −ln q) for every value, i.e. the basic β
    when every gain is within −ln q, else infinity (no β makes the class enhanced-β-like)."""
    p, seg, _ = _shares(counts, seg, n)
    qv = np.asarray(q, dtype=np.float64)[np.asarray(val, dtype=np.int64)]
    gain = np.maximum((p - qv) / qv, 0.0)
    over = np.bincount(seg, weights=(gain > -np.log(qv) + 1e-12).astype(float), minlength=n) > 0
    return np.where(over, np.inf, _seg_max(gain, seg, n))


def beta_enhanced_capped(beta_basic: float, q: np.ndarray) -> float:
    """pycanon's "enhanced β": max over values s of min(β_basic, −ln q_s) (q_s: share of s in the table)."""
    q = np.asarray(q, dtype=np.float64)
    q = q[q > 0]
    return float(np.max(np.minimum(beta_basic, -np.log(q)))) if q.size else float("nan")


def delta_segments(counts: np.ndarray, seg: np.ndarray, n: int, val: np.ndarray, q: np.ndarray,
                   base: float = math.e) -> np.ndarray:
    """δ of each class: max over the values present of |log(p / q)| (δ-disclosure holds for δ above it)."""
    p, seg, _ = _shares(counts, seg, n)
    qv = np.asarray(q, dtype=np.float64)[np.asarray(val, dtype=np.int64)]
    return _seg_max(np.abs(np.log(p / qv)) / math.log(base), seg, n)


def recursive_c_segments(counts: np.ndarray, seg: np.ndarray, n: int, l: int) -> np.ndarray:
    """The c recursive (c, l)-diversity needs per class: r_1 / (r_l + r_{l+1} + …); the class passes for any c
    above it; infinity when the class has fewer than l values."""
    c = np.asarray(counts, dtype=np.float64)
    seg = np.asarray(seg, dtype=np.int64)
    order = np.lexsort((-c, seg))
    cs, ss = c[order], seg[order]
    start = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]]) if ss.size else np.zeros(0, dtype=np.int64)
    rank = np.arange(ss.size) - np.repeat(start, np.diff(np.r_[start, ss.size])) + 1
    r1 = np.bincount(ss, weights=np.where(rank == 1, cs, 0.0), minlength=n)
    tail = np.bincount(ss, weights=np.where(rank >= l, cs, 0.0), minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tail > 0, r1 / np.where(tail > 0, tail, 1.0), np.inf)


def t_hierarchical_segments(counts: np.ndarray, seg: np.ndarray, n: int, val: np.ndarray, q: np.ndarray,
                            nodes: Sequence[np.ndarray]) -> np.ndarray:
    """EMD with the hierarchical ground distance (Li et al. 2007) per class. ``nodes[j][v]``: the code of value v's
    ancestor at level j (j = 0 the value itself, the last level the root); H = len(nodes) − 1.

    extra(N) = Σ_{leaves under N} (p − q); for an internal node N at level j, pos/neg = the summed positive /
    negative extra of its children; EMD = Σ_N (j / H) · min(pos(N), neg(N)). Only nodes with records in the class
    can have pos > 0, so the sum runs over the (class, node) pairs present (neg = pos − extra)."""
    p, seg, _ = _shares(counts, seg, n)
    val = np.asarray(val, dtype=np.int64)
    q = np.asarray(q, dtype=np.float64)
    levels = [np.asarray(x, dtype=np.int64) for x in nodes]
    height = len(levels) - 1
    total = np.zeros(n)
    # present (class, node) pairs of the level below, with their extra; level 0: the values themselves
    child_seg, child_node, child_extra = seg, levels[0][val], p - q[val]
    for j in range(1, height + 1):
        code = levels[j]
        n_nodes = int(code.max()) + 1
        rep = np.zeros(int(levels[j - 1].max()) + 1, dtype=np.int64)   # a leaf under each level-(j−1) node
        rep[levels[j - 1]] = np.arange(len(code))
        key = child_seg * n_nodes + code[rep[child_node]]
        uniq, inv = np.unique(key, return_inverse=True)
        pos = np.bincount(inv, weights=np.maximum(child_extra, 0.0), minlength=len(uniq))
        seg_u, node_u = uniq // n_nodes, uniq % n_nodes
        p_node = np.bincount(np.searchsorted(uniq, seg * n_nodes + code[val]), weights=p, minlength=len(uniq))
        extra = p_node - np.bincount(code, weights=q, minlength=n_nodes)[node_u]
        total += np.bincount(seg_u, weights=(j / height) * np.minimum(pos, pos - extra), minlength=n)
        child_seg, child_node, child_extra = seg_u, node_u, extra
    return total
