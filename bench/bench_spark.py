"""Spark releases against one bare Spark GROUP BY (issue 14.4): a fixed level vector (target <= 3x) and the optimal
lattice search (target <= 5x) on Spark local[2], each beside one bare ``GROUP BY`` over the same 8 QIs written to
Parquet — same session, same Parquet file, measured in the same run — with the Spark jobs each stage launches
(SparkContext status tracker, one job group per stage) and DuckDB's time on the same file for reference.

    python bench/bench_spark.py --rows 10000000 [--methods levels optimal] [--repeat 2] [--warmup] [--json F]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import anon_sql
from anon_sql import spark as aspark

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate  # noqa: E402
from results import Result, emit, load_average  # noqa: E402

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
TARGETS = {"levels": "<= 3x", "optimal": "<= 5x"}
STAGES = ("prepare", "plan", "materialize", "verify")


def policy(method: str) -> dict:
    pol = {"name": f"bench_{method}", "source": "adult", "method": method,
           "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                          "salary-class": {"role": "sensitive"}},
           "privacy": {"k": 5, "max_suppression": 0.02, "l_diversity": {"kind": "distinct", "l": 2}}}
    if method == "levels":
        pol["method_params"] = {"levels": {"age": 4, "education": 2, "marital-status": 1, "race": 1,
                                           "native-country": 1, "workclass": 2, "occupation": 1}}
    return pol


def bare_group_by(spark, path: Path, out: str) -> tuple[float, int]:
    """One ``SELECT QIs, count(*) FROM parquet GROUP BY QIs`` written to Parquet: seconds and Spark jobs."""
    sc = spark.sparkContext
    group = f"bench-baseline-{time.monotonic_ns()}"
    sc.setJobGroup(group, "bare GROUP BY")
    t = time.perf_counter()
    spark.read.parquet(str(path)).groupBy(*QIS).count().write.mode("overwrite").parquet(out)
    seconds = time.perf_counter() - t
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    sc.setLocalProperty("spark.jobGroup.id", None)
    return seconds, jobs


def run(rows: int, methods: list[str], memory: str, repeat: int, warmup: bool = False) -> list[Result]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])  # DuckDB: data in the database
    spark = aspark.local_session(cores=2, shuffle_partitions=8, conf={"spark.driver.memory": memory})
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        bare_group_by(spark, path, str(Path(tmp) / "warm.parquet"))   # JVM warm-up, file in the page cache
        if warmup:   # the first release of a session pays the JVM's class loading and JIT of its code paths
            aspark.release(spark, policy(methods[0]), source=str(path), replace=True)
            spark.catalog.clearCache()
        for method in methods:
            pol = policy(method)
            t = time.perf_counter()
            duck = anon_sql.release(con, pol, replace=True)
            t_duck = time.perf_counter() - t
            best, best_base, base_jobs, rel, seconds = float("inf"), float("inf"), 0, None, {}
            for _ in range(repeat):   # the baseline right before each release: both under the same load
                t_base, base_jobs = bare_group_by(spark, path, str(Path(tmp) / "baseline.parquet"))
                best_base = min(best_base, t_base)
                t = time.perf_counter()
                rel = aspark.release(spark, pol, source=str(path), replace=True)
                t_spark = time.perf_counter() - t
                if t_spark < best:
                    best, seconds = t_spark, dict(rel.info.get("stage_seconds", {}))
                spark.catalog.clearCache()
            assert rel.plan == duck.plan and rel.records_out == duck.records_out, (rel.plan, duck.plan)
            jobs = rel.info["spark_jobs"]
            out.append(Result("spark", f"{method} release, Spark local[2]", best, "bare Spark GROUP BY -> Parquet",
                              best_base, rows=rows, repeat=repeat, target=TARGETS.get(method, ""),
                              extra={"jobs": "/".join(str(jobs.get(s, 0)) for s in STAGES),
                                     "jobs_total": sum(jobs.values()), "baseline_jobs": base_jobs,
                                     "stage_seconds": "/".join(f"{seconds.get(s, 0):.1f}" for s in STAGES),
                                     "duckdb_s": t_duck, "nodes": rel.info.get("nodes_evaluated", 1),
                                     "released": rel.records_out}))
    spark.stop()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    ap.add_argument("--methods", nargs="+", default=["levels", "optimal"])
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warmup", action="store_true",
                    help="one release of the first method before measuring (a session that has run a release)")
    ap.add_argument("--json", default=None, help="append the records (bench/results.py format) to this file")
    args = ap.parse_args()
    load_before = load_average()
    results = [r for n in args.rows for r in run(n, args.methods, args.driver_memory, args.repeat, args.warmup)]
    emit(results, args.json, echo=False)
    print("| rows | method | Spark (s) | bare GROUP BY (s) | ratio | target | Spark jobs: prepare / plan / "
          "materialize / verify (total; GROUP BY) | seconds per stage | DuckDB (s) | nodes | released | load |")
    print("| ---: | --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- |")
    for r in results:
        x = r.extra
        print(f"| {r.rows:,} | {r.case.split()[0]} | {r.value:.1f} | {r.baseline_value:.1f} | **{r.ratio:.2f}x** | "
              f"{r.target} | {x['jobs'].replace('/', ' / ')} ({x['jobs_total']}; {x['baseline_jobs']}) | "
              f"{x['stage_seconds'].replace('/', ' / ')} | {x['duckdb_s']:.1f} | {x['nodes']} | "
              f"{x['released']:,} | {' '.join(f'{v:.1f}' for v in r.load)} |", flush=True)
    print(f"\nload average before: {load_before}, after: {load_average()}")
    print(f"command: python bench/bench_spark.py --rows {' '.join(map(str, args.rows))} "
          f"--methods {' '.join(args.methods)} --repeat {args.repeat}{' --warmup' if args.warmup else ''}")
