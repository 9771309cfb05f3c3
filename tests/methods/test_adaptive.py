"""method = "adaptive" (seed 002, spec/03): cosine-similarity classes, Simpson-driven level choice, IV storage, and the
Adult golden releases against pycanon and Mondrian (IV-weighted distortion DM of spec/06, recomputed with pandas)."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st
from sqlglot import exp
from sklearn.metrics.pairwise import cosine_similarity

import anon_sql
from anon_sql.catalog import store as catalog
from anon_sql.analytics.similarity import encode_qis, similarity_classes
from anon_sql.errors import PolicyError
from anon_sql.methods.adaptive import adaptive_generalize, choose_levels, iv_distortion
from anon_sql.methods.local_values import encode_categorical
from anon_sql.common.sqlbuild import alias, col, ident, render, table
from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy as builtin
from anon_sql.data.taxonomy import build_taxonomy
from conftest import working

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
QIS = ["age", "sex", "race", "native-country"]
SA = "salary-class"


# -- helpers: independent recomputation from the released values -------------------------------------------------
def _long(tax) -> pd.DataFrame:
    """(leaf, level, value) rows of a taxonomy, level 0 included."""
    lv = tax.levels
    return pd.concat([pd.DataFrame({"leaf": lv["level0"], "level": i, "value": lv[f"level{i}"]})
                      for i in range(tax.height + 1)], ignore_index=True)


def released_levels(original: pd.Series, released: pd.Series, tax) -> np.ndarray:
    """Per record: the lowest taxonomy level whose ancestor of the original value is the released value; a released
    range "[lo-hi]" (Mondrian) counts at the lowest level where lo and hi share an ancestor. -1 = not covered."""
    long = _long(tax)
    frame = pd.DataFrame({"leaf": original.astype(str).to_numpy(), "value": released.astype(str).to_numpy()})
    rng = frame["value"].str.extract(r"^\[(-?\d+)-(-?\d+)\]$")
    is_range = rng[0].notna() & ~frame["value"].isin(long["value"])
    frame.loc[is_range, "value"] = None
    node = frame.reset_index().merge(long, on=["leaf", "value"], how="left").groupby("index")["level"].min()
    out = node.reindex(range(len(frame))).to_numpy(dtype=float, copy=True)
    if is_range.any():
        lo = pd.DataFrame({"leaf": rng.loc[is_range, 0].to_numpy()}).merge(long, on="leaf", how="left")
        hi = pd.DataFrame({"leaf": rng.loc[is_range, 1].to_numpy()}).merge(long, on="leaf", how="left")
        lo["i"] = np.repeat(np.flatnonzero(is_range), tax.height + 1)
        hi["i"] = lo["i"].to_numpy()
        same = lo[(lo["value"].to_numpy() == hi["value"].to_numpy())].groupby("i")["level"].min()
        out[same.index.to_numpy()] = same.to_numpy()
    return np.nan_to_num(out.astype(float), nan=-1).astype(int)


def per_record(con, name: str) -> pd.DataFrame:
    """Original and released QI values of every record of a local-recoding release (source ⋈ assignment ⋈ values)."""
    released = [alias(col(q, "v"), "r_" + q) for q in QIS]
    query = (exp.select(exp.Column(this=exp.Star(), table=ident("s")),
                        col("ec_id", "a"), *released)
             .from_(f"{working(name, 'source')} AS s")
             .join(f"{working(name, 'assignment')} AS a", on=exp.EQ(this=col("__row", "s"), expression=col("__row", "a")))
             .join(f"{working(name, 'ec_values')} AS v", on=exp.EQ(this=col("ec_id", "a"), expression=col("ec_id", "v")))
             .order_by(col("__row", "s")))
    return con.execute(render(query)).df()


def dm_from_release(con, name: str, iv: dict[str, float]) -> tuple[float, pd.DataFrame]:
    """IV-weighted distortion DM of spec/06 from the released values alone (pandas), and the per-record levels."""
    df = per_record(con, name)
    levels = pd.DataFrame({q: released_levels(df[q], df["r_" + q], builtin(f"adult_{q}")) for q in QIS})
    assert (levels >= 0).all().all(), "a released value does not cover its record's original value"
    heights = np.array([builtin(f"adult_{q}").height for q in QIS])
    w = np.array([iv[q] for q in QIS]) / sum(iv.values())
    return float(((levels.to_numpy() / heights) @ w).mean()), levels.assign(ec_id=df["ec_id"].to_numpy())


# -- fixtures ------------------------------------------------------------------------------------------------------

def adult_policy(name: str, k: int, method: str = "adaptive", **params) -> dict:
    return {"name": name, "source": "adult", "method": method, "seed": 0, "default_role": "insensitive",
            "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS}, SA: {"role": "sensitive"}},
            "privacy": {"k": k}, "method_params": params}


@pytest.fixture(scope="module")
def adult_iv(adult):
    """The IVs computed once by the method (iv = "computed"), stored in the catalog, then reused by every release."""
    rel = anon_sql.release(adult, adult_policy("adapt_iv", 10, iv_trees=40))
    return rel


# -- IV storage ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_iv_computed_stored_and_reused(adult, adult_iv):
    info = adult_iv.info
    assert info["iv_source"] == "computed" and info["iv_oob_score"] < 0.90 and "weak" in info["iv_warning"]
    stored = catalog.load_vulnerability(adult, "adult", SA, QIS)
    assert sorted(stored["attribute"]) == sorted(QIS) and stored["iv"].sum() == pytest.approx(1.0)
    ranked = stored.sort_values("iv", ascending=False)["attribute"].tolist()
    assert ranked[:2] == ["age", "sex"]                          # Table 2's robust part: age > sex > {race, country}
    assert info["iv"] == {q: pytest.approx(v, abs=1e-6) for q, v in stored.set_index("attribute")["iv"].items()}
    assert info["boosted"] == [q for q in adult_iv.policy.quasi if q in ("age", "sex")]  # IV >= median of four
    again = anon_sql.release(adult, adult_policy("adapt_iv2", 10))
    assert again.info["iv_source"] == "catalog" and again.info["iv"] == info["iv"]
    assert "class_table" not in again.plan and "class_table" not in json.loads(adult.execute(
        "SELECT plan FROM anon.releases WHERE release = 'adapt_iv2'").fetchall()[0][0])


def test_iv_from_policy_weights_and_errors(con):
    con.execute("CREATE TABLE small AS SELECT * FROM (VALUES (30, 'M', 'a'), (31, 'M', 'b'), (32, 'F', 'a'), "
                "(33, 'F', 'b')) t(age, sex, y)")
    pol = {"name": "small_rel", "source": "small", "method": "adaptive",
           "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10]}},
                          "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}, "y": {"role": "sensitive"}},
           "privacy": {"k": 2}, "method_params": {"iv": {"age": 3, "sex": 1}}}
    rel = anon_sql.release(con, pol)
    assert rel.info["iv"] == {"age": 0.75, "sex": 0.25} and rel.info["iv_source"] == "policy"
    assert rel.info["boosted"] == ["age"]
    bad = [({"iv": {"age": 1}}, r"every quasi-identifier \['age', 'sex'\]: missing \['sex'\]"),
           ({"iv": {"age": 0, "sex": 0}}, "all 0"),
           ({"iv": "guess"}, "iv must be one of `computed`, `recompute` or a table"),
           ({"boost": -1}, "boost must be an integer >= 0, got -1"),
           ({"diversity": 0.5}, "diversity must be a number >= 1, got 0.5"),
           ({"similarity": "euclid"}, "similarity must be one of .*got 'euclid'"),
           ({"similarity_weights": "x"}, "similarity_weights"),
           ({"levels": {"age": 1}}, r"unknown key `levels` in \[method_params\] of method 'adaptive'")]
    for params, message in bad:
        with pytest.raises(PolicyError, match=message):
            anon_sql.release(con, {**pol, "name": "bad", "method_params": params})
    with pytest.raises(PolicyError, match="exactly one sensitive attribute"):
        anon_sql.release(con, {**pol, "name": "bad", "attributes": {**pol["attributes"], "y": {"role": "insensitive"}}})
    with pytest.raises(PolicyError, match="has no taxonomy"):
        anon_sql.release(con, {**pol, "name": "bad", "attributes": {**pol["attributes"], "sex": {"role": "quasi"}}})


def test_cli_stores_iv_and_release_reuses_it(tmp_path):
    path = DATA / "adult" / "adult.csv"
    if not path.exists():
        pytest.skip("shared data not present")
    db = tmp_path / "a.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE people AS SELECT age, sex, race, \"salary-class\" FROM read_csv(?, delim=';') "
                  "LIMIT 1500", [str(path)])
    from anon_sql.cli.analyze import analyze

    res = CliRunner().invoke(analyze, ["people", "--db", str(db), "--vulnerability", "--target", SA, "--store",
                                       "--n-estimators", "10"])
    assert res.exit_code == 0, res.output
    assert "stored in anon.identity_vulnerability" in res.output
    with duckdb.connect(str(db)) as c:
        stored = catalog.load_vulnerability(c, "people", SA, ["race", "age", "sex"])
        assert stored is not None and len(stored) == 3 and stored["n_estimators"].eq(10).all()
        pol = {"name": "people_rel", "source": "people", "method": "adaptive",
               "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in ("age", "sex", "race")},
                              SA: {"role": "sensitive"}}, "privacy": {"k": 5}}
        rel = anon_sql.release(c, pol)
        assert rel.info["iv_source"] == "catalog"
        assert rel.info["iv"] == {a: pytest.approx(v, abs=1e-6) for a, v in stored.set_index("attribute")["iv"].items()}
    usage = CliRunner().invoke(analyze, ["people", "--db", str(db), "--store"])
    assert usage.exit_code == 2 and "--store needs --vulnerability" in usage.output


def test_same_seed_same_release_and_policy_forms(con):
    path = DATA / "adult" / "adult.csv"
    if not path.exists():
        pytest.skip("shared data not present")
    con.execute("CREATE TABLE part AS SELECT * FROM read_csv(?, delim=';') LIMIT 3000", [str(path)])
    toml = """
