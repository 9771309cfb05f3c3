"""Masking macros vs a plain upper() over the same column, in one run (issue 26: each <= 2x).

    python bench/bench_sdc_masking.py --rows 2000000 [--repeat 5] [--threads 1] [--only partial]

Data: a generated VARCHAR column of 16-digit card numbers, an email column (and a DOUBLE and a DATE column for
noise / dnoise), in an in-memory table. Each query aggregates its output (sum of lengths / sum) so nothing is fetched
row by row. The reference and the macro are timed alternately, ``--repeat`` pairs; each row prints the median of the
per-pair ratios (on a loaded shared machine the ratios, not the seconds, are what compare). ``sha256(card)`` alone is the cost floor of ``anon.hash``. ``(former)`` rows are the definitions the macros
had before they were rewritten for speed, created here under another name, so the gain is measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import duckdb

from anon_sql.sdc.masking import install_masking

REFERENCE = "SELECT sum(length(upper(card))) FROM cards"
MAIL_REFERENCE = "SELECT sum(length(upper(mail))) FROM cards"
# the macros before this rewrite (session 10's: three length() over CASE counts, split_part on '.' for the top level)
FORMER = (Path(__file__).resolve().parent / "former_masking.sql").read_text(encoding="utf-8")
# name -> (query, reference): partial_email is compared with upper() over the email column it reads
CASES = {
    "anon.partial(card, 2, 'XXXX', 2)": ("SELECT sum(length(anon.partial(card, 2, 'XXXX', 2))) FROM cards", REFERENCE),
    "  (former) partial": ("SELECT sum(length(former_partial(card, 2, 'XXXX', 2))) FROM cards", REFERENCE),
    "anon.partial_email(mail)": ("SELECT sum(length(anon.partial_email(mail))) FROM cards", MAIL_REFERENCE),
    "  (former) partial_email": ("SELECT sum(length(former_partial_email(mail))) FROM cards", MAIL_REFERENCE),
    "anon.redact(card)": ("SELECT sum(length(anon.redact(card))) FROM cards", REFERENCE),
    "anon.hash(card, 'salt')  [sha256]": ("SELECT sum(length(anon.hash(card, 'salt'))) FROM cards", REFERENCE),
    "  sha256(card) alone  [floor]": ("SELECT sum(length(sha256(card))) FROM cards", REFERENCE),
    "  md5('salt' || card)  [not used]": ("SELECT sum(length(md5('salt' || card))) FROM cards", REFERENCE),
    "anon.noise(amount, 0.1)": ("SELECT sum(anon.noise(amount, 0.1)) FROM cards", REFERENCE),
    "anon.noise(amount, 0.1, 42, id)": ("SELECT sum(anon.noise(amount, 0.1, 42, id)) FROM cards", REFERENCE),
    "anon.dnoise(day, INTERVAL 10 DAY)": ("SELECT max(anon.dnoise(day, INTERVAL 10 DAY)) FROM cards", REFERENCE),
}


def timed(con, sql: str) -> float:
    start = time.perf_counter()
    con.execute(sql).fetchall()
    return time.perf_counter() - start


def ratio(con, sql: str, reference: str, repeat: int) -> tuple[float, float, float]:
    """Median time of ``sql``, of ``reference`` (timed alternately), and the median of the per-pair ratios."""
    ours, ref = [], []
    for _ in range(repeat):
        ref.append(timed(con, reference))
        ours.append(timed(con, sql))
    return statistics.median(ours), statistics.median(ref), statistics.median(o / r for o, r in zip(ours, ref))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's)")
    ap.add_argument("--only", default=None, help="run only the rows whose name contains this text (e.g. partial)")
    args = ap.parse_args()
    con = duckdb.connect()
    if args.threads:
        con.execute(f"SET threads = {int(args.threads)}")
    install_masking(con)
    con.execute(FORMER)
    con.execute("""CREATE TABLE cards AS SELECT i AS id,
                   CAST(4000000000000000 + (i * 7919) % 1000000000000000 AS VARCHAR) AS card,
                   'user' || i || '@mail.example.org' AS mail, (i % 1000) * 1.5 AS amount,
                   DATE '1950-01-01' + CAST(i % 20000 AS INTEGER) AS day FROM range(?) r(i)""", [args.rows])
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    print(f"$ python {' '.join(sys.argv)}")
    print(f"rows {args.rows:,}, medians of {args.repeat} alternate runs, DuckDB {duckdb.__version__}, {threads} "
          f"threads, load average {os.getloadavg()[0]:.2f} at start (2 cores shared)")
    print(f"{'query':38} {'median s':>8} {'upper()':>8} {'ratio':>6}")
    for name, (sql, reference) in CASES.items():
        if args.only and args.only not in name:
            continue
        t, ref, r = ratio(con, sql, reference, args.repeat)
        print(f"{name:38} {t:8.3f} {ref:8.3f} {r:6.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
