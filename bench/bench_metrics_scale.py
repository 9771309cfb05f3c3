"""Metrics of a 1M-row release, each family timed against one bare GROUP BY over the release (issue 5: <= 3x).

    python bench/bench_metrics_scale.py --rows 1000000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

import anon_sql
from anon_sql import metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_release import LEVELS, QIS  # noqa: E402
from generate import generate  # noqa: E402

FAMILIES = {
    "risk": ["k", "records_at_risk", "prosecutor_risk_max", "prosecutor_risk_avg", "sample_uniques"],
    "diversity": ["l_distinct", "t_closeness"],
    "utility": ["ncp", "precision", "dcp", "cavg"],
    "distribution": ["kl_divergence"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    path = Path(__file__).resolve().parent / "data" / f"adult_{args.rows}.parquet"
    if not path.exists():
        generate(args.rows, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    policy = {"name": "m_rel", "source": "adult", "method": "levels",
              "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                             "salary-class": {"role": "sensitive"}},
              "privacy": {"k": 5, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 2}},
              "method_params": {"levels": LEVELS}}
    anon_sql.release(con, policy)
    quoted = ", ".join('"' + q + '"' for q in QIS)  # bench-only, fixed column names
    t = time.perf_counter()
    con.execute(f"SELECT {quoted}, count(*) FROM m_rel GROUP BY ALL").fetchall()
    bare = time.perf_counter() - t
    print(f"| family | metrics | seconds | x bare GROUP BY ({bare:.2f} s) |")
    print("| --- | --- | ---: | ---: |")
    available = set(metrics.REGISTRY)
    for family, names in FAMILIES.items():
        names = [n for n in names if n in available]
        t = time.perf_counter()
        metrics.compute(con, "m_rel", names)
        s = time.perf_counter() - t
        print(f"| {family} | {', '.join(names)} | {s:.2f} | {s / bare:.1f}x |", flush=True)
    print(f"\ncommand: python bench/bench_metrics_scale.py --rows {args.rows}")


if __name__ == "__main__":
    main()
