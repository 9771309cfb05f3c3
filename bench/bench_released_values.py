"""What the digest of the released QI values costs (hostile round 9, M9: the release records it, `check` recomputes
it): `anon_sql.runner.digests.released_values_query` over a released-like table (four generalized QIs as text)
against one GROUP BY of the same four QIs (the class count every release and check already runs), in the same run
(a ratio: the machine is shared). Beside it, the content digest of the table's rows
(`content_digest_query`, hostile round 10, B40): the sha256 of the sorted row md5s (recorded up to a million rows)
and the hash sum (beyond). Medians of ``--repeat`` runs.

    python bench/bench_released_values.py [--rows 1000000] [--repeat 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb
from sqlglot import exp

from anon_sql.common.sqlbuild import render
from anon_sql.common.content_kinds import CONTENT_HASH_SUM, CONTENT_SHA256
from anon_sql.runner.digests import content_digest_query, released_values_query

QUASI = ["age", "zip", "sex", "edu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    con.execute("CREATE TABLE t AS SELECT '[' || (i % 7) * 10 || '-' || (i % 7) * 10 + 9 || ']' age, "
                "left(lpad((i % 977)::VARCHAR, 5, '0'), 3) || '**' zip, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END sex, "
                "(i % 5)::VARCHAR edu, 'd' || (i % 13) dx FROM range(?) r(i)", [args.rows])
    table = exp.Table(this=exp.to_identifier("t"))
    columns = [*QUASI, "dx"]
    queries = {"group_by": "SELECT age, zip, sex, edu, count(*) FROM t GROUP BY ALL",
               "digest": render(released_values_query(table, QUASI)),
               "content_sha256": render(content_digest_query(table, columns, CONTENT_SHA256)),
               "content_hash_sum": render(content_digest_query(table, columns, CONTENT_HASH_SUM))}
    times: dict[str, list[float]] = {name: [] for name in queries}
    for _ in range(args.repeat):
        for name, query in queries.items():
            t0 = time.perf_counter()
            con.execute(query).fetchall()
            times[name].append(time.perf_counter() - t0)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows={args.rows} quasi={len(QUASI)} threads={args.threads} median of {args.repeat}: "
          + "  ".join(f"{k} {v:.3f}s ({v / m['group_by']:.2f}x)" for k, v in m.items()))


if __name__ == "__main__":
    main()
