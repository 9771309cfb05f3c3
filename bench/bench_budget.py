"""What a suppression budget costs the optimal search (issue 17.2): the same search with a 4 % budget and at 0 %, in
one run, as a ratio — on Adult (30,162 rows, ARX's 8 QIs) and on Adult resampled to 300k rows (seeded) with k scaled
to the rows (k = 5 · rows / 30,162), for DM (``discernibility``, not monotone with a budget) and DM* (``dm_star``).

    python bench/bench_budget.py                     # 30k and 300k, best of 3
    python bench/bench_budget.py --rows 300000 --repeat 5

"search" is the search after the base aggregation (a fresh lattice each run, measuring only the objective).
The machine is shared: the load average is printed, and only the ratios compare.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anon_sql                                                      # noqa: E402
from bench_arx import Q8                                             # noqa: E402
from anon_sql.lattice import Lattice                                 # noqa: E402
from anon_sql.methods import get_method                              # noqa: E402
from bench_search import DATA, context, policy, resample              # noqa: E402


def search_time(ctx, objective: str, repeat: int) -> tuple[float, int, dict]:
    """Best search time (after the base aggregation) over ``repeat`` fresh lattices built as ``plan`` builds them
    (only the objective's measure), the nodes evaluated and the optimum."""
    m = get_method("optimal", {"objective": objective})
    best, plan = float("inf"), None
    for _ in range(repeat):
        lat = Lattice.from_context(ctx, rows=False, measures=[m.measure])
        t = time.perf_counter()
        plan = m.search(lat, ctx)
        best = min(best, time.perf_counter() - t)
    return best, plan.info["nodes_evaluated"], plan.levels


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[300_000], help="resampled sizes besides Adult itself")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.04)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE adult AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(DATA / "adult.csv")])
    n = con.execute("SELECT count(*) FROM adult").fetchall()[0][0]
    print(f"command: python bench/bench_budget.py {' '.join(argv or sys.argv[1:])}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}")
    print(f"| rows | k | objective | 0 % search ms | nodes | {args.budget:.0%} search ms | nodes | budget / 0 % |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        sources = [("adult", n)] + [(resample(con, r, args.seed, Path(tmp)), r) for r in args.rows]
        for source, rows in sources:
            k = round(5 * rows / n)
            for objective in ("discernibility", "dm_star"):
                out = []
                for budget in (0.0, args.budget):
                    pol = policy(source, Q8, "optimal", objective, name=f"budget_{rows}", k=k)
                    pol["privacy"]["max_suppression"] = budget
                    out.append(search_time(context(con, pol), objective, args.repeat))
                (t0, n0, _), (t4, n4, _) = out
                print(f"| {rows} | {k} | {objective} | {t0 * 1e3:.0f} | {n0} | {t4 * 1e3:.0f} | {n4} | "
                      f"{t4 / t0:.2f}x |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
