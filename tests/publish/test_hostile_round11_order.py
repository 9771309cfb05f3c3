"""Hostile round 11, M22 (docs/hostile-round-11.md, H89, H105): export wrote the working table's storage order,
which no check constrains, so rows rewritten in the order of a raw identifier passed check and were exported in that
order (200 of 200 rows lined up with the raw SSNs). Export now writes the released table and each related table
ordered by class, then by every released value: the file is the same whatever order the working table has.
"""
from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pandas as pd

import anon_sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from related_set_fixtures import db as related_db  # noqa: E402,F401  (release `synth` with `synth_conditions`)

CM = """CREATE ANONYMIZED VIEW cm WITH (k = 5, seed = 4242424242, method = 'levels', method_params = {'levels':
  {'age': 0}}) AS SELECT identifier(cid), quasi(age, taxonomy => {'kind': 'top'}),
  insensitive(ssn, mask => {'function': 'partial', 'keep_start': 0, 'pad': 'XXX-XX-', 'keep_end': 4}),
  insensitive(income) FROM custs"""


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """The oracle: pandas' stable sort by ec_id (when present), then every other column, NULLs last."""
    keys = sorted(frame.columns, key=lambda c: c != "ec_id")
    return frame.sort_values(keys, na_position="last", kind="mergesort").reset_index(drop=True)


def rewrite(con, table: str, order: str) -> None:
    """The attack: the same rows deleted and inserted again in another order (test-only SQL)."""
    con.execute(f"CREATE TEMP TABLE copy AS SELECT * FROM {table}")
    con.execute(f"DELETE FROM {table}")
    con.execute(f"INSERT INTO {table} SELECT * FROM copy ORDER BY {order}")
    con.execute("DROP TABLE copy")


def test_h89_rows_rewritten_in_raw_ssn_order_are_exported_in_the_released_values_order(tmp_path):
    db = str(tmp_path / "w.duckdb")
    with duckdb.connect(db) as c:
        anon_sql.install(c)
        c.execute("CREATE TABLE custs AS SELECT i AS cid, 30 + (i % 4) * 10 AS age, "
                  "lpad(((i * 7919) % 1000000000)::VARCHAR, 9, '0') AS ssn, (i * 37) % 5000 AS income FROM range(200) t(i)")
        anon_sql.execute(c, CM)
        anon_sql.execute(c, f"EXPORT ANONYMIZED VIEW cm TO '{tmp_path / 'before.duckdb'}'")
        # the released rows lined up with the raw SSNs: the last four digits are released, the order gives the rest
        rewrite(c, "cm", "(SELECT min(s.ssn) FROM custs s WHERE right(s.ssn, 4) = right(copy.ssn, 4)) DESC")
        assert anon_sql.check(c, "cm")["passed"].all()   # every digest is order-independent, by design
        anon_sql.execute(c, f"EXPORT ANONYMIZED VIEW cm TO '{tmp_path / 'after.duckdb'}'")
    files = {}
    for name in ("before", "after"):
        with duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True) as f:
            files[name] = f.execute("SELECT * FROM cm").df()
    pd.testing.assert_frame_equal(files["after"], files["before"])
    pd.testing.assert_frame_equal(files["after"], canonical(files["after"]))


def test_h105_a_related_table_rewritten_in_raw_id_order_is_exported_in_its_values_order(related_db, tmp_path):
    with duckdb.connect(related_db) as c:
        anon_sql.execute(c, f"EXPORT ANONYMIZED VIEW synth TO '{tmp_path / 'before.parquet'}'")
        rewrite(c, "synth_conditions", "visit DESC, DESCRIPTION DESC")
        assert anon_sql.check(c, "synth")["passed"].all()
        anon_sql.execute(c, f"EXPORT ANONYMIZED VIEW synth TO '{tmp_path / 'after.parquet'}'")
    before = pd.read_parquet(tmp_path / "before.conditions.parquet")
    after = pd.read_parquet(tmp_path / "after.conditions.parquet")
    pd.testing.assert_frame_equal(after, before)
    pd.testing.assert_frame_equal(after, canonical(after))
    released = pd.read_parquet(tmp_path / "after.parquet")
    pd.testing.assert_frame_equal(released, canonical(released))
