"""What the digests of a released table cost (hostile round 9, M9; round 10, B40; round 11, M24: the release records
them, `check` recomputes them): `anon_sql.runner.digests.released_values_query` over a released-like table (four
generalized QIs as text) and `content_digest_query` of its rows, against one GROUP BY of the same four QIs (the class
count every release and check already runs), in the same run (a ratio: the machine is shared). The content digest:
the counted kind a release records (one GROUP BY of the rows, an md5 per distinct row; session 14's md5 of every
row cost 15-29x a GROUP BY) and, for scale, the forgeable hash sum no release records any more. ``--shape classes``: rows repeat as a
release's do (2,000 classes × 13 diagnoses); ``--shape distinct``: nearly every row differs (the counted kind's
worst case). Medians of ``--repeat`` runs.

    python bench/bench_released_values.py [--rows 1000000] [--shape classes|distinct] [--repeat 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb
from sqlglot import exp

from anon_sql.common.sqlbuild import render
from anon_sql.runner.digests import content_digest_query, hash_sum, released_values_query

QUASI = ["age", "zip", "sex", "edu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shape", choices=["classes", "distinct"], default="classes")
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    # classes: every QI a function of the row's class e (2,000 classes), the diagnosis of the row; distinct: of i,
    # with the zip code kept whole (7 × 977 × 2 × 5 × 13 combinations)
    key, dx, digits = ("i % 2000", "hash(i) % 13", 3) if args.shape == "classes" else ("i", "i % 13", 5)
    con.execute("CREATE TABLE t AS SELECT '[' || (e % 7) * 10 || '-' || (e % 7) * 10 + 9 || ']' age, "
                f"left(lpad((e % 977)::VARCHAR, 5, '0'), {digits}) zip, CASE WHEN e % 2 = 0 THEN 'F' ELSE 'M' END sex, "
                f"(e % 5)::VARCHAR edu, 'd' || (d) dx FROM (SELECT {key} AS e, {dx} AS d FROM range(?) r(i))",
                [args.rows])
    distinct = con.execute("SELECT count(*) FROM (SELECT DISTINCT * FROM t)").fetchall()[0][0]
    table = exp.Table(this=exp.to_identifier("t"))
    columns = [*QUASI, "dx"]
    types = {c: "VARCHAR" for c in columns}
    queries = {"group_by": "SELECT age, zip, sex, edu, count(*) FROM t GROUP BY ALL",
               "digest": render(released_values_query(table, QUASI)),
               "content_counted": render(content_digest_query(table, columns, types)),
               "hash_sum": render(exp.select(hash_sum(columns)).from_(table.copy()))}
    times: dict[str, list[float]] = {name: [] for name in queries}
    for _ in range(args.repeat):
        for name, query in queries.items():
            t0 = time.perf_counter()
            con.execute(query).fetchall()
            times[name].append(time.perf_counter() - t0)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows={args.rows} distinct={distinct} shape={args.shape} quasi={len(QUASI)} threads={args.threads} median of {args.repeat}: "
          + "  ".join(f"{k} {v:.3f}s ({v / m['group_by']:.2f}x)" for k, v in m.items()))


if __name__ == "__main__":
    main()
