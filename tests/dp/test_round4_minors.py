"""Hostile round 4's DP minors (docs/hostile-round-4.md): D03, a window beside a bare column, is refused for the
window; D23, a budget charged by another connection in the same moment, is an exit-4 error naming the cause, with
nothing charged and the ledger as before."""
from __future__ import annotations

from dp_fixtures import db_path, dcon  # noqa: F401  (fixtures)

import pytest

from anon_sql.dp import create_budget, run_dp_statement
from anon_sql.errors import PolicyError, ResourceError


@pytest.fixture
def budgeted(dcon):
    create_budget(dcon, "visits", epsilon=10.0, delta=1e-4, privacy_unit="patient_id")
    return dcon


@pytest.mark.parametrize("items", ["sex, COUNT(*) OVER ()", "COUNT(*) OVER (), sex",
                                   "sex, SUM(age) OVER (PARTITION BY sex) AS s"])
def test_a_window_is_refused_for_the_window_before_a_bare_column(budgeted, items):
    """D03: the message named the bare column `sex` first (the items were checked in order)."""
    with pytest.raises(PolicyError, match=r"window functions \(OVER …\) are not supported"):
        run_dp_statement(budgeted, f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) {items} FROM visits")


def test_a_budget_changed_by_another_connection_at_the_same_moment_names_the_cause(budgeted, monkeypatch):
    """D23: eight threads charging one budget at once; DuckDB let one commit and failed the others with its bare
    "TransactionContext Error: Conflict on update!" (exit 1). That error, raised where the charge is written, is now
    a ResourceError (exit 4) saying what happened and that nothing was charged; the ledger and budget are unchanged.
    (The conflict is injected: which threads collide depends on DuckDB's timing.)"""
    import duckdb
    from anon_sql.dp import ledger

    def conflict(*args, **kwargs):
        raise duckdb.TransactionException("TransactionContext Error: Conflict on update!")

    monkeypatch.setattr(ledger, "record_spend", conflict)
    query = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) AS n FROM visits"
    with pytest.raises(ResourceError, match="another connection changed this privacy budget at the same moment"):
        run_dp_statement(budgeted, query)
    assert ResourceError.exit_code == 4
    assert budgeted.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall() == [(0.0, 0)]
    assert budgeted.execute("SELECT count(*) FROM anon.privacy_ledger").fetchall() == [(0,)]
    monkeypatch.undo()
    assert len(run_dp_statement(budgeted, query)) == 1


def test_other_transaction_errors_are_not_called_conflicts(budgeted, monkeypatch):
    import duckdb
    from anon_sql.dp import ledger

    def other(*args, **kwargs):
        raise duckdb.TransactionException("TransactionContext Error: something else")

    monkeypatch.setattr(ledger, "record_spend", other)
    with pytest.raises(duckdb.TransactionException, match="something else"):
        run_dp_statement(budgeted, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM visits")


@pytest.mark.parametrize("groups", ["100000", "50000"])   # (1e9 and 1e6: above the option's limit since round 17, D12)
def test_a_group_threshold_no_group_can_reach_is_refused_before_charging(budgeted, groups):
    """D19: `max_groups_contributed = 1e9` was accepted, charged, and released 0 groups: the selection threshold
    (a function of the options alone, OpenDP's) exceeded the 300 people of the table. Now refused (exit 2) naming
    the option, the threshold and the units; nothing charged. A threshold within reach still answers."""
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = {}) "
             "sex, COUNT(*) AS n FROM visits GROUP BY sex")
    with pytest.raises(PolicyError, match=r"max_groups_contributed = \d+ .* more than the 300 units"):
        run_dp_statement(budgeted, query.format(groups))
    assert budgeted.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall() == [(0.0, 0)]
    from anon_sql.dp.mechanisms import selection_threshold
    assert selection_threshold(2, 0.5, 1e-6)[2] < 300
    assert set(run_dp_statement(budgeted, query.format(2))["sex"]) <= {"F", "M"}
    assert budgeted.execute("SELECT queries FROM anon.privacy_budgets").fetchall() == [(1,)]
