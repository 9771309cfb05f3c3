"""Release at a fixed level vector vs a bare DuckDB GROUP BY over the same QIs, same run (issue 2 target: <= 3x).

Two shapes of source: Adult's own columns (8 QIs + salary: every released column is a QI or the sensitive attribute,
so the release is written from the base counts) and the same rows with one extra insensitive numeric column
(the source is re-read and joined to the class map, then sorted by class).

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


def _policy(name: str, source: str, extra: bool) -> dict:
    attributes = {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                  "salary-class": {"role": "sensitive"}}
    if extra:
        attributes["hours"] = {"role": "insensitive"}
    return {"name": name, "source": source, "method": "levels", "attributes": attributes,
            "privacy": {"k": 5, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 2}},
            "method_params": {"levels": LEVELS}}


def run(rows: int, repeats: int) -> list[tuple[str, float, float, int]]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    # bench-only SQL text over fixed column names
    con.execute("CREATE TABLE adult_x AS SELECT *, CAST(hash(age, education) % 60 AS INTEGER) AS hours FROM adult")
    quoted = ", ".join('"' + q + '"' for q in QIS)
    out = []
    for label, source, extra in (("QIs + sensitive", "adult", False), ("+ 1 insensitive column", "adult_x", True)):
        bare, total, released = [], [], 0
        for i in range(repeats):
            t = time.perf_counter()
            con.execute(f"SELECT {quoted}, count(*) FROM {source} GROUP BY ALL").fetchall()
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            rel = anon_sql.release(con, _policy(f"bench_{source}", source, extra), replace=True)
            total.append(time.perf_counter() - t)
            released = rel.records_out
        out.append((label, min(bare), min(total), released))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--repeats", type=int, default=3, help="best of N for both timings")
    args = ap.parse_args()
    print("| rows | source columns | bare GROUP BY (s) | release incl. checks + catalog (s) | ratio | released |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n in args.rows:
        for label, bare, total, released in run(n, args.repeats):
            print(f"| {n:,} | {label} | {bare:.2f} | {total:.2f} | {total / bare:.1f}x | {released:,} |", flush=True)
    print(f"\ncommand: python bench/bench_release.py --rows {' '.join(map(str, args.rows))} --repeats {args.repeats}")
