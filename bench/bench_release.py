"""Release at a fixed level vector against the same run's baselines: one bare DuckDB GROUP BY over the QIs (issue 2:
<= 3x) and the physical floor of a real table (issue 17.5: <= 1.5x) = one plain copy of the source table + that
GROUP BY.

Three shapes of source: Adult's own columns (8 QIs + salary: every released column is a QI or the sensitive
attribute, so the release is written from the base counts), and the same rows with one or ten extra insensitive
integer columns (the source is read again and joined to the class map; rows ordered by class, then by a seeded hash
of their released values — never the source's order).

    python bench/bench_release.py --rows 1000000 10000000 [--extra 0 1 10] [--json results.jsonl]
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
from results import Result, emit  # noqa: E402

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 2, "occupation": 1}


def _policy(name: str, source: str) -> dict:
    attributes = {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                  "salary-class": {"role": "sensitive"}}
    return {"name": name, "source": source, "method": "levels", "attributes": attributes,
            "default_role": "insensitive",
            "privacy": {"k": 5, "max_suppression": 0.05, "l_diversity": {"kind": "distinct", "l": 2}},
            "method_params": {"levels": LEVELS}}


def source_table(con: duckdb.DuckDBPyConnection, rows: int, extra: int) -> str:
    """``adult`` (Adult resampled to ``rows``) and, for ``extra`` > 0, ``adult_x<extra>`` with that many insensitive
    integer columns (a hash of the row number: every row differs)."""
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con.execute("CREATE TABLE IF NOT EXISTS adult AS SELECT * FROM read_parquet(?)", [str(path)])
    if not extra:
        return "adult"
    # bench-only SQL text over fixed column names
    cols = ", ".join(f"CAST(hash(row_number() OVER (), {j}) % 100000 AS INTEGER) AS x{j}" for j in range(extra))
    con.execute(f"CREATE TABLE IF NOT EXISTS adult_x{extra} AS SELECT *, {cols} FROM adult")
    return f"adult_x{extra}"


def run(rows: int, repeats: int, extras: list[int]) -> list[Result]:
    con = duckdb.connect()
    anon_sql.install(con)
    quoted = ", ".join('"' + q + '"' for q in QIS)
    out = []
    for extra in extras:
        source = source_table(con, rows, extra)
        bare, copy, total, released = [], [], [], 0
        for _ in range(repeats):              # the three measured alternately, best of each
            t = time.perf_counter()
            con.execute(f"SELECT {quoted}, count(*) FROM {source} GROUP BY ALL").fetchall()
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            con.execute(f"CREATE OR REPLACE TABLE bench_copy AS SELECT * FROM {source}")
            copy.append(time.perf_counter() - t)
            con.execute("DROP TABLE bench_copy")
            t = time.perf_counter()
            rel = anon_sql.release(con, _policy(f"bench_{source}", source), replace=True)
            total.append(time.perf_counter() - t)
            released = rel.records_out
            con.execute(f'DROP TABLE "bench_{source}"')
        label = "QIs + sensitive" if not extra else f"+ {extra} insensitive column{'s' if extra > 1 else ''}"
        common = {"rows": rows, "repeat": repeats}
        info = {"released": released, "bare_group_by_s": min(bare), "copy_s": min(copy),
                "ratio_to_group_by": min(total) / min(bare)}
        out.append(Result("release", f"levels release, {label}", min(total), "copy of the source + bare GROUP BY",
                          min(copy) + min(bare), target="<= 1.5x" if extra else "", extra=info, **common))
    con.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--extra", type=int, nargs="+", default=[0, 1, 10], help="insensitive columns beside the QIs")
    ap.add_argument("--repeats", type=int, default=3, help="best of N for every timing")
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args(argv)
    print("| rows | source columns | bare GROUP BY (s) | copy (s) | release (s) | / GROUP BY | / copy + GROUP BY |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    results = []
    for n in args.rows:
        for r in run(n, args.repeats, args.extra):
            results.append(r)
            e = r.extra
            print(f"| {n:,} | {r.case.split(', ', 1)[1]} | {e['bare_group_by_s']:.2f} | {e['copy_s']:.2f} | "
                  f"{r.value:.2f} | {e['ratio_to_group_by']:.1f}x | {r.ratio:.2f}x |", flush=True)
    emit(results, args.json)


if __name__ == "__main__":
    main()
