"""Lattice node evaluation from counts (spec/01 §2–§5): seed 000's states, a pandas oracle over the raw rows, and
agreement with the independent SQL verification of a release at the same node."""
from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anon_sql
from anon_sql.compiler.views import SOURCE_STATEMENT, CompileInput, compile_release
from anon_sql.errors import PrivacyRequirementError
from anon_sql.methods.lattice import MEASURES, Lattice
from anon_sql.methods import LevelPlan, MethodContext
from anon_sql.runner.resolve import resolve_release
from anon_sql.common.sqlbuild import render
from anon_sql.data.taxonomy import TOP
from conftest import load_seed000, seed000_policy


def make_context(con: duckdb.DuckDBPyConnection, policy) -> MethodContext:
    """Resolve a policy and create its ``__source`` view, as release() does before planning."""
    r = resolve_release(con, policy)
    policy, src, taxonomies, models, records = r.policy, r.source, r.taxonomies, r.models, r.records
    probe = CompileInput(policy, src.relation, src.columns, LevelPlan({}), taxonomies, models)
    compiled = compile_release(probe)
    for what, stmt in compiled.statements:       # the working schema, then the source view
        con.execute(render(stmt))
        if what == SOURCE_STATEMENT:
            break
    return MethodContext(con, policy, compiled.names.source_relation(), taxonomies, models, records)


# -- random small releases (shared with test_search.py) ---------------------------------------------------------
_MASKS = ["101", "102", "111", "112", "121", "201", "211"]


@st.composite
def random_case(draw, with_models: bool = True) -> dict:
    """A small table with 1–3 quasi-identifiers of every taxonomy kind, optional NULLs, count column, sensitive
    attribute with distinct l-diversity, an extra <S,k> requirement and a suppression budget."""
    n = draw(st.integers(4, 22))
    n_qi = draw(st.integers(1, 3))
    data: dict[str, list] = {}
    attrs: dict[str, dict] = {}
    for j in range(n_qi):
        kind = draw(st.sampled_from(["mask", "interval", "mapping", "top"]))
        name = f"q{j}"
        nulls = draw(st.booleans()) and kind != "interval"
        if kind == "mask":
            vals = draw(st.lists(st.sampled_from(_MASKS), min_size=n, max_size=n))
            tax = {"kind": "mask"}
        elif kind == "interval":
            vals = draw(st.lists(st.integers(0, 29), min_size=n, max_size=n))
            tax = {"kind": "interval", "widths": draw(st.sampled_from([[5], [5, 10], [3, 6, 12], [10]]))}
        elif kind == "mapping":
            vals = draw(st.lists(st.sampled_from("abcde"), min_size=n, max_size=n))
            parents = draw(st.lists(st.sampled_from(["G1", "G2", "G3"]), min_size=5, max_size=5))
            tax = {"kind": "mapping", "mapping": {v: [p] for v, p in zip("abcde", parents)}}
        else:
            vals = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
            tax = {"kind": "top"}
        if nulls:   # (the first value stays: a column of NULLs only has no taxonomy to build)
            vals = vals[:1] + [None if draw(st.integers(0, 5)) == 0 else v for v in vals[1:]]
        data[name] = vals
        attrs[name] = {"role": "quasi", "taxonomy": tax}
    data["s"] = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    attrs["s"] = {"role": "sensitive"}
    data["o"] = draw(st.lists(st.sampled_from("uv"), min_size=n, max_size=n))
    count = draw(st.booleans())
    if count:
        data["n"] = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    records = sum(data["n"]) if count else n
    privacy: dict = {"k": draw(st.integers(1, min(4, records))),
                     "max_suppression": draw(st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5]))}
    if with_models and draw(st.booleans()):
        privacy["l_diversity"] = {"kind": draw(st.sampled_from(["distinct", "distinct", "entropy"])), "l": 2}
    if draw(st.booleans()):
        qis = list(attrs)[:n_qi]
        subset = draw(st.lists(st.sampled_from(qis), min_size=1, max_size=n_qi, unique=True))
        privacy["requirements"] = [{"quasi": subset, "k": draw(st.integers(2, 6))}]
    frame = pd.DataFrame(data)
    for j in range(n_qi):
        if attrs[f"q{j}"]["taxonomy"]["kind"] == "interval":
            frame[f"q{j}"] = frame[f"q{j}"].astype("Int64")
    policy = {"name": "rnd", "source": "rnd_src", "method": "levels", "attributes": attrs, "privacy": privacy,
              "default_role": "insensitive"}
    if count:
        policy["count_column"] = "n"
    return {"frame": frame, "policy": policy}


