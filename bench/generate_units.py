"""The privacy-unit data set of issue 24.6: ``units`` people with about ``rows / units`` visits each, seeded.

``people`` holds one row per person (``pid``, age, sex, zip, diagnosis); ``visits`` holds ``rows`` rows, row ``i``
belonging to person ``i % units`` with that person's QIs (constant inside a unit) and a diagnosis of its own. Every
value is a seeded hash of the row or person number, so the same (rows, units, seed) gives the same tables on any
machine and at any thread count (no ``random()``, whose sequence depends on the scan's parallelism).

    python bench/generate_units.py --rows 10000000            # → bench/data/units_10000000_s0/{people,visits}.parquet

The bench (bench/bench_units.py) builds the tables in its own database with :func:`create_units`; the Parquet
files are for other tools. bench/data is ignored by git: never commit data.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import duckdb

DATA = Path(__file__).resolve().parent / "data"


def create_units(con: duckdb.DuckDBPyConnection, rows: int, units: int | None = None, seed: int = 0) -> None:
    """``people`` (``units`` rows, default ``rows // 10``) and ``visits`` (``rows`` rows) in ``con``."""
    units = units or max(rows // 10, 1)
    # bench-only SQL over fixed names; the sizes and the seed are bound parameters
    con.execute("""CREATE OR REPLACE TABLE people AS
        SELECT u AS pid, (18 + hash(u, $s, 1) % 70)::INT AS age,
               CASE WHEN hash(u, $s, 2) % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
               (10000 + hash(u, $s, 3) % 900)::INT AS zip, 'd' || (hash(u, $s, 4) % 20) AS diagnosis
        FROM range($n) t(u)""", {"s": seed, "n": units})
    con.execute("""CREATE OR REPLACE TABLE visits AS
        SELECT p.pid, p.age, p.sex, p.zip, 'd' || (hash(i, $s, 5) % 20) AS diagnosis
        FROM range($r) t(i) JOIN people p ON p.pid = i % $n""", {"s": seed, "r": rows, "n": units})


def generate_units(rows: int, out: Path | None = None, seed: int = 0) -> Path:
    """Write ``people.parquet`` and ``visits.parquet`` into ``out`` (default bench/data/units_<rows>_s<seed>)."""
    out = (out or DATA / f"units_{rows}_s{seed}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    create_units(con, rows, seed=seed)
    for table in ("people", "visits"):
        con.execute(f"COPY {table} TO '{out / (table + '.parquet')}' (FORMAT parquet)")   # bench-only fixed names
    con.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(generate_units(args.rows, args.out, args.seed))


if __name__ == "__main__":
    main()
