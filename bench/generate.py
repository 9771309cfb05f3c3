"""Seeded Adult-like data at any size: resample Adult's rows (distinct combinations stay Adult's), as Parquet.

    python bench/generate.py --rows 1000000 --out bench/data/adult_1m.parquet
"""
from __future__ import annotations

import argparse
from pathlib import Path

import duckdb

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"


def generate(rows: int, out: Path, seed: int = 0) -> Path:
    """Resample Adult with replacement in DuckDB (seeded) and write Parquet."""
    out.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SELECT setseed(?)", [seed / 2**31])
    con.execute("CREATE TABLE adult AS SELECT row_number() OVER () - 1 AS i, * FROM read_csv(?, delim=';')",
                [str(ADULT)])
    n = con.execute("SELECT count(*) FROM adult").fetchall()[0][0]
    con.execute(
        "COPY (SELECT a.* EXCLUDE (i) FROM range(?) r(x) JOIN adult a "
        "ON a.i = CAST(hash(r.x, ?) % ? AS BIGINT)) TO ? (FORMAT parquet)",
        [rows, seed, n, str(out)])
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(generate(args.rows, args.out, args.seed))
