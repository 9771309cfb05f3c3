"""The one reading of a checks view (anon_sql.compiler.checks_summary): hand-computed summaries from one SQL aggregate, NULL flags
fail closed, unknown values are not the worst, and the same summary from the view in DuckDB as from a pandas frame
of it (the verify stage's path)."""
from __future__ import annotations

import math

import duckdb
from sqlglot import exp

from anon_sql.compiler.checks_summary import summarize_checks, summary_columns
from anon_sql.runner.verify import check_summary

VIEW = ("SELECT * FROM (VALUES (1, 'a', 5.0, 5.0, TRUE, 0.1, TRUE), (2, 'b', 2.0, 2.0, FALSE, 0.4, FALSE), "
        "(3, 'c', 4.0, NULL, NULL, NULL, TRUE)) "
        "t(ec_id, qi, __size, k_value, k_ok, t_closeness__s_value, t_closeness__s_ok)")


def summary(con: duckdb.DuckDBPyConnection, sql: str, largest=("t_closeness__s",)) -> dict[str, dict]:
    con.execute(f"CREATE OR REPLACE TEMP VIEW checks AS {sql}")
    cols = summary_columns(d[0] for d in con.execute("SELECT * FROM checks LIMIT 0").description)
    return {r["check"]: r for r in summarize_checks(con, exp.to_table("checks"), cols, largest)}


def test_hand_computed_summary_and_null_flags_fail():
    con = duckdb.connect()
    cols = summary_columns(d[0] for d in con.execute(VIEW + " LIMIT 0").description)
    assert cols == ["__size", "k_value", "k_ok", "t_closeness__s_value", "t_closeness__s_ok"]
    rows = summary(con, VIEW)
    # class 3's NULL flag counts as failed: classes 2 and 3 fail, 2 + 4 records
    assert rows["k"] == {"check": "k", "classes": 3, "failing_classes": 2, "failing_records": 6,
                         "worst_value": 2.0, "passed": False}
    assert rows["t_closeness__s"]["worst_value"] == 0.4          # a distance: the largest is the worst
    assert (rows["t_closeness__s"]["failing_classes"], rows["t_closeness__s"]["failing_records"]) == (1, 2)


def test_unknown_values_no_classes_and_no_size():
    con = duckdb.connect()
    # NaN and NULL values are unknown: the worst is the smallest known one, NaN when none is known
    rows = summary(con, "SELECT * FROM (VALUES (3.0, 'NaN'::DOUBLE, TRUE, NULL::DOUBLE, TRUE), "
                        "(4.0, 7.0, TRUE, NULL, TRUE)) t(__size, k_value, k_ok, l__s_value, l__s_ok)")
    assert rows["k"]["worst_value"] == 7.0 and rows["k"]["passed"] and rows["k"]["failing_records"] == 0
    assert math.isnan(rows["l__s"]["worst_value"])
    # no classes: nothing fails, no worst value
    rows = summary(con, "SELECT 1.0 AS __size, 2.0 AS k_value, FALSE AS k_ok WHERE FALSE")
    assert rows["k"] == {"check": "k", "classes": 0, "failing_classes": 0, "failing_records": 0,
                         "worst_value": None, "passed": True}
    # no size column and no value column: failing classes still counted, records 0, worst None
    rows = summary(con, "SELECT * FROM (VALUES (FALSE), (TRUE)) t(k_ok)")
    assert rows["k"] == {"check": "k", "classes": 2, "failing_classes": 1, "failing_records": 0,
                         "worst_value": None, "passed": False}


def test_the_view_in_duckdb_and_a_pandas_frame_of_it_give_the_same_summary():
    con = duckdb.connect()
    from_view = list(summary(con, VIEW).values())
    from_frame = check_summary(con.execute(VIEW).df(), ("t_closeness__s",))
    assert from_view == from_frame
    assert [r["passed"] for r in from_frame] == [False, False]


def test_flags_of_a_frame_of_any_engine_fail_closed():
    """A frame from another engine may hold its flags as floats (NaN for NULL) or objects (None): NaN, None and
    0 fail, 1 / True pass — as DuckDB's own NULL does."""
    import numpy as np
    import pandas as pd

    floats = pd.DataFrame({"__size": [2.0, 3.0, 4.0], "k_ok": [np.nan, 1.0, 0.0], "k_value": [np.nan, 1.0, 2.0]})
    assert check_summary(floats) == [{"check": "k", "classes": 3, "failing_classes": 2, "failing_records": 6,
                                      "worst_value": 1.0, "passed": False}]
    objects = pd.DataFrame({"__size": [2.0, 3.0], "k_ok": [None, True], "k_value": [None, 1.0]})
    assert check_summary(objects)[0]["failing_records"] == 2


def test_the_worst_value_direction_is_the_models_declaration():
    """Each model's ``SQLCheck.worst`` says which class value is the worst: bounds from above (a distance, a share,
    β, δ, δ-presence's ratio) report the largest, bounds from below (k, l, θ …) the smallest — read from the
    models, not from the check's name."""
    from anon_sql.models import (AlphaKAnonymity, BetaLikeness, DeltaDisclosure, DistinctLDiversity, KAnonymity,
            TCloseness, ThetaSensitivity, largest_is_worst)

    models = [KAnonymity(2), DistinctLDiversity("s", 2), TCloseness("s", 0.2), AlphaKAnonymity("s", 0.5),
              BetaLikeness("s", 1.0), DeltaDisclosure("s", 1.0), ThetaSensitivity("s", 0.5)]
    largest = largest_is_worst(models)
    assert largest == {"t_closeness__s", "alpha__s", "beta_basic__s", "delta__s"}
    rows = summary(duckdb.connect(), "SELECT * FROM (VALUES (4.0, 0.5, TRUE, 4.0, TRUE), (4.0, 0.75, FALSE, 4.0, TRUE))"
                                     " t(__size, alpha__s_value, alpha__s_ok, k_value, k_ok)", largest)
    assert rows["alpha__s"]["worst_value"] == 0.75        # the class whose largest share is 3/4 is the worst
    assert rows["k"]["worst_value"] == 4.0
