"""Metrics of an Adult release (30,162 rows, 8 QIs): every registered metric (classification excluded) and a
1,000-query workload, for a full-domain release and a Mondrian release (issue 5 targets: < 5 s and < 10 s).

    python bench/bench_metrics.py [--repeat 3] [--classify]

Times are wall clock (and process CPU) of a cold ``anon_sql.metrics.compute`` call: the catalog row, taxonomies and
source aggregates are read inside it. "per metric" runs each metric alone, cold (its shared loads included).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb

import anon_sql
from anon_sql import metrics

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 2, "occupation": 1}


def setup() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true)", [str(DATA)])
    base = {"source": "adult", "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                                              "salary-class": {"role": "sensitive"}}}
    anon_sql.release(con, {**base, "name": "adult_levels", "method": "levels",
                           "privacy": {"k": 5, "max_suppression": 0.05}, "method_params": {"levels": LEVELS}})
    mondrian = {**base, "name": "adult_mondrian", "method": "mondrian", "privacy": {"k": 5}}
    mondrian["attributes"] = {**base["attributes"], "age": {"role": "quasi"}}   # numeric ranges
    anon_sql.release(con, mondrian)
    return con


def timed(fn, repeat: int) -> tuple[float, float, object]:
    best = (float("inf"), float("inf"), None)
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, (time.perf_counter() - w, time.process_time() - c, out), key=lambda t: t[0])
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--classify", action="store_true", help="also time classify() (4 fast models, 10 folds)")
    args = ap.parse_args()
    con = setup()
    print("| release | what | wall (s) | CPU (s) |")
    print("| --- | --- | ---: | ---: |")
    for name in ("adult_levels", "adult_mondrian"):
        w, c, _ = timed(lambda: metrics.compute(con, name), args.repeat)
        print(f"| {name} | all {len(metrics.REGISTRY)} metrics | {w:.2f} | {c:.2f} |", flush=True)
        w, c, _ = timed(lambda: metrics.compute(con, name, params={"iv": "uniform"}), args.repeat)
        print(f"| {name} | all metrics, uniform IV (no forest) | {w:.2f} | {c:.2f} |", flush=True)
        w, c, out = timed(lambda: metrics.compute(con, name, ["query_error"], params={"queries": 1000}), args.repeat)
        print(f"| {name} | query error, 1,000 queries (mean {out['query_error']:.3f}) | {w:.2f} | {c:.2f} |",
              flush=True)
        if args.classify:
            from anon_sql.metrics.classification import classify

            w, c, _ = timed(lambda: classify(con, name, "salary-class",
                                             models=["tree_gini", "c45", "naive_bayes", "random_forest"]), 1)
            print(f"| {name} | classify: 4 models × (cv10 + holdout) | {w:.2f} | {c:.2f} |", flush=True)
    print("\nper metric, each alone and cold (wall s):")
    for name in ("adult_levels", "adult_mondrian"):
        parts = []
        for m in metrics.REGISTRY:
            w, _, _ = timed(lambda: metrics.compute(con, name, [m]), 1)
            parts.append(f"{m} {w:.2f}")
        print(f"  {name}: " + ", ".join(parts))
    print(f"\ncommand: python bench/bench_metrics.py --repeat {args.repeat}" + (" --classify" if args.classify else ""))


if __name__ == "__main__":
    main()
