"""DP SELECT: the issue's example end to end, refusals naming what is supported (exit 2), hostile input."""
from __future__ import annotations

from dp_fixtures import db_path, dcon  # noqa: F401  (fixtures)

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anon_sql.dp import create_budget, dp_query, is_dp_statement, run_dp_statement
from anon_sql.errors import AnonSQLError, PolicyError

EXAMPLE = """SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.25, delta = 1e-7, max_groups_contributed = 1,
intervals = 0.95) sex, COUNT(*) AS n, COUNT(DISTINCT patient_id) AS people,
SUM(age, contribution_bounds_per_group => (0, 100)) AS s, AVG(age, contribution_bounds_per_group => (0, 100)) AS a
FROM visits WHERE age > 17 GROUP BY sex"""


@pytest.fixture
def budgeted(dcon):
    create_budget(dcon, "visits", epsilon=1000.0, delta=1e-3 / 2, privacy_unit="patient_id")
    return dcon


def test_issue_example(budgeted):
    # at ε = 0.25 split over 5 parts the selection threshold is ~300 people, above the 150 per sex: a larger ε here
    answer = run_dp_statement(budgeted, EXAMPLE.replace("epsilon = 0.25", "epsilon = 5"))
    assert list(answer.columns) == ["sex", "n", "n_low", "n_high", "people", "people_low", "people_high",
                                    "s", "s_low", "s_high", "a", "a_low", "a_high"]
    assert sorted(answer["sex"]) == ["F", "M"]  # 150 people each: far above the threshold
    assert ((answer["a"] >= 0) & (answer["a"] <= 100)).all()
    assert (answer["n_low"] <= answer["n"]).all() and (answer["n"] <= answer["n_high"]).all()


def test_is_dp_statement():
    assert is_dp_statement(EXAMPLE) and is_dp_statement("show privacy budgets;")
    assert is_dp_statement("CREATE PRIVACY BUDGET ON t WITH (epsilon = 1)")
    assert not is_dp_statement("SELECT 1") and not is_dp_statement("'unterminated") and not is_dp_statement("")


REFUSED = [
    ("OPTIONS (epsilon = 0) COUNT(*) FROM visits", "epsilon = 0: must be > 0"),
    ("OPTIONS (epsilon = -1) COUNT(*) FROM visits", "epsilon"),
    ("OPTIONS (delta = 1e-7) COUNT(*) FROM visits", "epsilon is required"),
    ("OPTIONS (epsilon = 1, delta = 0.01) sex, COUNT(*) FROM visits GROUP BY sex", r"delta.*1/units"),
    ("OPTIONS (epsilon = 1) sex, COUNT(*) FROM visits GROUP BY sex", r"delta.*GROUP BY"),
    ("OPTIONS (epsilon = 1, colour = 2) COUNT(*) FROM visits", "unknown option 'colour'; supported"),
    ("OPTIONS (epsilon = 1) SUM(age) FROM visits", "contribution_bounds_per_group"),
    ("OPTIONS (epsilon = 1) AVG(age) FROM visits", "contribution_bounds_per_group"),
    ("OPTIONS (epsilon = 1) SUM(age, contribution_bounds_per_group => (5, 1)) FROM visits", "lower ≤ upper"),
    ("OPTIONS (epsilon = 1) COUNT(*) FROM visits v JOIN visits w ON v.patient_id = w.patient_id", "JOIN"),
    ("OPTIONS (epsilon = 1) COUNT(*) OVER () FROM visits", "window functions"),
    ("OPTIONS (epsilon = 1, delta = 1e-7) sex, age, COUNT(*) FROM visits GROUP BY sex", "neither in GROUP BY"),
    ("OPTIONS (epsilon = 1) MAX(age) FROM visits", "not supported"),
    ("OPTIONS (epsilon = 1) COUNT(DISTINCT age) FROM visits", "privacy unit"),
    ("OPTIONS (epsilon = 1) COUNT(*) FROM (SELECT * FROM visits)", "one table by name"),
    ("OPTIONS (epsilon = 1) COUNT(*) FROM visits WHERE age IN (SELECT 1)", "subqueries"),
    ("OPTIONS (epsilon = 1) COUNT(*) FROM visits ORDER BY 1", "ORDER BY"),
    ("OPTIONS (epsilon = 1, privacy_unit_column = sex) COUNT(*) FROM visits", "protects 'patient_id'"),
    ("OPTIONS (epsilon = 1, intervals = 95) COUNT(*) FROM visits", "intervals"),
    ("OPTIONS (epsilon = 1, max_groups_contributed = 0) COUNT(*) FROM visits", "max_groups_contributed"),
]


