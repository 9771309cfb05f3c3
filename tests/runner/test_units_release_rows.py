"""The rows of a DuckDB level release with a privacy unit, written as sorted groups of released values with their
units' lists (issue 24.6), against a pandas recount: the same rows (generalized values of the kept classes' rows,
each source row once), the people released, and the release order (``ec_id``, then the seeded hash of the other
released values) — on hostile data: NULL values, one person's rows in several diagnoses, classes below k."""
from __future__ import annotations

from collections import Counter

import duckdb
import pandas as pd
from hypothesis import given, settings, strategies as st

import anon_sql

SEED = 11


def _policy() -> dict:
    return {"name": "rel", "source": "t", "method": "levels", "privacy_unit": "pid", "seed": SEED,
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "pid": {"role": "identifier"},
                           "dx": {"role": "insensitive"}},
            "privacy": {"k": 2, "max_suppression": 1.0},
            "method_params": {"levels": {"age": 1, "sex": 0}}}


people = st.lists(st.tuples(st.integers(20, 39), st.sampled_from(["F", "M"]),
                            st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=4)),
                  min_size=2, max_size=25)


@settings(max_examples=40, deadline=None)
@given(people)
def test_unit_release_rows_people_and_order_match_pandas(persons):
    rows = [(pid, age, sex, dx) for pid, (age, sex, dxs) in enumerate(persons) for dx in dxs]
    frame = pd.DataFrame(rows, columns=["pid", "age", "sex", "dx"])
    frame["band"] = (frame["age"] // 10 * 10).map(lambda lo: f"[{lo}-{lo + 9}]")
    people_per_class = frame.groupby(["band", "sex"])["pid"].nunique()
    kept_classes = people_per_class[people_per_class >= 2].index
    kept = frame[pd.MultiIndex.from_frame(frame[["band", "sex"]]).isin(kept_classes)]
    con = duckdb.connect()
    anon_sql.install(con)
    con.execute("CREATE TABLE t (pid BIGINT, age INTEGER, sex VARCHAR, dx VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    if kept.empty:
        return   # nothing to release: the refusal is tested elsewhere
    rel = anon_sql.release(con, _policy())
    out = con.execute(f"SELECT CAST(age AS VARCHAR) AS age, sex, dx, ec_id, hash(dx, {SEED}) AS h FROM rel "
                      "ORDER BY rowid").df()   # the seed as the release writes it: an integer literal
    got = Counter(zip(out["age"], out["sex"], [None if pd.isna(d) else d for d in out["dx"]]))
    want = Counter(zip(kept["band"], kept["sex"], [None if pd.isna(d) else d for d in kept["dx"]]))
    assert got == want
    assert rel.info["people"] == {"in": len(persons), "released": int(kept["pid"].nunique()),
                                  "suppressed": len(persons) - int(kept["pid"].nunique())}
    keys = list(zip(out["ec_id"], out["h"]))
    assert keys == sorted(keys)                       # ec_id, then the seeded hash of the other released values
    assert "__unit" not in out.columns and "__unit" not in con.execute("SELECT * FROM rel LIMIT 0").df().columns
