"""Metrics (spec/06): each formula on a hand-computed release, the spec's golden cases (DCP, C_AVG, zero loss at level
0, NCP = 1 at the top), local recoding, the release hook, pycanon agreement and properties."""
from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import anon_sql
import anon_sql.metrics as metrics
from anon_sql.errors import PolicyError, SourceError
from anon_sql.metrics import REGISTRY, ReleaseData, evaluate
from anon_sql.metrics.query import Query, answers
from anon_sql.metrics.registry import DIRECTIONS, NEEDS
from anon_sql.metrics.values import cover, domain, parse_interval
from anon_sql.data.taxonomy import from_mapping
from conftest import adult_policy, load_adult, working

# Hand table: six records, age (numeric, interval taxonomy of width 10 built from the data), city (A1, A2 → A;
# B1, B2 → B; → *), dx sensitive. At levels {age: 1, city: 1} the classes are
#   ([20-29], A) = {20 A1 flu, 22 A2 hiv}   ([30-39], B) = {30 B1 flu, 34 B1 flu}
#   ([40-49], B) = {40 B2 cancer}           ([50-59], A) = {50 A1 flu}
HAND_ROWS = [(20, "A1", "flu"), (22, "A2", "hiv"), (30, "B1", "flu"), (34, "B1", "flu"), (40, "B2", "cancer"),
             (50, "A1", "flu")]
CITY = {"kind": "mapping", "mapping": {"A1": ["A"], "A2": ["A"], "B1": ["B"], "B2": ["B"]}}


def _hand(con, levels: dict, name: str = "hand", **extra) -> anon_sql.Release:
    if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'h'").fetchall()[0][0]:
        con.execute("CREATE TABLE h (age INTEGER, city VARCHAR, dx VARCHAR)")
        con.executemany("INSERT INTO h VALUES (?, ?, ?)", HAND_ROWS)
    policy = {"name": name, "source": "h", "method": "levels",
              "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                             "city": {"role": "quasi", "taxonomy": CITY}, "dx": {"role": "sensitive"}},
              "privacy": {"k": 1}, "method_params": {"levels": levels}, **extra}
    return anon_sql.release(con, policy, replace=True)


def test_hand_case_utility(con):
    _hand(con, {"age": 1, "city": 1})
    m = metrics.compute(con, "hand", ["ncp", "loss", "precision", "dcp", "cavg", "kl_divergence"])
    # NCP age: every label spans 9 of max_T − min_T = 30; city: (2 − 1)/(4 − 1) for A and B
    assert m["ncp__age"] == pytest.approx(0.3)
    assert m["ncp__city"] == pytest.approx(1 / 3)
    assert m["ncp"] == pytest.approx((0.3 + 1 / 3) / 2)
    # Loss with leaf counts: age leaves are the 6 data values; [20-29] and [30-39] cover 2 → 1/5, the others 1 → 0
    assert m["loss"] == pytest.approx(((4 * 0.2) / 6 + 1 / 3) / 2)
    assert m["precision"] == pytest.approx(1 - 0.5)          # level 1 of height 2 on both QIs
    assert m["dcp"] == 2 ** 2 + 2 ** 2 + 1 + 1
    assert m["cavg"] == pytest.approx((6 / 4) / 1)
    # Q spreads each class over (age leaves × city leaves) it covers: every original tuple gets 1/12, P = 1/6
    assert m["kl_divergence"] == pytest.approx(math.log(2))


def test_hand_case_weights_and_identity_vulnerability(con):
    _hand(con, {"age": 1, "city": 1})
    p = {"weights": {"age": 1, "city": 3}, "iv": {"age": 3, "city": 1}}
    m = metrics.compute(con, "hand", ["ncp", "dm_iv", "coverage_iv"], params=p)
    assert m["ncp"] == pytest.approx(0.25 * 0.3 + 0.75 / 3)
    assert m["dm_iv"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.5)
    assert m["coverage_iv"] == pytest.approx(0.75 * (4 * 0.2 / 6) + 0.25 / 3)