name = "part_a"
source = "part"
method = "adaptive"
seed = 7
default_role = "insensitive"
[attributes.age]
role = "quasi"
taxonomy = "adult_age"
[attributes.sex]
role = "quasi"
taxonomy = "adult_sex"
[attributes.native-country]
role = "quasi"
taxonomy = "adult_native-country"
[attributes.salary-class]
role = "sensitive"
[privacy]
k = 6
[method_params]
iv = { age = 0.6, sex = 0.3, native-country = 0.1 }
diversity = 1.5
evenness = 0.7
"""
    policy = anon_sql.Policy.from_toml(toml)
    assert anon_sql.Policy.from_sql(policy.to_sql()) == policy
    first = anon_sql.release(con, policy)
    d = policy.to_dict()
    d["name"] = "part_b"
    second = anon_sql.release(con, d)
    assert first.info["diversity"] == 1.5 and first.info["evenness"] == 0.7
    assert sorted(first.info["boosted"]) == ["age", "sex"]
    a, b = (con.execute(render(exp.select("*").from_(table(t)).order_by(
        *[exp.Literal.number(i) for i in range(1, 11)]))).df() for t in ("part_a", "part_b"))
    assert a.equals(b)                                             # byte for byte, ec_id included
    for part in ("assignment", "ec_values"):
        x = con.execute(f"SELECT * FROM {working('part_a', part)} ORDER BY 1").df()
        y = con.execute(f"SELECT * FROM {working('part_b', part)} ORDER BY 1").df()
        assert x.equals(y)
    assert first.info["class_table"].equals(second.info["class_table"])


# -- similarity classes --------------------------------------------------------------------------------------------
def test_similarity_classes_sizes_and_determinism():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"age": rng.integers(20, 60, 103), "c": rng.choice(list("abc"), 103)})
    x = encode_qis(frame)
    cls = similarity_classes(x, 10, seed=1)
    sizes = np.bincount(cls)
    assert len(sizes) == 10 and sorted(sizes.tolist()) == [10] * 9 + [13]
    assert np.array_equal(cls, similarity_classes(x, 10, seed=1))
    same = similarity_classes(np.ones((12, 3)), 4, seed=0)      # identical users: classes of exactly k
    assert np.bincount(same).tolist() == [4, 4, 4]
    with pytest.raises(PolicyError, match="larger than the 3 records"):
        similarity_classes(np.ones((3, 2)), 4)


def test_similarity_classes_group_cosine_similar_users():
    rng = np.random.default_rng(0)
    # two groups that differ on c and d; inside a group users differ on d at most (and age)
    frame = pd.DataFrame({"age": rng.integers(20, 70, 120), "c": np.repeat(["x", "y"], 60),
                          "d": np.r_[rng.choice(list("pq"), 60), rng.choice(list("rs"), 60)]})
    x = encode_qis(frame)
    cls = similarity_classes(x, 6, seed=0)
    mixed = pd.Series(frame["c"].to_numpy()).groupby(cls).nunique()
    assert (mixed > 1).sum() <= 1                                 # the ranking crosses from x to y once at most
    sim = cosine_similarity(x)                                    # test-side oracle (small N)

    def cohesion(groups: np.ndarray) -> float:
        return float(np.mean([sim[np.ix_(groups == g, groups == g)].mean() for g in np.unique(groups)]))

    random_groups = np.minimum(rng.permutation(120) // 6, 19)
    assert cohesion(cls) > cohesion(random_groups) + 0.1


@pytest.mark.slow
def test_similarity_classes_scale_without_pairwise_matrix():
    # 45,000 distinct users: an N×N float matrix would need 16 GB
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.integers(17, 90, 45_000), "b": rng.normal(size=45_000)})
    cls = similarity_classes(encode_qis(frame), 10, seed=0)
    assert np.bincount(cls).min() == 10 and len(np.unique(cls)) == 4_500


# -- Algorithm 2 on a hand-made example ----------------------------------------------------------------------------
def _toy():
    ages = [30, 31, 30, 31, 30, 31, 30, 31, 35, 36, 35, 36, 37, 37, 37, 37]
    sexes = ["M"] * 12 + ["F"] * 4
    sa = list("aabb") + list("aaaa") + list("aaab") + list("abcc")
    taxes = {"age": build_taxonomy("age", {"kind": "interval", "widths": [5, 10]}, ages),
             "sex": build_taxonomy("sex", {"kind": "top"}, sexes)}
    cols = [encode_categorical("age", pd.Series(ages).astype(str), taxes["age"]),
            encode_categorical("sex", pd.Series(sexes), taxes["sex"])]
    return cols, pd.factorize(pd.Series(sa))[0], np.repeat(np.arange(4), 4)


def test_adaptive_generalize_hand_made_example():
    cols, sa, cls = _toy()
    res = adaptive_generalize(cols, sa, cls, np.array([0.7, 0.3]), boost=1)   # median 0.5: only age is boosted
    assert res.diversity == pytest.approx([2.0, 1.0, 1.6, 8 / 3])
    assert res.evenness == pytest.approx([1.0, 1.0, 0.8, 8 / 9])
    assert res.diverse.tolist() == [True, False, False, True]
    assert res.lower.tolist() == [[1, 0], [1, 0], [1, 0], [0, 0]]
    assert res.levels.tolist() == [[1, 0], [2, 0], [2, 0], [0, 0]]
    # classes 1 and 2 are released alike ([30-39], M) and merge
    assert res.class_ec.tolist() == [1, 2, 2, 3]
    assert res.values.to_dict("list") == {"ec_id": [1, 2, 3], "age": ["[30-34]", "[30-39]", "37"],
                                          "sex": ["M", "M", "F"]}
    ec = res.ec_table(["age", "sex"])                               # EC 2 = {a×7, b}: D = 1/(49/64 + 1/64)
    assert ec["simpson_d"].to_numpy() == pytest.approx([2.0, 64 / 50, 8 / 3])
    assert ec[["similarity_classes", "non_diverse_classes", "level__age"]].to_numpy().tolist() == \
        [[1, 0, 1], [2, 2, 2], [1, 0, 0]]
    capped = adaptive_generalize(cols, sa, cls, np.array([0.7, 0.3]), boost=5)
    assert capped.levels[:, 0].tolist() == [1, 3, 3, 0]           # the top of the age taxonomy is level 3
    table = res.class_table(["age", "sex"])
    assert table.columns.tolist() == ["class", "ec_id", "size", "simpson_d", "simpson_e", "diverse", "level__age",
                                      "level__sex", "lower__age", "lower__sex"]
    # IV-weighted DM of spec/06 written out: (1/16)·Σ_r (age level/3·0.7 + sex level/1·0.3)
    assert iv_distortion(res.levels, np.array([3, 1]), np.array([0.7, 0.3]), res.sizes) == \
        pytest.approx((4 * 1 + 8 * 2) / 16 / 3 * 0.7)


def test_choose_levels_median_rule():
    lower = np.array([[0, 0, 0, 1], [2, 1, 0, 0]])
    top = np.array([4, 1, 1, 2])
    iv = np.array([0.5, 0.3, 0.1, 0.1])                           # median 0.2: age and sex boosted
    got = choose_levels(lower, top, iv, np.array([False, True]), boost=1)
    assert got.tolist() == [[1, 1, 0, 1], [2, 1, 0, 0]]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(12, 120), k=st.integers(2, 6), boost=st.integers(0, 3), seed=st.integers(0, 10))
def test_adaptive_properties(n, k, boost, seed):
    rng = np.random.default_rng(seed)
    ages = rng.integers(20, 60, n)
    region = rng.choice(["n1", "n2", "s1", "s2"], n)
    taxes = {"age": build_taxonomy("age", {"kind": "interval", "widths": [5, 10, 20]}, ages),
             "region": build_taxonomy("region", {"kind": "mapping", "mapping": {"n1": ["N"], "n2": ["N"],
                                                                                "s1": ["S"], "s2": ["S"]}}, region)}
    texts = pd.DataFrame({"age": pd.Series(ages).astype(str), "region": region})
    cols = [encode_categorical(q, texts[q], taxes[q]) for q in ("age", "region")]
    sa = rng.integers(0, 3, n)
    iv = np.array([0.8, 0.2])
    cls = similarity_classes(encode_qis(texts, taxes, {"age": ages}), k, seed)
    res = adaptive_generalize(cols, sa, cls, iv, boost=boost)
    assert np.bincount(res.ec)[1:].min() >= k                     # k-anonymous after merging
    assert not res.values.drop(columns="ec_id").duplicated().any()  # one EC per released tuple
    top = np.array([c.anc.shape[1] - 1 for c in cols])
    assert (res.levels >= res.lower).all() and (res.levels <= top).all()
    raised = np.minimum(res.lower + boost, top)
    assert np.array_equal(res.levels[res.diverse], res.lower[res.diverse])
    assert np.array_equal(res.levels[~res.diverse, 0], raised[~res.diverse, 0])   # age: IV above the median
    assert np.array_equal(res.levels[:, 1], res.lower[:, 1])                       # region: below the median
    released = res.values.set_index("ec_id").loc[res.ec]
    for j, q in enumerate(("age", "region")):                      # every released value covers the original
        lv = res.levels[res.cls, j]
        anc = np.array([taxes[q].mapping(level)[v] for level, v in zip(lv, texts[q])])
        assert (anc == released[q].to_numpy()).all()


# -- Adult golden releases (spec/03 §4, issue: k ∈ {5, 10, 50}) -----------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("k", [5, 10, 50])
def test_adult_golden(adult, adult_iv, k):
    pycanon = pytest.importorskip("pycanon.anonymity")
    iv = adult_iv.info["iv"]
    rel = anon_sql.release(adult, adult_policy(f"adapt_{k}", k))
    low = anon_sql.release(adult, adult_policy(f"adapt_low_{k}", k, boost=0))
    mon = anon_sql.release(adult, adult_policy(f"mondrian_{k}", k, method="mondrian"))
    assert rel.info["iv_source"] == "catalog" and rel.passed and rel.records_out == rel.records_in == 30162

    # k-anonymous by pycanon over the released QI values; classes with equal released values merged
    released = adult.execute(f'SELECT * FROM "adapt_{k}"').df()
    assert pycanon.k_anonymity(released, QIS) >= k
    assert released.groupby(QIS, dropna=False)["ec_id"].nunique().eq(1).all()

    # every non-diverse class is generalized at least as high as under lower-level generalization (boost = 0,
    # same similarity classes) on the high-IV QIs, strictly where that level is below the top; others unchanged
    ct, base = rel.info["class_table"], low.info["class_table"]
    assert ct[["size", "simpson_d", "simpson_e", "diverse"]].equals(base[["size", "simpson_d", "simpson_e", "diverse"]])
    nd = ~ct["diverse"].to_numpy()
    tops = {q: builtin(f"adult_{q}").height for q in QIS}
    for q in QIS:
        mine, lower = ct[f"level__{q}"].to_numpy(), base[f"level__{q}"].to_numpy()
        assert np.array_equal(lower, ct[f"lower__{q}"].to_numpy())
        if q in rel.info["boosted"]:
            assert (mine[nd] >= lower[nd]).all()
            assert (mine[nd] == np.minimum(lower[nd] + 1, tops[q])).all()
            assert np.array_equal(mine[~nd], lower[~nd])
        else:
            assert np.array_equal(mine, lower)
    assert 0 < nd.sum() < len(ct)

    # D and E recomputed with pandas for the released equivalence classes (each EC = one or more similarity classes)
    ec_d = released.groupby("ec_id")[SA].apply(lambda s: 1 / (s.value_counts(normalize=True) ** 2).sum())
    merged = ct.groupby("ec_id")["size"].sum()
    assert np.array_equal(merged.to_numpy(), released.groupby("ec_id").size().loc[merged.index].to_numpy())
    single = ct.groupby("ec_id").filter(lambda g: len(g) == 1).set_index("ec_id")
    assert single["simpson_d"].to_numpy() == pytest.approx(ec_d.loc[single.index].to_numpy())
    # the EC table of the catalog carries each EC's D, E, similarity classes and levels
    stats = pd.DataFrame([{"ec_id": e, **json.loads(j)} for e, j in adult.execute(
        "SELECT ec_id, stats FROM anon.equivalence_classes WHERE release = ? ORDER BY ec_id", [f"adapt_{k}"]).fetchall()])
    assert stats["simpson_d"].to_numpy() == pytest.approx(ec_d.loc[stats["ec_id"]].to_numpy())
    assert stats["similarity_classes"].sum() == len(ct) and stats["non_diverse_classes"].sum() == nd.sum()
    first = ct.drop_duplicates("ec_id").set_index("ec_id")
    for q in QIS:
        assert np.array_equal(stats[f"level__{q}"].to_numpy(), first.loc[stats["ec_id"], f"level__{q}"].to_numpy())

    # IV-weighted distortion DM (spec/06) from the released values alone, per record, against the method's own figure
    dm, levels = dm_from_release(adult, f"adapt_{k}", iv)
    assert dm == pytest.approx(rel.info["iv_distortion"], rel=1e-9)
    dm_low, _ = dm_from_release(adult, f"adapt_low_{k}", iv)
    dm_mon, _ = dm_from_release(adult, f"mondrian_{k}", iv)
    anon_sql.release(adult, adult_policy(f"adapt_low_iv_{k}", k, boost=0, similarity_weights="iv"))
    dm_low_iv, _ = dm_from_release(adult, f"adapt_low_iv_{k}", iv)
    # Seed 002 claims DM(adaptive) < DM(Mondrian). Measured (docs/adaptive.md) it does not reproduce: raising age and
    # sex for the non-diverse classes (most classes, with a 25/75 binary salary) costs 3-9x Mondrian's DM. What holds:
    # the boost is what costs, and the similarity classes with IV-weighted cosine alone beat Mondrian at every k.
    assert dm > 2 * dm_mon
    assert dm_low < dm
    assert dm_low_iv < dm_mon
