"""θ-sensitive k-anonymity (spec/05): the Table 4a golden values through the Python API, the UDFs and the release
checks; the θ method's swaps, noise and reconciliation; the Adult golden (k = 4, 8 pass, verified by `anon-sql check`
and re-computed here; k = 16 proven impossible without suppression by a supply bound over every class shape, and
passing with the smallest suppression the method names); the p-, p+- and (p, α)-sensitive models (numpy and SQL).
σ² is recomputed here from its definition, not from the kernels."""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import anon_sql
import anon_sql.metrics
from anon_sql.cli.main import main
from anon_sql.errors import PolicyError, PrivacyRequirementError
from anon_sql.methods.theta import (capacity, deal_classes, level_take, max_excess, min_distinct, noise_needed,
        suppression_needed, swaps_needed, theta_anonymize)
from anon_sql.models import ClassStats, SensitiveCounts, ThetaSensitivity, build_models
from anon_sql.models.p_sensitive import PSensitivity
from anon_sql.udfs import kernels
from conftest import data_path, load_adult, load_theta_noise, theta_noise_policy, working

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ADULT = DATA / "adult"
QIS = ["age", "sex", "race", "marital-status", "education", "native-country", "workclass"]


def sigma2(values) -> float:
    """σ² by spec/05 §1, written out: ranks 1, 2, ... by descending frequency (ties by value),
    Σfx²/m − (Σfx/m)²."""
    counts = pd.Series(list(values)).value_counts()
    counts = counts.sort_index().sort_values(ascending=False, kind="stable")
    f = counts.to_numpy(dtype=float)
    x = np.arange(1, len(f) + 1)
    m = f.sum()
    return float((f * x * x).sum() / m - ((f * x).sum() / m) ** 2)


def theta_of(m, mu) -> float:
    return mu * (m * m - 1) / 12.0


