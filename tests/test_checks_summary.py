"""The one reading of a checks view (anon_sql.checks): hand-computed summaries, NULL flags fail closed, and the same
summary from a DuckDB fetchnumpy (masked arrays for NULLs) as from a pandas frame."""
from __future__ import annotations

import duckdb
import numpy as np

from anon_sql.checks import summarize, summary_columns
from anon_sql.stages.verify import check_summary

VIEW = ("SELECT * FROM (VALUES (1, 'a', 5.0, 5.0, TRUE, 0.1, TRUE), (2, 'b', 2.0, 2.0, FALSE, 0.4, FALSE), "
        "(3, 'c', 4.0, NULL, NULL, NULL, TRUE)) "
        "t(ec_id, qi, __size, k_value, k_ok, t_closeness__s_value, t_closeness__s_ok)")


def test_hand_computed_summary_and_null_flags_fail():
    rows = {r["check"]: r for r in summarize({"__size": np.array([5.0, 2.0, 4.0]),
                                             "k_value": np.array([5.0, 2.0, np.nan]),
                                             "k_ok": np.array([True, False, None], dtype=object),
                                             "t_closeness__s_value": np.array([0.1, 0.4, None], dtype=object),
                                             "t_closeness__s_ok": np.array([True, False, True])},
                                            largest={"t_closeness__s"})}
    assert rows["k"] == {"check": "k", "classes": 3, "failing_classes": 2, "failing_records": 6,
                         "worst_value": 2.0, "passed": False}
    assert rows["t_closeness__s"]["worst_value"] == 0.4          # a distance: the largest is the worst
    assert rows["t_closeness__s"]["failing_records"] == 2


def test_duckdb_numpy_and_pandas_give_the_same_summary():
    con = duckdb.connect()
    cols = summary_columns(d[0] for d in con.execute(VIEW + " LIMIT 0").description)
    assert cols == ["__size", "k_value", "k_ok", "t_closeness__s_value", "t_closeness__s_ok"]
    from_numpy = summarize(con.execute(VIEW).fetchnumpy(), {"t_closeness__s"})
    from_pandas = check_summary(con.execute(VIEW).df(), {"t_closeness__s"})
    assert from_numpy == from_pandas
    assert [r["passed"] for r in from_numpy] == [False, False]
    assert from_numpy[0]["failing_records"] == 6                 # the NULL flag of class 3 counts as failed


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
    columns = {"__size": np.array([4.0, 4.0]), "alpha__s_value": np.array([0.5, 0.75]),
               "alpha__s_ok": np.array([True, False]), "k_value": np.array([4.0, 4.0]), "k_ok": np.array([True, True])}
    rows = {r["check"]: r for r in summarize(columns, largest)}
    assert rows["alpha__s"]["worst_value"] == 0.75        # the class whose largest share is 3/4 is the worst
    assert rows["k"]["worst_value"] == 4.0
