"""Assessing a table vs one bare GROUP BY over its quasi-identifiers (issue 15: <= 3x at 10M rows).

    python bench/bench_assess.py --rows 10000000 [--repeat 5] [--quasi sex,age,race,...] [--sensitive salary-class]

Data: bench/generate.py's seeded resample of Adult, loaded into an in-memory table. Every time is the best of
``--repeat`` runs, the two measured alternately in the same process; the reference is
``SELECT <QIs>, count(*) FROM adult GROUP BY <QIs>`` fetched as Arrow (the one pass ``assess`` cannot avoid). The
assessment computes every measure: k, l, t (equal, ordered), α, β, δ, the risks, population uniques (sampling
fraction 0.01) and distinction / separation per QI. The machine's load average is printed with the table.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_metrics_scale import best  # noqa: E402
from bench_release import QIS  # noqa: E402
from generate import generate  # noqa: E402
from results import Result, emit  # noqa: E402

from anon_sql.common.sqlbuild import col, render  # noqa: E402
from sqlglot import exp  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quasi", default=",".join(QIS))
    ap.add_argument("--sensitive", default="salary-class")
    ap.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = ap.parse_args()
    quasi = args.quasi.split(",")
    sensitive = [s for s in args.sensitive.split(",") if s]
    path = Path(__file__).resolve().parent / "data" / f"adult_{args.rows}.parquet"
    if not path.exists():
        generate(args.rows, path)
    con = duckdb.connect()
    con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(path)])
    cols = [col(q) for q in quasi]
    bare = render(exp.select(*cols, exp.Count(this=exp.Star())).from_("adult").group_by(*[c.copy() for c in cols]))

    def group_by() -> None:
        con.sql(bare).to_arrow_table()

    def assess() -> None:
        anon_sql.assess(con, "adult", quasi, sensitive, sampling_fraction=0.01)

    group_by(), assess()                       # warm-up
    t_ref, t_assess = [], []
    for _ in range(args.repeat):
        t_ref.append(best(group_by, 1))
        t_assess.append(best(assess, 1))
    ref, ass = min(t_ref), min(t_assess)
    load = os.getloadavg()
    print(f"rows={args.rows:,} QIs={len(quasi)} sensitive={sensitive} repeat={args.repeat} "
          f"load average={load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| measured | best time (s) | ratio to GROUP BY |")
    print("| --- | --- | --- |")
    print(f"| bare GROUP BY over the QIs | {ref:.3f} | 1.0x |")
    print(f"| anon_sql.assess (all measures) | {ass:.3f} | {ass / ref:.2f}x |")
    emit([Result("assess", "assess (all measures)", ass, "bare GROUP BY over the QIs", ref, rows=args.rows,
                 repeat=args.repeat, target="<= 3x")], args.json)


if __name__ == "__main__":
    main()