def sorted_by_ec(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("ec_id").reset_index(drop=True)


def example(name: str) -> Path:
    return data_path("examples", name)


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE t4 AS SELECT * FROM read_csv(?)", [str(example("seed004_table4a.csv"))])
    yield c
    c.close()


def table4a_policy(method: str = "levels", **privacy) -> dict:
    top = {"kind": "top"}
    return {"name": "r4", "source": "t4", "method": method,
            "attributes": {"id": {"role": "identifier"}, "ec": {"role": "insensitive"},
                           "age": {"role": "quasi", "taxonomy": top}, "zipcode": {"role": "quasi", "taxonomy": top},
                           "country": {"role": "quasi", "taxonomy": top}, "disease": {"role": "sensitive"}},
            "privacy": {"k": 4, **privacy}}


def sigma2_rows(counts: np.ndarray) -> np.ndarray:
    """σ² by spec/05 §1 for every row of a class × value count matrix, in numpy: counts sorted descending get the
    ranks 1, 2, ...; Σfx²/m − (Σfx/m)²."""
    f = -np.sort(-np.asarray(counts, dtype=float), axis=1)
    x = np.arange(1, f.shape[1] + 1)
    m = f.sum(axis=1)
    return (f * x * x).sum(axis=1) / m - ((f * x).sum(axis=1) / m) ** 2


def released_sigma(con, table: str, sa: str) -> pd.DataFrame:
    """Per released class (ec_id): size and σ² from the definition (numpy), from the released rows only."""
    df = con.execute(f'SELECT ec_id, "{sa}" FROM "{table}"').df()
    ec, e = np.unique(df["ec_id"].to_numpy(), return_inverse=True)
    _, v = np.unique(df[sa].astype(str).to_numpy(), return_inverse=True)
    counts = np.zeros((len(ec), v.max() + 1))
    np.add.at(counts, (e, v), 1)
    return pd.DataFrame({"m": counts.sum(axis=1), "var": sigma2_rows(counts)}, index=pd.Index(ec, name="ec_id"))


# -- golden values, Table 4a ---------------------------------------------------------------------------------------
def test_table4a_variance_golden_python_api():
    ec2, ec3 = ["Hepatitis", "Phthisis", "Asthma", "Obesity"], ["Flu", "Flu", "Cancer", "HIV"]
    # Σfx = 10, Σfx² = 30 and Σfx = 7, Σfx² = 15 (spec/05 §2)
    assert 30 / 4 - (10 / 4) ** 2 == 1.25 and 15 / 4 - (7 / 4) ** 2 == 0.6875
    assert kernels.theta_variance(ec2) == pytest.approx(1.25) == sigma2(ec2)
    assert kernels.theta_variance(ec3) == pytest.approx(0.6875) == sigma2(ec3)
    assert kernels.theta_threshold(4, 0.6) == pytest.approx(0.75)
    assert kernels.theta_threshold(4, 0.5) == pytest.approx(0.625)
    assert not kernels.theta_ok(ec3, 0.6) and kernels.theta_ok(ec3, 0.5) and kernels.theta_ok(ec2, 0.6)
    # the model's numpy test (what searches and Mondrian call) on the three classes
    codes = {v: i for i, v in enumerate(sorted(set(ec2 + ec3 + ["Indigestion"])))}
    cls = np.repeat([0, 1, 2], 4)
    vals = np.array([codes[v] for v in ["HIV", "Cancer", "Flu", "Indigestion"] + ec2 + ec3])
    stats = ClassStats(np.full(3, 4.0), {"disease": SensitiveCounts.from_codes(cls, vals, np.ones(12), 3, len(codes))})
    assert ThetaSensitivity("disease", 0.6).measure(stats) == pytest.approx([1.25, 1.25, 0.6875])
    assert ThetaSensitivity("disease", 0.6).check(stats).tolist() == [True, True, False]
    assert ThetaSensitivity("disease", 0.5).check(stats).tolist() == [True, True, True]


def test_table4a_variance_golden_udf_in_sql(con):
    rows = con.execute("SELECT ec, anon_theta_variance(list(disease)), anon_theta_ok(list(disease), 0.6), "
                       "anon_theta_ok(list(disease), 0.5) FROM t4 GROUP BY ec ORDER BY ec").fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]
    assert [r[1] for r in rows] == pytest.approx([1.25, 1.25, 0.6875])
    assert [r[2] for r in rows] == [True, True, False]
    assert [r[3] for r in rows] == [True, True, True]


def test_table4a_release_checks_theta_and_p_plus(con):
    cats = str(example("seed004_categories.csv"))
    with pytest.raises(PrivacyRequirementError, match=r"theta__disease fails for 1 class \("):
        anon_sql.release(con, table4a_policy(theta={"mu": 0.6}))
    assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'r4'").fetchall()[0][0] == 0
    rel = anon_sql.release(con, table4a_policy(theta={"mu": 0.5}, p_sensitive={"p": 2, "plus": True,
                                                                                "categories": cats}))
    paper_ec = con.execute("SELECT ec_id, any_value(ec) AS ec FROM r4 GROUP BY ec_id").df().set_index("ec_id")["ec"]
    by_ec = rel.classes.set_index(rel.classes["ec_id"].map(paper_ec))
    assert by_ec.loc[3, "theta__disease_value"] == pytest.approx(0.6875)
    assert by_ec.loc[2, "theta__disease_value"] == pytest.approx(1.25)
    # categorical similarity of EC3: 3 distinct diseases but only 2 categories ({HIV, Cancer}, {Flu})
    assert by_ec.loc[3, "p_sensitive__disease_value"] == 3
    assert by_ec.loc[3, "p_plus__disease_value"] == 2
    assert by_ec["p_plus__disease_value"].tolist() == [2, 2, 2]
    with pytest.raises(PrivacyRequirementError, match="p_plus__disease fails for 3 classes"):
        anon_sql.release(con, {**table4a_policy(p_sensitive={"p": 3, "plus": True, "categories": cats}),
                               "name": "r4p3"})


