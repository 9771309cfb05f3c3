"""SDC on Spark (issue 26): the row-local masks and perturbations give the DuckDB release on Spark — the masks and
coding equal value for value (the macros' bodies run inline, recomputed here in Python too), noise by its
distributional contract (Spark draws a seeded normal per row from sha256, DuckDB from numpy) — and what needs DuckDB
is refused, naming it. Local suppression runs on Spark too (the heuristic on the driver over the counted
combinations)."""
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
def engines(spark_session):
    session = spark_session
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


HOSTILE = [None, "", "a", "@", "@@", "a@b", "a@b.c", "a.b@c", "a@b@c.d", "a@b.c@d", "..@..", "a@.", "a@b.",
           "é@ü.中", "x@y.z\n", "x@y.\nz", "x@y\n.z", "a@b.c\r\n", "q@w.e\u0301", "q.\u0301@w", "𝄞@𝄞.𝄞𝄞", "no at.all",
           "jo@mail.example.org", "ab", "abcd", "abcdef"]


def test_inline_partial_masks_on_spark_equal_the_oracles_on_hostile_text(engines):
    """The Spark spellings of partial / partial_email (concat, regexp_extract with Java's regex) on several '@',
    no '.', line breaks (Java's '$' differs from RE2's before a final line break), combining marks, astral
    characters, NULL: the Python oracles' values, as on DuckDB."""
    con, spark = engines
    spark.createDataFrame(pd.DataFrame({"i": range(len(HOSTILE)), "v": HOSTILE})).createOrReplaceTempView("hostile")
    masks = {"p": {"function": "partial", "keep_start": 2, "pad": "XX", "keep_end": 1},
             "e": {"function": "partial_email"}}
    query = exp_select(masks)
    s = spark.sql(render(query, "spark")).toPandas().sort_values("i")
    con.register("hostile", pd.DataFrame({"i": range(len(HOSTILE)), "v": HOSTILE}))
    d = con.execute(render(query)).df().sort_values("i")
    con.unregister("hostile")
    spark.catalog.dropTempView("hostile")
    assert values(s["p"]) == [partial_oracle(v, 2, "XX", 1) for v in HOSTILE] == values(d["p"])
    assert values(s["e"]) == [partial_email_oracle(v) for v in HOSTILE] == values(d["e"])


def exp_select(masks):
    from sqlglot import exp

    items = [exp_col("i")] + [exp.alias_(inline_mask(exp_col("v"), spec), name) for name, spec in masks.items()]
    return exp.select(*items).from_("hostile")


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
    assert con.execute(f"SELECT {render(keyed_digest(11, exp_lit('5')))}").fetchall()[0][0] == digest


def _whole_frame(n=300) -> pd.DataFrame:
    """The source of the whole-column kinds: ties (MDAV, ranking), NULLs, categories, dates and timestamps."""
    i = np.arange(n)
    rng = np.random.default_rng(3)
    return pd.DataFrame({
        "id": i, "age": 20 + (i * 7) % 50, "region": np.array(["north", "south", "east", "west"])[(i * 13) % 4],
        "income": np.where(i % 17 == 0, np.nan, ((i * 37) % 200) * 10.0),
        "x1": rng.normal(50, 10, n).round(1), "x2": rng.normal(0, 3, n).round(2),
        "w": ((i * 29) % 300).astype(float), "spend": rng.gamma(2.0, 30.0, n).round(2),
        "n1": rng.normal(10, 2, n), "n2": rng.normal(5, 1, n),
        "colour": np.where(i % 23 == 0, None, np.array(["red", "green", "blue", "black", "white"])[(i * 7) % 5]),
        "shape": np.array(["o", "x", "+"])[(i * 5) % 3], "customer": [f"c{k % 150}" for k in i],
        "name": [f"person {k % 80}" if k % 19 else None for k in i],
        "born": pd.to_datetime("1980-01-01") + pd.to_timedelta((i * 97) % 9000, unit="D"),
        "seen": pd.to_datetime("2024-03-01 08:00:00") + pd.to_timedelta((i * 7919) % 500000, unit="s")})


