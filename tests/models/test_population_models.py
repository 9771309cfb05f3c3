"""k-map and δ-presence (population-based models, ARX's KMap / DPresence with a population table): golden classes by
hand, an independent pandas recomputation on an Adult sample (population = Adult), the lattice's numpy evaluation
against the SQL verification, the monotonicity the searches rely on, and fail-closed inputs (API and CLI exit codes).
"""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import PolicyError, PrivacyRequirementError, SourceError, TaxonomyError
from anon_sql.methods.lattice import Lattice
from anon_sql.models import ClassStats, DeltaPresence, KMap, Population
from anon_sql.runner.resolve import discard_resolved, resolve_release
from anon_sql.data.taxonomy import from_arx_csv
from conftest import data_path

# population: 10001 ×4, 10002 ×6, 10011 ×5, 10012 ×5 (20); sample: 10001 ×2, 10002 ×1, 10011 ×3, 10012 ×1 (7)
POPULATION = {"10001": 4, "10002": 6, "10011": 5, "10012": 5}
SAMPLE = {"10001": 2, "10002": 1, "10011": 3, "10012": 1}
# by hand: level 0 (the zips) and level 1 of the mask taxonomy (1000*, 1001*)
GOLDEN = {0: {"10001": (2, 4, 0.5), "10002": (1, 6, 1 / 6), "10011": (3, 5, 0.6), "10012": (1, 5, 0.2)},
          1: {"1000*": (3, 10, 0.3), "1001*": (4, 10, 0.4)}}


def _table(c, name: str, counts: dict[str, int]) -> None:
    frame = pd.DataFrame({"zip": [z for z, n in counts.items() for _ in range(n)]})
    frame["s"] = "x"
    c.register("__src", frame)
    c.execute(f'CREATE TABLE "{name}" AS SELECT * FROM __src')
    c.unregister("__src")


@pytest.fixture
def golden(con):
    _table(con, "sample", SAMPLE)
    _table(con, "pop", POPULATION)
    return con


def _policy(level: int = 0, method: str = "levels", **privacy) -> dict:
    params = {"levels": {"zip": level}} if method == "levels" else {}
    return {"name": "rel", "source": "sample", "method": method, "method_params": params,
            "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}}, "s": {"role": "insensitive"}},
            "privacy": {"k": 1, **privacy}}


def _kmap(k: int = 5, population: str = "pop") -> dict:
    return {"k": k, "population": population}


def _dp(lo: float = 0.0, hi: float = 0.5, population: str = "pop") -> dict:
    return {"delta_min": lo, "delta_max": hi, "population": population}


def _exists(c, name: str = "rel") -> bool:
    return c.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0] > 0


def test_golden_numpy():
    stats = ClassStats(np.array([2.0, 1, 3, 1]), population=np.array([4.0, 6, 5, 5]))
    pop = Population("pop")
    assert KMap(5, pop).measure(stats).tolist() == [4, 6, 5, 5]
    assert KMap(5, pop).check(stats).tolist() == [False, True, True, True]
    assert DeltaPresence(0, 0.5, pop).measure(stats) == pytest.approx([0.5, 1 / 6, 0.6, 0.2])
    assert DeltaPresence(0, 0.5, pop).check(stats).tolist() == [True, True, False, True]
    assert DeltaPresence(0.25, 0.5, pop).check(stats).tolist() == [True, False, False, False]
    empty = ClassStats(np.array([1.0]), population=np.array([0.0]))          # no population record: no δ, fails
    assert DeltaPresence(0, 1, pop).check(empty).tolist() == [False]
    with pytest.raises(PolicyError, match="population count"):
        KMap(2, pop).check(ClassStats(np.array([1.0])))                     # statistics without the population


@pytest.mark.parametrize("level", [0, 1])
def test_golden_sql_values(golden, level):
    rel = anon_sql.release(golden, _policy(level, k_map=_kmap(1), delta_presence=_dp(0, 1)))
    cl = rel.classes
    got = {str(z): (n, p, d) for z, n, p, d in zip(cl["zip"], cl["__size"], cl["k_map_value"],
                                                   cl["delta_presence_value"])}
    assert set(got) == set(GOLDEN[level])
    for z, (size, pop, delta) in GOLDEN[level].items():
        assert got[z] == (size, pop, pytest.approx(delta))


