"""DP GROUP BY aggregate vs the same query without DP, same data, same run: prints the time ratio (target ≤ 3×),
for max_groups_contributed = 1 (one group per unit) and = 3, and a DP median (PERCENTILE_CONT) vs DuckDB's median;
beside them, one aggregation keyed on the unit alone (the per-unit pass every exact bounding needs) and one keyed on
(unit, group) (the first pass of a plan that aggregates pairs before choosing a unit's groups) against the same plain
query. `--operators` adds, per query, the operators that took ≥ 5 % of its time (DuckDB's profiler, the last repeat).

Two measures, medians of --repeat interleaved runs: wall seconds of the whole call (dp_query: parse, ledger, SQL,
OpenDP, record), and DuckDB's own CPU seconds of the row-level SQL alone (its profiler), which a loaded shared
machine disturbs far less than wall time.

    python bench/bench_dp.py --rows 1000000        (default 10,000,000)
    python bench/bench_dp.py --rows 1000000 --repeat 1 --operators
    python bench/bench_dp.py --rows 10000000 --repeat 3 --json results.jsonl    (records for python -m bench)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from sqlglot import exp

from anon_sql.dp import create_budget, dp_query
from anon_sql.dp.query import parse_dp_select
from anon_sql.dp.run import build_quantile_sql, build_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Result, emit  # noqa: E402

PLAIN = "SELECT region, COUNT(*) AS n, SUM(LEAST(GREATEST(amount, 0), 100)) AS s FROM events GROUP BY region"
DP = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01, delta = 1e-10, max_groups_contributed = {m}, "
      "max_rows_contributed = 10) region, COUNT(*) AS n, "
      "SUM(amount, contribution_bounds_per_group => (0, 100)) AS s FROM events GROUP BY region")
# the least row-level work exact per-unit bounding needs: one aggregation keyed on every unit (each unit's smallest
# group hash); the DP plan does this and then a second pass that keeps and sums the chosen rows
UNIT_PASS = ("SELECT count(*), sum(h) FROM (SELECT person, min(hash(person, region)) AS h FROM events GROUP BY person)")
# the first pass of a plan keyed on (unit, group): every pair's rows and sum (the DP work would follow on this relation)
PAIR_PASS = ("SELECT count(*), sum(n), sum(s) FROM (SELECT person, region, count(*) AS n, sum(amount) AS s FROM events "
             "GROUP BY person, region)")
PLAIN_MEDIAN = "SELECT region, quantile_cont(LEAST(GREATEST(amount, 0), 100), 0.5) AS q FROM events GROUP BY region"
DP_MEDIAN = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01, delta = 1e-10) region, "
             "PERCENTILE_CONT(amount, 0.5, contribution_bounds_per_row => (0, 100)) AS q FROM events GROUP BY region")


def _sql_texts(text: str) -> list[str]:
    """The row-level statements dp_query runs for `text` (fixed salt; the counted plan where it applies)."""
    q = parse_dp_select(text)
    table = exp.to_table("events")
    texts = [build_sql(q, table, "person", 12345, counted=True).sql(dialect="duckdb")]
    texts += [build_quantile_sql(q, a, table, "person", 12345, counted=True).sql(dialect="duckdb")
              for a in q.aggregates if a.kind == "percentile"]
    return texts


def _cpu(con: duckdb.DuckDBPyConnection, texts: list[str], profile: str) -> tuple[float, list[dict]]:
    """DuckDB's CPU seconds of `texts`, and their profiles (operator trees)."""
    total, trees = 0.0, []
    for text in texts:
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute(f"PRAGMA profiling_output = '{profile}'")
        con.execute(text).fetchall()
        con.execute("PRAGMA disable_profiling")
        with open(profile) as handle:
            tree = json.load(handle)
        total += tree["query"]["cpu_time"]
        trees.append(tree)
    return total, trees