def test_hand_case_risk(con):
    _hand(con, {"age": 1, "city": 1})
    m = metrics.compute(con, "hand", ["k", "prosecutor_risk_max", "prosecutor_risk_avg", "sample_uniques",
                                      "records_at_risk", "reid_probability"], params={"risk_threshold": 2})
    assert m["k"] == 1 and m["prosecutor_risk_max"] == 1
    assert m["prosecutor_risk_avg"] == pytest.approx(4 / 6)
    assert m["sample_uniques"] == pytest.approx(2 / 6)
    assert m["records_at_risk"] == 2
    # per record 1/|covering released records|: 1/2 for the four records in pairs, 1 for the two singletons
    assert m["reid_probability"] == pytest.approx(4 / 6)
    assert m["reid_probability_std"] == pytest.approx(math.sqrt(1 / 18))
    only_city = metrics.compute(con, "hand", ["reid_probability"], params={"reid_quasi": ["city"]})
    assert only_city["reid_probability"] == pytest.approx(1 / 3)      # three released records say A, three B
    assert only_city["reid_probability_std"] == pytest.approx(0)


def test_hand_case_sensitive_summaries(con):
    _hand(con, {"age": 1, "city": 1})
    m = metrics.compute(con, "hand", ["l_distinct", "l_entropy", "l_recursive", "t_closeness", "simpson_d",
                                      "simpson_e", "theta"])
    assert m["l_distinct"] == 1 and m["l_entropy"] == pytest.approx(1)
    assert m["l_recursive"] == math.inf                      # ([30-39], B) has one value: no c makes it pass
    # P_T = flu 4/6, hiv 1/6, cancer 1/6; the cancer-only class is farthest: ½(4/6 + 1/6 + 5/6)
    assert m["t_closeness"] == pytest.approx(5 / 6)
    assert m["simpson_d"] == pytest.approx(1) and m["simpson_e"] == pytest.approx(1)
    assert m["theta"] == pytest.approx(0)                    # {flu, flu}: σ² = 0; singletons skipped


def test_recursive_and_theta_on_diverse_classes(con):
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1, 'x'), (1, 'x'), (1, 'y'), (2, 'x'), (2, 'y'), "
                "(2, 'z')) t(g, s)")
    anon_sql.release(con, {"name": "rr", "source": "r", "method": "levels",
                           "attributes": {"g": {"role": "quasi", "taxonomy": {"kind": "top"}},
                                          "s": {"role": "sensitive"}}, "privacy": {"k": 3}})
    m = metrics.compute(con, "rr", ["l_recursive", "l_entropy", "theta", "simpson_d"])
    assert m["l_recursive"] == pytest.approx(2.0)            # class 1: r1 = 2, r2 = 1 → c must exceed 2
    assert m["l_entropy"] == pytest.approx(math.exp(-(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)))
    # class 1 counts (2, 1): weights 1, 2 → σ² = (2·1 + 1·4)/3 − (4/3)² = 2/9; σ²_full(3) = 8/12
    assert m["theta"] == pytest.approx((2 / 9) / (8 / 12))
    assert m["simpson_d"] == pytest.approx(1 / ((2 / 3) ** 2 + (1 / 3) ** 2))


def test_query_error_on_hand_queries(con):
    _hand(con, {"age": 1, "city": 1})
    d = ReleaseData.from_catalog(con, "hand")
    age, city = d.domains["age"], d.domains["city"]
    q_age = Query(1, 0.5, {"age": (age.x >= 20) & (age.x <= 30)})          # true 3; [20-29] → 2, [30-39] → 2·½
    q_city = Query(1, 0.3, {"city": city.labels == "A1"})                  # true 2; the A classes give 2·½ + ½
    true, est = answers(d, [q_age, q_city])
    assert true.tolist() == [3, 2]
    assert est == pytest.approx([3, 1.5])
    # the same predicates as SQL over the source give the same true counts
    from anon_sql.common.sqlbuild import render
    for q, expected in ((q_age, 3), (q_city, 2)):
        where = render(q.condition(d.domains))
        assert con.execute(f"SELECT count(*) FROM h WHERE {where}").fetchall()[0][0] == expected