# -- the θ method --------------------------------------------------------------------------------------------------
def test_theta_release_table4a_swaps_every_class_reaches_theta(con):
    pol = table4a_policy("theta", theta={"mu": 0.6})
    pol["method_params"] = {"order": "sorted"}   # the paper's sorted classes: EC3 {Flu, Flu, Cancer, HIV} first
    rel = anon_sql.release(con, pol)
    assert rel.info["classes_below_theta_before"] == 1
    assert rel.info["swaps"] >= 1 and rel.info["noise_records"] == 0 and rel.noise == 0
    got = released_sigma(con, "r4", "disease")
    assert (got["m"] >= 4).all() and len(got) == 3
    assert (got["var"] >= theta_of(got["m"], 0.6) - 1e-9).all()
    assert sorted(con.execute("SELECT disease FROM r4").df()["disease"]) == sorted(
        con.execute("SELECT disease FROM t4").df()["disease"])   # swaps move whole records, nothing invented
    assert rel.plan["variance"] == pytest.approx(got["var"].tolist())
    assert anon_sql.check(con, "r4")["passed"].all()


def test_theta_noise_when_swaps_cannot_reach_theta(con):
    # class 1 {Flu, Flu, HIV, Cancer} (σ² 0.6875 < 0.75); the only later class {Flu, HIV, Cancer, Asthma} would fall
    # below θ by any swap, so class 1 gets exactly one noise record: the only absent value, Asthma (conftest)
    load_theta_noise(con)
    rel = anon_sql.release(con, theta_noise_policy())
    assert rel.info["swaps"] == 0 and rel.info["noise_records"] == 1 and rel.noise == 1
    out = con.execute('SELECT age, disease, is_noise, ec_id FROM rn ORDER BY ec_id, is_noise, disease').df()
    noise = out[out["is_noise"]]
    assert noise[["age", "disease"]].values.tolist() == [["[20-23]", "Asthma"]]
    got = released_sigma(con, "rn", "disease")
    assert got["m"].tolist() == [5, 4]
    assert (got["var"] >= theta_of(got["m"], 0.6) - 1e-9).all()
    # reconciliation: input = released − noise + suppressed, in the release and in the catalog
    assert rel.records_in == 8 and rel.records_out == 9 and rel.suppressed == 0
    row = con.execute("SELECT records_in, records_out, noise, suppressed FROM anon.releases WHERE release = 'rn'")
    assert row.fetchall() == [(8, 9, 1, 0)]
    assert con.execute(f"SELECT count(*) FROM {working('rn', 'noise')}").fetchall() == [(1,)]


def test_theta_is_deterministic_and_seeded(con):
    con.execute("CREATE TABLE tr AS SELECT (i * 7919) % 83 AS age, "
                "['a', 'b', 'c', 'd', 'e', 'f'][1 + (i // 3 + (i * i) % 4) % 6] AS s FROM range(200) r(i)")
    pol = {"name": "d1", "source": "tr", "method": "theta", "seed": 3,
           "attributes": {"age": {"role": "quasi"}, "s": {"role": "sensitive"}},
           "privacy": {"k": 4, "theta": {"mu": 0.6}}, "method_params": {"order": "sorted"}}
    rel = anon_sql.release(con, pol)
    assert rel.info["swaps"] > 0
    anon_sql.release(con, {**pol, "name": "d2"})
    a = con.execute("SELECT * FROM d1 ORDER BY ALL").df()
    b = con.execute("SELECT * FROM d2 ORDER BY ALL").df()
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("change, match", [
    ({"privacy": {"k": 1, "theta": {"mu": 0.6}}}, "k >= 2"),
    ({"privacy": {"k": 4}}, r"theta = \{ mu = 0.6 \}"),
    ({"method_params": {"window": 0}}, "window must be an integer"),
    ({"method_params": {"order": "random"}}, "order must be one of"),
    ({"method_params": {"spread": 2}}, r"unknown key `spread` in \[method_params\]"),
    ({"method_params": {"noise_flag": "disease"}}, "already a column"),
])
def test_theta_bad_parameters(con, change, match):
    pol = table4a_policy("theta", theta={"mu": 0.6})
    pol.update(change)
    with pytest.raises(PolicyError, match=match):
        anon_sql.release(con, pol)