@pytest.mark.parametrize("level, privacy, check", [
    (0, {"k_map": _kmap(5)}, "k_map"),                                     # 10001: 4 population records
    (0, {"delta_presence": _dp(0, 0.5)}, "delta_presence"),                # 10011: δ = 0.6
    (0, {"delta_presence": _dp(0.25, 1)}, "delta_presence"),               # 10002: 1/6, 10012: 0.2
    (1, {"k_map": _kmap(11)}, "k_map"),                                    # 10 population records per class
    (1, {"delta_presence": _dp(0.35, 0.5)}, "delta_presence"),             # 1000*: 0.3
])
def test_golden_refusals(golden, level, privacy, check):
    with pytest.raises(PrivacyRequirementError, match=check):
        anon_sql.release(golden, _policy(level, **privacy))
    assert not _exists(golden)


def test_level_0_equals_assess(golden):
    # assess measures the table as it is: at level 0 its k_map / δ range are the release's extreme class values
    m = anon_sql.assess(golden, "sample", quasi=["zip"], population="pop").measures
    rel = anon_sql.release(golden, _policy(0, k_map=_kmap(1), delta_presence=_dp(0, 1)))
    assert (m["k_map"], m["delta_presence_min"], m["delta_presence_max"]) == pytest.approx((4, 1 / 6, 0.6))
    assert m["k_map"] == rel.classes["k_map_value"].min()
    assert m["delta_presence_max"] == pytest.approx(rel.classes["delta_presence_value"].max())


@pytest.mark.parametrize("privacy", [{"k_map": _kmap(10)}, {"delta_presence": _dp(0.3, 0.4)},
                                     {"k_map": _kmap(10), "delta_presence": _dp(0.25, 0.5)}])
def test_golden_passes_at_level_1(golden, privacy):
    assert anon_sql.release(golden, _policy(1, **privacy)).passed


def test_k_map_met_by_suppression(golden):
    # level 0, k = 5: only class 10001 (2 records) fails, so 2/7 suppression meets k-map
    with pytest.raises(PrivacyRequirementError, match="suppression of 2 records exceeds"):
        anon_sql.release(golden, _policy(0, k_map=_kmap(5), max_suppression=0.25))
    rel = anon_sql.release(golden, _policy(0, k_map=_kmap(5), max_suppression=0.3))
    assert rel.suppressed == 2 and sorted(golden.execute("SELECT DISTINCT zip FROM rel").df()["zip"]) == [
        "10002", "10011", "10012"]


@pytest.mark.parametrize("method", ["optimal", "exhaustive", "iab", "greedy"])
def test_searches_generalize_to_meet_the_models(golden, method):
    rel = anon_sql.release(golden, _policy(method=method, k_map=_kmap(6), delta_presence=_dp(0.25, 0.5)))
    assert rel.plan == {"zip": 1} and rel.passed          # level 0 fails both; level 1 is the lowest that passes


def test_delta_presence_with_suppression_is_not_monotone(golden):
    # δ in [0.45, 0.6], budget 0.3 (2.1 records): level 0 passes after suppressing 10002 and 10012 (δ 1/6, 0.2);
    # its generalization, level 1 (δ 0.3 and 0.4), fails in every class: feasibility is lost by generalizing
    privacy = {"delta_presence": _dp(0.45, 0.6), "max_suppression": 0.3}
    with pytest.raises(PrivacyRequirementError, match="suppression of 7 records"):
        anon_sql.release(golden, _policy(1, **privacy))
    for method in ("optimal", "exhaustive"):
        rel = anon_sql.release(golden, {**_policy(method=method, **privacy), "name": f"rel_{method}"})
        assert rel.plan == {"zip": 0} and rel.suppressed == 2