def test_level_zero_has_no_loss(con):
    """Spec golden: query error 0, KL 0 and NCP 0 for a release with no generalization."""
    _hand(con, {"age": 0, "city": 0})
    m = metrics.compute(con, "hand", ["ncp", "loss", "precision", "kl_divergence", "query_error", "reid_probability"],
                        params={"queries": 200})
    assert m["ncp"] == 0 and m["loss"] == 0 and m["precision"] == 1
    assert m["kl_divergence"] == pytest.approx(0, abs=1e-12)
    assert m["query_error"] == pytest.approx(0, abs=1e-12) and m["query_skipped"] < 200  # empty answers skipped
    assert m["reid_probability"] == 1


def test_everything_generalized_to_the_top(con):
    """Spec golden: NCP 1 when every QI is `*`."""
    _hand(con, {"age": 2, "city": 2})
    assert set(con.execute("SELECT DISTINCT age || city FROM hand").fetchall()) == {("**",)}
    m = metrics.compute(con, "hand", ["ncp", "loss", "precision", "kl_divergence", "dcp"])
    assert m["ncp"] == 1 and m["loss"] == 1 and m["precision"] == 0
    assert m["dcp"] == 36
    assert m["kl_divergence"] == pytest.approx(math.log(4))  # Q = 1/(6·4), P = 1/6


def test_dcp_and_cavg_golden_spec05(con):
    """Spec/05 §5: N = 10 records in classes of k = 2 → DCP = (N/k)·k² = 20, C_AVG = 1; suppression adds N·s."""
    con.execute("CREATE TABLE g AS SELECT * FROM (VALUES ('a'), ('a'), ('b'), ('b'), ('c'), ('c'), ('d'), ('d'), "
                "('e'), ('e')) t(v)")
    pol = {"name": "g2", "source": "g", "method": "levels",
           "attributes": {"v": {"role": "quasi", "taxonomy": {"kind": "top"}}}, "privacy": {"k": 2}}
    anon_sql.release(con, pol)
    m = metrics.compute(con, "g2", ["dcp", "cavg", "k"])
    assert (m["dcp"], m["cavg"], m["k"]) == (20, 1, 2)
    con.execute("UPDATE g SET v = 'f' WHERE rowid = 9")      # e and f become singletons: suppressed
    anon_sql.release(con, {**pol, "name": "g3", "privacy": {"k": 2, "max_suppression": 0.2}})
    m = metrics.compute(con, "g3", ["dcp", "cavg", "ncp"])
    assert m["dcp"] == 4 * 2 ** 2 + 10 * 2
    assert m["cavg"] == pytest.approx((8 / 4) / 2)
    assert m["ncp"] == pytest.approx(2 / 10)                 # suppressed records count NCP 1, the rest 0


def test_local_recoding_ranges_and_silhouette(con):
    con.execute("CREATE TABLE x AS SELECT * FROM (VALUES (1), (2), (3), (4), (10), (11), (12), (13)) t(v)")
    anon_sql.release(con, {"name": "xm", "source": "x", "method": "mondrian",
                           "attributes": {"v": {"role": "quasi"}}, "privacy": {"k": 4}})
    assert sorted(r[0] for r in con.execute("SELECT DISTINCT v FROM xm").fetchall()) == ["[1-4]", "[10-13]"]
    m = metrics.compute(con, "xm", ["ncp", "precision", "kl_divergence", "query_error", "silhouette"],
                        params={"queries": 50})
    assert m["ncp"] == pytest.approx(3 / 12)                 # width 3 of the range 12
    assert m["precision"] == pytest.approx(1 - 3 / 12)      # ranges outside a taxonomy: their normalized width
    assert m["kl_divergence"] == pytest.approx(0, abs=1e-12)  # each range holds 4 records over its 4 leaves
    assert math.isnan(m["silhouette"])                       # Mondrian is not a clustering method
    # silhouette of {0, 1} vs {10, 11}: s = 1 − 1/10.5, 1 − 1/9.5, 1 − 1/9.5, 1 − 1/10.5
    con.execute("CREATE TABLE y AS SELECT * FROM (VALUES (0), (1), (10), (11)) t(v)")
    anon_sql.release(con, {"name": "ym", "source": "y", "method": "mondrian",
                           "attributes": {"v": {"role": "quasi"}}, "privacy": {"k": 2}})
    d = ReleaseData.from_catalog(con, "ym")
    d.plan["clustering"] = True
    expected = np.mean([1 - 1 / 10.5, 1 - 1 / 9.5, 1 - 1 / 9.5, 1 - 1 / 10.5])
    assert evaluate(d, ["silhouette"])["silhouette"] == pytest.approx(expected)