def test_theta_needs_exactly_one_sensitive_attribute(con):
    pol = table4a_policy("theta", theta={"mu": 0.6})
    pol["attributes"]["ec"] = {"role": "sensitive"}
    with pytest.raises(PolicyError, match="exactly one sensitive attribute"):
        anon_sql.release(con, pol)


# -- the algorithm on random inputs ----------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=60), st.integers(2, 5), st.floats(0.5, 0.9),
       st.integers(1, 8), st.integers(0, 99))
def test_theta_anonymize_properties(values, k, mu, window, seed):
    values = np.array(values)
    if len(values) < k:
        return
    nv = 6
    res = theta_anonymize(values, nv, k, mu, window, seed)
    n_classes = len(values) // k
    real = np.bincount(res.cls * nv + values, minlength=n_classes * nv).reshape(n_classes, nv)
    assert (real.sum(axis=1) >= k).all()                                   # every class keeps >= k real records
    assert np.array_equal(np.bincount(res.cls, minlength=n_classes), real.sum(axis=1))
    assert np.array_equal(np.sort(values), np.sort(np.repeat(np.arange(nv), real.sum(axis=0))))   # values kept
    assert (real[res.noise_cls, res.noise_val] == 0).all()                 # noise only with absent values
    assert len(set(zip(res.noise_cls.tolist(), res.noise_val.tolist()))) == len(res.noise_cls)
    final = real.copy()
    np.add.at(final, (res.noise_cls, res.noise_val), 1)
    assert np.array_equal(final, res.counts)
    for c in range(n_classes):                                             # σ² from the definition
        vals = np.repeat(np.arange(nv), final[c])
        passes = sigma2(vals) >= theta_of(len(vals), mu) - 1e-9
        assert passes or c in res.unreachable
    again = theta_anonymize(values, nv, k, mu, window, seed)
    assert np.array_equal(again.cls, res.cls) and np.array_equal(again.noise_val, res.noise_val)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=40), min_size=1, max_size=6), st.integers(2, 6),
       st.booleans())
def test_deal_classes_properties(parts, k, grow):
    parts = [p for p in parts if len(p) >= k]             # Mondrian partitions hold >= k records
    if not parts:
        return
    pid = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    values = np.concatenate([np.sort(p) for p in parts])  # (partition, value) order, as class_order passes them
    cls = deal_classes(pid, values, k, 8, grow)
    sizes = np.bincount(cls)
    assert len(cls) == len(values) and (sizes >= k).all()
    for p, vals in enumerate(parts):
        counts = np.bincount(vals)
        rows = len(vals) // k
        own = np.unique(cls[pid == p])
        mine = own[np.bincount(cls[pid == p], minlength=len(sizes))[own] == sizes[own]]   # classes only of p
        assert len(mine) >= rows - 1                      # p's classes stay p's (one may take a foreign remainder)
        if len(vals) % k == 0 and (counts <= rows).all():
            for c in mine:                                # a value per class at most once when none exceeds n
                assert len(np.unique(values[cls == c])) == (cls == c).sum()


def test_swaps_and_noise_needed_golden():
    # [2, 1, 1] at k = 4: one swap gives 4 distinct values; one noise record gives [2, 1, 1, 1] (σ² 1.36 >= θ(5) 1.2)
    assert swaps_needed(np.array([[2, 1, 1, 0, 0]]), 0.6).tolist() == [1]
    assert noise_needed(np.array([[2, 1, 1, 0, 0]]), 0.6, np.ones(5, bool)).tolist() == [1]
    # [3, 1] cannot be lifted by the two absent values: [3, 1, 1, 1] has σ² 1.33 < θ(6) = 1.75
    assert noise_needed(np.array([[3, 1, 0, 0]]), 0.6, np.ones(4, bool)).tolist() == [-1]
    # the fewest distinct values for θ(k) at μ = 0.6: 4 of 4, 6 of 8, 12 of 16 (shape: one value k − d + 1 times)
    assert [min_distinct(k, 0.6, 14) for k in (4, 8, 16)] == [4, 6, 12]