@pytest.mark.parametrize("tail, message", REFUSED)
def test_refusals_name_the_problem_and_exit_2(budgeted, tail, message):
    with pytest.raises(PolicyError, match=message) as info:
        dp_query(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY " + tail)
    assert info.value.exit_code == 2


def test_refusals_spend_nothing(budgeted):
    for tail, _ in REFUSED:
        with pytest.raises(PolicyError):
            dp_query(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY " + tail)
    assert budgeted.execute("SELECT count(*) FROM anon.privacy_ledger").fetchone()[0] == 0


TOKENS = ["SELECT", "WITH", "DIFFERENTIAL_PRIVACY", "OPTIONS", "(", ")", ",", "=", "=>", "epsilon", "delta",
          "max_groups_contributed", "intervals", "COUNT", "SUM", "AVG", "DISTINCT", "*", "FROM", "visits", "WHERE",
          "GROUP", "BY", "sex", "age", "patient_id", "1", "0", "-1", "1e-7", "0.95", "'x'", "\"q\"", "OVER", "JOIN",
          "contribution_bounds_per_group", "CREATE", "DROP", "SHOW", "PRIVACY", "BUDGET", "BUDGETS", "ON", ";",
          "privacy_unit", "NULL", "1e400", "nan", "'", "--", "AS"]
PREFIX = ["", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) ",
          "CREATE PRIVACY BUDGET ON ", "DROP PRIVACY BUDGET ON "]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIX), words=st.lists(st.sampled_from(TOKENS), max_size=14))
def test_hostile_statements_raise_only_anon_sql_errors(budgeted, prefix, words):
    try:
        run_dp_statement(budgeted, prefix + " ".join(words))
    except AnonSQLError as error:
        assert str(error)
        if isinstance(error, PolicyError):
            assert error.exit_code == 2


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(epsilon=st.one_of(st.floats(allow_nan=True), st.integers(-5, 5), st.text(max_size=3)),
       bounds=st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)))
def test_hostile_option_values(budgeted, epsilon, bounds):
    value = repr(epsilon) if not isinstance(epsilon, str) else "'" + epsilon.replace("'", "''") + "'"
    text = (f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {value}) "
            f"SUM(age, contribution_bounds_per_group => ({bounds[0]!r}, {bounds[1]!r})) AS s FROM visits")
    try:
        answer = dp_query(budgeted, text)
    except AnonSQLError as error:
        assert error.exit_code in (2, 3)
    else:
        assert isinstance(epsilon, (int, float)) and epsilon > 0 and bounds[0] <= bounds[1]
        assert len(answer) == 1


def test_quoted_and_hostile_names_stay_names(dcon):
    dcon.execute('CREATE TABLE "we""ird" AS SELECT u AS "p id", \'x\' AS "g; DROP TABLE visits" FROM range(500) a(u)')
    create_budget(dcon, '"we""ird"', epsilon=10, delta=1e-4, privacy_unit="p id")
    answer = dp_query(dcon, 'SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 5, delta = 1e-5) '
                            '"g; DROP TABLE visits", COUNT(DISTINCT "p id") AS people FROM "we""ird" '
                            'GROUP BY "g; DROP TABLE visits"')
    assert answer["g; DROP TABLE visits"].tolist() == ["x"] and 450 < answer.loc[0, "people"] < 550
    assert dcon.execute("SELECT count(*) FROM visits").fetchone()[0] > 0
