"""Privacy units at scale (issue 24.6): a level release with ``privacy_unit`` against its floor, and Mondrian over
units against Mondrian over one-row people, measured in the same run (ratios, never absolute targets).

    python bench/bench_units.py                       # 10M rows / 1M units (the issue's size)
    python bench/bench_units.py --rows 1000000        # 1M rows / 100k units (a loaded machine)
    python bench/bench_units.py --rows 1000000 --cases level --repeat 5 --json results.jsonl

Data: bench/generate_units.py (seeded): ``rows / 10`` units of about 10 rows each; the QIs (age, sex, zip) are
constant per unit, the diagnosis varies per row. Floor: a copy of the source (CREATE TABLE AS) plus one GROUP BY of
the QIs counting distinct units. Level release: method ``levels`` at (age 1, sex 0, zip 2), k = 5, the unit
dropped. Mondrian: k = 5 over the ``rows / 10`` units (``rows`` rows) against the same policy over ``rows / 10``
one-row people without a unit. Each figure is the median of ``--repeat`` rounds (each case once per round, so a
load change hits both sides of a ratio alike); each record also carries the per-round ratios, the statements of
the last release and the slowest of them (a timing proxy around the connection, bench only).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import duckdb

import anon_sql
from anon_sql.engines import DuckDBEngine
from anon_sql.runner.run import release_on

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_large import Timed  # noqa: E402
from generate_units import create_units  # noqa: E402
from results import Result, emit  # noqa: E402


def policy(name: str, source: str, method: str, unit: bool) -> dict:
    """The bench's policy over ``source``: QIs age / sex / zip, k = 5, 5 % suppression; the unit ``pid`` when
    ``unit``, else ``pid`` an identifier of one-row people."""
    attrs: dict[str, Any] = {
        "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20, 100]}},
        "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "zip": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 100, 1000]}},
        "diagnosis": {"role": "insensitive"},
        "pid": {"role": "identifier"}}
    p: dict[str, Any] = {"name": name, "source": source, "method": method, "attributes": attrs,
                         "privacy": {"k": 5, "max_suppression": 0.05}}
    if unit:
        p["privacy_unit"] = "pid"
    if method == "levels":
        p["method_params"] = {"levels": {"age": 1, "sex": 0, "zip": 2}}
    return p


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(rows: int, cases: list[str], repeat: int, seed: int = 0, threads: int | None = None) -> list[Result]:
    units = max(rows // 10, 1)
    con = duckdb.connect()
    if threads:
        con.execute("SET threads = ?", [threads])
    anon_sql.install(con)
    create_units(con, rows, units, seed)
    spy = Timed(con)

    def release(name: str, source: str, method: str, unit: bool) -> Callable[[], Any]:
        def go() -> Any:
            spy.times.clear()
            return release_on(DuckDBEngine(spy), policy(name, source, method, unit), replace=True)
        return go

    def floor() -> None:
        con.execute("CREATE OR REPLACE TABLE floor_copy AS SELECT * FROM visits")
        con.execute("SELECT age, sex, zip, count(DISTINCT pid) FROM visits GROUP BY ALL").fetchall()

    pairs = {"level": (("level release, privacy unit", release("lv", "visits", "levels", True)),
                       ("copy of the source + one GROUP BY of the QIs (distinct units)", floor), "<= 3x"),
             "mondrian": (("mondrian release, 1 unit = ~10 rows", release("mu", "visits", "mondrian", True)),
                          ("mondrian release, as many one-row people", release("mr", "people", "mondrian", False)),
                          "<= 1.5x")}
    out = []
    for case in cases:
        (name, fn), (base_name, base_fn), target = pairs[case]
        fn(), base_fn()   # warm-up (and a check that each one releases)
        # rounds: both sides once per round, so a change of the shared machine's load hits a ratio's both sides
        took, base, stats = [], [], []
        for _ in range(repeat):
            took.append(timed(fn))
            stats = sorted(spy.times, reverse=True)
            count = len(spy.times)
            base.append(timed(base_fn))
        ratios = [a / b for a, b in zip(took, base)]
        out.append(Result("units", name, statistics.median(took), base_name, statistics.median(base), rows=rows,
                          repeat=repeat, target=target, stat="median",
                          extra={"units": units, "median of round ratios": statistics.median(ratios),
                                 "ratios": " ".join(f"{r:.2f}" for r in ratios), "statements": count,
                                 "slowest statements (s)": "; ".join(f"{s:.2f} {q[:70]}" for s, q in stats[:4])}))
        emit(out[-1:], None)
    con.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--cases", nargs="+", default=["level", "mondrian"], choices=["level", "mondrian"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's)")
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args(argv)
    results = run(args.rows, args.cases, args.repeat, args.seed, args.threads)
    emit(results, args.json, echo=False)
    for r in results:
        print(f"  {r.case}: median of round ratios {r.extra['median of round ratios']:.2f}x (rounds {r.extra['ratios']}), "
              f"{r.extra['statements']} statements; slowest: {r.extra['slowest statements (s)']}")


if __name__ == "__main__":
    main()
