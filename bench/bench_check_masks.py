"""What `check` pays to re-derive deterministic masks from the source (hostile round 9, M8): `anon_sql.check` of
one release with three masked columns (`hash`, `partial`, `partial_email`), with the `masks <column>` rows against
the same check with them switched off, in the same run (a ratio: the machine is shared); medians of ``--repeat``.

    python bench/bench_check_masks.py [--rows 200000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb

import anon_sql
import anon_sql.audit.recheck as recheck


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute("""CREATE TABLE custs AS SELECT i AS cid, 20 + 10 * (i % 5) AS age,
        CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, printf('%09d', i) AS ssn,
        'user' || i || '@mail' || (i % 4) || '.com' AS email, '4111' || lpad(i::VARCHAR, 12, '0') AS card
        FROM range(?) t(i)""", [args.rows])
    anon_sql.release(con, {"name": "mk", "source": "custs", "method": "levels", "method_params": {
        "levels": {"age": 0, "sex": 0}}, "privacy": {"k": 5}, "attributes": {
        "cid": {"role": "identifier"}, "age": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
        "ssn": {"role": "identifier", "mask": {"function": "hash", "salt": "pepper"}},
        "email": {"role": "identifier", "mask": {"function": "partial_email"}},
        "card": {"role": "insensitive", "mask": {"function": "partial", "keep_start": 2, "pad": "XXXX",
                                                  "keep_end": 2}}}})
    derive = recheck.source_mask_rows
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.repeat):
        for name in ("without", "with"):
            recheck.source_mask_rows = derive if name == "with" else (lambda *a: [])
            t0 = time.perf_counter()
            rows = anon_sql.check(con, "mk")
            times[name].append(time.perf_counter() - t0)
            assert rows["passed"].all() and (name == "without") != any(rows["check"].str.startswith("masks "))
    recheck.source_mask_rows = derive
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows {args.rows}, median of {args.repeat}: check without masks rows {m['without']:.3f} s, "
          f"with {m['with']:.3f} s, ratio {m['with'] / m['without']:.2f}x")


if __name__ == "__main__":
    main()
