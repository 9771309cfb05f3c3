"""Mondrian planned on the aggregated (QI, sensitive) combinations with their counts and written from counted rows
(issue 29.2) against Mondrian planned row by row and written row by row, on hostile data from hypothesis: NULLs in
numeric and text QIs, quotes and non-ASCII in values, rows repeated many times, one-value columns, suppression.
The oracle is the per-row path (every source row its own weight-1 point, the ``__row``-keyed assignment, the
general view joined on ``__row`` and sorted row by row): both must release the same rows, classes and counts."""
from __future__ import annotations

import duckdb
import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st

import anon_sql
from anon_sql.methods import AssignmentPlan
from anon_sql.methods.base import ROW_ID
from anon_sql.methods.local_values import class_values, load_source
from anon_sql.methods.mondrian import Mondrian, StatsBuilder, check_root, partition
from anon_sql.methods.population_points import population_points
from conftest import working

TEXT = st.sampled_from(["a", "b", "O'Brien", "é\"x", "", "Ünïcode", None])
ROWS = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 9)), TEXT, st.sampled_from(["f", "m"]),
                          st.sampled_from(["flu", "cold", "hiv", None]), st.integers(1, 6)),
                min_size=1, max_size=40)


def _per_row_plan(self: Mondrian, ctx) -> AssignmentPlan:
    """The plan before aggregation: every source row a point of weight 1, the assignment per ``__row``."""
    data = load_source(ctx)
    stats = StatsBuilder.from_source(data, ctx.models, population_points(ctx, data.columns))
    check_root(ctx.models, stats)
    result = partition(data.columns, ctx.models, stats, None, self.categorical_width)
    ec = result.pid + 1
    assignment = pd.DataFrame({ROW_ID: data.rows, "ec_id": ec})
    return AssignmentPlan(assignment, class_values(ec, data.columns), None,
                          {"partitions": result.n_partitions, "depth": result.depth})


def _policy(name: str, k: int, l_div: bool, suppression: float) -> dict:
    privacy: dict = {"k": k, "max_suppression": suppression}
    if l_div:
        privacy["l_diversity"] = {"kind": "distinct", "l": 2}
    return {"name": name, "source": "t", "method": "mondrian",
            "attributes": {"age": {"role": "quasi"}, "city": {"role": "quasi"}, "sex": {"role": "quasi"},
                           "disease": {"role": "sensitive"}},
            "privacy": privacy}


def _release(con, pol):
    try:
        return anon_sql.release(con, pol)
    except (anon_sql.PrivacyRequirementError, anon_sql.PolicyError) as err:   # refused: both must refuse
        return err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ROWS, k=st.integers(1, 5), l_div=st.booleans(), suppression=st.sampled_from([0.0, 0.2]))
def test_aggregated_mondrian_releases_what_the_per_row_one_does(data, k, l_div, suppression, monkeypatch):
    rows = [r[:4] for r in data for _ in range(r[4])]          # each drawn row repeated 1–6 times
    frame = pd.DataFrame(rows, columns=["age", "city", "sex", "disease"]).astype({"age": "float64"})
    con = duckdb.connect()
    anon_sql.install(con)
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    new = _release(con, _policy("aggregated", k, l_div, suppression))
    with monkeypatch.context() as m:
        m.setattr(Mondrian, "plan", _per_row_plan)
        old = _release(con, _policy("per_row", k, l_div, suppression))
    assert isinstance(new, Exception) == isinstance(old, Exception), (new, old)
    if isinstance(new, Exception):
        assert type(new) is type(old)
        con.close()
        return
    cols = ["age", "city", "sex", "disease", "ec_id"]
    a = con.execute("SELECT * FROM aggregated").df()
    b = con.execute("SELECT * FROM per_row").df()
    key = lambda f: f[cols].astype(str).sort_values(cols).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(key(a), key(b))
    assert (new.records_out, new.suppressed) == (old.records_out, old.suppressed)
    assert new.records_out + new.suppressed == len(frame)
    pd.testing.assert_frame_equal(new.classes.reset_index(drop=True), old.classes.reset_index(drop=True))
    pd.testing.assert_frame_equal(new.checks.reset_index(drop=True), old.checks.reset_index(drop=True))
    for part in ("assignment", "ec_values"):
        x = con.execute(f"SELECT * FROM {working('aggregated', part)} ORDER BY ALL").df()
        y = con.execute(f"SELECT * FROM {working('per_row', part)} ORDER BY ALL").df()
        pd.testing.assert_frame_equal(x, y)
    # the session tables of the counted rows and the tuple maps are gone
    temps = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]
    assert not [t for t in temps if t.startswith("aggregated__")]
    con.close()
