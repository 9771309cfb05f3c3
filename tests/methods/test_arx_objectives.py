"""The lattice objectives against ARX's own test expectations on Adult (issue 15.4), and each objective's formula
against a pandas recomputation over the raw rows.

Every ARX case below is a parameter row of an ARX JUnit test (arx-deidentifier/arx, src/test/org/deidentifier/arx/
test/, cited per case): configuration (privacy model, suppression limit, quality model), the optimal transformation
(levels in Adult's column order, the sensitive attribute left out) and ARX's information loss of it. The data and the
hierarchies are the same files (ARX's data-junit/adult*.csv = ../shared/data/adult). Only cases with
``practical monotonicity = false`` (ARX's exact search) are used; ``null`` transformations mean "no solution".
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.methods.lattice import Lattice
from anon_sql.methods import get_method
from conftest import data_path, load_adult
from test_lattice import make_context

ADULT = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
         "salary-class"]
K_FILE = "TestAnonymizationKAnonymity.java"
T_FILE = "TestAnonymizationTCloseness.java"
L_FILE = "TestAnonymizationLDiversity.java"
HIER_T = {"t": 0.2, "distance": "hierarchical"}

# (ARX test file, case index, privacy section, sensitive attribute, objective params, ARX's loss, ARX's optimum)
ARX_CASES = [
    # Metric.createEntropyMetric(true) = monotone non-uniform entropy, KAnonymity, all nine attributes QIs
    (K_FILE, 0, {"k": 5, "max_suppression": 0.04}, None, {"objective": "non_uniform_entropy", "monotone": True},
     255559.85455731067, [1, 0, 1, 1, 3, 2, 2, 0, 1]),
    (K_FILE, 1, {"k": 100, "max_suppression": 0.04}, None, {"objective": "non_uniform_entropy", "monotone": True},
     379417.3460570988, [1, 1, 1, 1, 3, 2, 2, 1, 1]),
    (K_FILE, 2, {"k": 5}, None, {"objective": "non_uniform_entropy", "monotone": True},
     407289.5388925293, [1, 2, 1, 1, 3, 2, 2, 1, 1]),
    (K_FILE, 3, {"k": 100}, None, {"objective": "non_uniform_entropy", "monotone": True},
     453196.8932458743, [0, 4, 1, 1, 3, 2, 2, 1, 1]),
    # Metric.createDiscernabilityMetric(true) = DM*, EqualDistanceTCloseness("occupation", 0.2) + KAnonymity
    (T_FILE, 0, {"k": 5, "max_suppression": 0.04, "t_closeness": 0.2}, "occupation", {"objective": "dm_star"},
     3.11880088E8, [1, 4, 1, 0, 3, 2, 2, 1]),
    (T_FILE, 1, {"k": 100, "max_suppression": 0.04, "t_closeness": 0.2}, "occupation", {"objective": "dm_star"},
     3.11880088E8, [1, 4, 1, 0, 3, 2, 2, 1]),
    (T_FILE, 4, {"k": 5, "t_closeness": 0.2}, "occupation", {"objective": "dm_star"},
     4.56853172E8, [1, 4, 1, 1, 3, 2, 2, 1]),
    (T_FILE, 5, {"k": 100, "t_closeness": 0.2}, "occupation", {"objective": "dm_star"},
     4.56853172E8, [1, 4, 1, 1, 3, 2, 2, 1]),
    # monotone non-uniform entropy, KAnonymity + HierarchicalDistanceTCloseness("occupation", 0.2, its hierarchy)
    # (the test's test() adds the hierarchical t-closeness when the case has no t-closeness of its own)
    (T_FILE, 2, {"k": 5, "max_suppression": 0.04, "t_closeness": HIER_T}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": True}, 377622.78458729305, [1, 4, 0, 0, 3, 2, 2, 1]),
    # case 3: the JUnit file expects 390436.40440636466 at [1, 4, 1, 0, 3, 1, 2, 1], but ARX's library itself (commit
    # aacd487f, run through its public API by bench/ArxCase.java) returns this optimum with loss 390765.61326019815
    # (469 records suppressed, 10 classes): the JUnit expectation is stale, the value here is what ARX computes.
    (T_FILE, 3, {"k": 100, "max_suppression": 0.04, "t_closeness": HIER_T}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": True}, 390765.61326019815, [1, 4, 1, 0, 3, 1, 2, 1]),
    (T_FILE, 6, {"k": 5, "t_closeness": HIER_T}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": True}, 398400.0741806447, [0, 4, 1, 1, 3, 2, 2, 1]),
    (T_FILE, 7, {"k": 100, "t_closeness": HIER_T}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": True}, 398400.0741806447, [0, 4, 1, 1, 3, 2, 2, 1]),
    # Metric.createEntropyMetric(false) = non-monotone non-uniform entropy, EntropyLDiversity("occupation", l)
    (L_FILE, 0, {"k": 1, "max_suppression": 0.04, "l_diversity": {"kind": "entropy", "l": 5}}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": False}, 228878.2039109517, [1, 0, 1, 1, 2, 2, 2, 1]),
    (L_FILE, 1, {"k": 1, "max_suppression": 0.04, "l_diversity": {"kind": "entropy", "l": 100}}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": False}, None, None),
    (L_FILE, 2, {"k": 1, "l_diversity": {"kind": "entropy", "l": 5}}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": False}, 324620.5269918692, [1, 1, 1, 1, 3, 2, 2, 1]),
    (L_FILE, 3, {"k": 1, "l_diversity": {"kind": "entropy", "l": 100}}, "occupation",
     {"objective": "non_uniform_entropy", "monotone": False}, None, None),
]


def adult_policy(name: str, privacy: dict, sensitive: str | None, params: dict, method: str = "optimal") -> dict:
    attrs = {a: {"role": "quasi", "taxonomy": str(data_path("adult", f"adult_hierarchy_{a}.csv"))}
             for a in ADULT if a != sensitive}
    if sensitive:
        attrs[sensitive] = {"role": "sensitive"}
        if isinstance(privacy.get("t_closeness"), dict):     # hierarchical distance: over its ARX hierarchy
            attrs[sensitive]["taxonomy"] = str(data_path("adult", f"adult_hierarchy_{sensitive}.csv"))
    return {"name": name, "source": "adult", "method": method, "attributes": attrs, "privacy": privacy,
            "method_params": params}


def _param(case: tuple) -> object:
    return pytest.param(case, id=f"{case[0][len('TestAnonymization'):-5]}-{case[1]}")


@pytest.mark.parametrize("case", [_param(c) for c in ARX_CASES])
def test_optimum_equals_arx_on_its_adult_cases(mcon, case):
    """Same optimum (ARX's loss, and ARX's transformation) as ARX's test case (file and index in the id)."""
    arx_file, index, privacy, sensitive, params, loss, levels = case
    if not mcon.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'adult'").fetchall()[0][0]:
        load_adult(mcon)
    policy = adult_policy(f"arx_{index}", privacy, sensitive, params)
    if loss is None:                                   # ARX: result.getGlobalOptimum() == null
        with pytest.raises(PrivacyRequirementError):
            anon_sql.release(mcon, policy, replace=True)
        return
    rel = anon_sql.release(mcon, policy, replace=True)
    quasi = [a for a in ADULT if a != sensitive]
    assert rel.passed
    assert rel.info["score"] == pytest.approx(loss, rel=1e-12), f"{arx_file} case {index}"
    assert [rel.plan[a] for a in quasi] == levels, f"{arx_file} case {index}"