WHOLE = {
    "name": "sdc_spark_whole", "source": "whole", "method": "optimal", "seed": 13,
    "attributes": {
        "id": {"role": "insensitive"},
        "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20]}},
        "region": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "income": {"role": "sensitive", "perturb": {"kind": "microaggregation", "k": 3}},
        "x1": {"role": "insensitive", "perturb": {"kind": "microaggregation", "k": 4, "group": "g"}},
        "x2": {"role": "insensitive", "perturb": {"kind": "microaggregation", "k": 4, "group": "g"}},
        "w": {"role": "insensitive", "perturb": {"kind": "microaggregation", "k": 3, "method": "individual_ranking"}},
        "spend": {"role": "insensitive", "perturb": {"kind": "swap", "window": 5}},
        "n1": {"role": "insensitive", "perturb": {"kind": "noise", "scale": 0.2, "correlated": True, "group": "n"}},
        "n2": {"role": "insensitive", "perturb": {"kind": "noise", "scale": 0.2, "correlated": True, "group": "n"}},
        "colour": {"role": "insensitive", "perturb": {"kind": "pram", "retain": 0.6, "invariant": True}},
        "shape": {"role": "insensitive", "perturb": {"kind": "pram", "retain": 0.7}},
        "customer": {"role": "insensitive", "mask": {"function": "shuffle"}},
        "name": {"role": "insensitive", "mask": {"function": "fake", "provider": "first_name"}},
        "born": {"role": "insensitive", "mask": {"function": "dnoise", "interval": "30 days"}},
        "seen": {"role": "insensitive", "mask": {"function": "dnoise", "interval": "6 hours"}},
    },
    "privacy": {"k": 5},
}


@pytest.fixture(scope="module")
def whole(engines):
    con, spark = engines
    frame = _whole_frame()
    sdf = spark.createDataFrame(frame)
    sdf.withColumn("born", sdf["born"].cast("date")).createOrReplaceTempView("whole_src")
    con.register("whole_frame", frame)
    con.execute("CREATE TABLE whole AS SELECT * REPLACE (CAST(born AS DATE) AS born, CAST(seen AS TIMESTAMP) AS seen)"
                " FROM whole_frame")
    con.unregister("whole_frame")
    # one release per engine, read by the three tests below (a Spark release of every kind is slow on 2 shared cores)
    duck = anon_sql.release(con, WHOLE, replace=True)
    rel = aspark.release(spark, {**WHOLE, "source": "whole_src"}, replace=True)
    d = con.execute('SELECT * FROM "sdc_spark_whole"').df()
    s = spark.table("sdc_spark_whole").toPandas()
    yield duck, rel, d, s, frame
    spark.catalog.dropTempView("whole_src")


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in a canonical order, floats rounded to 9 significant digits (engines may differ in the last bits of
    a mean), every value as text."""
    out = frame.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(lambda v: None if v != v else f"{v:.9g}")
        elif pd.api.types.is_datetime64_any_dtype(out[c]):
            out[c] = out[c].map(lambda v: None if pd.isna(v) else pd.Timestamp(v).isoformat())
    out = out.astype(object).where(out.notna(), None).map(lambda v: "<NULL>" if v is None else str(v))
    return out.sort_values(list(out.columns), kind="stable").reset_index(drop=True)


def test_every_perturbation_and_mask_on_spark_equals_the_duckdb_release(whole):
    """MDAV (one column and a group), individual ranking, rank swap, correlated noise, PRAM (invariant too),
    shuffle, fake and dnoise: the Spark release holds DuckDB's rows, and records the same plan."""
    duck, rel, d, s, frame = whole
    assert duck.passed and rel.passed
    assert (duck.records_in, duck.records_out, duck.suppressed) == (rel.records_in, rel.records_out, rel.suppressed)
    assert duck.plan["sdc"]["perturbed"] == rel.plan["sdc"]["perturbed"]
    assert duck.plan["sdc"]["table_masks"] == rel.plan["sdc"]["table_masks"] == {"customer": "shuffle",
                                                                                  "name": "fake"}
    assert list(d.columns) == list(s.columns)
    s = s.assign(born=pd.to_datetime(s["born"]))
    d = d.assign(born=pd.to_datetime(d["born"]))
    pd.testing.assert_frame_equal(_canonical(d), _canonical(s))


