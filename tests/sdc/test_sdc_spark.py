"""SDC on Spark (issue 26): the row-local masks and perturbations give the DuckDB release on Spark — the masks and
coding equal value for value (the macros' bodies run inline, recomputed here in Python too), noise by its
distributional contract (Spark draws a seeded normal per row from sha256, DuckDB from numpy) — and what needs DuckDB
is refused, naming it."""
from __future__ import annotations

import hashlib

import duckdb
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

import anon_sql  # noqa: E402
from anon_sql import spark as aspark  # noqa: E402
from anon_sql.common.sqlbuild import render  # noqa: E402
from anon_sql.errors import PolicyError  # noqa: E402
from anon_sql.sdc.portable import hash_normal, inline_mask, keyed_digest, row_content_key  # noqa: E402
from test_sdc_masking_oracle import hash_oracle, partial_email_oracle, partial_oracle  # noqa: E402

pytestmark = [pytest.mark.spark]
N = 600


def _frame(n=N) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame({
        "id": i, "email": [f"user{k}@mail.example.org" if k % 9 else f"bad{k}" for k in i],
        "card": ["41112222" + str(k).zfill(8) if k % 11 else None for k in i],
        "customer": [f"c{k}" for k in i], "age": 20 + (i * 7) % 50,
        "region": np.array(["north", "south", "east", "west"])[(i * 13) % 4],
        "income": ((i * 37) % 1000) * 1.5 + 1000.0, "spend": (i * 11) % 97 + 0.5 * i,
        "amount": ((i * 5) % 400).astype(np.int64)})


POLICY = {
    "name": "sdc_spark", "source": "people", "method": "optimal", "seed": 7,
    "attributes": {
        "id": {"role": "identifier"},
        "email": {"role": "identifier", "mask": {"function": "partial_email"}},
        "customer": {"role": "identifier", "mask": {"function": "hash", "salt": "pepper"}},
        "card": {"role": "insensitive", "mask": {"function": "partial", "keep_start": 2, "pad": "XXXX", "keep_end": 2}},
        "amount": {"role": "insensitive", "mask": {"function": "noise", "ratio": 0.1}},
        "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20]}},
        "region": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "income": {"role": "sensitive", "perturb": {"kind": "top_code", "above": 2200, "replacement": 2500}},
        "spend": {"role": "insensitive", "perturb": {"kind": "bottom_code", "below": 20}},
    },
    "privacy": {"k": 5},
}


@pytest.fixture(scope="module")
def engines():
    session = aspark.local_session(cores=2, shuffle_partitions=2)
    frame = _frame()
    session.createDataFrame(frame).createOrReplaceTempView("people")
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("people_frame", frame)
    con.execute("CREATE TABLE people AS SELECT * FROM people_frame")
    con.unregister("people_frame")
    yield con, session
    con.close()
    session.catalog.dropTempView("people")


def values(column) -> list:
    """A column's values with pandas' missing markers as None."""
    return [v if isinstance(v, str) else None for v in column]


def texts(items) -> list[str]:
    """A multiset of texts (None included) in a canonical order."""
    return sorted(str(v) if isinstance(v, str) else "<NULL>" for v in items)


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.astype(object).where(frame.notna(), None).astype(str)
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


def test_masks_and_coding_on_spark_equal_the_duckdb_release(engines):
    con, spark = engines
    duck = anon_sql.release(con, POLICY, replace=True)
    rel = aspark.release(spark, POLICY, replace=True)
    assert duck.passed and rel.passed
    assert (duck.records_in, duck.records_out, duck.suppressed) == (rel.records_in, rel.records_out, rel.suppressed)
    assert duck.plan["sdc"]["perturbed"] == rel.plan["sdc"]["perturbed"]
    d = con.execute('SELECT * FROM "sdc_spark"').df()
    s = spark.table("sdc_spark").toPandas()
    assert list(d.columns) == list(s.columns)
    # noise of a value: the same float on both engines up to the last bits of the arithmetic
    np.testing.assert_allclose(np.sort(d["amount"].astype(float)), np.sort(s["amount"].astype(float)), rtol=1e-12)
    pd.testing.assert_frame_equal(_rows(d.drop(columns="amount")), _rows(s.drop(columns="amount")))
    # and against Python: the masks recomputed from the source without SQL
    src = _frame()
    assert texts(s["email"]) == texts(partial_email_oracle(v) for v in values(src["email"]))
    assert texts(s["customer"]) == texts(hash_oracle(v, "pepper") for v in values(src["customer"]))
    assert texts(s["card"]) == texts(partial_oracle(v, 2, "XXXX", 2) for v in values(src["card"]))
    want = np.where(src["income"] > 2200, 2500, src["income"])
    assert sorted(s["income"].astype(float)) == sorted(want.astype(float))
    assert rel.plan["sdc"]["perturbed"]["income"]["coded"] == int((src["income"] > 2200).sum())