# -- each objective's formula against the raw rows --------------------------------------------------------------
def _oracle(raw: pd.DataFrame, ctx, levels: dict[str, int], suppressed: pd.Series) -> dict[str, float]:
    """DM*, DM, AECS, height and both non-uniform entropies recomputed from the generalized rows (ARX's formulas:
    MetricSDDiscernability, MetricSDNMDiscernability, MetricSDAECS, MetricMDHeight, MetricMDNUEntropyPrecomputed and
    MetricMDNUNMEntropyPrecomputed)."""
    quasi = list(levels)
    gen = raw[quasi].astype(str).copy()
    for q, lvl in levels.items():
        if lvl:
            gen[q] = gen[q].map(ctx.taxonomies[q].mapping(lvl))
    n = len(raw)
    size = gen.groupby(quasi)[quasi[0]].transform("size").astype(float)
    classes = gen.drop_duplicates()
    kept_classes = gen[~suppressed].drop_duplicates()
    s = float(suppressed.sum())
    mono = 0.0
    for q in quasi:
        mono += float(np.log2(gen.groupby(q)[q].transform("size") / raw[q].astype(str).map(
            raw[q].astype(str).value_counts())).sum())
    extra = 0.0
    for q in quasi:
        c = gen.loc[suppressed, q].value_counts().to_numpy(float)
        extra += float((c * np.log2(s / c)).sum()) if s else 0.0
    return {"dm_star": float((gen.groupby(quasi).size() ** 2).sum()),
            "discernibility": float(size[~suppressed].sum() + n * s),
            "aecs": n / (len(kept_classes) + (1 if s else 0)),
            "height": float(sum(levels.values())),
            "non_uniform_entropy_monotone": mono,
            "non_uniform_entropy": mono + extra,
            "_classes": float(len(classes))}