# -- fail-closed inputs -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("privacy, error, match", [
    ({"k_map": _kmap(5, "nope")}, SourceError, "population 'nope'"),
    ({"delta_presence": _dp(0.6, 0.5)}, PolicyError, "delta_min = 0.6 is larger than delta_max = 0.5"),
    ({"delta_presence": _dp(0, 1.5)}, PolicyError, "delta_max"),
    ({"delta_presence": _dp(-0.1, 0.5)}, PolicyError, "delta_min"),
    ({"k_map": _kmap(0)}, PolicyError, "k"),
    ({"k_map": {"k": 5}}, PolicyError, "population"),
    ({"delta_presence": {"delta_min": 0.1, "population": "pop"}}, PolicyError, "delta_max"),
    ({"k_map": _kmap(5), "delta_presence": _dp(0, 0.5, "pop2")}, PolicyError, "different populations"),
])
def test_bad_parameters_fail_closed(golden, privacy, error, match):
    _table(golden, "pop2", POPULATION)
    with pytest.raises(error, match=match):
        anon_sql.release(golden, _policy(1, **privacy))
    assert not _exists(golden)


def test_population_without_the_quasi_identifier(golden):
    golden.execute("CREATE TABLE popx AS SELECT s AS code FROM pop")
    with pytest.raises(PolicyError, match=r"no column\(s\) \['zip'\]"):
        anon_sql.release(golden, _policy(1, k_map=_kmap(5, "popx")))


def test_source_not_a_subset_of_the_population(golden):
    golden.execute("DELETE FROM pop WHERE zip = '10011' AND rowid IN (SELECT rowid FROM pop WHERE zip = '10011' "
                   "LIMIT 3)")                                         # 2 left, the sample has 3
    with pytest.raises(SourceError, match=r"not a subset of population 'pop'.*zip='10011' \(3 in the source, 2"):
        anon_sql.release(golden, _policy(1, delta_presence=_dp(0, 0.5)))
    golden.execute("DELETE FROM pop WHERE zip = '10011'")            # a sample class absent: δ would be undefined
    with pytest.raises(SourceError, match=r"zip='10011' \(3 in the source, 0 in the population\)"):
        anon_sql.release(golden, _policy(1, delta_presence=_dp(0, 0.5)))
    assert not _exists(golden)


def test_population_value_outside_the_taxonomy(golden):
    golden.execute("INSERT INTO pop VALUES ('20001', 'x')")
    with pytest.raises(TaxonomyError, match="population 'pop'.*20001.*inline taxonomy"):
        anon_sql.release(golden, _policy(1, k_map=_kmap(5)))


def test_mondrian_golden_categorical(golden):
    # k = 3 by the mask taxonomy: Mondrian splits 100** into 1000* (3 records; 4 + 6 in the population) and 1001*
    # (4; 5 + 5): each matches 10 population records, so k-map 10 keeps the split and k-map 11 refuses it (one
    # class 100** of 7 records, all 20 population records)
    def classes(k: int) -> dict:
        pol = {**_policy(method="mondrian"), "name": f"m{k}",
               "privacy": {"k": 3, "k_map": _kmap(k), "delta_presence": _dp(0, 1)}}
        cl = anon_sql.release(golden, pol).classes
        return {z: (n, p, pytest.approx(d)) for z, n, p, d in zip(cl["zip"], cl["__size"], cl["k_map_value"],
                                                                   cl["delta_presence_value"])}

    assert classes(10) == {"1000*": (3, 10, 0.3), "1001*": (4, 10, 0.4)}
    assert classes(11) == {"100**": (7, 20, 0.35)}


def test_mondrian_golden_numeric(golden):
    # numeric zips: classes are ranges; 3 population records at 10005 lie between the ranges [10001-10002] and
    # [10011-10012] (10 each) and match neither, but the single class [10001-10012] that k-map 11 forces: 23
    golden.execute("CREATE TABLE nsample AS SELECT CAST(zip AS INTEGER) AS zip, s FROM sample")
    golden.execute("CREATE TABLE npop AS SELECT CAST(zip AS INTEGER) AS zip, s FROM pop "
                   "UNION ALL SELECT 10005, 'x' FROM range(3)")

    def classes(k: int) -> dict:
        pol = {**_policy(method="mondrian"), "source": "nsample", "name": f"n{k}",
               "privacy": {"k": 3, "k_map": _kmap(k, "npop")}}
        pol["attributes"]["zip"] = {"role": "quasi"}
        cl = anon_sql.release(golden, pol).classes
        return dict(zip(cl["zip"], zip(cl["__size"], cl["k_map_value"])))

    assert classes(10) == {"[10001-10002]": (3, 10), "[10011-10012]": (4, 10)}
    assert classes(11) == {"[10001-10012]": (7, 23)}
    with pytest.raises(PrivacyRequirementError, match="k-map"):   # no partition reaches 24: refused before planning
        classes(24)
    assert not _exists(golden, "n24")


