"""What the digest of the released QI values costs (hostile round 9, M9: the release records it, `check` recomputes
it): `anon_sql.runner.digests.released_values_query` over a released-like table (four generalized QIs as text)
against one GROUP BY of the same four QIs (the class count every release and check already runs), in the same run
(a ratio: the machine is shared). Medians of ``--repeat`` runs.

    python bench/bench_released_values.py [--rows 2000000] [--repeat 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb
from sqlglot import exp

from anon_sql.common.sqlbuild import render
from anon_sql.runner.digests import released_values_query

QUASI = ["age", "zip", "sex", "edu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    con.execute("CREATE TABLE t AS SELECT '[' || (i % 7) * 10 || '-' || (i % 7) * 10 + 9 || ']' age, "
                "left(lpad((i % 977)::VARCHAR, 5, '0'), 3) || '**' zip, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END sex, "
                "(i % 5)::VARCHAR edu, 'd' || (i % 13) dx FROM range(?) r(i)", [args.rows])
    digest = render(released_values_query(exp.Table(this=exp.to_identifier("t")), QUASI))
    group_by = "SELECT age, zip, sex, edu, count(*) FROM t GROUP BY ALL"
    times: dict[str, list[float]] = {"group_by": [], "digest": []}
    for _ in range(args.repeat):
        for name, query in (("group_by", group_by), ("digest", digest)):
            t0 = time.perf_counter()
            con.execute(query).fetchall()
            times[name].append(time.perf_counter() - t0)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows={args.rows} quasi={len(QUASI)} threads={args.threads} median of {args.repeat}: "
          f"group_by {m['group_by']:.3f}s digest {m['digest']:.3f}s ratio {m['digest'] / m['group_by']:.2f}")


if __name__ == "__main__":
    main()
