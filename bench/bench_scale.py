"""Scale curve (issue 17.6): a level-vector release, the optimal search and Mondrian on Adult resampled to 1M, 10M
(and 100M) rows, each against one bare GROUP BY over the QIs measured in the same run, in the same process.

    python bench/bench_scale.py --rows 1000000 10000000 [--methods levels optimal mondrian] [--json results.jsonl]

Data: bench/generate.py's seeded resample of Adult (Parquet, then a DuckDB table; ``--database FILE`` keeps it on disk
so that DuckDB can spill, for sizes beyond memory; ``--memory-limit 6GB --temp-directory DIR`` make it spill; a file
that already holds the table at that size is reused). levels = bench_release.py's policy (8 QIs, salary sensitive,
k = 5, distinct 2-diversity, 5 % suppression); optimal = the ARX q8 case (k = 5, DM*); Mondrian = bench_mondrian.py's
(k = 10, age numeric, occupation sensitive). Each release is timed once per repeat alternately with the GROUP BY.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_arx import policy as arx_policy  # noqa: E402
from bench_mondrian import QIS as MONDRIAN_QIS, policy as mondrian_policy  # noqa: E402
from bench_release import QIS, _policy as levels_policy  # noqa: E402
from generate import generate  # noqa: E402
from results import Result, emit  # noqa: E402


def policy(method: str) -> dict:
    if method == "levels":
        return levels_policy("scale_levels", "adult")
    if method == "optimal":
        return {**arx_policy("q8_k5_s0"), "name": "scale_optimal"}
    if method == "mondrian":
        return mondrian_policy("scale_mondrian", "adult", "mondrian", MONDRIAN_QIS, k=10)
    raise SystemExit(f"unknown method {method!r}: levels, optimal or mondrian")


def run(rows: int, methods: list[str], repeat: int, database: str | None, memory_limit: str | None = None,
        temp_directory: str | None = None) -> list[Result]:
    path = Path(__file__).resolve().parent / "data" / f"adult_{rows}.parquet"
    if not path.exists():
        generate(rows, path)
    con = duckdb.connect(database or ":memory:")
    if memory_limit:        # out of core: DuckDB spills its sorts, joins and aggregates to temp_directory
        con.execute("SET memory_limit = ?", [memory_limit])
    if temp_directory:
        con.execute("SET temp_directory = ?", [temp_directory])
    anon_sql.install(con)
    loaded = (database and con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'adult'")
              .fetchall()[0][0] and con.execute("SELECT count(*) FROM adult").fetchall()[0][0] == rows)
    if not loaded:          # a --database file keeps the table between runs
        con.execute("CREATE OR REPLACE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    quoted = ", ".join('"' + q + '"' for q in QIS)          # bench-only SQL text over fixed column names
    out = []
    for method in methods:
        bare, took = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            con.execute(f"SELECT {quoted}, count(*) FROM adult GROUP BY ALL").fetchall()
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            rel = anon_sql.release(con, policy(method), replace=True)
            took.append(time.perf_counter() - t)
        out.append(Result("scale", f"{method} release", min(took), "bare GROUP BY over the 8 QIs", min(bare),
                          rows=rows, repeat=repeat, extra={"released": rel.records_out, "classes": len(rel.classes)}))
        emit(out[-1:], None)
    con.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--methods", nargs="+", default=["levels", "optimal", "mondrian"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--database", default=None, help="a DuckDB file (out of core) instead of memory")
    ap.add_argument("--memory-limit", default=None, help="DuckDB memory_limit, e.g. 6GB (spills beyond it)")
    ap.add_argument("--temp-directory", default=None, help="DuckDB temp_directory for the spilled data")
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args(argv)
    results = []
    for n in args.rows:
        results += run(n, args.methods, args.repeat, args.database, args.memory_limit, args.temp_directory)
    emit(results, args.json, echo=False)


if __name__ == "__main__":
    main()
