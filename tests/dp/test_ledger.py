"""Budgets and the ledger: creation rules, exhaustion, refusals with what is left, persistence across a reopen."""
from __future__ import annotations

from dp_fixtures import db_path, dcon  # noqa: F401  (fixtures)

import duckdb
import pytest

from anon_sql.dp import create_budget, dp_query, drop_budget, run_dp_statement, show_budgets
from anon_sql.errors import PolicyError, PrivacyRequirementError, SourceError

COUNT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) COUNT(*) AS n FROM visits"


def test_create_show_drop_statements(dcon):
    created = run_dp_statement(dcon, "CREATE PRIVACY BUDGET ON visits WITH (epsilon = 1.0, delta = 1e-5, "
                                     "privacy_unit = 'patient_id');")
    assert created.loc[0, "units"] == 300 and created.loc[0, "table_name"] == "main.visits"
    shown = run_dp_statement(dcon, "show privacy budgets")
    assert shown[["table_name", "privacy_unit", "epsilon", "spent_epsilon", "queries"]].values.tolist() == [
        ["main.visits", "patient_id", 1.0, 0.0, 0]]
    run_dp_statement(dcon, "DROP PRIVACY BUDGET ON visits")
    assert show_budgets(dcon).empty
    assert len(show_budgets(dcon, include_dropped=True)) == 1


def test_delta_must_be_below_one_over_units(dcon):
    with pytest.raises(PolicyError, match=r"delta.*1/units.*300 units"):
        create_budget(dcon, "visits", epsilon=1.0, delta=1 / 300, privacy_unit="patient_id")
    with pytest.raises(PolicyError, match="epsilon"):
        create_budget(dcon, "visits", epsilon=0, delta=1e-5, privacy_unit="patient_id")
    with pytest.raises(PolicyError, match="no such column"):
        create_budget(dcon, "visits", epsilon=1, delta=1e-5, privacy_unit="nobody")
    with pytest.raises(SourceError, match="not found"):
        create_budget(dcon, "nothing", epsilon=1, delta=1e-5, privacy_unit="patient_id")


def test_no_budget_is_exit_3(dcon):
    with pytest.raises(PrivacyRequirementError, match="no privacy budget.*CREATE PRIVACY BUDGET") as info:
        dp_query(dcon, COUNT)
    assert info.value.exit_code == 3


def test_exhaustion_then_refusal_and_the_ledger_survives_a_reopen(db_path):
    con = duckdb.connect(str(db_path))
    create_budget(con, "visits", epsilon=1.0, delta=1e-5, privacy_unit="patient_id")
    for _ in range(3):
        dp_query(con, COUNT)  # 0.9 spent
    with pytest.raises(PrivacyRequirementError, match=r"needs epsilon = 0.3.*0\.1 of epsilon = 1 .*after 3 queries"):
        dp_query(con, COUNT)
    dp_query(con, COUNT.replace("0.3", "0.1"))  # exactly what is left: allowed (1.0 = 0.3 × 3 + 0.1)
    con.close()

    con = duckdb.connect(str(db_path))
    budgets = show_budgets(con)
    assert budgets.loc[0, "queries"] == 4 and budgets.loc[0, "spent_epsilon"] == pytest.approx(1.0)
    with pytest.raises(PrivacyRequirementError, match="0 of epsilon = 1"):
        dp_query(con, COUNT.replace("0.3", "0.01"))
    ledger = con.execute("SELECT epsilon, query_text FROM anon.privacy_ledger ORDER BY spent_at").fetchall()
    assert [round(e, 9) for e, _ in ledger] == [0.3, 0.3, 0.3, 0.1] and ledger[0][1] == COUNT
    # a dropped budget keeps its history; a new one starts from zero but the old rows stay
    drop_budget(con, "visits")
    create_budget(con, "visits", epsilon=0.5, delta=1e-5, privacy_unit="patient_id")
    con.close()
    con = duckdb.connect(str(db_path))
    everything = show_budgets(con, include_dropped=True)
    assert everything["dropped_at"].notna().tolist() == [True, False]
    assert con.execute("SELECT count(*) FROM anon.privacy_ledger").fetchone()[0] == 4
    con.close()


def test_a_failed_answer_is_not_charged(dcon):
    create_budget(dcon, "visits", epsilon=1.0, delta=1e-5, privacy_unit="patient_id")
    with pytest.raises(PolicyError, match="does not fit"):
        dp_query(dcon, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) "
                       "SUM(nope, contribution_bounds_per_group => (0, 1)) FROM visits")
    assert show_budgets(dcon).loc[0, "queries"] == 0
    assert dcon.execute("SELECT count(*) FROM anon.privacy_ledger").fetchone()[0] == 0


def test_answer_and_charge_are_one_transaction(dcon, monkeypatch):
    """A crash after the noise but before the ledger row commits: no answer, no charge, no half-written row."""
    from anon_sql.dp import ledger

    create_budget(dcon, "visits", epsilon=1.0, delta=1e-5, privacy_unit="patient_id")

    def crash(con, *args, **kwargs):
        con.execute("UPDATE anon.privacy_budgets SET queries = queries + 100")
        raise RuntimeError("crash between charge and commit")

    monkeypatch.setattr(ledger, "record_spend", crash)
    with pytest.raises(RuntimeError):
        dp_query(dcon, COUNT)
    assert show_budgets(dcon).loc[0, "queries"] == 0


def test_open_transaction_is_refused_cleanly(dcon):
    create_budget(dcon, "visits", epsilon=1.0, delta=1e-5, privacy_unit="patient_id")
    dcon.begin()
    with pytest.raises(PolicyError, match="COMMIT or ROLLBACK"):
        dp_query(dcon, COUNT)
    dcon.rollback()


@pytest.mark.parametrize(("budget", "query"), [
    ({"epsilon": 20.0, "delta": 1e-12},  # δ 500× the budget
     "OPTIONS (epsilon = 10, delta = 5e-10) sex, COUNT(*) AS n FROM visits GROUP BY sex"),
    ({"epsilon": 1e-10, "delta": 1e-5},  # ε 10× the budget
     "OPTIONS (epsilon = 1e-9) COUNT(*) AS n FROM visits"),
])
def test_a_tiny_budget_is_not_overspent_by_the_float_slack(dcon, budget, query):
    """Hostile round 5 (D40, D41): the slack for float sums was absolute (1e-9), so a budget of δ = 1e-12 answered a
    query of δ = 5e-10 and one of ε = 1e-10 answered ε = 1e-9; the slack must be relative to the budget."""
    create_budget(dcon, "visits", privacy_unit="patient_id", **budget)
    with pytest.raises(PrivacyRequirementError, match="ask for less"):
        dp_query(dcon, f"SELECT WITH DIFFERENTIAL_PRIVACY {query}")
    assert show_budgets(dcon).loc[0, "queries"] == 0


def test_a_small_budget_spent_in_float_steps_is_not_refused(dcon):
    """The relative slack still lets ten shares of a tenth spend a small budget exactly."""
    create_budget(dcon, "visits", epsilon=3e-3, delta=1e-12, privacy_unit="patient_id")
    for _ in range(10):
        dp_query(dcon, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 3e-4) COUNT(*) AS n FROM visits")
    assert show_budgets(dcon).loc[0, "queries"] == 10
    with pytest.raises(PrivacyRequirementError, match="0 of epsilon"):
        dp_query(dcon, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e-6) COUNT(*) AS n FROM visits")