def test_cli_exit_codes(tmp_path):
    db = str(tmp_path / "p.duckdb")
    c = duckdb.connect(db)
    _table(c, "sample", SAMPLE)
    _table(c, "pop", POPULATION)
    c.close()

    def run(**privacy) -> int:
        pol = anon_sql.Policy.from_dict(_policy(1, **privacy))
        path = tmp_path / "p.toml"
        path.write_text(pol.to_toml())
        res = CliRunner().invoke(main, ["release", str(path), "--db", db])
        return res.exit_code, res.output

    assert run(k_map=_kmap(5, "missing"))[0] == 2                           # no such population
    code, out = run(k_map=_kmap(11))                                        # 10 population records per class
    assert code == 3 and "k_map" in out
    assert run(delta_presence=_dp(0.35, 0.5))[0] == 3                       # 1000*: δ = 0.3
    assert run(k_map=_kmap(10), delta_presence=_dp(0.3, 0.4))[0] == 0
    bad = tmp_path / "bad.toml"
    bad.write_text((tmp_path / "p.toml").read_text().replace("delta_min = 0.3", "delta_min = 0.9"))
    assert CliRunner().invoke(main, ["release", str(bad), "--db", db]).exit_code == 2   # δmin > δmax


# -- Adult: population = Adult, sample = a seeded 10% ---------------------------------------------------------------
QIS = ["age", "sex", "race"]


@pytest.fixture(scope="module")
def adult():
    c = duckdb.connect()
    anon_sql.install(c)
    frame = pd.read_csv(data_path("adult", "adult.csv"), sep=";")
    c.register("__adult", frame)
    c.execute("CREATE TABLE population AS SELECT * FROM __adult")
    c.register("__sample", frame.sample(frac=0.1, random_state=7))
    c.execute("CREATE TABLE sample AS SELECT * FROM __sample")
    yield c, frame
    c.close()


def _taxonomies() -> dict:
    return {q: str(data_path("adult", f"adult_hierarchy_{q}.csv")) for q in QIS}


def _adult_policy(name: str, method: str = "levels", levels=None, **privacy) -> dict:
    attrs = {q: {"role": "quasi", "taxonomy": path} for q, path in _taxonomies().items()}
    return {"name": name, "source": "sample", "method": method, "default_role": "insensitive", "attributes": attrs,
            "privacy": {"k": 1, **privacy}, "method_params": {"levels": levels} if levels else {}}


