"""Where a warm release goes (issue 17.1): the stages of ``anon_sql.runner.run`` timed one by one on Adult (the ARX
cases of bench_arx.py), warm — same process, later releases of the same policy — with the median of N.

    python bench/bench_release_phases.py                       # q8_k5_s0 (optimal, k = 5, DM*, 8 QIs), 9 releases
    python bench/bench_release_phases.py --case q8_k5_s4_dm --repeat 5

The stage functions are wrapped by timers here (bench only, the package is not changed; a stage's time excludes
the timed stages inside it): resolve (policy, source, record count), its base counts and taxonomies, the target
check, the source view, the lattice build (base table and its integer coding), the search, compile (sqlglot trees),
SQL rendering, materialize (DuckDB runs the release statements), verify and its check summary, tidy, catalog record,
commit. "other" is the rest of the wall time. The machine is shared: the load average is printed beside the figures.
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
import anon_sql                                        # noqa: E402
from anon_sql.methods import lattice as lattice_mod             # noqa: E402
from anon_sql.compiler.views import CompiledRelease          # noqa: E402
from anon_sql.engines import DuckDBEngine               # noqa: E402
from anon_sql.methods import search as search_mod       # noqa: E402
from bench_arx import DATA, policy                      # noqa: E402

release_mod = importlib.import_module("anon_sql.release")   # the module (the package exports a function of that name)
resolve_mod = importlib.import_module("anon_sql.runner.resolve")
verify_mod = importlib.import_module("anon_sql.runner.verify")
TIMES: dict[str, float] = defaultdict(float)
ACTIVE: list[str] = []


def timed(name: str, fn: Callable) -> Callable:
    """``fn`` timed under ``name``; time spent in an inner timed stage counts for the inner one only."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        ACTIVE.append(name)
        try:
            return fn(*args, **kwargs)
        finally:
            ACTIVE.pop()
            spent = time.perf_counter() - t
            TIMES[name] += spent
            if ACTIVE:
                TIMES[ACTIVE[-1]] -= spent
    return wrapper


def instrument() -> None:
    release_mod.resolve_release = timed("resolve: policy, source, record count", release_mod.resolve_release)
    DuckDBEngine.base_counts = timed("resolve: base counts (GROUP BY of the source)", DuckDBEngine.base_counts)
    resolve_mod.resolve_taxonomies = timed("resolve: taxonomies + coverage check", resolve_mod.resolve_taxonomies)
    release_mod.check_target = timed("target name check", release_mod.check_target)
    release_mod.create_source_view = timed("source view", release_mod.create_source_view)
    lattice_mod.Lattice.__init__ = timed("lattice: base table + coding", lattice_mod.Lattice.__init__)
    search_mod.Optimal.search = timed("search (node evaluations)", search_mod.Optimal.search)
    release_mod.compile_release = timed("compile (sqlglot trees)", release_mod.compile_release)
    CompiledRelease.sql = timed("render SQL text", CompiledRelease.sql)
    release_mod.materialize = timed("materialize (DuckDB runs the release)", release_mod.materialize)
    release_mod.verify = timed("verify: checks view, counts, metrics", release_mod.verify)
    verify_mod.check_summary = timed("verify: check summary", verify_mod.check_summary)
    release_mod.suppression.settle = timed("settle suppression", release_mod.suppression.settle)
    release_mod.tidy = timed("tidy (drop working views)", release_mod.tidy)
    DuckDBEngine.record = timed("catalog record", DuckDBEngine.record)
    DuckDBEngine.commit = timed("commit", DuckDBEngine.commit)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="q8_k5_s0")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(DATA / "adult.csv")])
    pol = policy(args.case)
    anon_sql.release(con, pol, replace=True)          # cold: caches filled
    instrument()
    runs: list[dict[str, float]] = []
    print(f"command: python bench/bench_release_phases.py {' '.join(argv or sys.argv[1:])}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.repeat):
        TIMES.clear()
        t = time.perf_counter()
        anon_sql.release(con, pol, replace=True)
        wall = time.perf_counter() - t
        run = dict(TIMES)
        run["other (checks, views, Python glue)"] = wall - sum(run.values())
        run["total"] = wall
        runs.append(run)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    total = statistics.median(r["total"] for r in runs)
    print(f"\nwarm release, {args.case}: median of {args.repeat} releases = {total * 1e3:.0f} ms\n")
    print(f"| phase | median ms | share |\n|---|---|---|")
    for name in sorted({n for r in runs for n in r} - {"total"}, key=lambda n: -statistics.median(
            r.get(n, 0.0) for r in runs)):
        med = statistics.median(r.get(name, 0.0) for r in runs)
        print(f"| {name} | {med * 1e3:.1f} | {med / total:.0%} |")


if __name__ == "__main__":
    main()
