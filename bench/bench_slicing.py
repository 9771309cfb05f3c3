"""Seed 001 evaluation on Adult-7 (spec/02 §3): classification accuracy with occupation as target, NCP vs k and run
time vs k, slicing / attribute_focused against Mondrian.

    python bench/bench_slicing.py                       # everything below, default grids
    python bench/bench_slicing.py --part accuracy --folds 10
    python bench/bench_slicing.py --part ncp --k 5 10 25 50 100
    python bench/bench_slicing.py --part suppression    # l = 5, 8, 10: buckets, suppressed records, time

Adult-7 = {age, workclass, marital-status, race, sex, education} + occupation (sensitive); the shared Adult file has
9 columns (30,162 rows), so Adult-15 (15 attributes) cannot be built. Accuracy: anon_sql.metrics.classification, 10-fold
stratified CV on the released table (the paper's protocol), decision tree (c45: entropy criterion, J48's split rule)
and naive Bayes, features = the six Adult-7 QIs as released. NCP: Mondrian's from anon_sql.metrics (taxonomy leaves of
the built-in Adult hierarchies); slicing releases original values (NCP 0 by definition); attribute_focused's only
generalization is age's fixed interval, NCP = mean over the 6 QIs of (interval high − low)/(max − min) for age, 0 for
the others. Slicing's information loss is the broken link between column groups, which NCP does not see: the table
also reports buckets and their mean size.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

import anon_sql
from anon_sql.errors import PrivacyRequirementError
from anon_sql.metrics import compute
from anon_sql.metrics.classification import classify

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
QIS = ["age", "workclass", "marital-status", "race", "sex", "education"]
SA = "occupation"


def policy(name: str, method: str, k: int, l: float | None = None, c: int = 2, max_suppression: float = 0.0) -> dict:
    attrs = {q: {"role": "quasi"} for q in QIS}
    privacy: dict = {"k": k}
    params: dict = {}
    if method == "mondrian":
        for q in QIS:
            if q != "age":
                attrs[q]["taxonomy"] = f"adult_{q}"
        if l:
            privacy["l_diversity"] = {"kind": "distinct", "l": l}
    else:
        privacy["l_diversity"] = {"kind": "slicing", "l": l or 5}
        privacy["max_suppression"] = max_suppression   # a budget: slicing suppresses only what l needs
        params["columns"] = c
    return {"name": name, "source": "adult", "method": method, "seed": 1, "default_role": "insensitive",
            "attributes": {**attrs, SA: {"role": "sensitive"}}, "privacy": privacy, "method_params": params}


def run(con, pol: dict) -> tuple[object | None, float, str]:
    t = time.perf_counter()
    try:
        rel = anon_sql.release(con, pol, replace=True)
        return rel, time.perf_counter() - t, ""
    except PrivacyRequirementError as err:
        return None, time.perf_counter() - t, str(err).split(";")[0][:90]


def accuracy(con, args) -> pd.DataFrame:
    rows = []
    grid = [("mondrian", 5, lv, 0) for lv in args.l] + [(m, 5, lv, c) for m in ("slicing", "attribute_focused")
                                                         for lv in args.l for c in args.c]
    baseline_done = False
    for method, k, lv, c in grid:
        if method != "mondrian" and c != 2 and lv != args.l[0]:
            continue   # the paper varies c at l = 5 (and 8) only
        rel, secs, err = run(con, policy("bench_sl", method, k, lv, c or 2, args.max_suppression))
        base = {"method": method, "k": k, "l": lv, "c": c or "", "buckets": "", "suppressed": "",
                "seconds": round(secs, 2)}
        if rel is None:
            rows.append({**base, "note": err})
            continue
        acc = classify(con, "bench_sl", SA, models=["c45", "naive_bayes"], protocols=["cv"], folds=args.folds,
                       features=QIS, seed=1)
        base["buckets"] = int(len(rel.classes))
        base["suppressed"] = rel.suppressed
        if not baseline_done:
            for _, r in acc.iterrows():
                rows.append({"method": "original", "model": r["model"], "accuracy": round(r["accuracy_original"], 4)})
            baseline_done = True
        for _, r in acc.iterrows():
            rows.append({**base, "model": r["model"], "accuracy": round(r["accuracy_release"], 4)})
    return pd.DataFrame(rows)


def ncp_and_time(con, args) -> pd.DataFrame:
    rows = []
    age = con.execute("SELECT min(age), max(age) FROM adult").fetchone()
    for k in args.k:
        for method in ("mondrian", "slicing", "attribute_focused"):
            rel, secs, err = run(con, policy("bench_sl", method, k, 5 if method != "mondrian" else None))
            row = {"k": k, "method": method, "seconds": round(secs, 2), "note": err}
            if rel is not None:
                sizes = rel.classes["__size"] if "__size" in rel.classes else None
                row["buckets/classes"] = len(rel.classes)
                row["mean size"] = round(float(sizes.mean()), 1) if sizes is not None else ""
                if method == "mondrian":
                    row["ncp"] = round(compute(con, "bench_sl", ["ncp"])["ncp"], 4)
                elif method == "slicing":
                    row["ncp"] = 0.0
                else:
                    iv = pd.DataFrame(rel.plan["intervals"]["age"])
                    per_record = ((iv["high"] - iv["low"]) / (age[1] - age[0]) * iv["records"]).sum() / iv["records"].sum()
                    row["ncp"] = round(per_record / len(QIS), 4)
            rows.append(row)
    return pd.DataFrame(rows)


def suppression(con, args) -> pd.DataFrame:
    """Slicing and attribute_focused at c = 2, k = 5 for each l: buckets, records suppressed (the fewest that make
    every occupation's share <= 1/l), which occupations lost them, max p(t, s), release time."""
    rows = []
    for method in ("slicing", "attribute_focused"):
        for lv in args.l:
            rel, secs, err = run(con, policy("bench_sl", method, 5, lv, 2, args.max_suppression))
            row = {"method": method, "l": lv, "seconds": round(secs, 2), "note": err}
            if rel is not None:
                row.update({"buckets": len(rel.classes), "released": rel.records_out, "suppressed": rel.suppressed,
                            "by occupation": ", ".join(f"{v} {n}" for v, n in
                                                       rel.plan.get("suppressed_by_value", {}).items()),
                            "max p(t, s)": round(rel.plan["max_p"], 4)})
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table (no tabulate dependency)."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in frame.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["all", "accuracy", "ncp", "suppression"], default="all")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10, 25, 50, 100])
    ap.add_argument("--l", type=float, nargs="+", default=[5, 8, 10])
    ap.add_argument("--c", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--max-suppression", type=float, default=0.38,
                    help="slicing methods' privacy.max_suppression (budget; 0.38 covers l = 10 on Adult)")
    args = ap.parse_args()
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(ADULT)])
    for method in ("mondrian", "slicing"):   # warm-up (imports, first-call costs) outside the timings
        run(con, policy("bench_sl", method, 5, 5))
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 90)
    if args.part in ("all", "accuracy"):
        print("## classification accuracy, target occupation, 10-fold CV on the release (Adult-7)")
        print(markdown(accuracy(con, args).fillna("")))
    if args.part in ("all", "suppression"):
        print(f"\n## suppression for l (c = 2, k = 5, max_suppression = {args.max_suppression})")
        print(markdown(suppression(con, args).fillna("")))
    if args.part in ("all", "ncp"):
        print("\n## NCP and run time vs k (slicing methods at l = 5, c = 2; Mondrian k only)")
        print(markdown(ncp_and_time(con, args).fillna("")))


if __name__ == "__main__":
    main()
