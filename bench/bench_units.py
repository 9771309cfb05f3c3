"""Privacy units at scale (issue 24.6): a level release with ``privacy_unit`` against its floor, and Mondrian over
units against Mondrian over one-row people, measured in the same run (ratios, never absolute targets).

    python bench/bench_units.py                       # 10M rows / 1M units (the issue's size)
    python bench/bench_units.py --rows 1000000        # 1M rows / 100k units (a loaded machine)

Data (DuckDB, seeded): ``rows / 10`` units of about 10 rows each; the QIs (age, sex, zip) are constant per unit, the
diagnosis varies per row. Floor: a copy of the source (CREATE TABLE AS) plus one GROUP BY of the QIs counting
distinct units. Level release: method ``levels`` at (age 1, sex 0, zip 2), k = 5, the unit dropped. Mondrian: k = 5
over the units (``rows`` rows) against the same policy over ``rows / 10`` one-row people without a unit. Each figure
is the median of ``--repeat`` rounds (each case once per round, so a load change hits both sides of a ratio alike),
a ratio the median of the per-round ratios; the load average is printed beside them (the machine is shared).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import duckdb

import anon_sql


def make(con, rows: int, units: int, seed: int = 7) -> None:
    con.execute(f"SELECT setseed({1 / (seed + 1)})")
    con.execute("""CREATE OR REPLACE TABLE people AS
        SELECT u AS pid, 18 + (hash(u, 1) % 70)::INT AS age, CASE WHEN hash(u, 2) % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
               (10000 + hash(u, 3) % 900)::INT AS zip, 'd' || (hash(u, 4) % 20) AS diagnosis
        FROM range(?) t(u)""", [units])
    con.execute("""CREATE OR REPLACE TABLE visits AS
        SELECT p.pid, p.age, p.sex, p.zip, 'd' || (hash(i, 5) % 20) AS diagnosis
        FROM range(?) t(i) JOIN people p ON p.pid = i % ?""", [rows, units])


def policy(name: str, source: str, method: str, unit: bool) -> dict:
    attrs = {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20, 100]}},
             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
             "zip": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 100, 1000]}},
             "diagnosis": {"role": "insensitive"}}
    p = {"name": name, "source": source, "method": method, "attributes": attrs,
         "privacy": {"k": 5, "max_suppression": 0.05}}
    if unit:
        p["privacy_unit"] = "pid"
        attrs["pid"] = {"role": "identifier"}
    elif source == "people":
        attrs["pid"] = {"role": "identifier"}
    if method == "levels":
        p["method_params"] = {"levels": {"age": 1, "sex": 0, "zip": 2}}
    return p


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    units = max(args.rows // 10, 1)
    con = duckdb.connect()
    anon_sql.install(con)
    make(con, args.rows, units)

    def floor():
        con.execute("CREATE OR REPLACE TABLE floor_copy AS SELECT * FROM visits")
        con.execute("SELECT age, sex, zip, count(DISTINCT pid) FROM visits GROUP BY ALL").fetchall()

    def level_release():
        anon_sql.release(con, policy("lv", "visits", "levels", True), replace=True)

    def mondrian_units():
        anon_sql.release(con, policy("mu", "visits", "mondrian", True), replace=True)

    def mondrian_rows():
        anon_sql.release(con, policy("mr", "people", "mondrian", False), replace=True)

    level_release(), mondrian_units(), mondrian_rows()   # warm-up (and a check that each one releases)
    cases = [("floor", floor), ("level release, unit", level_release), ("mondrian, units", mondrian_units),
             ("mondrian, one-row people", mondrian_rows)]
    # rounds: each case once per round, so a change of the shared machine's load hits a ratio's both sides alike;
    # a ratio is the median of the per-round ratios
    rounds = [{name: timed(fn) for name, fn in cases} for _ in range(args.repeat)]
    t = {name: statistics.median(r[name] for r in rounds) for name, _ in cases}
    print(f"bench_units: {args.rows:,} rows / {units:,} units, median of {args.repeat} rounds, load "
          f"{os.getloadavg()[0]:.1f}")
    for name, secs in t.items():
        print(f"  {name:28s} {secs:8.3f} s")
    level = statistics.median(r["level release, unit"] / r["floor"] for r in rounds)
    per_round = [r["mondrian, units"] / r["mondrian, one-row people"] for r in rounds]
    mondrian = statistics.median(per_round)
    print(f"  level release / floor        {level:8.2f}x   (goal <= 3)")
    print(f"  mondrian units / one-row     {mondrian:8.2f}x   (goal <= 1.5; rounds: "
          f"{', '.join(f'{x:.2f}' for x in per_round)})")

if __name__ == "__main__":
    main()