@pytest.mark.parametrize("node,k", [((0, 2, 0, 1, 1), 10), ((0, 1, 0, 1, 2), 20), ((1, 0, 1, 0, 1), 50)])
def test_objective_formulas_match_a_row_level_recomputation(con, node, k):
    load_adult(con)
    quasi = ADULT[:5]
    policy = adult_policy("f", {"k": k, "max_suppression": 0.2}, None, {})
    policy["attributes"] = {a: v for a, v in policy["attributes"].items() if a in quasi}
    policy["default_role"] = "insensitive"
    ctx = make_context(con, policy)
    lat = Lattice.from_context(ctx)
    ev = lat.evaluate(node)
    raw = con.execute("SELECT * FROM adult").df()
    levels = dict(zip(lat.quasi, node))
    gen = raw[quasi].astype(str)
    for q, lvl in levels.items():
        if lvl:
            gen[q] = gen[q].map(ctx.taxonomies[q].mapping(lvl))
    suppressed = gen.groupby(quasi)[quasi[0]].transform("size") < k
    assert ev.suppressed == float(suppressed.sum()) > 0
    ref = _oracle(raw, ctx, levels, suppressed)
    for m in ("dm_star", "discernibility", "aecs", "height", "non_uniform_entropy", "non_uniform_entropy_monotone"):
        assert ev.scores[m] == pytest.approx(ref[m], rel=1e-12), m
    # the bounds the search prunes with: per record max(class size, k) for DM (a feasible generalization keeps it in
    # a class of at least that size or suppresses it at cost N), all classes for AECS, the monotone entropy
    size = gen.groupby(quasi)[quasi[0]].transform("size").astype(float)
    assert ev.bounds["discernibility"] == float(size.clip(lower=k).sum()) >= ev.scores["dm_star"]
    assert ev.bounds["aecs"] == pytest.approx(len(raw) / ref["_classes"])
    assert ev.bounds["non_uniform_entropy"] == ev.scores["non_uniform_entropy_monotone"]


def test_monotone_is_only_a_parameter_of_non_uniform_entropy():
    with pytest.raises(PolicyError, match="monotone"):
        get_method("optimal", {"objective": "dm_star", "monotone": True})
    with pytest.raises(PolicyError, match="monotone"):
        get_method("optimal", {"objective": "non_uniform_entropy", "monotone": "yes"})
    assert get_method("optimal", {"objective": "non_uniform_entropy"}).measure == "non_uniform_entropy"
    assert get_method("exhaustive", {"objective": "non_uniform_entropy", "monotone": True}).measure == \
        "non_uniform_entropy_monotone"
