"""DP GROUP BY aggregate vs the same query without DP, same data, same run: prints the time ratio (target ≤ 3×),
for max_groups_contributed = 1 (one group per unit: a GROUP BY unit over a row hash) and = 3 (a window keeping each
unit's 3 smallest-hash groups).

    python bench/bench_dp.py --rows 1000000        (default 10,000,000)
"""
from __future__ import annotations

import argparse
import os
import time

import duckdb

from anon_sql.dp import create_budget, dp_query

PLAIN = "SELECT region, COUNT(*) AS n, SUM(LEAST(GREATEST(amount, 0), 100)) AS s FROM events GROUP BY region"
DP = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.01, delta = 1e-10, max_groups_contributed = {m}, "
      "max_rows_contributed = 10) region, COUNT(*) AS n, "
      "SUM(amount, contribution_bounds_per_group => (0, 100)) AS s FROM events GROUP BY region")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect()
    units = max(1, args.rows // 10)
    con.execute("CREATE TABLE events AS SELECT i % ? AS person, 'r' || (hash(i) % 50) AS region, "
                "(hash(i * 7) % 200)::DOUBLE AS amount FROM range(?) t(i)", [units, args.rows])
    create_budget(con, "events", epsilon=1e6, delta=0.5 / units, privacy_unit="person")
    timings = {}
    cases = (("plain", lambda: con.execute(PLAIN).df()),
             ("dp, max_groups_contributed = 1", lambda: dp_query(con, DP.format(m=1))),
             ("dp, max_groups_contributed = 3", lambda: dp_query(con, DP.format(m=3))))
    for label, run in cases:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        timings[label] = best
    print(f"rows {args.rows:,}  units {units:,}  groups 50  (best of {args.repeat})")
    print("| query | seconds |\n| --- | --- |")
    for label, seconds in timings.items():
        print(f"| {label} | {seconds:.3f} |")
    for label in timings:
        if label != "plain":
            print(f"ratio {label} / plain = {timings[label] / timings['plain']:.2f}x")
    print(f"(command: python bench/bench_dp.py --rows {args.rows}; load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