def _operators(trees: list[dict], share: float = 0.05) -> list[tuple[str, int, float]]:
    """(operator, rows out, seconds) of every operator that took at least `share` of the summed operator time."""
    found = []

    def walk(node: dict) -> None:
        found.append((node["name"], node.get("intermediate_rows", 0), node.get("timing", 0.0)))
        for child in node.get("children", []):
            walk(child)
    for tree in trees:
        for node in tree["operator"]:
            walk(node)
    total = sum(t for *_, t in found) or 1.0
    return [op for op in found if op[2] >= share * total]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--operators", action="store_true", help="print each query's costliest operators")
    parser.add_argument("--json", default=None, help="append the results (medians of wall time) to this JSON-lines file")
    args = parser.parse_args()
    con = duckdb.connect()
    units = max(1, args.rows // 10)
    con.execute("CREATE TABLE events AS SELECT i % ? AS person, 'r' || (hash(i) % 50) AS region, "
                "(hash(i * 7) % 200)::DOUBLE AS amount FROM range(?) t(i)", [units, args.rows])
    create_budget(con, "events", epsilon=1e6, delta=0.5 / units, privacy_unit="person")
    cases = [("plain GROUP BY", lambda: con.execute(PLAIN).df(), [PLAIN], None),
             ("floor: one pass keyed on the unit (no DP)", lambda: con.execute(UNIT_PASS).df(), [UNIT_PASS],
              "plain GROUP BY"),
             ("floor of a (unit, group) plan: one pass keyed on (unit, group) (no DP)",
              lambda: con.execute(PAIR_PASS).df(), [PAIR_PASS], "plain GROUP BY"),
             ("dp, max_groups_contributed = 1", lambda: dp_query(con, DP.format(m=1)), _sql_texts(DP.format(m=1)),
              "plain GROUP BY"),
             ("dp, max_groups_contributed = 3", lambda: dp_query(con, DP.format(m=3)), _sql_texts(DP.format(m=3)),
              "plain GROUP BY"),
             ("plain median", lambda: con.execute(PLAIN_MEDIAN).df(), [PLAIN_MEDIAN], None),
             ("dp median (PERCENTILE_CONT)", lambda: dp_query(con, DP_MEDIAN), _sql_texts(DP_MEDIAN), "plain median")]
    wall = {label: [] for label, *_ in cases}
    cpu = {label: [] for label, *_ in cases}
    trees = {}
    with tempfile.TemporaryDirectory() as folder:
        profile = os.path.join(folder, "profile.json")
        for _ in range(args.repeat):          # interleaved, so load swings hit every case alike
            for label, run, texts, _ in cases:
                start = time.perf_counter()
                run()
                wall[label].append(time.perf_counter() - start)
                seconds, trees[label] = _cpu(con, texts, profile)
                cpu[label].append(seconds)
    records = [Result("dp", label, statistics.median(wall[label]), baseline, statistics.median(wall[baseline]),
                      rows=args.rows, repeat=args.repeat, stat="median", target="<= 3x" if label.startswith("dp,") else "",
                      extra={"cpu_s": statistics.median(cpu[label]), "baseline_cpu_s": statistics.median(cpu[baseline])})
               for label, _, _, baseline in cases if baseline]
    emit(records, args.json, echo=False)
    print(f"rows {args.rows:,}  units {units:,}  groups 50  (median of {args.repeat}, interleaved)")
    print("| query | wall s | wall ratio | DuckDB CPU s | CPU ratio |\n| --- | --- | --- | --- | --- |")
    for label, _, _, baseline in cases:
        w, c = statistics.median(wall[label]), statistics.median(cpu[label])
        wr = f"{w / statistics.median(wall[baseline]):.2f}×" if baseline else "1"
        cr = f"{c / statistics.median(cpu[baseline]):.2f}×" if baseline else "1"
        print(f"| {label} | {w:.3f} | {wr} | {c:.2f} | {cr} |")
    if args.operators:
        for label, *_ in cases:
            print(f"\n{label}: operators with ≥ 5 % of the time (last repeat)")
            for name, rows, seconds in _operators(trees[label]):
                print(f"  {name:<24} {rows:>12,} rows  {seconds:7.3f} s")
    print(f"(command: python bench/bench_dp.py --rows {args.rows} --repeat {args.repeat}"
          f"{' --operators' if args.operators else ''}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
