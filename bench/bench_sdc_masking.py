"""Masking macros vs a plain upper() over the same column (issue 26: each <= 2x at 10M rows).

    python bench/bench_sdc_masking.py --rows 10000000 [--repeat 3]

Data: a generated VARCHAR column of 16-digit card numbers (and a DOUBLE and a DATE column for noise / dnoise),
in an in-memory table. Each query aggregates its output (sum of lengths / sum) so nothing is fetched row by row;
every time is the best of ``--repeat`` runs, the reference and the macro measured alternately. The load average
is printed with the table: on a loaded shared machine the ratios, not the seconds, are what compare.
"""
from __future__ import annotations

import argparse
import os
import time

import duckdb

from anon_sql.sdc.masking import install_masking

REFERENCE = "SELECT sum(length(upper(card))) FROM cards"
CASES = {
    "anon.partial(card, 2, 'XXXX', 2)": "SELECT sum(length(anon.partial(card, 2, 'XXXX', 2))) FROM cards",
    "anon.partial_email(mail)": "SELECT sum(length(anon.partial_email(mail))) FROM cards",
    "anon.redact(card)": "SELECT sum(length(anon.redact(card))) FROM cards",
    "anon.hash(card, 'salt')": "SELECT sum(length(anon.hash(card, 'salt'))) FROM cards",
    "anon.noise(amount, 0.1)": "SELECT sum(anon.noise(amount, 0.1)) FROM cards",
    "anon.noise(amount, 0.1, 42, id)": "SELECT sum(anon.noise(amount, 0.1, 42, id)) FROM cards",
    "anon.dnoise(day, INTERVAL 10 DAY)": "SELECT max(anon.dnoise(day, INTERVAL 10 DAY)) FROM cards",
}


def best(con, sql: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        con.execute(sql).fetchall()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    con = duckdb.connect()
    install_masking(con)
    con.execute("""CREATE TABLE cards AS SELECT i AS id,
                   CAST(4000000000000000 + (i * 7919) % 1000000000000000 AS VARCHAR) AS card,
                   'user' || i || '@mail.example.org' AS mail, (i % 1000) * 1.5 AS amount,
                   DATE '1950-01-01' + CAST(i % 20000 AS INTEGER) AS day FROM range(?) r(i)""", [args.rows])
    print(f"rows {args.rows:,}, best of {args.repeat}, load average {os.getloadavg()[0]:.2f} (2 cores shared)")
    print(f"{'query':40} {'seconds':>8} {'upper()':>8} {'ratio':>6}")
    for name, sql in CASES.items():
        ref, t = 0.0, 0.0
        ref, t = best(con, REFERENCE, args.repeat), best(con, sql, args.repeat)
        print(f"{name:40} {t:8.3f} {ref:8.3f} {t / ref:6.2f}")


if __name__ == "__main__":
    main()