def test_whole_column_kinds_on_spark_keep_their_contracts(whole):
    """Independent of DuckDB: MDAV groups of k … 2k − 1 keep the column's total, individual ranking keeps it too,
    swapping and shuffling permute the column, fake maps each value to one name, NULLs stay NULL."""
    _, _, _, s, frame = whole
    out = s.sort_values("id").reset_index(drop=True)
    src = frame.sort_values("id").reset_index(drop=True)
    assert out["income"].isna().tolist() == src["income"].isna().tolist()
    assert out["income"].sum() == pytest.approx(src["income"].sum(), rel=1e-12)
    sizes = out["income"].dropna().value_counts()
    assert sizes.min() >= 3
    g = out.groupby(["x1", "x2"]).size()
    assert g.min() >= 4 and g.max() <= 7
    assert out["x1"].sum() == pytest.approx(src["x1"].sum(), rel=1e-12)
    assert out["w"].sum() == pytest.approx(src["w"].sum(), rel=1e-12) and out["w"].value_counts().min() >= 3
    assert sorted(out["spend"]) == sorted(src["spend"]) and (out["spend"] != src["spend"]).mean() > 0.5
    assert sorted(out["customer"]) == sorted(src["customer"]) and (out["customer"] != src["customer"]).any()
    pairs = pd.DataFrame({"src": src["name"], "fake": out["name"]}).dropna()
    assert out["name"].isna().tolist() == src["name"].isna().tolist()
    assert pairs.groupby("src")["fake"].nunique().max() == 1
    assert out["colour"].isna().tolist() == src["colour"].isna().tolist()
    assert set(out["colour"].dropna()) <= set(src["colour"].dropna())


UTILITY = ("perturbation_il1s", "perturbation_means", "perturbation_variances", "perturbation_covariances",
           "perturbation_correlations")


