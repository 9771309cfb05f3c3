"""What the source digest a release records for `check` costs (issue 28.8): the digest query of
`anon_sql.runner.digests` (records, rows, the sum of every row's hash) against one GROUP BY of four QIs over the same
table, in the same run (a ratio: the machine is shared). Medians of ``--repeat`` runs.

    python bench/bench_source_digest.py [--rows 2000000] [--repeat 5] [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb
from sqlglot import exp

from anon_sql.common.sqlbuild import render
from anon_sql.runner.digests import source_digest_query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    con.execute("CREATE TABLE t AS SELECT (i % 70)::INT age, (i % 977)::VARCHAR zip, "
                "CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END sex, (i % 13)::VARCHAR dx, i id, "
                "'name' || i::VARCHAR nm, random() inc, (i % 5)::INT edu FROM range(?) r(i)", [args.rows])
    columns = [r[0] for r in con.execute("DESCRIBE t").fetchall()]
    digest = render(source_digest_query(exp.Table(this=exp.to_identifier("t")), columns, None))
    group_by = "SELECT age, zip, sex, dx, count(*) FROM t GROUP BY ALL"
    times: dict[str, list[float]] = {"group_by": [], "digest": []}
    for _ in range(args.repeat):
        for name, query in (("group_by", group_by), ("digest", digest)):
            t0 = time.perf_counter()
            con.execute(query).fetchall()
            times[name].append(time.perf_counter() - t0)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows={args.rows} columns={len(columns)} threads={args.threads} median of {args.repeat}: "
          f"group_by {m['group_by']:.3f}s digest {m['digest']:.3f}s ratio {m['digest'] / m['group_by']:.2f}")


if __name__ == "__main__":
    main()