def load_case(con: duckdb.DuckDBPyConnection, case: dict) -> None:
    con.register("__case_frame", case["frame"])
    con.execute("CREATE OR REPLACE TABLE rnd_src AS SELECT * FROM __case_frame")
    con.unregister("__case_frame")


# -- seed 000 golden states (spec/01 §4 table) -----------------------------------------------------------------
# (zip, age, alcohol) levels → (violating rows v, distinct rows m), this project's counting (spec/00 point 3)
SEED000_STATES = {(0, 0, 0): (5, 22), (1, 0, 0): (2, 21), (0, 0, 1): (0, 18), (2, 0, 0): (2, 21),
                  (1, 1, 0): (0, 21), (1, 0, 1): (0, 17)}


def test_seed000_states_have_the_spec_violations_and_rows(con):
    load_seed000(con)
    lat = Lattice.from_context(make_context(con, seed000_policy()))
    order = [lat.quasi.index(a) for a in ("zip", "age", "alcohol")]
    for state, (v, m) in SEED000_STATES.items():
        node = [0] * 3
        for a, level in zip(order, state):
            node[a] = level
        ev = lat.evaluate(node)
        assert (ev.violations, ev.distinct_rows) == (v, m), state
        assert ev.feasible == (v == 0)
    # failing classes: rows 1, 4, 9, 10, 13 (1 + 1 + 2 + 1 + 1 records); row 14 shares (Low, 35, 52000) with row 2
    assert lat.evaluate(lat.root).failures == {"k-anonymity (k = 3)": (5, 6.0)}


def test_seed000_scores_follow_their_formulas(con):
    """Zip+1, Age+1 (Table 5): discernibility Σ|EC|², NCP from leaf counts, precision 1 − mean level/height."""
    load_seed000(con)
    ctx = make_context(con, seed000_policy())
    lat = Lattice.from_context(ctx)
    node = tuple({"zip": 1, "age": 1, "alcohol": 0}[q] for q in lat.quasi)
    ev = lat.evaluate(node)
    raw = con.execute("SELECT * FROM t1").df()
    gen = _generalize(raw, ctx, dict(zip(lat.quasi, node)))
    sizes = gen.groupby(lat.quasi, dropna=False)["n"].sum()
    assert ev.scores["discernibility"] == float((sizes ** 2).sum()) == 422.0   # as the smoke release reports
    heights = {q: ctx.taxonomies[q].height for q in lat.quasi}
    assert ev.scores["precision"] == pytest.approx(1 - (1 / heights["zip"] + 1 / heights["age"]) / 3)
    assert ev.scores["ncp"] == pytest.approx(_ncp_oracle(raw, gen, ctx, dict(zip(lat.quasi, node))))


# -- an independent pandas oracle over the raw rows -------------------------------------------------------------
def _generalize(raw: pd.DataFrame, ctx: MethodContext, levels: dict[str, int]) -> pd.DataFrame:
    out = raw.copy()
    for q, level in levels.items():
        if level == 0:
            continue
        tax = ctx.taxonomies[q]
        mapped = raw[q].map(lambda v: None if pd.isna(v) else str(v)).map(tax.mapping(level))
        out[q] = mapped.where(raw[q].notna(), tax.null_parent or TOP)
    return out


def _ncp_oracle(raw: pd.DataFrame, gen: pd.DataFrame, ctx: MethodContext, levels: dict[str, int],
                kept: pd.Series | None = None) -> float:
    w = raw[ctx.policy.count_column] if ctx.policy.count_column else pd.Series(1, index=raw.index)
    total, n = 0.0, float(w.sum())
    for q, level in levels.items():
        tax = ctx.taxonomies[q]
        leaves = len(tax.leaves)
        counts = tax.leaf_counts(level) if level else {}
        per = gen[q].map(lambda v: 0.0 if level == 0 else
                         ((counts[v] - 1) / (leaves - 1) if v in counts and leaves > 1 else (0.0 if v in counts else 1.0)))
        if kept is not None:
            per = per.where(kept, 1.0)
        total += float((per * w).sum())
    return total / (n * len(levels))


