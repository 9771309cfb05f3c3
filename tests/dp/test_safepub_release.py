"""SafePub releases (spec/09, issue 25 item 4): seeded sampling in SQL, generalization at a given level vector,
suppression of every class below the k that ε and δ imply; ε, δ, β and k in the catalog; clear refusals.
Oracles: pandas recomputes the classes and the suppression from the sample through the taxonomy CSVs; the sample's
size and its independence over identical rows are checked against Binomial(n, β)."""
from __future__ import annotations

import math
from importlib import resources

import duckdb
import pandas as pd
import pytest

import anon_sql
from anon_sql.cli.demo import load_demo_data
from anon_sql.errors import PolicyError
from anon_sql.runner.sampling import sampled_relation
from anon_sql.common.sqlbuild import render, table
from sqlglot import exp

LEVELS = {"age": 3, "sex": 0, "race": 0, "marital-status": 1, "education": 2}
SEED = 8675309


def _policy(name="adult_dp", seed=SEED, epsilon=2.0, delta=1e-5, **extra) -> dict:
    attrs = {q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in LEVELS}
    attrs["patient_id"] = {"role": "identifier"}
    d = {"name": name, "source": "adult_sample", "method": "levels", "seed": seed, "default_role": "insensitive",
         "attributes": attrs, "privacy": {"differential_privacy": {"epsilon": epsilon, "delta": delta}},
         "method_params": {"levels": dict(LEVELS)}}
    d.update(extra)
    return d


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    load_demo_data(c, "adult_sample")
    yield c
    c.close()


def _taxonomy_map(q: str, level: int) -> dict[str, str]:
    text = resources.files("anon_sql.taxonomies").joinpath(f"adult_{q}.csv").read_text(encoding="utf-8")
    rows = [line.split(";") for line in text.splitlines() if line.strip()]
    return {r[0]: r[level] for r in rows}


def test_release_suppresses_every_class_below_k_and_records_the_parameters(con):
    rel = anon_sql.release(con, _policy(epsilon=1.0, delta=1e-5))
    assert rel.policy.privacy.k == 62                         # spec/09 golden value for (1, 1e-5)
    sizes = con.execute('SELECT count(*) FROM adult_dp GROUP BY ALL ORDER BY 1').fetchall()
    assert sizes and min(s for (s,) in sizes) >= 62
    recorded = dict(con.execute("SELECT metric, value FROM anon.metrics WHERE release = 'adult_dp' AND metric "
                                "LIKE 'dp_%'").fetchall())
    assert recorded["dp_epsilon"] == 1.0 and recorded["dp_delta"] == 1e-5 and recorded["dp_k"] == 62
    assert recorded["dp_beta"] == pytest.approx(1 - math.exp(-1.0))
    # pandas oracle: the sample, generalized through the taxonomy files, classes below k dropped
    sample = con.execute(render(exp.select("*").from_(sampled_relation(
        table("adult_sample"), list(con.execute("SELECT * FROM adult_sample LIMIT 0").df().columns),
        recorded["dp_beta"], SEED)))).df()
    assert len(sample) == recorded["dp_sampled"]
    general = pd.DataFrame({q: sample[q].astype(str).map(_taxonomy_map(q, lvl)) for q, lvl in LEVELS.items()})
    counts = general.value_counts()
    kept = counts[counts >= 62]
    assert len(kept) >= 3 and (counts < 62).sum() >= 3       # both sides of k are exercised
    assert rel.records_out == int(kept.sum()) and len(rel.classes) == len(kept)
    assert rel.records_in == 3000 and rel.suppressed == 3000 - int(kept.sum())
    assert rel.suppressed == recorded["dp_unsampled"] + int(counts[counts < 62].sum())
    checks = rel.checks.set_index("check")
    assert checks.loc["safepub_k", "passed"] and checks.loc["reconciliation", "passed"]
    assert "patient_id" not in con.execute("SELECT * FROM adult_dp LIMIT 0").df().columns
    assert anon_sql.check(con, "adult_dp")["passed"].all()


def test_sample_size_is_binomial_and_identical_rows_are_drawn_independently():
    con = duckdb.connect()
    con.execute("CREATE TABLE same AS SELECT 'x' AS a, 1 AS b FROM range(20000)")
    beta = 1 - math.exp(-2.0)
    sizes = []
    for seed in (1, 2, 3):
        q = exp.select(exp.Count(this=exp.Star())).from_(sampled_relation(table("same"), ["a", "b"], beta, seed))
        sizes.append(con.execute(render(q)).fetchall()[0][0])
    sd = math.sqrt(20000 * beta * (1 - beta))
    for n in sizes:
        assert abs(n - 20000 * beta) < 5 * sd, sizes
    assert len(set(sizes)) > 1            # the seed changes the draws


