"""Where a warm release goes (issue 17.1, issue 29.1): the statements DuckDB runs and the stages of a release, timed
one by one on Adult (the ARX cases of bench_arx.py), warm — same process, later releases of the same policy — with
the median of N.

    python bench/bench_release_phases.py                       # q8_k5_s0 (optimal, k = 5, DM*, 8 QIs), 9 releases
    python bench/bench_release_phases.py --case q8_k5_s4 --repeat 5 --statements
    python bench/bench_release_phases.py --mixed 1000000 --repeat 3          # issue 29.3's 1M rows
    python bench/bench_release_phases.py --clock cpu --statements            # CPU time of the process instead

``--clock cpu`` times stages and statements by the process's CPU time (``time.process_time``: every thread,
DuckDB's included) instead of the wall clock: on a machine shared with other work the wall time of a 30k-row
release is 2-4x its CPU time and varies with the load, its CPU time much less.

The release runs through ``anon_sql.release`` on a counting wrapper of the connection (every ``execute`` / ``sql`` is
one statement, timed), and the stage functions of :mod:`anon_sql.runner.run` are wrapped by timers (bench only, the
package is not changed; a stage's time excludes the timed stages inside it). Each stage's row gives its wall time,
its statements and the time DuckDB spent in them; the rest of its wall time is Python. ``--statements`` lists the
statements of the last release. The machine is shared: the load average is printed beside the figures.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anon_sql                                         # noqa: E402
from anon_sql.engines import DuckDBEngine               # noqa: E402
from anon_sql.methods import search as search_mod       # noqa: E402
from anon_sql.methods import lattice as lattice_mod     # noqa: E402
from bench_arx import DATA, policy                      # noqa: E402

run_mod = importlib.import_module("anon_sql.runner.run")
resolve_mod = importlib.import_module("anon_sql.runner.resolve")
verify_mod = importlib.import_module("anon_sql.runner.verify")
recheck_mod = importlib.import_module("anon_sql.audit.recheck")
api_mod = importlib.import_module("anon_sql.api")
CLOCK: list[Callable[[], float]] = [time.perf_counter]   # --clock cpu: time.process_time
TIMES: dict[str, float] = defaultdict(float)
SQL_TIMES: dict[str, float] = defaultdict(float)
COUNTS: dict[str, int] = defaultdict(int)
ACTIVE: list[str] = []
LOG: list[tuple[str, float, str]] = []
OUTSIDE = "other (Python glue)"


def timed(name: str, fn: Callable) -> Callable:
    """``fn`` timed under ``name``; time spent in an inner timed stage counts for the inner one only."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = CLOCK[0]()
        ACTIVE.append(name)
        try:
            return fn(*args, **kwargs)
        finally:
            ACTIVE.pop()
            spent = CLOCK[0]() - t
            TIMES[name] += spent
            if ACTIVE:
                TIMES[ACTIVE[-1]] -= spent
    return wrapper