def test_parser_cases():
    assert parse_interval("[20-29]") == (20, 29) and parse_interval("20-29") == (20, 29)
    assert parse_interval("[20, 30)") == (20, 30) and parse_interval("-5--1") == (-5, -1)
    assert parse_interval("*") is None and parse_interval("5200*") is None and parse_interval("39") == (39, 39)
    tax = from_mapping("c", {"a": ["ab"], "b": ["ab"], "c": ["cd"], "d": ["cd"]})
    dom = domain("c", np.array(["a", "b", "c", None], dtype=object), False, tax)
    assert dom.n == 5                                        # 4 leaves + the NULL leaf
    c = cover(dom, ["ab", "*", "a", None])                   # level unknown (local recoding)
    assert c.size.tolist() == [2, 5, 1, 1]
    assert c.ncp.tolist() == pytest.approx([1 / 4, 1, 0, 0])
    assert c.level.tolist() == pytest.approx([0.5, 1, 0, 0])
    num = domain("n", np.array(["1", "5", "9"], dtype=object), True, None)
    cn = cover(num, ["[1-5]", "9", "*"])
    assert cn.ncp.tolist() == pytest.approx([0.5, 0, 1]) and cn.mid.tolist() == pytest.approx([3, 9, 5])
    with pytest.raises(anon_sql.AnonSQLError, match="neither a taxonomy label"):
        cover(num, ["[100-200]"])


def test_release_hook_stores_metrics_with_direction(con):
    _hand(con, {"age": 1, "city": 1}, metrics={"compute": ["ncp", "dcp", "kl_divergence"]})
    rows = dict((r[0], (r[1], r[2])) for r in con.execute(
        "SELECT metric, value, direction FROM anon.metrics WHERE release = 'hand'").fetchall())
    assert rows["ncp"][0] == pytest.approx((0.3 + 1 / 3) / 2) and rows["ncp"][1] == "lower"
    assert rows["kl_divergence"][1] == "lower" and rows["dcp"] == (10, "lower")


def test_dry_run_computes_metrics_and_creates_nothing(con):
    _hand(con, {"age": 0, "city": 0})
    policy = {"name": "hdry", "source": "h", "method": "levels", "default_role": "insensitive",
              "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                             "city": {"role": "quasi", "taxonomy": CITY}},
              "privacy": {"k": 1}, "method_params": {"levels": {"age": 2, "city": 2}},
              "metrics": {"compute": ["ncp", "k"]}}
    rel = anon_sql.release(con, policy, dry_run=True)
    assert rel.metrics["ncp"] == 1 and rel.metrics["k"] == 6
    assert not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'hdry%'"
                           ).fetchall()[0][0]


def test_metrics_reload_from_a_reopened_file(tmp_path):
    db = str(tmp_path / "m.duckdb")
    c = duckdb.connect(db)
    anon_sql.install(c)
    _hand(c, {"age": 1, "city": 1})
    before = metrics.compute(c, "hand", ["ncp", "kl_divergence", "reid_probability"])
    c.close()
    c = duckdb.connect(db)
    assert metrics(c, "hand", ["ncp", "kl_divergence", "reid_probability"]) == before  # callable, deterministic
    c.close()