def test_spark_release_records_the_duckdb_utility_metrics(whole):
    """IL1s and the moments kept, aggregated by Spark: DuckDB's values (every numeric kind in WHOLE is drawn the same
    on both engines), and IL1s and the mean changes recomputed with pandas from the source and the release."""
    duck, rel, _, s, frame = whole
    assert set(UTILITY) <= set(duck.metrics) and set(UTILITY) <= set(rel.metrics)
    for name in UTILITY:
        assert rel.metrics[name] == pytest.approx(duck.metrics[name], rel=1e-9, abs=1e-12), name
    assert rel.info["metric_directions"]["perturbation_il1s"] == "lower"
    util_d, util_s = duck.plan["sdc"]["utility"], rel.plan["sdc"]["utility"]
    assert util_s["columns"].keys() == util_d["columns"].keys()
    for column, stats in util_d["columns"].items():
        for key, value in stats.items():
            assert util_s["columns"][column][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (column, key)
    assert rel.records_out == rel.records_in      # nothing suppressed: the release aligns with the source by id
    out = s.sort_values("id").reset_index(drop=True)
    src = frame.sort_values("id").reset_index(drop=True)
    numeric = list(util_s["columns"])
    assert set(numeric) == {"income", "x1", "x2", "w", "spend", "n1", "n2"}
    terms, changes = [], []
    for c in numeric:
        x, y = src[c].astype(float), out[c].astype(float)
        ok = x.notna() & y.notna()
        terms.append((x[ok] - y[ok]).abs().sum() / (np.sqrt(2) * x[ok].std(ddof=1)) / ok.sum())
        changes.append(abs(y.mean() - x.mean()) / abs(x.mean()))
    assert rel.metrics["perturbation_il1s"] == pytest.approx(np.mean(terms), rel=1e-9)
    assert rel.metrics["perturbation_means"] == pytest.approx(np.mean(changes), rel=1e-9)


def _dnoise_oracle(value, seed: int, seconds: float, date: bool):
    """anon.dnoise's seeded draw recomputed in Python: u from sha256(seed ‖ chr(31) ‖ text), the offset in µs
    rounded half to even; a DATE moves by whole days (floor)."""
    text = value.strftime("%Y-%m-%d") if date else value.strftime("%Y-%m-%d %H:%M:%S")
    u = int(hashlib.sha256(f"{seed}\x1f{text}".encode()).hexdigest()[:13], 16) / 2**52
    offset = round((2 * u - 1) * seconds * 1_000_000)
    if date:
        return (value + pd.Timedelta(days=offset // 86_400_000_000)).date()
    return value + pd.Timedelta(microseconds=offset)


def test_dnoise_on_spark_is_the_macro_recomputed(whole):
    _, _, _, s, frame = whole
    out = s.sort_values("id").reset_index(drop=True)
    src = frame.sort_values("id").reset_index(drop=True)
    want_born = [_dnoise_oracle(v, 13, 30 * 86400, True) for v in src["born"]]
    assert [pd.Timestamp(v).date() for v in out["born"]] == want_born
    want_seen = [_dnoise_oracle(v, 13, 6 * 3600, False) for v in src["seen"]]
    assert [pd.Timestamp(v) for v in out["seen"]] == want_seen
    shift = (pd.to_datetime(out["seen"]) - src["seen"]).abs()
    assert shift.max() <= pd.Timedelta(hours=6) and shift.min() >= pd.Timedelta(0)


def _suppression_frame(n=400) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"id": np.arange(n), "age": rng.integers(20, 70, n), "sex": rng.choice(["m", "f"], n),
                          "zip": rng.choice(list("abcdefg"), n), "x": rng.normal(size=n)})
    frame.loc[::37, "zip"] = None     # source NULLs: suppressed already, they match any value
    return frame


SUPPRESSION = {"name": "sdc_spark_ls", "source": "ls_src", "method": "local_suppression",
               "default_role": "insensitive", "privacy": {"k": 3},
               "attributes": {"id": {"role": "insensitive"}, "age": {"role": "quasi"}, "sex": {"role": "quasi"},
                              "zip": {"role": "quasi"}},
               "method_params": {"importance": {"sex": 2, "zip": 1}}}


def _wildcard_matches(frame: pd.DataFrame, quasi: list[str]) -> np.ndarray:
    """Brute force: for each released row, the rows it matches when '*' matches anything."""
    cells = frame[quasi].astype(str).to_numpy()
    star = cells == "*"
    same = (cells[:, None, :] == cells[None, :, :]) | star[:, None, :] | star[None, :, :]
    return same.all(axis=2).sum(axis=1)


def test_local_suppression_on_spark_suppresses_the_duckdb_cells(engines):
    """The combinations are counted in Spark and the heuristic runs on the driver: the same cells as on DuckDB,
    whatever the rows' order in Spark (two orders, CI time), and k-anonymous under the wildcard rule by brute
    force."""
    con, spark = engines
    frame = _suppression_frame()
    con.register("ls_frame", frame)
    con.execute("CREATE OR REPLACE TABLE ls_src AS SELECT * FROM ls_frame")
    con.unregister("ls_frame")
    duck = anon_sql.release(con, SUPPRESSION, replace=True)
    d = con.execute('SELECT * FROM "sdc_spark_ls" ORDER BY id').df()
    for order in (frame.iloc[::-1], frame.sample(frac=1.0, random_state=5)):   # neither is DuckDB's order
        spark.createDataFrame(order.reset_index(drop=True)).createOrReplaceTempView("ls_src")
        rel = aspark.release(spark, SUPPRESSION, replace=True)
        s = spark.table("sdc_spark_ls").toPandas().sort_values("id").reset_index(drop=True)
        assert rel.passed and duck.passed
        for key in ("suppressed_cells", "suppressed_cells_total", "suppression_order", "rounds"):
            assert rel.info[key] == duck.info[key], key
        assert rel.info["suppressed_cells_total"] > 0
        assert (rel.records_in, rel.records_out) == (400, 400)
        pd.testing.assert_frame_equal(d[["id", "age", "sex", "zip"]].astype(str),
                                      s[["id", "age", "sex", "zip"]].astype(str))
        assert _wildcard_matches(s, ["age", "sex", "zip"]).min() >= 3
        assert (s["zip"] == "*").sum() >= frame["zip"].isna().sum()
    spark.catalog.dropTempView("ls_src")


def test_local_suppression_on_spark_refuses_other_models_leaving_the_session_unchanged(engines):
    _, spark = engines
    spark.createDataFrame(_suppression_frame(50)).createOrReplaceTempView("ls_bad")
    before = {t.name for t in spark.catalog.listTables()}
    policy = {**SUPPRESSION, "name": "sdc_spark_ls_bad", "source": "ls_bad",
              "attributes": {**SUPPRESSION["attributes"], "x": {"role": "sensitive"}},
              "privacy": {"k": 3, "l_diversity": {"l": 2}}}
    with pytest.raises(PolicyError, match="verifies k-anonymity only"):
        aspark.release(spark, policy, replace=True)
    assert {t.name for t in spark.catalog.listTables()} == before
    spark.catalog.dropTempView("ls_bad")


def exp_col(name):
    from sqlglot import exp

    return exp.column(name, quoted=True)


def exp_lit(value):
    from sqlglot import exp

    return exp.Literal.string(value)


def parse_duck(sql):
    import sqlglot

    return sqlglot.parse_one(sql, read="duckdb")
