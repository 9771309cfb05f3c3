"""Level-vector release (optimal lattice search) on Spark local[2] vs DuckDB, same machine, same Parquet file, and
the Spark jobs each stage launches (SparkContext status tracker, one job group per stage).

    python bench/bench_spark.py --rows 10000000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

import anon_sql
from anon_sql import spark as aspark

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate  # noqa: E402

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def policy(method: str) -> dict:
    pol = {"name": f"bench_{method}", "source": "adult", "method": method,
           "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                          "salary-class": {"role": "sensitive"}},
           "privacy": {"k": 5, "max_suppression": 0.02, "l_diversity": {"kind": "distinct", "l": 2}}}
    if method == "levels":
        pol["method_params"] = {"levels": {"age": 4, "education": 2, "marital-status": 1, "race": 1,
                                           "native-country": 1, "workclass": 2, "occupation": 1}}
    return pol


def run(rows: int, methods: list[str], memory: str) -> list[dict]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])  # DuckDB: data in the database
    spark = aspark.local_session(cores=2, shuffle_partitions=8, conf={"spark.driver.memory": memory})
    out = []
    for method in methods:
        pol = policy(method)
        t = time.perf_counter()
        duck = anon_sql.release(con, pol, replace=True)
        t_duck = time.perf_counter() - t
        t = time.perf_counter()
        rel = aspark.release(spark, pol, source=str(path), replace=True)
        t_spark = time.perf_counter() - t
        assert rel.plan == duck.plan and rel.records_out == duck.records_out, (rel.plan, duck.plan)
        jobs = rel.info["spark_jobs"]
        out.append({"rows": rows, "method": method, "duckdb": t_duck, "spark": t_spark, "jobs": jobs,
                    "nodes": rel.info.get("nodes_evaluated", 1), "released": rel.records_out})
        spark.catalog.clearCache()
    spark.stop()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    ap.add_argument("--methods", nargs="+", default=["optimal", "levels"])
    ap.add_argument("--driver-memory", default="6g")
    args = ap.parse_args()
    print("| rows | method | DuckDB (s) | Spark local[2] (s) | Spark / DuckDB | nodes evaluated | Spark jobs: "
          "prepare / plan (search) / materialize / verify | released |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for n in args.rows:
        for r in run(n, args.methods, args.driver_memory):
            j = r["jobs"]
            print(f"| {n:,} | {r['method']} | {r['duckdb']:.1f} | {r['spark']:.1f} | {r['spark'] / r['duckdb']:.1f}x "
                  f"| {r['nodes']} | {j.get('prepare')} / {j.get('plan')} / {j.get('materialize')} / "
                  f"{j.get('verify')} | {r['released']:,} |", flush=True)
    print(f"\ncommand: python bench/bench_spark.py --rows {' '.join(map(str, args.rows))} "
          f"--methods {' '.join(args.methods)}")