def _oracle(raw: pd.DataFrame, ctx: MethodContext, levels: dict[str, int]) -> dict:
    """v, m, need, suppression and feasibility computed row by row in pandas (no codes, no roll-up)."""
    policy = ctx.policy
    quasi = list(policy.quasi)
    gen = _generalize(raw, ctx, levels)
    for q in quasi:
        gen[q] = gen[q].map(lambda v: "<NULL>" if pd.isna(v) else str(v)).astype(object)
    w = raw[policy.count_column] if policy.count_column else pd.Series(1, index=raw.index)
    gen["__w"] = w
    size = gen.groupby(quasi)["__w"].transform("sum")
    ok = size >= policy.privacy.k
    if policy.privacy.l_diversity:
        ld = policy.privacy.l_diversity
        if ld.get("kind", "distinct") == "distinct":
            ok &= gen.groupby(quasi)["s"].transform(lambda s: s.nunique(dropna=False)) >= ld["l"]
        else:      # entropy l-diversity: exp(entropy of the class's weighted sensitive values) >= l
            def exp_entropy(idx: pd.Index) -> float:
                p = gen.loc[idx].groupby("s", dropna=False)["__w"].sum()
                p = p / p.sum()
                return float(np.exp(-(p * np.log(p)).sum()))
            ent = gen.groupby(quasi)["s"].transform(lambda s: exp_entropy(s.index))
            ok &= ent >= ld["l"] - 1e-9
    for req in policy.privacy.requirements:
        ok &= gen.groupby(req.quasi)["__w"].transform("sum") >= req.k
    others = [c for c in gen.columns if c not in ("__w", policy.count_column)]
    rows = gen[others].astype(str).assign(__ok=ok.to_numpy())
    distinct = rows.drop_duplicates(subset=others)
    need = float(w[~ok].sum())
    return {"violations": int((~distinct["__ok"]).sum()), "rows": len(distinct), "need": need, "ok": ok,
            "gen": gen}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_case(), data=st.data())
def test_node_evaluation_matches_a_row_level_oracle(mcon, case, data):
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    lat = Lattice.from_context(ctx)
    node = tuple(data.draw(st.integers(0, h)) for h in lat.heights)
    ev = lat.evaluate(node)
    raw = mcon.execute("SELECT * FROM rnd_src").df()
    ref = _oracle(raw, ctx, dict(zip(lat.quasi, node)))
    assert ev.violations == ref["violations"]
    assert ev.rows_before == ref["rows"]
    assert ev.need == ref["need"]
    if not lat.allow_suppression:
        gen = _generalize(raw, ctx, dict(zip(lat.quasi, node)))
        assert ev.scores["ncp"] == pytest.approx(_ncp_oracle(raw, gen, ctx, dict(zip(lat.quasi, node))))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_case(), data=st.data())
def test_feasible_iff_the_sql_verification_passes(mcon, case, data):
    """The lattice's verdict, suppression, distinct rows and discernibility equal what the release's SQL says."""
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    lat = Lattice.from_context(ctx)
    node = tuple(data.draw(st.integers(0, h)) for h in lat.heights)
    ev = lat.evaluate(node)
    policy = dict(case["policy"], method_params={"levels": lat.as_dict(node)})
    try:
        rel = anon_sql.release(mcon, policy, replace=True)
    except PrivacyRequirementError:
        assert not ev.feasible
        return
    assert ev.feasible
    assert rel.suppressed == ev.suppressed
    assert rel.metrics["discernibility"] == ev.scores["discernibility"]
    data_cols = [c for c in case["frame"].columns if c != case["policy"].get("count_column")]
    q = "SELECT count(*) FROM (SELECT DISTINCT " + ", ".join(data_cols) + " FROM rnd)"
    assert mcon.execute(q).fetchall()[0][0] == ev.distinct_rows


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_case(), seed=st.integers(0, 2 ** 16))
def test_roll_up_gives_the_same_evaluation_as_the_base_table(mcon, case, seed):
    load_case(mcon, case)
    ctx = make_context(mcon, case["policy"])
    rolled = Lattice.from_context(ctx)
    nodes = [tuple(int(x) for x in n) for n in rolled.all_nodes()]
    np.random.default_rng(seed).shuffle(nodes)
    for node in nodes[:8]:
        got = rolled.evaluate(node)
        fresh = Lattice.from_context(ctx).evaluate(node)   # straight from the base table
        assert {**vars(got), "scores": None, "bounds": None} == {**vars(fresh), "scores": None, "bounds": None}
        for obj in MEASURES:
            assert got.scores[obj] == pytest.approx(fresh.scores[obj], rel=1e-12)
            assert got.bounds[obj] == pytest.approx(fresh.bounds[obj], rel=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_case())
