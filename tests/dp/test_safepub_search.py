"""SafePub's DP lattice search (spec/09 step 2): the exponential mechanism over every level vector, as OpenDP's
report-noisy-max with the search's share of ε. Checked: the chosen node is in the lattice and its release passes
its checks; the search's ε is recorded; with a large ε it finds the best node (an exhaustive numpy scoring of the
lattice is the oracle); with a tiny ε the choice is close to uniform over the candidates (chi-square); the privacy
map reports what is charged; bad combinations are refused naming the key."""
from __future__ import annotations

import itertools
import math
from importlib import resources

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sqlglot import exp

import anon_sql
from anon_sql.cli.demo import load_demo_data
from anon_sql.common.sqlbuild import render, table
from anon_sql.errors import PolicyError
from anon_sql.methods import dp_search
from anon_sql.methods.dp_search import (choose_index, generalization_intensity, noisy_max_measurement)
from anon_sql.models.safepub import safepub_parameters
from anon_sql.runner.sampling import sampled_relation

QI = {"age": 4, "sex": 1, "race": 1}   # taxonomy heights of the demo's adult_* files (checked below)
SEED = 424242


def _policy(name="adult_search", epsilon=2.0, share=0.5, **extra) -> dict:
    attrs = {q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QI}
    attrs["patient_id"] = {"role": "identifier"}
    d = {"name": name, "source": "adult_sample", "method": "levels", "seed": SEED, "default_role": "insensitive",
         "attributes": attrs,
         "privacy": {"differential_privacy": {"epsilon": epsilon, "delta": 1e-5, "search_share": share}}}
    d.update(extra)
    return d


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    load_demo_data(c, "adult_sample")
    yield c
    c.close()


def test_search_release_is_valid_and_records_the_search_epsilon(con):
    rel = anon_sql.release(con, _policy())
    params = safepub_parameters(2.0, 1e-5, 0.5)
    info = rel.info["differential_privacy"]
    assert info["dp_epsilon_search"] == pytest.approx(1.0) and info["dp_epsilon_anon"] == pytest.approx(1.0)
    assert rel.policy.privacy.k == params.k
    recorded = dict(con.execute("SELECT metric, value FROM anon.metrics WHERE release = 'adult_search' AND metric "
                                "LIKE 'dp_epsilon%'").fetchall())
    assert recorded["dp_epsilon_search"] == pytest.approx(1.0)
    levels = rel.plan if isinstance(rel.plan, dict) else rel.plan.levels
    assert set(levels) == set(QI) and all(0 <= levels[q] for q in QI)
    assert rel.checks["passed"].all()
    sizes = con.execute("SELECT count(*) FROM adult_search GROUP BY ALL").fetchall()
    assert all(s >= params.k for (s,) in sizes)
    search = rel.info["dp_search"]
    assert search["candidates"] == math.prod(h + 1 for h in QI.values())
    assert search["epsilon_search"] <= 1.0 + 1e-12 and search["sensitivity"] == params.k
    assert "score" not in search and "best_score" not in search   # counts of the sample: not DP, not reported


def test_large_epsilon_finds_the_best_node():
    """Exhaustive scores → argmax; at ε = 1e6 · sensitivity the noise cannot reorder a gap of 1."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        scores = rng.integers(0, 1000, size=30).astype(float)
        scores[rng.integers(30)] = 2000.0
        index, _, spent = choose_index(scores, sensitivity=50.0, epsilon=1e7)
        assert index == int(np.argmax(scores)) and spent <= 1e7


def test_tiny_epsilon_is_close_to_uniform():
    scores = [0.0, 100.0, 200.0, 300.0, 400.0, 500.0]
    draws = [choose_index(scores, sensitivity=100.0, epsilon=1e-6)[0] for _ in range(3000)]
    counts = np.bincount(draws, minlength=len(scores))
    assert stats.chisquare(counts).pvalue > 1e-4, counts


def test_two_candidates_follow_the_exponential_noise_law():
    """Scores 0 and 1, scale 1 (sensitivity 1, ε = 1): with i.i.d. Exp(1) noise the worse one wins with
    probability ½·e^(−1) ≈ 0.184 (binomial test over 3000 draws)."""
    draws = [choose_index([0.0, 1.0], sensitivity=1.0, epsilon=1.0)[0] for _ in range(3000)]
    worse = draws.count(0)
    assert stats.binomtest(worse, len(draws), 0.5 * math.exp(-1)).pvalue > 1e-4, worse


def test_privacy_map_is_sensitivity_over_scale_for_monotone_scores():
    m = noisy_max_measurement(114.0 / 0.5)
    assert m.map(114.0) <= 0.5 + 1e-12
    assert choose_index([1.0, 2.0], 114.0, 0.5)[2] <= 0.5


def test_intensity():
    assert generalization_intensity((0, 0), (4, 1)) == 0.0
    assert generalization_intensity((4, 1), (4, 1)) == 1.0
    assert generalization_intensity((2, 0, 3), (4, 0, 3)) == pytest.approx((0.5 + 0 + 1) / 3)


@pytest.mark.parametrize("change, words", [
    ({"method_params": {"levels": {"age": 1}}}, "levels must be left out"),
    ({"privacy_unit": "patient_id"}, "privacy_unit"),
])
def test_refusals(con, change, words):
    with pytest.raises(PolicyError, match=words):
        anon_sql.release(con, {**_policy(), **change})
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult_search'").fetchall() == [(0,)]


def _taxonomy_map(q: str, level: int) -> dict[str, str]:
    text = resources.files("anon_sql.taxonomies").joinpath(f"adult_{q}.csv").read_text(encoding="utf-8")
    return {r[0]: r[level] for r in (line.split(";") for line in text.splitlines() if line.strip())}


def test_scores_match_a_pandas_recomputation_on_the_sample(con, monkeypatch):
    """The scores the mechanism sees, captured at choose_index, against pandas: the seeded sample generalized
    through the taxonomy CSVs at every node, classes below k dropped, released × (1 − mean level/height)."""
    seen = {}

    def capture(scores, sensitivity, epsilon):
        seen.update(scores=np.asarray(scores, dtype=float), sensitivity=sensitivity, epsilon=epsilon)
        return choose_index(scores, sensitivity, epsilon)

    monkeypatch.setattr(dp_search, "choose_index", capture)
    rel = anon_sql.release(con, _policy())
    params = safepub_parameters(2.0, 1e-5, 0.5)
    assert seen["sensitivity"] == params.k and seen["epsilon"] == pytest.approx(1.0)
    columns = list(con.execute("SELECT * FROM adult_sample LIMIT 0").df().columns)
    sample = con.execute(render(exp.select("*").from_(sampled_relation(table("adult_sample"), columns, params.beta,
                                                                        SEED)))).df()
    assert len(sample) == rel.info["differential_privacy"]["dp_sampled"]
    heights = [QI[q] for q in QI]
    nodes = sorted(itertools.product(*[range(h + 1) for h in heights]), key=sum)   # total level, then lexicographic
    expected = []
    for node in nodes:
        general = pd.DataFrame({q: sample[q].astype(str).map(_taxonomy_map(q, lvl)) for q, lvl in zip(QI, node)})
        counts = general.value_counts(dropna=False)
        released = int(counts[counts >= params.k].sum())
        expected.append(released * (1 - np.mean([lvl / h for lvl, h in zip(node, heights)])))
    np.testing.assert_allclose(seen["scores"], expected)
    assert len(set(expected)) > 3   # the scores differ: the test can tell nodes apart