def test_clear_errors(con):
    _hand(con, {"age": 1, "city": 1})
    with pytest.raises(SourceError, match="not a materialized release.*hand"):
        metrics.compute(con, "nope")
    with pytest.raises(PolicyError, match="unknown metric.*available"):
        metrics.compute(con, "hand", ["ncp", "nope"])
    with pytest.raises(PolicyError, match="reid_quasi"):
        metrics.compute(con, "hand", ["reid_probability"], params={"reid_quasi": ["dx"]})
    with pytest.raises(PolicyError, match="query_selectivity"):
        metrics.compute(con, "hand", ["query_error"], params={"query_selectivity": [2]})
    with pytest.raises(PolicyError, match="weights"):
        metrics.compute(con, "hand", ["ncp"], params={"weights": {"zip": 1}})


def test_registry_declares_every_metric():
    required = {"k", "records_at_risk", "prosecutor_risk_max", "prosecutor_risk_avg", "sample_uniques", "ncp",
                "precision", "dcp", "cavg", "kl_divergence", "query_error", "dm_iv", "coverage_iv", "silhouette",
                "l_distinct", "l_entropy", "l_recursive", "t_closeness", "simpson_d", "simpson_e", "theta",
                "leakage_pre", "leakage_post", "reid_probability"}
    assert required <= set(REGISTRY)
    for m in REGISTRY.values():
        assert m.direction in DIRECTIONS and m.needs in NEEDS and m.formula
    assert metrics.direction("l_distinct__dx") == "higher" and metrics.direction("query_error_median") == "lower"


def test_adult_release_agrees_with_pycanon(con):
    """k, distinct l and entropy l against pycanon on the released Adult table (level vector, 5% suppression)."""
    anonymity = pytest.importorskip("pycanon.anonymity")
    load_adult(con)
    levels = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
              "workclass": 2, "occupation": 1}
    anon_sql.release(con, adult_policy(levels, max_suppression=0.05, l_diversity={"kind": "distinct", "l": 2}))
    m = metrics.compute(con, "adult_rel", ["k", "l_distinct", "l_entropy", "ncp", "records_at_risk"])
    df = con.execute("SELECT * FROM adult_rel").df()
    qi = list(levels)
    assert m["k"] == anonymity.k_anonymity(df, qi)
    assert m["l_distinct"] == anonymity.l_diversity(df, qi, ["salary-class"])
    assert anonymity.entropy_l_diversity(df, qi, ["salary-class"]) in {math.floor(m["l_entropy"] - 1e-9),
                                                                        math.floor(m["l_entropy"] + 1e-9)}
    assert 0 < m["ncp"] < 1 and m["records_at_risk"] == 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ages=st.lists(st.integers(18, 60), min_size=4, max_size=14),
       cities=st.lists(st.sampled_from(["A1", "A2", "B1", "B2"]), min_size=14, max_size=14),
       age_level=st.integers(0, 1), city_level=st.integers(0, 1))
def test_properties_bounds_and_monotonicity(ages, cities, age_level, city_level):
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE p (age INTEGER, city VARCHAR)")
    con.executemany("INSERT INTO p VALUES (?, ?)", list(zip(ages, cities)))
    names = ["ncp", "loss", "precision", "kl_divergence", "reid_probability", "prosecutor_risk_max", "dcp"]
    results = []
    for bump in (0, 1):
        levels = {"age": age_level + bump, "city": city_level + bump}
        anon_sql.release(con, {"name": "p_rel", "source": "p", "method": "levels",
                               "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval",
                                                                                   "widths": [10]}},
                                              "city": {"role": "quasi", "taxonomy": CITY}},
                               "privacy": {"k": 1}, "method_params": {"levels": levels}}, replace=True)
        results.append(metrics.compute(con, "p_rel", names))
    for m in results:
        assert 0 <= m["ncp"] <= 1 and 0 <= m["loss"] <= 1 and 0 <= m["precision"] <= 1
        assert m["kl_divergence"] >= -1e-9
        assert 0 < m["reid_probability"] <= m["prosecutor_risk_max"] + 1e-12
        assert m["dcp"] >= len(ages)
    lo, hi = results
    assert hi["ncp"] >= lo["ncp"] - 1e-12 and hi["precision"] <= lo["precision"] + 1e-12
    assert hi["kl_divergence"] >= lo["kl_divergence"] - 1e-9 and hi["dcp"] >= lo["dcp"]
    con.close()


