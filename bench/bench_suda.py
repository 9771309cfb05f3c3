"""SUDA2 on Adult with 8 key variables (issue 26: <= 30 s), and on resampled Adult at larger sizes.

    python bench/bench_suda.py [--rows 30162,100000] [--keys 8] [--repeat 3]

Data: /work/shared/data/adult (30,162 rows); a larger size repeats Adult's rows in a fixed order with age jittered
by a seeded ±2 (so new combinations appear). Times are the best of ``--repeat`` runs of anon_sql.sdc.suda2 (fetch, encode,
2^M − 1 factorized group-bys, DIS-SUDA); the load average is printed with the table.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import duckdb

from anon_sql.sdc.suda import suda2

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
KEYS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", default="30162")
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim=';', header=true)", [str(ADULT)])
    keys = KEYS[:args.keys]
    print(f"keys {keys}, best of {args.repeat}, load average {os.getloadavg()[0]:.2f} (2 cores shared)")
    print(f"{'rows':>10} {'seconds':>8} {'records at risk':>16} {'MSUs':>8}")
    for n in (int(x) for x in args.rows.split(",")):
        if n == 30162:
            con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM adult")
        else:                    # row (i * 7919) mod 30162 of Adult for i < n, age jittered by a seeded ±2
            con.execute("SELECT setseed(0.26)")
            con.execute("""CREATE OR REPLACE TABLE t AS SELECT a.* EXCLUDE (rn) REPLACE (a.age
                           + CAST(floor(random() * 5) AS BIGINT) - 2 AS age) FROM range(?) r(i)
                           JOIN (SELECT *, row_number() OVER () - 1 AS rn FROM adult) a ON a.rn = (i * 7919) % 30162""",
                        [n])
        times, result = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = suda2(con, "t", keys)
            times.append(time.perf_counter() - start)
        msus = sum(v for k, v in result.measures.items() if k.startswith("suda_msus_size_"))
        print(f"{n:>10,} {min(times):8.3f} {result.measures['suda_records_at_risk']:>16,} {msus:>8,}")


if __name__ == "__main__":
    main()
