"""Metrics of a 1M-row release, each family timed against one bare GROUP BY (issue 5: <= 3x), plus the 30k-row
targets of bench_metrics.py (all metrics < 5 s, 1,000-query error < 10 s).

    python bench/bench_metrics_scale.py --rows 1000000 [--repeat 7]

Every time is the best of ``--repeat`` runs of a cold ``anon_sql.metrics.compute`` call (catalog row, taxonomies and
aggregates read inside it). The references are bare ``SELECT <QIs>, count(*) ... GROUP BY ALL`` over the release
(every family) and over the source (for the families that must read the original QI values or tuples), measured in
the same run, best of the same number of runs. "SQL" is the time spent in ``con.execute`` during the best run; the
rest is Python (plan, taxonomies, numpy over the aggregates). The machine's load average is printed with the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

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
READS_SOURCE = {"utility": "one min/max/NULL pass", "distribution": "original QI tuples"}


class TimedConnection:
    """A DuckDB connection whose ``execute`` adds its wall time to :attr:`sql` (the metrics accept any such object)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con, self.sql, self.statements = con, 0.0, 0

    def execute(self, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return self.con.execute(*args)
        finally:
            self.sql += time.perf_counter() - t
            self.statements += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def best_timed(con: duckdb.DuckDBPyConnection, names: list[str], repeat: int) -> tuple[float, float, int]:
    """(best wall time, SQL seconds of that run, statements) of metrics.compute over a timing connection."""
    runs = []
    for _ in range(repeat):
        tc = TimedConnection(con)
        t = time.perf_counter()
        metrics.compute(tc, "m_rel", names)
        runs.append((time.perf_counter() - t, tc.sql, tc.statements))
    return min(runs)


def load() -> str:
    return "load average %.2f %.2f %.2f (%d cores)" % (*os.getloadavg(), os.cpu_count() or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-30k", action="store_true", help="only the 1M-row families")
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
    classes = con.execute("SELECT count(DISTINCT ec_id), count(*) FROM m_rel").fetchone()
    for names in FAMILIES.values():        # warm-up: imports, built-in taxonomy parsing, DuckDB caches
        metrics.compute(con, "m_rel", names)
    bare = best(lambda: con.execute(f"SELECT {quoted}, count(*) FROM m_rel GROUP BY ALL").fetchall(), args.repeat)
    bare_src = best(lambda: con.execute(f"SELECT {quoted}, count(*) FROM adult GROUP BY ALL").fetchall(),
                    args.repeat)
    print(f"{args.rows:,} source rows, {classes[1]:,} released in {classes[0]:,} classes; best of {args.repeat}; "
          f"{load()}")
    print(f"bare GROUP BY of the {len(QIS)} QIs: release {bare:.3f} s, source {bare_src:.3f} s\n")
    print("| family | metrics | seconds | SQL s (statements) | x bare GROUP BY release | x bare GROUP BY source |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    available = set(metrics.REGISTRY)
    for family, names in FAMILIES.items():
        names = [n for n in names if n in available]
        s, sql, stmts = best_timed(con, names, args.repeat)
        src = f"{s / bare_src:.1f}x ({READS_SOURCE[family]})" if family in READS_SOURCE else "—"
        print(f"| {family} | {', '.join(names)} | {s:.3f} | {sql:.3f} ({stmts}) | {s / bare:.1f}x | {src} |",
              flush=True)
    # the same families with the taxonomies stored in the catalog (anon-sql taxonomy load), the production path
    from anon_sql.catalog import store as catalog
    from anon_sql.data.builtin_taxonomies import load_builtin_taxonomy as builtin

    for q in QIS:
        catalog.store_taxonomy(con, builtin(f"adult_{q}"))
    for family in ("utility", "distribution"):
        s, sql, stmts = best_timed(con, FAMILIES[family], args.repeat)
        src = f"{s / bare_src:.1f}x ({READS_SOURCE[family]})"
        print(f"| {family}, catalog taxonomies | {', '.join(FAMILIES[family])} | {s:.3f} | {sql:.3f} ({stmts}) | "
              f"{s / bare:.1f}x | {src} |", flush=True)
    print(f"\nafter: {load()}")
    if not args.skip_30k:
        import bench_metrics

        small = bench_metrics.setup()
        reps = max(3, args.repeat // 2)
        print(f"\nAdult 30,162 rows, best of {reps}; {load()}")
        print("| release | what | wall (s) |")
        print("| --- | --- | ---: |")
        for name in ("adult_levels", "adult_mondrian"):
            w = best(lambda: metrics.compute(small, name), reps)
            print(f"| {name} | all {len(metrics.REGISTRY)} metrics (forest IV; no classification) | {w:.2f} |")
            w = best(lambda: metrics.compute(small, name, params={"iv": "uniform"}), reps)
            print(f"| {name} | all metrics, uniform IV | {w:.2f} |")
            w = best(lambda: metrics.compute(small, name, ["query_error"], params={"queries": 1000}), reps)
            print(f"| {name} | query error, 1,000 queries | {w:.2f} |", flush=True)
    print(f"\ncommand: python bench/bench_metrics_scale.py --rows {args.rows} --repeat {args.repeat}")


if __name__ == "__main__":
    main()
