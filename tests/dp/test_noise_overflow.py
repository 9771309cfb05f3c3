"""Hostile rounds 6–7, D56 and the DP side of P02 (docs/hostile-round-6.md): a COUNT at ε = 1e-300 answered
-9223372036854775808 (OpenDP's integer noise saturated at INT64's minimum), and a SUM whose bounds let its answer
leave a double's range could release ±inf. Both are refused before any noise, by the CLI with exit 2, naming ε and
the smallest ε allowed (or the bounds), with nothing charged and the ledger as before. The smallest ε is checked
against its formula: sensitivity·ln(1e9) / (2^63 − units·cap), and queries at or above it still answer."""
from __future__ import annotations

import math
import re

import duckdb
import pytest
from click.testing import CliRunner
from dp_fixtures import db_path, dcon  # noqa: F401  (fixtures)

from anon_sql.cli.main import main
from anon_sql.dp import create_budget, run_dp_statement
from anon_sql.errors import PolicyError

UNITS = 300   # dp_fixtures: 300 patients


@pytest.fixture
def budgeted(dcon):
    create_budget(dcon, "visits", epsilon=10.0, delta=1e-4, privacy_unit="patient_id")
    return dcon


def _ledger(con) -> list:
    return (con.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall()
            + con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall())


def test_d56_count_at_epsilon_1e_300_is_refused_naming_the_smallest_epsilon(budgeted):
    before = _ledger(budgeted)
    with pytest.raises(PolicyError, match=r"option epsilon = 1e-300 is too small for COUNT n.*64-bit integer.*"
                                          r"smallest epsilon for this query is") as err:
        run_dp_statement(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e-300) COUNT(*) AS n "
                                   "FROM visits")
    assert _ledger(budgeted) == before == [(0.0, 0), (0,)]
    smallest = float(re.search(r"smallest epsilon for this query is (\S+) ", str(err.value)).group(1))
    cap = 1   # max_rows_contributed's default: one row per unit
    assert smallest == pytest.approx(cap * math.log(1e9) / (2.0 ** 63 - UNITS * cap), rel=1e-2)
    # at twice the smallest the count answers, as an integer that did not saturate
    answer = run_dp_statement(budgeted, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {2 * smallest!r}) "
                                        "COUNT(*) AS n FROM visits")
    assert len(answer) == 1 and -2 ** 63 < int(answer["n"].iloc[0]) < 2 ** 63 - 1


def test_d56_by_the_cli_is_exit_2(db_path):
    con = duckdb.connect(str(db_path))
    create_budget(con, "visits", epsilon=10.0, delta=1e-4, privacy_unit="patient_id")
    con.close()
    script = db_path.parent / "q.sql"
    script.write_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e-300) COUNT(*) AS n FROM visits;\n")
    result = CliRunner().invoke(main, ["run", str(script), "--db", str(db_path)])
    assert result.exit_code == 2, result.output
    assert "epsilon = 1e-300 is too small" in result.output and "-9223372036854775808" not in result.output
    con = duckdb.connect(str(db_path))
    assert _ledger(con) == [(0.0, 0), (0,)]
    con.close()


@pytest.mark.parametrize("bounds", ["(-1e308, 1e308)", "(0, 1e307)"])
def test_a_sum_that_could_leave_a_double_is_refused_naming_its_bounds(budgeted, bounds):
    """300 units × 1e307 or 1e308 exceeds a double (1.8e308): no ε keeps the noisy answer finite."""
    with pytest.raises(PolicyError, match=r"contribution bounds .* of SUM s: over the 300 units of .*narrow the bounds"):
        run_dp_statement(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
                                   f"SUM(age, contribution_bounds_per_group => {bounds}) AS s FROM visits")
    assert _ledger(budgeted) == [(0.0, 0), (0,)]


def test_an_infinite_noise_scale_is_refused_as_before(budgeted):
    with pytest.raises(PolicyError, match="too small for sensitivity"):
        run_dp_statement(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e-10) "
                                   "SUM(age, contribution_bounds_per_group => (0, 1e300)) AS s FROM visits")
    assert _ledger(budgeted) == [(0.0, 0), (0,)]


def test_large_but_representable_answers_still_answer(budgeted):
    answer = run_dp_statement(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) "
                                        "SUM(age, contribution_bounds_per_group => (0, 1e300)) AS s, "
                                        "COUNT(*) AS n FROM visits")
    assert math.isfinite(float(answer["s"].iloc[0])) and len(answer) == 1