# -- Adult ---------------------------------------------------------------------------------------------------------

def adult_theta(name: str, k: int, mu: float = 0.6) -> dict:
    attrs = {q: {"role": "quasi"} for q in QIS}
    for q in QIS[1:]:
        attrs[q]["taxonomy"] = str(ADULT / f"adult_hierarchy_{q}.csv")
    attrs["occupation"] = {"role": "sensitive"}
    return {"name": name, "source": "adult", "method": "theta", "default_role": "insensitive", "seed": 11,
            "attributes": attrs, "privacy": {"k": k, "theta": {"mu": mu}}}


@pytest.mark.parametrize("k", [4, 8])
def test_theta_adult_every_class_passes(tmp_path, k):
    # spec/05 golden: QIs age, sex, race, marital-status, education, native-country, workclass; sensitive
    # occupation; μ = 0.6. The paper adds 0.021% noise records; every class passes k and θ — by `anon-sql check`
    # on the database file and by σ² recomputed here from the released rows.
    db = str(tmp_path / "adult.duckdb")
    adult = duckdb.connect(db)
    anon_sql.install(adult)
    load_adult(adult)
    name = f"adult_theta{k}"
    rel = anon_sql.release(adult, adult_theta(name, k))
    adult.close()
    cli = CliRunner().invoke(main, ["check", name, "--db", db])
    assert cli.exit_code == 0 and "all checks passed" in cli.output, cli.output
    adult = duckdb.connect(db)
    anon_sql.install(adult)
    checks = anon_sql.check(adult, name)
    assert checks["passed"].all() and {"k", "theta__occupation"} <= set(checks["check"])
    got = released_sigma(adult, name, "occupation")
    assert (got["m"] >= k).all()
    assert (got["var"] >= theta_of(got["m"], 0.6) - 1e-9).all()
    assert got["var"].to_numpy() == pytest.approx(sorted_by_ec(rel.classes)["theta__occupation_value"].to_numpy())
    noise = rel.noise
    assert rel.records_in == 30162 == rel.records_out - noise + rel.suppressed and rel.suppressed == 0
    assert noise == rel.info["noise_records"] and noise / rel.records_in <= 0.00021
    # DCP and C_AVG (spec/06) from the released class sizes, against the metrics
    sizes = got["m"].to_numpy()
    dcp, cavg = float((sizes ** 2).sum()), sizes.sum() / len(sizes) / k
    metrics = anon_sql.metrics.compute(adult, name, ["dcp", "cavg"])
    assert metrics["dcp"] == pytest.approx(dcp) and metrics["cavg"] == pytest.approx(cavg)
    assert dcp <= 1.02 * (30162 / k) * k * k and cavg <= 1.02
    # the released ranges cover the original ages of their records (records moved by swaps included)
    ages = adult.execute(f'SELECT s.age, v.age AS released FROM {working(name, "source")} s JOIN {working(name, "assignment")} a '
                         f'USING (__row) JOIN {working(name, "ec_values")} v USING (ec_id)').df()
    bounds = ages["released"].str.extract(r"^\[?(\d+)(?:-(\d+)\])?$").astype(float)
    bounds[1] = bounds[1].fillna(bounds[0])
    assert ((ages["age"] >= bounds[0]) & (ages["age"] <= bounds[1])).all()
    adult.close()


def shapes(total: int, parts: int, largest: int | None = None):
    """Every multiset of positive counts summing to ``total`` with at most ``parts`` parts (descending tuples)."""
    if total == 0:
        yield ()
        return
    for first in range(min(total, largest or total), 0, -1):
        if parts > 0:
            for rest in shapes(total - first, parts - 1, first):
                yield (first,) + rest