def test_covering_pairs_hand_case_with_overlapping_values():
    """Overlapping local-recoding values: leaf 3 lies in [1-4], [3-6] and *; leaf a in a and *."""
    from anon_sql.metrics.coverage import covering_pairs

    num = domain("x", np.array([str(v) for v in range(1, 7)], dtype=object), True, None)
    cat = domain("c", np.array(["a", "b"], dtype=object), False, None)
    c0, c1 = cover(num, ["[1-4]", "[3-6]", "*"]), cover(cat, ["a", "*", "b"])
    oc = np.column_stack([num.codes(["1", "3", "5"]), cat.codes(["a", "b", "a"])])
    tc = np.column_stack([c0.index(["[1-4]", "[3-6]", "*"]), c1.index(["a", "*", "b"])])
    oi, ti = covering_pairs(oc, tc, [c0, c1], [num.n, cat.n])
    assert sorted(zip(oi.tolist(), ti.tolist())) == [(0, 0), (1, 1), (1, 2), (2, 1)]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_covering_pairs_equals_brute_force(data):
    """Random covers (partitions or overlapping sets) on 1–3 QIs: both pair searches find exactly the covering
    pairs."""
    from anon_sql.metrics.coverage import covering_pairs
    from anon_sql.metrics.values import Cover

    n_q = data.draw(st.integers(1, 3))
    covers, n_leaves, dense = [], [], []
    for _ in range(n_q):
        n = data.draw(st.integers(1, 5))
        n_vals = data.draw(st.integers(1, 4))
        if data.draw(st.booleans()):                         # a partition of the leaves (full-domain recoding)
            m = np.zeros((n_vals, n), dtype=bool)
            m[data.draw(st.lists(st.integers(0, n_vals - 1), min_size=n, max_size=n)), np.arange(n)] = True
        else:                                                # overlapping values (local recoding)
            m = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=n_vals,
                                            max_size=n_vals)), dtype=bool).reshape(n_vals, n)
            m[:, 0] |= ~m.any(axis=1)                        # every value covers at least one leaf
        val, leaf = np.nonzero(m)
        covers.append(Cover(np.arange(n_vals).astype(object), m.sum(1).astype(float), *([np.zeros(n_vals)] * 4),
                            val, leaf))
        n_leaves.append(n)
        dense.append(m.T)
    n_o, n_t = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    oc = np.column_stack([data.draw(st.lists(st.integers(0, n - 1), min_size=n_o, max_size=n_o)) for n in n_leaves])
    tc = np.column_stack([data.draw(st.lists(st.integers(0, len(c.labels) - 1), min_size=n_t, max_size=n_t))
                          for c in covers])
    expected = {(i, j) for i in range(n_o) for j in range(n_t)
                if all(dense[q][oc[i, q], tc[j, q]] for q in range(n_q))}
    for selective in (0.0, 1.0):                             # dense blocks only / hash join on partitioning QIs
        oi, ti = covering_pairs(oc, tc, covers, n_leaves, selective)
        assert set(zip(oi.tolist(), ti.tolist())) == expected and len(oi) == len(expected)


# -- shared reads (one pass per aggregate): each shortcut equals the direct computation ----------------------------
NULL_ROWS = [(20, "A1", "flu"), (22, "A2", "hiv"), (30, None, "flu"), (34, "B1", "flu"), (None, "B2", "cancer"),
             (50, "A1", "flu"), (51, "A1", None), (23, "B2", "flu")]


def _null_hand(con, levels: dict) -> None:
    con.execute("CREATE OR REPLACE TABLE hn (age INTEGER, city VARCHAR, dx VARCHAR)")
    con.executemany("INSERT INTO hn VALUES (?, ?, ?)", NULL_ROWS)
    anon_sql.release(con, {"name": "hn_rel", "source": "hn", "method": "levels",
                           "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                                          "city": {"role": "quasi", "taxonomy": CITY}, "dx": {"role": "sensitive"}},
                           "privacy": {"k": 1}, "method_params": {"levels": levels}}, replace=True)


