"""What `check` pays to re-derive slicing's column groups from the source (issue 28.8): `anon_sql.check` of one
slicing release with the re-derivation against the same check with it switched off, in the same run (a ratio: the
machine is shared). Random rows with a correlated pair (age, zipcode); medians of ``--repeat`` runs.

    python bench/bench_check_slicing.py [--rows 50000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import numpy as np
import pandas as pd

import anon_sql
import anon_sql.audit.recheck as recheck


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng, n = np.random.default_rng(1), args.rows
    age = rng.choice([25, 35, 45, 55, 65], n)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "age": age,
                          "zipcode": np.where(age > 45, "130", "148") + rng.choice(["01", "02", "03"], n),
                          "diagnosis": rng.choice(["flu", "cold", "gastritis", "ulcer", "bronchitis"], n)})
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM frame")
    anon_sql.release(con, {"name": "sl", "source": "r", "method": "slicing", "seed": 7,
                           "attributes": {"sex": {"role": "quasi"}, "age": {"role": "quasi"},
                                          "zipcode": {"role": "quasi"}, "diagnosis": {"role": "sensitive"}},
                           "privacy": {"k": 3, "l_diversity": {"kind": "slicing", "l": 2}},
                           "method_params": {"columns": 2}})
    derive = recheck.derived_groups
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.repeat):
        for name in ("without", "with"):
            recheck.derived_groups = derive if name == "with" else (lambda *a: (None, "switched off"))
            t0 = time.perf_counter()
            anon_sql.check(con, "sl")
            times[name].append(time.perf_counter() - t0)
    recheck.derived_groups = derive
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows {n}, median of {args.repeat}: check without re-derivation {m['without']:.3f} s, "
          f"with {m['with']:.3f} s, ratio {m['with'] / m['without']:.2f}x")


if __name__ == "__main__":
    main()