def brute_max_excess(k: int, mu: float, v: int) -> int:
    """Over every class shape of r >= k real records and 0..v − d noise records (absent values, once each, so they
    are singletons): the largest r − d (records beyond the distinct values) of a class that reaches θ. Classes with
    θ(r) > (v − 1)²/4, the largest possible variance of ranks 1..v (Popoviciu), cannot pass, which bounds r."""
    best = -1
    r = k
    while theta_of(r, mu) <= (v - 1) ** 2 / 4:
        rows = [s + (1,) * j for s in shapes(r, v) for j in range(v - len(s) + 1)]
        width = max(map(len, rows))
        counts = np.array([row + (0,) * (width - len(row)) for row in rows], dtype=float)
        ok = sigma2_rows(counts) >= theta_of(counts.sum(axis=1), mu) - 1e-9
        real = np.array([len(s) for s in shapes(r, v) for j in range(v - len(s) + 1)])
        if ok.any():
            best = max(best, int((r - real[ok]).max()))
        r += 1
    return best


def test_capacity_bound_small_cases_and_limits():
    # 4 values, k = 4: only all-distinct classes of 4 pass without noise; a class [2, 1, 1] + noise [2, 1, 1, 1]
    # (σ² 1.36 >= θ(5) = 1.2) holds 1 record beyond its distinct values, and nothing holds more
    assert brute_max_excess(4, 0.6, 4) == max_excess(4, 0.6, 4) == 1
    # 11 records → at most 2 classes: Σ min(f, 2) + 1·2 = 2 + 1 + 1 + 1 + 2 = 7 < 11, so k = 4 is impossible
    assert capacity(np.array([8, 1, 1, 1]), 4, 0.6) == 7
    # too many sensitive values to enumerate: no bound is claimed (the method then just runs)
    assert max_excess(8, 0.6, 500) is None
    assert capacity(np.full(500, 3), 8, 0.6) == 1500