def _sorted(frame):
    cols = list(frame.columns)
    return frame.astype({c: object for c in cols if c != "n"}).fillna("\x00").sort_values(cols).reset_index(drop=True)


@pytest.mark.parametrize("levels", [{"age": 0, "city": 0}, {"age": 1, "city": 1}, {"age": 2, "city": 0}])
def test_class_sizes_from_the_sensitive_pass_equal_the_direct_group_by(con, levels):
    _null_hand(con, levels)
    direct = ReleaseData.from_catalog(con, "hn_rel")
    shared = ReleaseData.from_catalog(con, "hn_rel")
    shared.prefetch(["sensitive"])                            # groups derived from the (class, dx) counts
    assert "groups" in shared.__dict__
    a, b = _sorted(direct.groups), _sorted(shared.groups)
    assert a.drop(columns="n").equals(b.drop(columns="n")) and np.allclose(a["n"], b["n"])
    assert np.array_equal(np.sort(direct.class_sizes), np.sort(shared.class_sizes))
    names = ["k", "l_distinct", "l_entropy", "t_closeness", "dcp", "sample_uniques"]
    assert evaluate(ReleaseData.from_catalog(con, "hn_rel"), names) == evaluate(direct, names)


def test_value_counts_one_pass_equal_the_sums_of_the_original_tuples(con):
    _null_hand(con, {"age": 1, "city": 1})
    scanned = ReleaseData.from_catalog(con, "hn_rel").value_counts        # UNION ALL of per-QI GROUP BYs
    summed = ReleaseData.from_catalog(con, "hn_rel")
    summed.original
    summed = summed.value_counts                                           # summed from the original tuples
    for q in ("age", "city"):
        assert _sorted(scanned[q]).equals(_sorted(summed[q]))
        assert scanned[q]["v"].isna().sum() == 1 and scanned[q]["n"].sum() == len(NULL_ROWS)


def test_domains_from_the_taxonomy_summary_equal_those_from_the_values(con):
    _null_hand(con, {"age": 1, "city": 1})
    d = ReleaseData.from_catalog(con, "hn_rel")
    for q in ("age", "city"):
        fast = d.domains[q]                                   # taxonomy + one aggregate pass (no value counts)
        assert fast.bounds is not None
        slow = domain(q, d.value_counts[q]["v"], d.numeric[q], d.taxonomies[q])
        assert fast.labels.tolist() == slow.labels.tolist() and fast.null_leaf == slow.null_leaf >= 0
        assert np.array_equal(fast.x, slow.x, equal_nan=True)
        assert (fast.lo, fast.hi) == (slow.lo, slow.hi) or (math.isnan(fast.lo) and math.isnan(slow.lo))
    assert (d.domains["age"].lo, d.domains["age"].hi) == (20.0, 51.0)


def test_metrics_of_the_release_alone_never_read_the_source(con):
    """k, DCP, C_AVG and l-diversity read one GROUP BY of the release (plus the catalog row), so they still work
    when the source is gone; NCP needs the source and says so."""
    _hand(con, {"age": 1, "city": 1})
    con.execute(f"DROP VIEW {working('hand', 'source')}")
    con.execute("DROP TABLE h")
    statements = []

    class Counting:
        def execute(self, *args):
            statements.append(args[0])
            return con.execute(*args)

        def __getattr__(self, name):
            return getattr(con, name)

    m = metrics.compute(Counting(), "hand", ["k", "records_at_risk", "dcp", "cavg", "l_distinct", "l_entropy"])
    assert m["k"] == 1 and m["dcp"] == 10 and m["l_distinct"] == 1
    release_scans = [s for s in statements if '"hand"' in s and "anon" not in s]
    assert len(release_scans) == 1 and len(statements) <= 4      # + catalog probe, catalog row, existence
    with pytest.raises(SourceError, match="is gone"):
        metrics.compute(con, "hand", ["ncp"])