def test_same_seed_same_release_other_seed_other_sample(con):
    a = anon_sql.release(con, _policy("a"))
    b = anon_sql.release(con, _policy("b"))
    c = anon_sql.release(con, _policy("c", seed=SEED + 1))
    assert a.records_out > 0
    assert a.info["differential_privacy"] == b.info["differential_privacy"]
    assert con.execute("SELECT * FROM a EXCEPT ALL SELECT * FROM b").fetchall() == []
    assert a.info["differential_privacy"]["dp_sampled"] != c.info["differential_privacy"]["dp_sampled"] or (
        con.execute("SELECT count(*) FROM (SELECT * FROM a EXCEPT ALL SELECT * FROM c)").fetchall()[0][0] > 0)


@pytest.mark.parametrize("change, words", [
    ({"seed": 0}, "seed"),
    ({"seed": 2 ** 64 + 1}, "seed = 18446744073709551617 is outside a 64-bit integer"),   # round 12, M28
    ({"seed": -2 ** 63 - 1}, "outside a 64-bit integer"),
    ({"method": "optimal", "method_params": {}}, "method = \"levels\""),
    ({"privacy": {"differential_privacy": {"epsilon": 2.0, "delta": 1e-5, "search_share": 0.1}}}, "search"),
    ({"privacy": {"differential_privacy": {"epsilon": 2.0, "delta": 1.5}}}, "delta"),
    ({"privacy": {"differential_privacy": {"epsilon": 0, "delta": 1e-5}}}, "epsilon"),
    ({"privacy": {"differential_privacy": {"epsilon": 2.0}}}, "delta"),
])
def test_refusals_name_the_key_and_write_nothing(con, change, words):
    with pytest.raises(PolicyError, match=words):
        anon_sql.release(con, {**_policy(), **change})
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult_dp'").fetchall() == [(0,)]


def test_m28_the_seed_is_not_one_mask_over_the_public_draws(con):
    """Round 12's M28 (SP2): DuckDB's ``hash(record, seed)`` is the seed-0 hash XOR one mask, so at β = 1/2 a seed
    kept either seed 0's records or exactly the others, and an attacker read the mask off the released counts. With
    keyed sha256 draws, two seeds keep independent halves: each overlaps the seed-0 sample in about a quarter of the
    records, never none or all (2^64 + 1 included, which DuckDB's hash read as seed 0: SP1)."""
    rel = table("adult_sample")
    columns = [r[0] for r in con.execute("DESCRIBE adult_sample").fetchall()]
    n = con.execute("SELECT count(*) FROM adult_sample").fetchall()[0][0]

    def sample(seed: int) -> set:
        kept = exp.select(exp.Star()).from_(sampled_relation(rel, columns, 0.5, seed))
        return set(con.execute(render(kept)).fetchall())

    public = sample(0)
    for seed in (1, 77, 3141592653589793, 2 ** 64 + 1):
        overlap = len(sample(seed) & public) / n
        assert 0.2 < overlap < 0.3, (seed, overlap)


def test_compile_refuses_what_would_skip_the_sample(con):
    with pytest.raises(PolicyError, match="compiles only for dialect 'duckdb'"):
        anon_sql.compile(_policy())
    with pytest.raises(PolicyError, match="compiles only"):
        anon_sql.compile(_policy(), dialect="spark", con=con)
    sql = "\n".join(anon_sql.compile(_policy(), con=con))
    assert "HASH(" in sql.upper() and str(SEED) in sql


def test_policy_round_trips_with_the_key():
    p = anon_sql.Policy.from_dict(_policy())
    assert p.privacy.differential_privacy == {"epsilon": 2.0, "delta": 1e-5}
    assert anon_sql.Policy.from_toml(p.to_toml()).privacy.differential_privacy["delta"] == 1e-5


def test_the_shared_file_leaves_the_seed_out_and_still_checks(con, tmp_path):
    import json

    anon_sql.release(con, _policy())
    target = tmp_path / "adult_dp.duckdb"
    anon_sql.export(con, "adult_dp", str(target))
    shared = duckdb.connect(str(target), read_only=True)
    policy = json.loads(shared.execute("SELECT policy FROM adult_dp__metadata").fetchall()[0][0])
    shared.close()
    assert "seed" not in policy and policy["privacy"]["differential_privacy"]["epsilon"] == 2.0
    assert str(SEED) not in target.read_bytes().decode("latin-1")
    assert anon_sql.check(duckdb.connect(str(target), read_only=True), "adult_dp")["passed"].all()


def test_a_larger_k_given_is_kept_and_the_sql_form_releases_the_same(con):
    rel = anon_sql.release(con, {**_policy("bigger"), "privacy": {
        "k": 170, "differential_privacy": {"epsilon": 2.0, "delta": 1e-5}}})
    assert rel.policy.privacy.k == 170 and len(rel.classes) and rel.classes["__size"].min() >= 170
    sql = anon_sql.Policy.from_dict(_policy("via_sql")).to_sql()
    assert "differential_privacy = {'epsilon': 2.0, 'delta': 1e-05}" in sql
    [result] = anon_sql.execute(con, sql)
    direct = anon_sql.release(con, _policy("direct"))
    assert result.value.records_out == direct.records_out and result.value.suppressed == direct.suppressed
