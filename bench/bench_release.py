"""Release at a fixed level vector vs a bare DuckDB GROUP BY over the same QIs, same run (issue 2 target: <= 3x).

    python bench/bench_release.py --rows 1000000 10000000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate  # noqa: E402

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 2, "occupation": 1}


def run(rows: int) -> tuple[float, float, int]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    quoted = ", ".join('"' + q + '"' for q in QIS)  # bench-only, fixed column names
    t = time.perf_counter()
    con.execute(f"SELECT {quoted}, count(*) FROM adult GROUP BY ALL").fetchall()
    bare = time.perf_counter() - t
    policy = {"name": "bench_rel", "source": "adult", "method": "levels",
              "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                             "salary-class": {"role": "sensitive"}},
              "privacy": {"k": 5, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 2}},
              "method_params": {"levels": LEVELS}}
    t = time.perf_counter()
    rel = anon_sql.release(con, policy)
    total = time.perf_counter() - t
    return bare, total, rel.records_out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    args = ap.parse_args()
    print("| rows | bare GROUP BY (s) | release incl. checks (s) | ratio | released |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in args.rows:
        bare, total, out = run(n)
        print(f"| {n:,} | {bare:.2f} | {total:.2f} | {total / bare:.1f}x | {out:,} |", flush=True)
    print(f"\ncommand: python bench/bench_release.py --rows {' '.join(map(str, args.rows))}")
