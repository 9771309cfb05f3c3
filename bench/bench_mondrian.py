"""Mondrian on Adult (8 QIs, spec/07) beside anonypy, and θ-sensitive k-anonymity on Adult scaled to 1M rows.

    python bench/bench_mondrian.py      # Mondrian k = 10, 5 (+ anonypy if importable), θ on Adult k = 4, 8, 16, θ 1M k = 8
    python bench/bench_mondrian.py --k 10 --no-anonypy --theta-rows 0
    python bench/bench_mondrian.py --theta-rows 1000000 --theta-k 8 --k --theta-adult
    python bench/bench_mondrian.py --k --theta-rows 0 --theta-adult 4 8 16   # θ on Adult itself (the spec/05 golden)
    python bench/bench_mondrian.py --k --theta-rows 0 --theta-adult 16 --theta-suppression 0.0097   # k = 16 suppressing

anon_sql runs twice per k: categorical_width "leaves" (default: the width is the NCP of the LCA it would release;
equal widths go to the larger distinct-value share) and "mixed" (mean of that and the distinct-value share).
Columns: "release s" = anon_sql.release end to end (plan, materialize, SQL verification, catalog); "plan s" = the
method alone. Both NCPs are spec/06 NCP scored here from the data and the hierarchy files, for every tool's
partition (numeric QIs (max − min)/range): NCP(set) releases a categorical class as the set of its values, what
anonypy releases and what its splits measure — (distinct − 1)/(leaves − 1), the comparison the target is judged
on; NCP(tax) releases the lowest common ancestor, what anon_sql releases — (leaves under it − 1)/(leaves − 1),
equal to anon_sql.metrics' "ncp" (asserted for the anon_sql rows).
The 1M-row θ input is Adult resampled with replacement (seed 42), age jittered by −2..2 and occupation re-drawn from
a random Adult record with the same education and sex (plain copies would put ~33 identical records side by side).
anonypy is only a benchmark peer: install it with `pip install anonypy` in the benchmark environment.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

import anon_sql
import anon_sql.errors
import anon_sql.metrics

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]
SA = "occupation"
WIDTHS = ("leaves", "mixed")


def adult_frame() -> pd.DataFrame:
    return duckdb.sql(f"SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim = ';', header = true)").df()


def policy(name: str, source: str, method: str, qis: list[str], **privacy) -> dict:
    attrs = {q: {"role": "quasi"} for q in qis}
    for q in qis:
        if q != "age":
            attrs[q]["taxonomy"] = str(ADULT / f"adult_hierarchy_{q}.csv")
    attrs[SA] = {"role": "sensitive"}
    return {"name": name, "source": source, "method": method, "default_role": "insensitive", "seed": 42,
            "attributes": attrs, "privacy": privacy}


def hierarchy(q: str) -> pd.DataFrame:
    """The ARX hierarchy file of a QI: one row per leaf, columns level0 (the leaf), level1, ..., the top."""
    h = pd.read_csv(ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str)
    return h.set_axis([f"level{j}" for j in range(h.shape[1])], axis=1)


def ncp(df: pd.DataFrame, qis: list[str], groups: np.ndarray) -> tuple[float, float]:
    """spec/06 NCP of a partition under the two ways of releasing a categorical class, scored here from the data
    and the hierarchy files (not by anon_sql): numeric QIs (max − min)/range either way; categorical QIs
    "set" = the set of its distinct values (anonypy's release, and the span its splits compare): (distinct − 1) /
    (leaves − 1), and "taxonomy" = the lowest common ancestor (anon_sql's release): (leaves under it − 1) /
    (leaves − 1); leaves = the hierarchy's (spec/06 |leaves(q)|; workclass has 8, the data 7)."""
    totals = np.zeros(2)
    g = pd.Series(groups, index=df.index)
    for q in qis:
        col = df[q]
        if pd.api.types.is_numeric_dtype(col) and not isinstance(col.dtype, pd.CategoricalDtype):
            by = col.groupby(g)
            per = (by.transform("max") - by.transform("min")) / (float(col.max() - col.min()) or 1.0)
            totals += float(per.sum())
            continue
        text = col.astype(str)
        h = hierarchy(q).set_index("level0")
        totals[0] += float(((text.groupby(g).transform("nunique") - 1) / (len(h) - 1)).sum())
        leaves = np.full(len(df), float(len(h)))                     # the top covers every leaf
        for j in reversed(range(1, h.shape[1])):                      # lowest level at which the class agrees
            lab = text.map(h[f"level{j}"])
            one = lab.groupby(g).transform("nunique").to_numpy() == 1
            size = lab.map(h[f"level{j}"].value_counts()).to_numpy(dtype=float)
            leaves = np.where(one, size, leaves)
        leaves = np.where(text.groupby(g).transform("nunique").to_numpy() == 1, 1.0, leaves)
        totals[1] += float(((leaves - 1) / (len(h) - 1)).sum())
    set_ncp, tax_ncp = totals / (len(df) * len(qis))
    return float(set_ncp), float(tax_ncp)


def timed_release(con, pol: dict) -> tuple[anon_sql.Release, float, float]:
    marks: dict[str, float] = {}
    t0 = time.perf_counter()
    rel = anon_sql.release(con, pol, progress=lambda m: marks.setdefault(m, time.perf_counter()))
    total = time.perf_counter() - t0
    plan = marks.get("materializing", t0) - marks.get("planning", t0)
    return rel, total, plan


def bench_mondrian(ks: list[int], with_anonypy: bool) -> list[dict]:
    df = adult_frame()
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("adult_df", df)
    con.execute("CREATE TABLE adult AS SELECT * FROM adult_df")
    rows = []
    anon_sql.release(con, policy("warm_up", "adult", "mondrian", QIS, k=max(ks)))   # one-time costs, untimed
    runs = [(k, w) for k in ks for w in WIDTHS]
    for k, width in runs:
        name = f"mondrian_k{k}_{width}"
        pol = policy(name, "adult", "mondrian", QIS, k=k)
        pol["method_params"] = {"categorical_width": width}
        rel, total, plan = timed_release(con, pol)
        product_ncp = anon_sql.metrics.compute(con, name, ["ncp"])["ncp"]
        pairs = con.execute(f'SELECT s.__row, a.ec_id FROM "{name}__source" s JOIN "{name}__assignment" a '
                            "USING (__row)").df()
        src = con.execute(f'SELECT * FROM "{name}__source"').df().set_index("__row").loc[pairs["__row"]]
        ncp_set, ncp_tax = ncp(src.reset_index(drop=True), QIS, pairs["ec_id"].to_numpy())
        assert abs(ncp_tax - product_ncp) < 1e-9, (ncp_tax, product_ncp)   # the bench's scoring = anon_sql.metrics
        rows.append({"tool": f"anon_sql mondrian ({width})", "k": k, "release s": total, "plan s": plan,
                     "classes": rel.plan["partitions"], "min class": int(rel.metrics["k"]), "NCP(tax)": ncp_tax,
                     "NCP(set)": ncp_set})
        if with_anonypy and width == WIDTHS[-1]:
            rows.append(bench_anonypy(df, k))
    con.close()
    return rows


def bench_anonypy(df: pd.DataFrame, k: int) -> dict:
    from anonypy import anonypy as ap, mondrian

    frame = df[QIS + [SA]].copy()
    for q in QIS:
        if q != "age":
            frame[q] = frame[q].astype("category")
    t0 = time.perf_counter()
    m = mondrian.Mondrian(frame, QIS, SA)
    parts = m.partition(k)
    ap.anonymize(frame, parts, QIS, SA)          # what Preserver.anonymize_k_anonymity does after partitioning
    seconds = time.perf_counter() - t0
    groups = np.empty(len(frame), dtype=np.int64)
    for i, p in enumerate(parts):               # labels for scoring only (not timed)
        groups[frame.index.get_indexer(p)] = i
    sizes = np.bincount(groups)
    ncp_set, ncp_tax = ncp(frame, QIS, groups)
    return {"tool": "anonypy 0.2.1", "k": k, "release s": seconds, "plan s": seconds, "classes": len(parts),
            "min class": int(sizes.min()), "NCP(tax)": ncp_tax, "NCP(set)": ncp_set}


def scaled_adult(rows: int, seed: int = 42) -> pd.DataFrame:
    """Adult resampled to ``rows`` (see the module docstring), seeded."""
    df = adult_frame()
    rng = np.random.default_rng(seed)
    big = df.iloc[rng.integers(0, len(df), rows)].reset_index(drop=True)
    big["age"] = np.clip(big["age"].to_numpy() + rng.integers(-2, 3, rows), 17, 90)
    pools = df.groupby(["education", "sex"]).indices
    key = pd.MultiIndex.from_frame(big[["education", "sex"]])
    occupation = df[SA].to_numpy()
    out = np.empty(rows, dtype=object)
    for (edu, sex), pool in pools.items():   # one vectorized draw per (education, sex) group
        m = (key.get_level_values(0) == edu) & (key.get_level_values(1) == sex)
        out[m] = occupation[pool[rng.integers(0, len(pool), int(m.sum()))]]
    big[SA] = out
    return big


def bench_theta(rows: int, k: int, mu: float) -> dict:
    big = scaled_adult(rows)
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("big_df", big)
    con.execute("CREATE TABLE adult_big AS SELECT * FROM big_df")
    con.unregister("big_df")
    qis = [q for q in QIS if q != "salary-class"]
    rel, total, plan = timed_release(con, policy(f"theta_k{k}", "adult_big", "theta", qis, k=k, theta={"mu": mu}))
    con.close()
    return {"tool": f"anon_sql theta μ={mu}", "k": k, "rows": rows, "release s": total, "plan s": plan,
            "classes": len(rel.classes), "swaps": rel.info["swaps"], "noise": rel.noise,
            "noise %": 100.0 * rel.noise / rows, "passed": rel.passed}


def bench_theta_adult(ks: list[int], mu: float, max_suppression: float = 0.0) -> list[dict]:
    """The spec/05 golden on Adult itself (7 QIs, occupation sensitive, the test's seed 11): noise, swaps, DCP, C_AVG."""
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("adult_df", adult_frame())
    con.execute("CREATE TABLE adult AS SELECT * FROM adult_df")
    qis = [q for q in QIS if q != "salary-class"]
    rows = []
    for k in ks:
        pol = policy(f"theta_adult_k{k}", "adult", "theta", qis, k=k, theta={"mu": mu})
        pol["seed"] = 11
        pol["privacy"]["max_suppression"] = max_suppression
        try:
            rel, total, plan = timed_release(con, pol)
        except anon_sql.errors.PrivacyRequirementError as e:
            rows.append({"k": k, "passed": False, "error": str(e)})
            continue
        n = rel.records_in
        m = anon_sql.metrics.compute(con, pol["name"], ["dcp", "cavg", "ncp"])
        rows.append({"k": k, "release s": total, "classes": len(rel.classes),
                     "below θ before swaps": rel.info["classes_below_theta_before"], "swaps": rel.info["swaps"],
                     "noise": rel.noise, "noise %": 100.0 * rel.noise / n, "suppressed": rel.suppressed,
                     "suppressed %": 100.0 * rel.suppressed / n, "DCP": m["dcp"],
                     "DCP vs N·k %": 100.0 * (m["dcp"] / (n * k) - 1), "CAVG": m["cavg"], "NCP": m["ncp"],
                     "passed": rel.passed})
    con.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="*", default=[10, 5])
    ap.add_argument("--no-anonypy", action="store_true")
    ap.add_argument("--theta-rows", type=int, default=1_000_000)
    ap.add_argument("--theta-k", type=int, default=8)
    ap.add_argument("--mu", type=float, default=0.6)
    ap.add_argument("--theta-adult", type=int, nargs="*", default=[4, 8, 16], help="k values for θ on Adult itself")
    ap.add_argument("--theta-suppression", type=float, default=0.0, help="max_suppression for θ on Adult itself")
    args = ap.parse_args()
    with_anonypy = not args.no_anonypy
    if with_anonypy:
        try:
            import anonypy  # noqa: F401
        except ImportError:
            print("anonypy is not installed: timing anon_sql alone")
            with_anonypy = False
    pd.set_option("display.width", 160)
    if args.k:
        out = pd.DataFrame(bench_mondrian(args.k, with_anonypy))
        print(f"Mondrian, Adult {len(adult_frame())} rows, QIs {QIS}, sensitive {SA}")
        print(out.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if with_anonypy:
            for k in args.k:
                b = out[(out.k == k) & (out.tool.str.startswith("anonypy"))].iloc[0]
                for _, a in out[(out.k == k) & (out.tool.str.startswith("anon_sql"))].iterrows():
                    print(f"k={k} {a['tool']}: release {b['release s'] / a['release s']:.0f}× faster end to end, "
                          f"plan {b['plan s'] / a['plan s']:.0f}× faster; NCP(set) {a['NCP(set)']:.4f} vs anonypy "
                          f"{b['NCP(set)']:.4f}")
    if args.theta_adult:
        res = pd.DataFrame(bench_theta_adult(args.theta_adult, args.mu, args.theta_suppression))
        print(f"\nθ-sensitive k-anonymity on Adult (7 QIs, sensitive {SA}, μ = {args.mu}; the paper: 0.021% noise)")
        print(res.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.theta_rows:
        res = pd.DataFrame([bench_theta(args.theta_rows, args.theta_k, args.mu)])
        print(f"\nθ-sensitive k-anonymity, Adult scaled to {args.theta_rows} rows (7 QIs, sensitive {SA})")
        print(res.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