class Counting:
    """A DuckDB connection that counts and times every statement, under the stage that runs it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con

    def _run(self, method: str, query: Any, *args: Any, **kwargs: Any) -> Any:
        t = CLOCK[0]()
        result = getattr(self._con, method)(query, *args, **kwargs)
        spent = CLOCK[0]() - t
        stage = ACTIVE[-1] if ACTIVE else OUTSIDE
        SQL_TIMES[stage] += spent
        COUNTS[stage] += 1
        LOG.append((stage, spent, str(query)))
        return result

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._run("execute", query, *args, **kwargs)

    def sql(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._run("sql", query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


STAGES = [   # (module, attribute, stage name)
    (run_mod, "resolve_release", "resolve: policy, source, record count"),
    (DuckDBEngine, "base_counts", "resolve: base counts (GROUP BY of the source)"),
    (resolve_mod, "resolve_taxonomies", "resolve: taxonomies + coverage check"),
    (run_mod, "check_target", "target name check (ownership)"),
    (run_mod, "create_source_view", "source view"),
    (lattice_mod.Lattice, "__init__", "lattice: base table + coding"),
    (search_mod.Optimal, "search", "search (node evaluations)"),
    (run_mod, "compile_release", "compile (sqlglot trees)"),
    (run_mod, "materialize", "materialize (DuckDB runs the release)"),
    (run_mod, "verify_release", "verify: checks view, counts, metrics"),
    (verify_mod, "check_summary", "verify: check summary"),
    (run_mod.suppression, "settle", "settle suppression"),
    (run_mod, "tidy", "tidy (drop working views)"),
    (DuckDBEngine, "record", "catalog record"),
    (DuckDBEngine, "commit", "commit"),
    (run_mod, "discard_resolved", "discard (drop the base counts)"),
    (recheck_mod, "prepare_check", "check program (cached for anon-sql check)"),
]


def instrument() -> None:
    for owner, attr, name in STAGES:
        if not hasattr(owner, attr):   # a renamed stage would silently count as "other": say so
            raise SystemExit(f"bench_release_phases: {owner.__name__}.{attr} is gone; update STAGES")
        setattr(owner, attr, timed(name, getattr(owner, attr)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="q8_k5_s0")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--statements", action="store_true", help="list the statements of the last release")
    ap.add_argument("--json", default=None, help="append the result (bench/results.py format) to this file")
    ap.add_argument("--mixed", type=int, default=None, metavar="ROWS",
                    help="bench/generate_mixed.py's data set of ROWS rows instead of Adult (issue 29.3)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time by the wall clock (default) or by the process's CPU time (all threads)")
    args = ap.parse_args(argv)
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    data = DATA
    if args.mixed:
        from generate_mixed import generate_mixed

        data = generate_mixed(args.mixed, Path(__file__).resolve().parent / "data" / f"adult_mixed_{args.mixed}")
    raw = duckdb.connect()
    anon_sql.install(raw)
    raw.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)",
                [str(data / "adult.csv")])
    pol = policy(args.case)
    anon_sql.release(raw, pol, replace=True)          # cold: caches filled
    instrument()
    con = Counting(raw)
    runs: list[dict[str, tuple[float, float, int]]] = []
    print(f"command: python bench/bench_release_phases.py {' '.join(argv or sys.argv[1:])}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.repeat):
        TIMES.clear(), SQL_TIMES.clear(), COUNTS.clear(), LOG.clear()
        t = CLOCK[0]()
        ACTIVE.append(OUTSIDE)
        try:
            api_mod.release(con, pol, replace=True)
        finally:
            ACTIVE.pop()
        wall = CLOCK[0]() - t
        TIMES[OUTSIDE] = wall - sum(v for k, v in TIMES.items() if k != OUTSIDE)
        run = {n: (TIMES.get(n, 0.0), SQL_TIMES.get(n, 0.0), COUNTS.get(n, 0)) for n in set(TIMES) | set(COUNTS)}
        run["total"] = (wall, sum(SQL_TIMES.values()), sum(COUNTS.values()))
        runs.append(run)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    def med(name: str, i: int) -> float:
        return statistics.median(r.get(name, (0.0, 0.0, 0))[i] for r in runs)
    total, statements = med("total", 0), med("total", 2)
    print(f"\nwarm release, {args.case} ({args.clock} clock): median of {args.repeat} releases = {total * 1e3:.0f} ms, "
          f"{statements:.0f} statements ({med('total', 1) * 1e3:.0f} ms in DuckDB, "
          f"{(total - med('total', 1)) * 1e3:.0f} ms Python)\n")
    print("| stage | median ms | statements | of which DuckDB ms | Python ms | share |\n|---|---:|---:|---:|---:|---:|")
    for name in sorted({n for r in runs for n in r} - {"total"}, key=lambda n: -med(n, 0)):
        wall, sql, n = med(name, 0), med(name, 1), med(name, 2)
        print(f"| {name} | {wall * 1e3:.1f} | {n:.0f} | {sql * 1e3:.1f} | {(wall - sql) * 1e3:.1f} | "
              f"{wall / total:.0%} |")
    from results import Result, emit

    sql = med("total", 1)
    top = sorted({n for r in runs for n in r} - {"total"}, key=lambda n: -med(n, 0))[:4]
    label = f"mixed {args.mixed:,} rows, " if args.mixed else ""
    clock = " (CPU time)" if args.clock == "cpu" else ""
    emit([Result("phases", f"{label}{args.case}: warm release, Python time{clock} (of {statements:.0f} statements)",
                 total - sql, "the DuckDB statements of the same releases", sql, rows=raw.execute(
                     "SELECT count(*) FROM adult").fetchall()[0][0], repeat=args.repeat, stat="median",
                 extra={"statements": int(statements), "release s": total,
                        **{f"{n} s": med(n, 0) for n in top}})], args.json)
    if args.statements:
        print("\nstatements of the last release (stage, ms, text):")
        for stage, spent, text in LOG:
            print(f"- {stage} | {spent * 1e3:.1f} | {' '.join(text.split())[:160]}")


if __name__ == "__main__":
    main()