def test_bounds_and_monotonicity_the_searches_rely_on(mcon, case):
    """Generalizing never increases distinct rows; every score of a feasible generalization is bounded by the
    node's bound; records needing suppression shrink (k-anonymity, distinct l, <S,k> windows); failing the monotone
    part of the checks (the tag) means infeasible, and it stays failed for every specialization."""
    load_case(mcon, case)
    lat = Lattice.from_context(make_context(mcon, case["policy"]))
    evs = [lat.evaluate(tuple(int(x) for x in n)) for n in lat.all_nodes()]
    for a, b in itertools.product(evs, evs):
        if a.node == b.node or not all(x <= y for x, y in zip(a.node, b.node)):
            continue
        assert b.rows_before <= a.rows_before
        if lat.suppression_monotone():
            assert b.need <= a.need
        assert a.tagging_ok or not a.feasible
        assert b.tagging_ok or not a.tagging_ok
        for obj in MEASURES:
            if b.feasible:
                assert lat.loss(b, obj) >= lat.loss(a, obj, bound=True), obj
        if not lat.allow_suppression:
            assert not a.feasible or b.feasible   # feasibility is monotone without suppression


def test_nulls_form_their_own_group_and_generalize_to_the_null_parent(con):
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('52001', 'a'), ('52002', 'a'), (NULL, 'a'), (NULL, 'b'), "
                "('52011', 'b')) v(zip, s)")
    policy = {"name": "nul", "source": "t", "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                                                          "s": {"role": "insensitive"}}, "privacy": {"k": 2}}
    ctx = make_context(con, policy)
    lat = Lattice.from_context(ctx)
    root = lat.evaluate((0,))
    assert root.classes == 4 and root.failures["k-anonymity (k = 2)"] == (3, 3.0)   # NULL is a class of 2
    one = lat.evaluate((1,))     # 5200* ×2, 5201*, NULL → '*' (its own class: no zip masks to '*')
    assert one.classes == 3 and one.need == 1.0
    leaves = len(ctx.taxonomies["zip"].leaves)   # (the mask builder may list NULL among its leaves)
    assert one.scores["ncp"] == pytest.approx((2 * 1 / (leaves - 1) + 0 + 2 * 1.0) / 5)   # NULL at level >= 1: 1
    assert lat.evaluate((5,)).need == 0 and lat.evaluate((5,)).classes == 2   # '*****' and NULL's '*'


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2 ** 40), max_size=300), st.booleans())
def test_group_first_matches_pandas(keys, small_radix):
    """Codes, count and first rows of ``group_first`` (both its paths: presence table and hashing) against pandas:
    codes in order of first appearance (hashed) or of the key (presence table), first rows from drop_duplicates."""
    import pandas as pd

    from anon_sql.methods.lattice.encode import group_first

    key = np.asarray(keys, dtype=np.int64) % (50 if small_radix else 2 ** 40)
    radix = 50 if small_radix else None
    codes, n, first = group_first(key, radix)
    uniq = sorted(set(key.tolist())) if small_radix else list(pd.unique(key))
    assert n == len(uniq)
    assert [uniq[c] for c in codes] == key.tolist()
    firsts = pd.Series(key).drop_duplicates()
    assert sorted(first.tolist()) == sorted(firsts.index.tolist())
    assert [int(key[i]) for i in first] == [int(u) for u in uniq]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=8), st.integers(0, 3000),
       st.integers(0, 2 ** 16))
def test_combined_keys_group_like_pandas(cards, n, seed):
    """The roll-up's grouping (``combine`` with its presence-table re-densification, then ``group_first``) puts two
    rows in one class exactly when pandas' groupby over the code columns does, and names each class's first row."""
    from anon_sql.methods.lattice.encode import combine, group_first

    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, c, n).astype(np.int32) for c in cards]
    codes, m, first = group_first(*combine(cols, cards, n))
    frame = pd.DataFrame({f"c{i}": c for i, c in enumerate(cols)})
    ref = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
    assert m == len(set(ref.tolist()))
    assert len(set(zip(codes.tolist(), ref.tolist()))) == m        # a bijection between the two groupings
    assert sorted(first.tolist()) == pd.Series(ref).drop_duplicates().index.tolist()
    assert all(codes[i] == c for c, i in enumerate(first))