def test_theta_adult_k16_is_impossible_even_with_noise(adult):
    # A proof by a computed bound, not by the method failing. Any θ-sensitive 16-anonymous release of Adult has
    # n <= ⌊30162/16⌋ = 1885 classes of >= 16 real records; occupation v occurs in at most min(f_v, n) classes, and a
    # class reaching θ(16 + noise) holds at most E records beyond its distinct values (E over every class shape,
    # noise included). So N <= Σ_v min(f_v, n) + E·n must hold; on Adult it does not.
    freq = adult.execute("SELECT count(*) FROM adult GROUP BY occupation").df().iloc[:, 0].to_numpy()
    n_rec, v = int(freq.sum()), len(freq)
    assert (n_rec, v) == (30162, 14)
    e = brute_max_excess(16, 0.6, v)
    assert e == 6 == max_excess(16, 0.6, v)   # e.g. 16 records, 10 distinct (one value 7 times) + 4 noise: 20.25 >= 19.95
    n = n_rec // 16
    bound = int(np.minimum(freq, n).sum()) + e * n
    assert bound == 30124 < n_rec == 30162                  # 38 records cannot be placed in any class
    assert bound == capacity(freq, 16, 0.6)
    # k = 4 and 8 are not excluded by the bound (and the releases above pass)
    for k in (4, 8):
        assert int(np.minimum(freq, n_rec // k).sum()) + brute_max_excess(k, 0.6, v) * (n_rec // k) >= n_rec
    # the method refuses with that bound, and nothing is written
    with pytest.raises(PrivacyRequirementError, match="at most 30124 of the 30162 records fit"):
        anon_sql.release(adult, adult_theta("adult_theta16", 16))
    tables = adult.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'adult_theta16'")
    assert tables.fetchall() == [(0,)]


def test_theta_adult_k16_with_suppression_every_class_passes(adult):
    # k = 16 with a suppression budget: the method's own message names the smallest max_suppression — 194 records of
    # the most frequent occupations for the capacity bound, then 6 classes of 16 the run cannot lift to θ
    # (suppressed whole by the release). Too small a budget fails closed and writes nothing.
    policy = adult_theta("adult_theta16s", 16)
    for budget in (0.0, 0.001, 0.0096):
        policy["privacy"]["max_suppression"] = budget
        with pytest.raises(PrivacyRequirementError, match=r"at most 30124 of the 30162 records fit .* needs 290 of "
                                                          r"30162 records suppressed: 194 .* 6 of 1873 classes "
                                                          r"\(96 records\).* max_suppression = 0\.0097"):
            anon_sql.release(adult, policy)
    tables = adult.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'adult_theta16s'")
    assert tables.fetchall() == [(0,)]
    policy["privacy"]["max_suppression"] = 0.0097
    name = policy["name"]
    rel = anon_sql.release(adult, policy)
    n, noise, sup = rel.records_in, rel.noise, rel.suppressed
    assert n == 30162 == rel.records_out - noise + sup and sup == 194 + 6 * 16 <= 0.0097 * n
    assert rel.info["records"] == 194 and sum(rel.info["suppressed_by_value"].values()) == 194
    # only over-represented occupations (frequency above the 1885 classes of the full table) lose records
    freq = adult.execute("SELECT occupation, count(*) AS f FROM adult GROUP BY ALL").df().set_index("occupation")["f"]
    assert all(freq[v] > 30162 // 16 for v in rel.info["suppressed_by_value"])
    # 194 is the fewest along the levelling of the most frequent values: the bound admits 30162 − 194, not − 193
    f = freq.to_numpy()
    r, take = suppression_needed(f, 16, 0.6, 30162)
    assert r == 194 == take.sum() and capacity(f - take, 16, 0.6) >= 30162 - 194
    assert capacity(f - level_take(f, 193), 16, 0.6) < 30162 - 193
    assert level_take(np.array([5, 5, 3]), 3).tolist() == [2, 1, 0]
    assert noise == rel.info["noise_records"] == 4 * 1867          # every class: 10 distinct values + 4 noise
    checks = anon_sql.check(adult, name)
    assert checks["passed"].all() and {"k", "theta__occupation"} <= set(checks["check"])
    assert rel.checks["passed"].all() and {"reconciliation", "max_suppression"} <= set(rel.checks["check"])
    # independent recomputation from the released table: size, σ² and θ per class; real records per class >= k
    got = released_sigma(adult, name, "occupation")
    assert len(got) == 1867 and (got["var"] >= theta_of(got["m"], 0.6) - 1e-9).all()
    noise_per = adult.execute(f'SELECT ec_id, count(*) AS c FROM {working(name, "noise")} GROUP BY ec_id').df()
    real = got["m"] - noise_per.set_index("ec_id")["c"].reindex(got.index, fill_value=0)
    assert (real >= 16).all() and int(real.sum()) == n - sup
    # suppressed records never reach the released table: 194 rows lack a class, 6 classes are not released
    assigned = adult.execute(f'SELECT count(*), count(DISTINCT ec_id) FROM {working(name, "assignment")}').fetchall()[0]
    assert assigned == (n - 194, 1873)
    metrics = anon_sql.metrics.compute(adult, name, ["dcp", "cavg"])
    sizes = got["m"].to_numpy()
    assert metrics["dcp"] == pytest.approx(float((sizes ** 2).sum()) + n * sup)
    # C_AVG over the released rows (noise included, like the |EC| of DCP): 20 per class; the release reports the same
    # value as the metrics module (one definition per name in anon.metrics); over real records it would be 16
    assert metrics["cavg"] == pytest.approx(sizes.sum() / len(sizes) / 16) == 1.25
    assert rel.metrics["cavg"] == pytest.approx(metrics["cavg"])
    assert (n - sup) / len(sizes) / 16 == 1.0


# -- p-sensitive models ------------------------------------------------------------------------------------------------
def _table4a_stats():
    labels = np.array(["Asthma", "Cancer", "Flu", "HIV", "Hepatitis", "Indigestion", "Obesity", "Phthisis"],
                      dtype=object)
    code = {v: i for i, v in enumerate(labels)}
    rows = ["HIV", "Cancer", "Flu", "Indigestion", "Hepatitis", "Phthisis", "Asthma", "Obesity", "HIV", "Cancer",
            "Flu", "Flu"]
    sc = SensitiveCounts.from_codes(np.repeat([0, 1, 2], 4), np.array([code[v] for v in rows]), np.ones(12), 3,
                                    len(labels))
    sc.labels = labels
    return ClassStats(np.full(3, 4.0), {"disease": sc})


def test_p_sensitive_numpy_golden():
    cats = str(example("seed004_categories.csv"))
    stats = _table4a_stats()
    m = PSensitivity.from_policy("disease", {"p": 2, "plus": True, "categories": cats})
    v = m.values(stats)
    assert v["distinct"].tolist() == [4, 4, 3] and v["categories"].tolist() == [2, 2, 2]
    assert m.check(stats).tolist() == [True, True, True]
    assert PSensitivity.from_policy("disease", {"p": 3, "plus": True, "categories": cats}).check(stats).tolist() == \
        [False, False, False]
    assert PSensitivity.from_policy("disease", {"p": 4}).check(stats).tolist() == [True, True, False]
    # (p, α): default weights (i − 1)/(n − 1), categories 1..4: EC1 {1, 4}, EC2 {2, 3}, EC3 {1, 4} all weigh 1
    alpha = PSensitivity.from_policy("disease", {"p": 2, "alpha": 1.0, "categories": cats})
    assert alpha.values(stats)["weight"] == pytest.approx([1.0, 1.0, 1.0])
    weights = {"1": 0.0, "2": 0.25, "3": 0.25, "4": 0.5}
    low = PSensitivity.from_policy("disease", {"p": 2, "alpha": 0.6, "categories": cats, "weights": weights})
    assert low.values(stats)["weight"] == pytest.approx([0.5, 0.5, 0.5]) and not low.check(stats).any()


@pytest.mark.parametrize("source", ["csv", "table", "inline"])
def test_p_sensitive_sql_matches_numpy(con, source):
    cats = str(example("seed004_categories.csv"))
    spec = {"csv": cats, "table": "cats", "inline": {"1": ["HIV", "Cancer"], "2": ["Hepatitis", "Phthisis"],
                                                     "3": ["Asthma", "Obesity"], "4": ["Indigestion", "Flu"]}}[source]
    con.execute("CREATE TABLE cats AS SELECT * FROM read_csv(?)", [cats])
    rel = anon_sql.release(con, table4a_policy(p_sensitive={"p": 2, "plus": True, "alpha": 1.0,
                                                            "categories": spec}))
    got = rel.classes.sort_values("ec_id")
    assert got["p_plus__disease_value"].tolist() == [2, 2, 2]
    assert got["p_alpha__disease_value"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert sorted(got["p_sensitive__disease_value"].tolist()) == [3, 4, 4]


@pytest.mark.parametrize("name, created", [("main.cats", "cats"), ("Cats.2024", '"Cats.2024"')])
def test_p_sensitive_categories_table_named_as_every_command_reads_it(con, name, created):
    """A categories table named ``schema.table`` or with a dot in its one name (issue 28.7: the name was found, then
    read as one quoted name, which ``main.cats`` is not)."""
    cats = str(example("seed004_categories.csv"))
    con.execute(f"CREATE TABLE {created} AS SELECT * FROM read_csv(?)", [cats])
    rel = anon_sql.release(con, table4a_policy(p_sensitive={"p": 2, "plus": True, "categories": name}))
    assert rel.classes.sort_values("ec_id")["p_plus__disease_value"].tolist() == [2, 2, 2]


@pytest.mark.parametrize("spec, match", [
    ({"p": 0}, "integer >= 1"),
    ({"p": 2, "plus": True}, "needs categories"),
    ({"p": 2, "q": 1}, "unknown key"),
    ({"p": 2, "plus": True, "categories": {"1": ["Flu"], "2": ["Flu"]}}, "in two categories"),
    ({"p": 2, "alpha": 0.5, "categories": {"1": ["Flu"]}, "weights": {"9": 1}}, "one weight per category"),
    ({"p": 2, "plus": True, "categories": "no_such_table"}, "needs a database connection"),
])
def test_p_sensitive_bad_policies(spec, match):
    with pytest.raises(PolicyError, match=match):    # the policy schema refuses some, the model the others
        build_models(anon_sql.Policy.from_dict(table4a_policy(p_sensitive=spec)))