def test_noise_on_spark_keeps_the_distributional_contract(engines):
    """e = spend' − spend has mean ≈ 0 and sd ≈ scale · sd(spend) (what DuckDB's numpy draws promise), NULLs stay,
    and the same seed gives the same release; another seed other draws."""
    con, spark = engines
    policy = {**POLICY, "name": "sdc_spark_noise", "method": "optimal",
              "attributes": {**POLICY["attributes"], "spend": {"role": "insensitive",
                                                                "perturb": {"kind": "noise", "scale": 0.5}},
                             "id": {"role": "insensitive"}}}
    rel = aspark.release(spark, policy, replace=True)
    out = spark.table("sdc_spark_noise").toPandas().sort_values("id")
    src = _frame().sort_values("id")
    e = out["spend"].to_numpy(float) - src["spend"].to_numpy(float)
    sd = src["spend"].std(ddof=1)
    assert rel.plan["sdc"]["perturbed"]["spend"]["sd"] == pytest.approx(sd)
    # N = 600: the sample mean of e is within 4 standard errors of 0, its sd within 15 % of 0.5 σ
    assert abs(e.mean()) < 4 * 0.5 * sd / np.sqrt(N)
    assert e.std(ddof=1) == pytest.approx(0.5 * sd, rel=0.15)
    again = aspark.release(spark, policy, replace=True)
    assert again.plan == rel.plan
    np.testing.assert_array_equal(spark.table("sdc_spark_noise").toPandas().sort_values("id")["spend"], out["spend"])
    other = aspark.release(spark, {**policy, "seed": 8}, replace=True)
    assert other.passed
    assert not np.allclose(spark.table("sdc_spark_noise").toPandas().sort_values("id")["spend"], out["spend"])


def test_the_portable_draws_are_the_same_on_both_engines(engines):
    """The sha256 normal and the inline noise mask: one expression, the same values on DuckDB and Spark (and the
    inline mask equals the persisted macro's seeded overload)."""
    con, spark = engines
    z = hash_normal(keyed_digest(7, row_content_key(["id", "card"]), "spend"))
    noise = inline_mask(exp_col("amount"), {"function": "noise", "ratio": 0.3}, seed=11)
    query = f"SELECT id, {render(z)} AS z, {render(noise)} AS n FROM people"
    d = con.execute(query + " ORDER BY id").df()
    s = spark.sql(render(parse_duck(query), "spark")).toPandas().sort_values("id").reset_index(drop=True)
    np.testing.assert_allclose(d["z"], s["z"], rtol=1e-12)
    np.testing.assert_allclose(d["n"], s["n"], rtol=1e-12)
    macro = con.execute("SELECT anon.noise(amount, 0.3, 11, amount) FROM people ORDER BY id").fetchnumpy()
    np.testing.assert_allclose(d["n"], list(macro.values())[0], rtol=1e-12)
    assert abs(d["z"].mean()) < 0.2 and d["z"].std() == pytest.approx(1, rel=0.15)
    digest = hashlib.sha256(b"11\x1f" + b"5").hexdigest()
    assert con.execute(f"SELECT {render(keyed_digest(11, exp_lit('5')))}").fetchone()[0] == digest


@pytest.mark.parametrize("attribute, spec, method", [
    ("income", {"perturb": {"kind": "microaggregation", "k": 3}}, None),
    ("income", {"perturb": {"kind": "noise", "scale": 0.1, "correlated": True}}, None),
    ("region", {"perturb": {"kind": "pram", "retain": 0.8}}, None),
    ("spend", {"perturb": {"kind": "swap", "window": 5}}, None),
    ("spend", {"mask": {"function": "shuffle"}}, None),
    ("card", {"mask": {"function": "dnoise", "interval": "3 days"}}, None),
    (None, None, "local_suppression")])
def test_what_needs_duckdb_is_refused_on_spark_naming_it(engines, attribute, spec, method):
    _, spark = engines
    attributes = dict(POLICY["attributes"])
    if attribute:
        base = {k: v for k, v in attributes[attribute].items() if k not in ("perturb", "mask")}
        attributes[attribute] = {**base, **spec}
    policy = {**POLICY, "name": "sdc_spark_refused", "attributes": attributes}
    if method:
        policy = {**policy, "method": method}
    before = {t.name for t in spark.catalog.listTables()}
    with pytest.raises(PolicyError, match="not available on spark.*run on DuckDB"):
        aspark.release(spark, policy, replace=True)
    assert {t.name for t in spark.catalog.listTables()} == before


def exp_col(name):
    from sqlglot import exp

    return exp.column(name, quoted=True)


def exp_lit(value):
    from sqlglot import exp

    return exp.Literal.string(value)


def parse_duck(sql):
    import sqlglot

    return sqlglot.parse_one(sql, read="duckdb")