def test_named_taxonomies_read_no_values_without_the_check(con):
    from anon_sql.policy.model import Policy
    from anon_sql.catalog.taxonomy_lookup import resolve_taxonomies

    def no_scan(column):
        raise AssertionError(f"read the values of {column}")

    pol = Policy.from_dict({"name": "x", "source": "adult", "method": "levels",
                            "attributes": {"age": {"role": "quasi", "taxonomy": "adult_age"},
                                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}}}})
    calls = []

    def sex_values(column):
        calls.append(column)
        return pd.DataFrame({"v": ["Male", "Female"], "n": [1, 1]})

    taxes = resolve_taxonomies(con, pol, None, False, catalog_con=con, check=False, value_counts=sex_values)
    assert set(taxes) == {"age", "sex"} and calls == ["sex"]            # only the inline builder needs values
    with pytest.raises(AssertionError, match="read the values"):
        resolve_taxonomies(con, pol, None, False, catalog_con=con, value_counts=no_scan)


def test_builtin_taxonomies_are_parsed_once_and_handed_out_as_copies():
    from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy

    a, b = load_builtin_taxonomy("adult_age"), load_builtin_taxonomy("adult_age")
    assert a is not b and a.levels.equals(b.levels)
    a.levels.iloc[0, 0] = "changed"
    a.spec["kind"] = "changed"
    c = load_builtin_taxonomy("adult_age")
    assert c.levels.iloc[0, 0] != "changed" and c.spec["kind"] == "builtin"
    assert load_builtin_taxonomy("no_such_taxonomy") is None


def test_check_covers_lists_missing_values_with_counts_and_ignores_nulls():
    tax = from_mapping("c", {"a": ["ab"], "b": ["ab"]})
    tax.check_covers(["a", None, "b"], [3, 2, 1])
    with pytest.raises(anon_sql.TaxonomyError, match=r"2 value\(s\).*'z' \(5 records\), 'y' \(1 records\)"):
        tax.check_covers(["a", "y", None, "z"], [1, 1, 9, 5], column="c")


def test_check_covers_a_large_domain():
    """300,000 distinct values against as many leaves (an interval QI of an identifier-like number): the membership
    test is one sort (it compared every pair when the leaves were an object array: minutes), and a missing value is
    still named."""
    leaves = [str(i) for i in range(300_000)]
    tax = from_mapping("big", {v: ["*"] for v in leaves})
    tax.check_covers(np.arange(300_000))
    with pytest.raises(anon_sql.TaxonomyError, match=r"1 value\(s\).*300000 \(1 records\)"):
        tax.check_covers(np.arange(300_001))


def test_taxonomy_memo_follows_content_not_name():
    """The per-taxonomy leaf order and label index are memoized by content: a taxonomy replaced under the same name
    (anon-sql taxonomy load again) gets its own."""
    a = from_mapping("same", {"a": ["ab"], "b": ["ab"]})
    b = from_mapping("same", {"a": ["ab"], "b": ["ab"], "c": ["cd"]})
    assert domain("x", np.array(["a"], dtype=object), False, a).n == 2
    assert domain("x", np.array(["a"], dtype=object), False, b).n == 3
    assert cover(domain("x", np.array(["a"], dtype=object), False, b), ["cd", "ab"]).size.tolist() == [1, 2]
    d = domain("x", np.array(["a"], dtype=object), False, a)
    d.labels[0] = "mutated"                                      # a caller's arrays are its own
    assert domain("x", np.array(["a"], dtype=object), False, a).labels[0] != "mutated"


def test_no_catalog_is_a_clear_error_that_keeps_an_open_transaction_usable():
    con = duckdb.connect()
    con.execute("BEGIN TRANSACTION")
    with pytest.raises(SourceError, match="no anon catalog"):
        metrics.compute(con, "anything")
    assert con.execute("SELECT 42").fetchall() == [(42,)]
    con.execute("COMMIT")
