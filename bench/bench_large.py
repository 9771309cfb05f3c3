"""Large tables, fewer passes (issue 29.2): the optimal search and Mondrian at 1M / 10M (/ 100M out of core) rows,
each beside one bare GROUP BY over the 8 QIs measured in the same run, alternately, the median of N of each.

    python bench/bench_large.py --rows 1000000 10000000 --repeat 3 [--methods optimal mondrian] [--json F]
    python bench/bench_large.py --rows 100000000 --database /tmp/big.duckdb --memory-limit 6GB --temp-directory /tmp/spill

Data and policies are bench_scale.py's (Adult resampled, seeded; optimal = ARX's q8 case, k = 5, DM*, salary-class
released as an insensitive column; Mondrian k = 10, age numeric, occupation sensitive). Targets: optimal ≤ 3× and
Mondrian ≤ 3× at 10M rows, Mondrian ≤ 5× at 100M out of core. Each record carries every repeat's ratio and the
statements that took the most time in the last release (a timing proxy around the connection; bench only).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

import anon_sql
from anon_sql.engines import DuckDBEngine
from anon_sql.runner.run import release_on

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_release import QIS  # noqa: E402
from bench_scale import policy  # noqa: E402
from generate import generate  # noqa: E402
from results import Result, emit  # noqa: E402

TARGETS = {("optimal", False): "<= 3x", ("mondrian", False): "<= 3x", ("mondrian", True): "<= 5x (out of core)",
           ("optimal", True): "<= 3x (out of core)"}


class Timed:
    """The connection with every ``execute`` timed (statement text, seconds): where a release's time goes."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con
        self.times: list[tuple[float, str]] = []

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = self._con.execute(query, *args, **kwargs)
        self.times.append((time.perf_counter() - t, " ".join(str(query).split())[:90]))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def run(rows: int, methods: list[str], repeat: int, database: str | None = None, memory_limit: str | None = None,
        temp_directory: str | None = None) -> list[Result]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect(database or ":memory:")
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    if temp_directory:
        con.execute("SET temp_directory = ?", [temp_directory])
    anon_sql.install(con)
    loaded = (database and con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult'")
              .fetchall()[0][0] and con.execute("SELECT count(*) FROM adult").fetchall()[0][0] == rows)
    if not loaded:
        con.execute("CREATE OR REPLACE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    quoted = ", ".join('"' + q + '"' for q in QIS)          # bench-only SQL text over fixed column names
    out = []
    for method in methods:
        bare, took, ratios = [], [], []
        timed = Timed(con)
        for _ in range(repeat):
            t = time.perf_counter()
            con.execute(f"SELECT {quoted}, count(*) FROM adult GROUP BY ALL").fetchall()
            bare.append(time.perf_counter() - t)
            timed.times.clear()
            t = time.perf_counter()
            rel = release_on(DuckDBEngine(timed), policy(method), replace=True)
            took.append(time.perf_counter() - t)
            ratios.append(took[-1] / bare[-1])
        top = sorted(timed.times, reverse=True)[:4]
        out.append(Result("large", f"{method} release", statistics.median(took), "bare GROUP BY over the 8 QIs",
                          statistics.median(bare), rows=rows, repeat=repeat,
                          target=TARGETS[(method, bool(database))],
                          extra={"median of": repeat, "ratios": " ".join(f"{r:.2f}" for r in ratios),
                                 "released": rel.records_out, "classes": len(rel.classes),
                                 "statements": len(timed.times),
                                 "largest statements (s)": "; ".join(f"{s:.1f} {q}" for s, q in top)}))
        emit(out[-1:], None)
    con.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--methods", nargs="+", default=["optimal", "mondrian"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--database", default=None, help="a DuckDB file (out of core) instead of memory")
    ap.add_argument("--memory-limit", default=None, help="DuckDB memory_limit, e.g. 6GB (spills beyond it)")
    ap.add_argument("--temp-directory", default=None, help="DuckDB temp_directory for the spilled data")
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args(argv)
    results = []
    for n in args.rows:
        results += run(n, args.methods, args.repeat, args.database, args.memory_limit, args.temp_directory)
    emit(results, args.json, echo=False)
    for r in results:
        print(f"{r.extra['largest statements (s)']}")


if __name__ == "__main__":
    main()
