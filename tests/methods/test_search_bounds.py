"""The search shortcuts of issue 17.2 change nothing but speed: the optimal search with a suppression budget (bound-
ordered sweep, inherited lower bounds) returns the exhaustive optimum, the skipped re-check of the remainder (class-
local models) never changes a node's feasibility, and the lattice read from the release's base counts evaluates
every node as the one aggregated from the source view."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from anon_sql.data import base_counts
from anon_sql.errors import PrivacyRequirementError
from anon_sql.methods.lattice import MEASURES, Lattice
from anon_sql.methods import get_method
from anon_sql.models import ClassStats, HierarchicalTCloseness, SensitiveCounts, TCloseness
from anon_sql.data.taxonomy import from_mapping
from anon_sql.common.sqlbuild import render, table as table_ref
from test_lattice import load_case, make_context, random_case

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def budget_case(draw) -> dict:
    """2–4 integer quasi-identifiers (interval taxonomies, lattices of up to 256 nodes), k-anonymity (optionally
    distinct 2-diversity, or t-closeness with the equal or the hierarchical distance, which the search tags by its
    coverage bound) and a suppression budget: the cases where the search sweeps after classifying (about one in four
    discernibility cases finds its optimum in the sweep)."""
    n = draw(st.integers(40, 200))
    n_qi = draw(st.integers(2, 4))
    data, attrs = {}, {}
    for j in range(n_qi):
        data[f"q{j}"] = draw(st.lists(st.integers(0, 23), min_size=n, max_size=n))
        widths = draw(st.sampled_from([[2], [2, 4], [3, 6, 12], [4, 8], [2, 6, 12]]))
        attrs[f"q{j}"] = {"role": "quasi", "taxonomy": {"kind": "interval", "widths": widths}}
    data["s"] = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    attrs["s"] = {"role": "sensitive"}
    privacy: dict = {"k": draw(st.integers(2, 5)), "max_suppression": draw(st.sampled_from([0.02, 0.05, 0.1, 0.2, 0.4]))}
    extra = draw(st.sampled_from(["", "l", "t_equal", "t_hierarchical"]))
    if extra == "l":
        privacy["l_diversity"] = {"kind": "distinct", "l": 2}
    elif extra == "t_equal":
        privacy["t_closeness"] = draw(st.sampled_from([0.15, 0.25, 0.4]))
    elif extra == "t_hierarchical":
        privacy["t_closeness"] = {"t": draw(st.sampled_from([0.1, 0.2, 0.3])), "distance": "hierarchical"}
        attrs["s"]["taxonomy"] = {"kind": "mapping", "mapping": {"a": ["X"], "b": ["X"], "c": ["Y"]}}
    frame = pd.DataFrame(data)
    for j in range(n_qi):
        frame[f"q{j}"] = frame[f"q{j}"].astype("Int64")
    return {"frame": frame, "policy": {"name": "rnd", "source": "rnd_src", "method": "levels", "attributes": attrs,
                                       "privacy": privacy, "default_role": "insensitive"}}


def _optimal(ctx, objective: str):
    try:
        return get_method("optimal", {"objective": objective}).plan(ctx)
    except PrivacyRequirementError:
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=budget_case(), objective=st.sampled_from(["discernibility", "discernibility", "ncp", "dm_star", "precision"]))
def test_budgeted_optimal_equals_exhaustive(mcon, case, objective):
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    every = Lattice.from_context(ctx, rows=False)
    try:
        ex = get_method("exhaustive", {"objective": objective}).search(every, ctx)
    except PrivacyRequirementError:
        ex = None
    opt = _optimal(ctx, objective)
    assert (ex is None) == (opt is None)
    if ex is not None:
        assert opt.levels == ex.levels
        assert opt.info["score"] == pytest.approx(ex.info["score"])


@st.composite
def t_classes(draw) -> tuple:
    """Random classes over 2–6 sensitive values (sparse counts) and a t-closeness model of each distance."""
    m = draw(st.integers(2, 6))
    n_cls = draw(st.integers(1, 6))
    rows = draw(st.lists(st.tuples(st.integers(0, n_cls - 1), st.integers(0, m - 1), st.integers(1, 5)),
                         min_size=1, max_size=30))
    cls, val, w = (np.array(x) for x in zip(*rows))
    cls = np.unique(cls, return_inverse=True)[1]          # every class holds records
    n_cls = int(cls.max()) + 1
    kind = draw(st.sampled_from(["equal", "ordered", "hierarchical"]))
    t = draw(st.floats(0.01, 0.9))
    if kind == "hierarchical":
        parents = draw(st.lists(st.sampled_from(["X", "Y", "Z"]), min_size=m, max_size=m))
        tax = from_mapping("s", {str(v): [p] for v, p in zip(range(m), parents)})
        model = HierarchicalTCloseness("s", t, tax)
    else:
        model = TCloseness("s", t, kind)
    return cls, val, w.astype(float), n_cls, m, model


def _stats(cls, val, w, n_cls, m) -> ClassStats:
    sc = SensitiveCounts.from_codes(cls, val, w, n_cls, m)
    sc.labels = np.array([str(v) for v in range(m)], dtype=object)
    return ClassStats(np.bincount(cls, weights=w, minlength=n_cls), {"s": sc})


@settings(max_examples=200, deadline=None)
@given(case=t_classes(), merge=st.lists(st.integers(0, 5), min_size=6, max_size=6))
def test_t_closeness_coverage_bound_is_necessary_and_survives_merging(case, merge):
    """The tag the optimal search uses for t-closeness with a budget: a class failing the coverage bound fails the
    t-closeness check, and a class passing it still passes after merging with any other classes (against the same
    table distribution)."""
    cls, val, w, n_cls, m, model = case
    stats = _stats(cls, val, w, n_cls, m)
    covered = model.coverage_passes(stats)
    if covered is None:
        return
    assert not (model.check(stats) & ~covered).any()
    to = np.array(merge)[:n_cls] % n_cls                       # a coarser partition of the same records
    merged_cls, n_merged = np.unique(to, return_inverse=True)[1], len(np.unique(to))
    merged = _stats(merged_cls[cls], val, w, n_merged, m)
    merged_covered = model.coverage_passes(merged)
    for c in range(n_cls):
        if covered[c]:
            assert merged_covered[merged_cls[c]]


@SETTINGS
@given(case=random_case())
def test_skipping_the_remainder_recheck_never_changes_feasibility(mcon, case):
    """With class-local checks only (k-anonymity, l-diversity, no <S,k> window) the lattice does not re-check what
    suppression leaves; forcing the re-check gives the same feasibility at every node."""
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    fast = Lattice.from_context(ctx, rows=False)
    slow = Lattice.from_context(ctx, rows=False)
    slow.local_checks = False
    for node in fast.all_nodes():
        node = tuple(int(x) for x in node)
        assert fast.evaluate(node).feasible == slow.evaluate(node).feasible, node


@SETTINGS
@given(case=random_case())
def test_lattice_from_the_base_counts_equals_the_lattice_from_the_source(mcon, case):
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    table = base_counts.temp_table(ctx.policy.name)
    mcon.execute(render(base_counts.create_base_table(ctx.policy, table_ref(ctx.source_view), table)))
    try:
        from_base = Lattice.from_context(dataclasses.replace(ctx, base=table), rows=False, measures=list(MEASURES))
        from_view = Lattice.from_context(ctx, rows=False, measures=list(MEASURES))
        assert from_base.base_rows == from_view.base_rows
        for node in from_view.all_nodes():
            node = tuple(int(x) for x in node)
            a, b = from_base.evaluate(node), from_view.evaluate(node)
            assert (a.classes, a.need, a.suppressed, a.feasible) == (b.classes, b.need, b.suppressed, b.feasible)
            assert (a.scores, a.bounds) == (b.scores, b.bounds), node
    finally:
        mcon.execute(render(base_counts.drop_base_table(table)))
