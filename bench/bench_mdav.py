"""Univariate MDAV over 1M rows against one sort of the same column (issue 26 part 8: target ≤ 10×).

    python bench/bench_mdav.py                 # 1M rows, k = 3 and 10, best of 3
    python bench/bench_mdav.py --rows 200000 --k 5 --repeat 5

Columns: "sort s" = numpy's np.sort of the column (the baseline the target names); "mdav s" = the labels
(microaggregation.mdav_univariate: argsort + grouping) plus the group means written back (aggregate);
"perturb s" = anon_sql.sdc.perturb end to end on a DuckDB table (read the column, MDAV, write the table back);
ratio = mdav s / sort s. The column is lognormal incomes (seed 42), float64.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from anon_sql.sdc import microaggregation  # noqa: E402
from anon_sql.sdc.perturb import perturb  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, nargs="+", default=[3, 10])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-perturb", action="store_true", help="skip the end-to-end DuckDB run")
    args = ap.parse_args()
    x = np.random.default_rng(42).lognormal(10, 1, args.rows)
    sort_s = best(lambda: np.sort(x), args.repeat)
    con = duckdb.connect()
    if not args.no_perturb:
        con.register("frame", pd.DataFrame({"income": x}))
        con.execute("CREATE TABLE incomes AS SELECT * FROM frame")
        con.unregister("frame")
    print(f"command: python bench/bench_mdav.py --rows {args.rows} --k {' '.join(map(str, args.k))} "
          f"--repeat {args.repeat}")
    print(f"{'rows':>9} {'k':>3} {'sort s':>8} {'mdav s':>8} {'ratio':>6} {'perturb s':>10}")
    for k in args.k:
        mdav_s = best(lambda: microaggregation.aggregate(x, microaggregation.mdav_univariate(x, k)), args.repeat)
        perturb_s = float("nan") if args.no_perturb else best(
            lambda: perturb(con, "incomes", {"income": {"kind": "microaggregation", "k": k}}, seed=1), 1)
        print(f"{args.rows:>9} {k:>3} {sort_s:>8.3f} {mdav_s:>8.3f} {mdav_s / sort_s:>6.2f} {perturb_s:>10.3f}")


if __name__ == "__main__":
    main()