def _oracle(frame: pd.DataFrame, sample: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """pandas: population and sample generalized through the ARX hierarchies, counted per class."""
    def generalize(f: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(index=f.index)
        for q in QIS:
            mapping = from_arx_csv(_taxonomies()[q]).mapping(levels[q])
            out[q] = f[q].astype(str).map(mapping)
        return out

    pop = generalize(frame).groupby(QIS).size().rename("population")
    smp = generalize(sample).groupby(QIS).size().rename("size")
    joined = pd.concat([smp, pop], axis=1, join="inner").reset_index()
    joined["delta"] = joined["size"] / joined["population"]
    return joined


@pytest.mark.parametrize("levels", [{"age": 1, "sex": 0, "race": 0}, {"age": 2, "sex": 1, "race": 1},
                                    {"age": 0, "sex": 0, "race": 1}])
def test_adult_sql_equals_pandas_oracle(adult, levels):
    c, frame = adult
    sample = c.execute("SELECT * FROM sample").df()
    name = "ad_" + "".join(map(str, levels.values()))
    rel = anon_sql.release(c, _adult_policy(name, levels=levels, k_map={"k": 1, "population": "population"},
                                            delta_presence={"delta_max": 1.0, "population": "population"}))
    want = _oracle(frame, sample, levels)
    assert len(want) == rel.classes.shape[0]
    got = rel.classes.assign(**{q: rel.classes[q].astype(str) for q in QIS}).merge(want, on=QIS)
    assert len(got) == len(want)
    assert (got["k_map_value"] == got["population"]).all()
    assert got["delta_presence_value"].to_numpy() == pytest.approx(got["delta"].to_numpy())
    assert (got["__size"] == got["size"]).all()


@pytest.fixture(scope="module")
def adult_lattice(adult):
    c, _ = adult
    pol = _adult_policy("lat", method="exhaustive", k_map={"k": 40, "population": "population"},
                        delta_presence={"delta_min": 0.05, "delta_max": 0.15, "population": "population"})
    r = resolve_release(c, pol)
    try:
        yield c, r, Lattice(c, r.policy, "sample", r.taxonomies, r.models, r.records)
    finally:
        discard_resolved(c, r)


def test_lattice_equals_sql_verification(adult_lattice):
    c, r, lat = adult_lattice
    nodes = [tuple(int(x) for x in n) for n in lat.all_nodes()]
    for node in nodes[:: max(1, len(nodes) // 8)] + [lat.top]:
        ev = lat.evaluate(node)
        name = "lv_" + "".join(map(str, node))
        pol = _adult_policy(name, levels=lat.as_dict(node), k_map={"k": 40, "population": "population"},
                            delta_presence={"delta_min": 0.05, "delta_max": 0.15, "population": "population"})
        if ev.feasible:
            assert anon_sql.release(c, pol).passed
        else:
            with pytest.raises(PrivacyRequirementError):
                anon_sql.release(c, pol)


def test_models_are_monotone_without_suppression(adult_lattice):
    # every class passing at a node ⇒ every class passing at each generalization (k-map: counts add up; δ-presence:
    # a merged class's δ is a weighted mean of its parts' δ) — what predictive tagging assumes
    _, _, lat = adult_lattice
    for node in (tuple(int(x) for x in n) for n in lat.all_nodes()):
        if lat.evaluate(node).need == 0:
            assert all(lat.evaluate(s).need == 0 for s in lat.successors(node)), node
    passing = sum(lat.evaluate(tuple(int(x) for x in n)).need == 0 for n in lat.all_nodes())
    assert 0 < passing < lat.size                                  # the property is exercised both ways


def test_optimal_search_equals_brute_force_with_suppression(adult):
    c, _ = adult
    privacy = {"k_map": {"k": 40, "population": "population"}, "max_suppression": 0.1,
               "delta_presence": {"delta_min": 0.05, "delta_max": 0.12, "population": "population"}}
    rel = anon_sql.release(c, _adult_policy("opt", method="optimal", **privacy))
    r = resolve_release(c, _adult_policy("brute", method="optimal", **privacy))
    try:
        lat = Lattice(c, r.policy, "sample", r.taxonomies, r.models, r.records)
        feasible = [lat.evaluate(tuple(int(x) for x in n)) for n in lat.all_nodes()]
        feasible = [ev for ev in feasible if ev.feasible]
        best = min(feasible, key=lambda ev: lat.rank_key(ev, "discernibility"))
    finally:
        discard_resolved(c, r)
    assert rel.plan == lat.as_dict(best.node)


def test_adult_level_0_equals_assess(adult):
    c, _ = adult
    m = anon_sql.assess(c, "sample", quasi=QIS, population="population").measures
    rel = anon_sql.release(c, _adult_policy("ad_000", levels={q: 0 for q in QIS},
                                            k_map={"k": 1, "population": "population"},
                                            delta_presence={"delta_max": 1.0, "population": "population"}))
    assert m["k_map"] == rel.classes["k_map_value"].min()
    assert m["delta_presence_min"] == pytest.approx(rel.classes["delta_presence_value"].min())
    assert m["delta_presence_max"] == pytest.approx(rel.classes["delta_presence_value"].max())


def test_check_reverifies_the_population_models(golden):
    pol = _policy(1, k_map=_kmap(10), delta_presence=_dp(0.3, 0.4))
    pol["attributes"]["zip"]["taxonomy"] = "zipmask"
    from anon_sql.api import build_taxonomy_from_column

    build_taxonomy_from_column(golden, "zipmask", "pop", "zip", {"kind": "mask"})
    anon_sql.release(golden, pol)
    frame = anon_sql.check(golden, "rel").set_index("check")
    assert frame.loc["k_map", "passed"] and frame.loc["delta_presence", "passed"]
    assert frame.loc["k_map", "worst_value"] == 10 and frame.loc["delta_presence", "worst_value"] == pytest.approx(0.4)
    golden.execute("DELETE FROM pop WHERE zip = '10001'")              # the population shrinks: k-map no longer holds
    frame = anon_sql.check(golden, "rel").set_index("check")
    assert not frame.loc["k_map", "passed"] and frame.loc["k_map", "worst_value"] == 6
    assert not frame.loc["delta_presence", "passed"]                   # 1000*: 3 / 6


def test_check_refuses_inline_taxonomies(golden):
    anon_sql.release(golden, _policy(1, k_map=_kmap(10)))
    with pytest.raises(PolicyError, match="inline"):
        anon_sql.check(golden, "rel")


def test_count_columns_weight_source_and_population(con):
    # the golden tables aggregated: one row per zip with its records in column n (the population's n counts too)
    for name, counts in (("sample", SAMPLE), ("pop", POPULATION)):
        frame = pd.DataFrame({"zip": list(counts), "s": "x", "n": list(counts.values())})
        con.register("__agg", frame)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM __agg')
        con.unregister("__agg")
    pol = {**_policy(1, k_map=_kmap(1), delta_presence=_dp(0, 1)), "count_column": "n"}
    cl = anon_sql.release(con, pol).classes
    got = {str(z): (n, p, d) for z, n, p, d in zip(cl["zip"], cl["__size"], cl["k_map_value"],
                                                   cl["delta_presence_value"])}
    assert got == {z: (n, p, pytest.approx(d)) for z, (n, p, d) in GOLDEN[1].items()}
    # the lattice weighs them too: at level 0 class 10001 has 4 population records, so k = 5 needs level 1
    opt = {**_policy(method="optimal", k_map=_kmap(5)), "count_column": "n", "name": "rel_opt"}
    assert anon_sql.release(con, opt).plan == {"zip": 1}


def test_population_columns_are_read_as_the_source_types(golden):
    # an INTEGER population column reads as the source's text; text that is no number refuses for a numeric source
    golden.execute("CREATE TABLE popint AS SELECT CAST(zip AS INTEGER) AS zip, s FROM pop")
    assert anon_sql.release(golden, _policy(1, k_map=_kmap(10, "popint"))).passed
    golden.execute("CREATE TABLE numsample AS SELECT CAST(zip AS INTEGER) AS zip, s FROM sample")
    golden.execute("CREATE TABLE popbad AS SELECT zip, s FROM pop UNION ALL SELECT 'abc', 'x'")
    pol = {**_policy(1, k_map=_kmap(10, "popbad")), "source": "numsample", "name": "rel2"}
    with pytest.raises(SourceError, match="population 'popbad': column 'zip' does not read as the source's type"):
        anon_sql.release(golden, pol)
    assert not _exists(golden, "rel2")


# -- every method: the population matched to released values (local recoding), full Adult as the population ------
def _matched(rel, c) -> tuple[dict, dict]:
    """The verified population matches per class and the pandas oracle's (test_method_contract.population_oracle)."""
    from test_method_contract import population_oracle

    out = c.execute(f'SELECT * FROM "{rel.name}"').df()
    pop = c.execute("SELECT * FROM population").df()
    taxonomies = {q: from_arx_csv(path) for q, path in _taxonomies().items()}
    want = population_oracle(out, pop, QIS, rel.plan, False, taxonomies)
    want.index = [(int(i[0]), *[None if v is None else str(v) for v in i[1:]]) for i in want.index]
    got = pd.Series({(int(r[0]), *[None if pd.isna(v) else str(v) for v in r[1:-1]]): float(r[-1])
                     for r in rel.classes[["ec_id", *QIS, "k_map_value"]].itertuples(index=False)})
    return dict(zip(got.index, got.to_numpy())), dict(zip(want.index, want.to_numpy()))


@pytest.mark.parametrize("method, privacy", [
    ("mondrian", {"k": 5}), ("upa", {"k": 5}), ("fixed_interval", {"k": 5, "max_suppression": 0.2}),
])
def test_local_recoding_equals_pandas_oracle_on_adult(adult, method, privacy):
    """Source: a 10% sample of Adult; population: all of Adult (30,162 records). Every released class's population
    matches equal the oracle's, k-map 60 and δ <= 0.2 hold in every class, and the planners honoured them (Mondrian
    and UPA: nothing suppressed)."""
    c, _ = adult
    pol = _adult_policy(f"lr_{method}", method=method, **privacy, k_map={"k": 60, "population": "population"},
                        delta_presence={"delta_max": 0.2, "population": "population"})
    rel = anon_sql.release(c, pol)
    got, want = _matched(rel, c)
    assert len(got) == len(want) == len(rel.classes) > 10
    assert got == want
    assert rel.classes["k_map_value"].min() >= 60 and rel.classes["delta_presence_value"].max() <= 0.2 + 1e-9
    if method != "fixed_interval":
        assert rel.suppressed == 0


def _planner_counts(c, rel, pol) -> np.ndarray:
    """The numpy population counts a planner splits by (methods/population_points.py), per released ec_id, over the
    release's own assignment."""
    from types import SimpleNamespace

    from sqlglot import exp

    from anon_sql.compiler.views import working
    from anon_sql.methods.local_values import load_source
    from anon_sql.methods.population_points import population_points
    from anon_sql.common.sqlbuild import render

    r = resolve_release(c, {**pol, "name": rel.name + "_again"})
    try:
        ctx = SimpleNamespace(con=c, policy=r.policy, source_view=working(rel.name, "source"),
                              taxonomies=r.taxonomies, models=r.models)
        data = load_source(ctx)
        points = population_points(ctx, data.columns)
        assignment = c.execute(render(exp.select("*").from_(working(rel.name, "assignment")))).df()
        ec = assignment.set_index("__row").loc[data.rows, "ec_id"].to_numpy()
    finally:
        discard_resolved(c, r)
    return points.counts(np.arange(data.n), ec - 1, int(ec.max()))


@pytest.mark.parametrize("method", ["mondrian", "upa"])
def test_planner_counts_equal_the_verified_counts(adult, method):
    """The planners' numpy counts are the SQL verification's, class by class."""
    c, _ = adult
    pol = _adult_policy(f"pc_{method}", method=method, k=4, k_map={"k": 30, "population": "population"})
    rel = anon_sql.release(c, pol)
    verified = rel.classes.set_index("ec_id")["k_map_value"].sort_index()
    np.testing.assert_array_equal(_planner_counts(c, rel, pol), verified.to_numpy())


def test_nulls_and_values_the_source_lacks(con):
    """NULL is a value of its own (a class of NULLs releases NULL, NULL mixed with values releases *), and population
    values the source never had match only * (categorical without a taxonomy) or the ranges around them (numeric):
    the SQL verification, the planner's numpy counts and the pandas oracle agree on every class."""
    from test_method_contract import population_oracle

    src = pd.DataFrame({"age": [20, 21, 22, None, None, 30, 31, 32, 40, None, 41, 42],
                        "color": ["red", "red", None, None, "blue", "blue", "red", None, "green", "green", "red", None]})
    extra = pd.DataFrame({"age": [None, 25, 35, 45, 21, None], "color": [None, "pink", "red", None, "pink", "blue"]})
    con.register("__s", src)
    con.execute("CREATE TABLE s AS SELECT CAST(age AS INTEGER) AS age, color FROM __s")
    con.register("__p", pd.concat([src, src, extra], ignore_index=True))
    con.execute("CREATE TABLE p AS SELECT CAST(age AS INTEGER) AS age, color FROM __p")
    pol = {"name": "nul", "source": "s", "method": "mondrian",
           "attributes": {"age": {"role": "quasi"}, "color": {"role": "quasi"}},
           "privacy": {"k": 2, "k_map": {"k": 1, "population": "p"}}}
    rel = anon_sql.release(con, pol)
    out = con.execute("SELECT * FROM nul").df()
    released = set(out["age"].dropna()) | set(out["color"].dropna())
    assert "*" in released and out[["age", "color"]].isna().any().any()   # both NULL forms are exercised
    # by hand (the population is the source twice plus 6 records): age NULL → 3·2 + 2 = 8; [20-22] → 3·2 + the
    # extra 21 (pink, matched by *) = 7; [30-42] → 6·2 + 35 = 13; [31-41] (overlapping it) → 4·2 + 35 = 9
    by_age = dict(zip(rel.classes["age"].astype(object).fillna("NULL"), rel.classes["k_map_value"]))   # an ENUM
    assert by_age == {"NULL": 8, "[20-22]": 7, "[30-42]": 13, "[31-41]": 9}
    want = population_oracle(out, con.execute("SELECT * FROM p").df(), ["age", "color"], rel.plan, False, {})
    got = {(int(e), None if pd.isna(a) else str(a), None if pd.isna(b) else str(b)): float(v)
           for e, a, b, v in rel.classes[["ec_id", "age", "color", "k_map_value"]].itertuples(index=False)}
    assert got == {(int(k[0]), *[None if pd.isna(v) else str(v) for v in k[1:]]): v for k, v in want.items()}
    verified = rel.classes.set_index("ec_id")["k_map_value"].sort_index()
    np.testing.assert_array_equal(_planner_counts(con, rel, pol), verified.to_numpy())


def test_check_reverifies_assignment_releases(golden, tmp_path):
    """anon_sql.check matches the population as it is now to the released values of a Mondrian release (the
    catalog's), and to a shared file's when the population is readable there; slicing's buckets (column groups)
    and fixed intervals (interval bounds) are left out of a shared file, so there the models count as failed."""
    golden.execute("CREATE TABLE nsample AS SELECT CAST(zip AS INTEGER) AS zip, s FROM sample")
    golden.execute("CREATE TABLE npop AS SELECT CAST(zip AS INTEGER) AS zip, s FROM pop")
    pol = {**_policy(method="mondrian"), "name": "mo", "source": "nsample",
           "privacy": {"k": 3, "k_map": _kmap(10, "npop"), "delta_presence": _dp(0, 0.4, "npop")}}
    pol["attributes"]["zip"] = {"role": "quasi"}                  # ranges [10001-10002] and [10011-10012]
    anon_sql.release(golden, pol)
    frame = anon_sql.check(golden, "mo").set_index("check")
    assert frame["passed"].all() and frame.loc["k_map", "worst_value"] == 10            # 10 each
    path = str(tmp_path / "mo.duckdb")
    anon_sql.export(golden, "mo", path)
    golden.execute("DELETE FROM npop WHERE zip = 10012")                   # [10011-10012]: 5 left, δ = 4/5
    frame = anon_sql.check(golden, "mo").set_index("check")
    assert frame.loc["k_map", "worst_value"] == 5 and not frame.loc["k_map", "passed"]
    assert not frame.loc["delta_presence", "passed"] and frame.loc["delta_presence", "worst_value"] == 0.8
    shared = duckdb.connect(path)
    try:
        unverifiable = anon_sql.check(shared, "mo").set_index("check")                  # no population there
        assert not unverifiable.loc["k_map", "passed"] and pd.isna(unverifiable.loc["k_map", "worst_value"])
        shared.register("__pop", golden.execute("SELECT * FROM npop").df())
        shared.execute("CREATE TABLE npop AS SELECT * FROM __pop")                         # the shrunk population
        frame = anon_sql.check(shared, "mo").set_index("check")
        assert frame.loc["k_map", "worst_value"] == 5 and not frame.loc["k_map", "passed"]
        assert frame.drop(["k_map", "delta_presence"])["passed"].all()
    finally:
        shared.close()


def test_leaf_ranks_vectorized_equals_a_dict_lookup():
    """``leaf_ranks`` (one pandas lookup over all population values) gives every value the rank a plain dict of the
    leaf labels gives it, unknown values -1; NULL however the frame spells it (None, NaN, pd.NA) is the NULL leaf."""
    from anon_sql.methods.local_values import encode_categorical
    from anon_sql.methods.population_points import leaf_ranks

    c = encode_categorical("color", ["red", "blue", None, "green", "red"])
    leaves = list(c.labels[0][c.tree[:, 0]])
    oracle = {v: r for r, v in enumerate(leaves)}
    rng = np.random.default_rng(7)
    values = list(rng.choice(np.array(["red", "blue", "green", "pink", "", "*"], dtype=object), 500)) + [None]
    want = np.array([oracle.get(v, -1) for v in values])
    np.testing.assert_array_equal(leaf_ranks(c, values), want)
    assert (want == -1).any() and (want >= 0).any()
    null = oracle[None]
    for spelled in (pd.Series(["blue", np.nan, "pink"], dtype=object), pd.Series(["blue", None, "pink"], dtype="string")):
        np.testing.assert_array_equal(leaf_ranks(c, spelled), [oracle["blue"], null, -1])
