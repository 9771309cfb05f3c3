"""Hostile round 10, M17 (docs/hostile-round-10.md, D35): a DP query read what is left of a budget from the
counters of its `anon.privacy_budgets` row, which the row's fingerprint does not cover. Reset by hand (`SET
spent_epsilon = 0, spent_delta = 0, queries = 0`), the budget answered again while the ledger already held the whole
ε. Now every DP query reconciles the counters with `anon.privacy_ledger` before it answers or charges; the D35 tests
fail on the code before that fix, the genuine sequences pass on both.
"""
from __future__ import annotations

from dp_fixtures import db_path, dcon  # noqa: F401  (fixtures)

import duckdb
import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main as cli
from anon_sql.dp import create_budget, dp_query, drop_budget, show_budgets
from anon_sql.errors import PolicyError, PrivacyRequirementError

Q99 = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 99, delta = 1e-7) sex, COUNT(*) AS n FROM visits "
       "GROUP BY sex")                                           # grouped: charges δ too
SMALL = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.3) COUNT(*) AS n FROM visits"


def _books(con) -> tuple:
    """The budget rows and the ledger, as a refusal must leave them."""
    return (con.execute("SELECT * FROM anon.privacy_budgets ORDER BY budget_id").fetchall(),
            con.execute("SELECT budget_id, query_text, epsilon, delta FROM anon.privacy_ledger ORDER BY ALL")
            .fetchall())


@pytest.mark.parametrize("edit, differs", [
    ("spent_epsilon = 0, spent_delta = 0, queries = 0", "spent epsilon = 0"),   # D35 itself
    ("spent_epsilon = 0", "spent epsilon = 0"),
    ("spent_delta = 0", "spent delta = 0"),
    ("queries = 0", "0 queries"),
], ids=["D35", "epsilon", "delta", "queries"])
def test_d35_counters_reset_by_hand_are_refused_before_anything_is_charged(dcon, edit, differs):
    create_budget(dcon, "visits", epsilon=100, delta=1e-5, privacy_unit="patient_id")
    dp_query(dcon, Q99)                                          # 1 of 100 left
    dcon.execute(f"UPDATE anon.privacy_budgets SET {edit}")
    before = _books(dcon)
    with pytest.raises(PolicyError, match="edited by hand") as info:
        dp_query(dcon, Q99)
    message = str(info.value)
    assert info.value.exit_code == 2
    assert "main.visits" in message and "budget_id 1" in message and differs in message
    assert "anon.privacy_ledger holds" in message and "1 answer" in message
    assert _books(dcon) == before                                # nothing charged, nothing logged


def test_d35_from_the_cli_exits_2_with_the_file_unchanged(db_path):
    with duckdb.connect(str(db_path)) as c:
        create_budget(c, "visits", epsilon=100, delta=1e-5, privacy_unit="patient_id")
        dp_query(c, Q99)
        c.execute("UPDATE anon.privacy_budgets SET spent_epsilon = 0, spent_delta = 0, queries = 0")
        before = _books(c)
    res = CliRunner().invoke(cli, ["run", "-", "--db", str(db_path)], input=Q99 + ";")
    assert res.exit_code == 2 and "edited by hand" in res.output, res.output
    with duckdb.connect(str(db_path)) as c:
        assert _books(c) == before


def test_the_counters_restored_from_the_ledger_answer_again(dcon):
    """The fix the message names: the counters set back to the ledger's sums reconcile (and then the budget's
    remaining ε refuses the query as it should, exit 3)."""
    create_budget(dcon, "visits", epsilon=100, delta=1e-5, privacy_unit="patient_id")
    dp_query(dcon, Q99)
    dcon.execute("UPDATE anon.privacy_budgets SET spent_epsilon = 0, spent_delta = 0, queries = 0")
    with pytest.raises(PolicyError, match="edited by hand"):
        dp_query(dcon, Q99)
    with pytest.raises(PolicyError) as info:
        dp_query(dcon, Q99)
    restore = str(info.value).split("set them back (")[1].split("), or DROP")[0]   # the UPDATE the message gives
    dcon.execute(restore)
    with pytest.raises(PrivacyRequirementError, match="1 of epsilon = 100"):
        dp_query(dcon, Q99)
    dp_query(dcon, SMALL)


def test_genuine_sequences_reconcile(db_path):
    """Many answers (float sums of ε in another order than the ledger's), refused ones between them, a dropped and
    created budget (its ledger rows stay under the old id), a reopen: every query reconciles."""
    con = duckdb.connect(str(db_path))
    create_budget(con, "visits", epsilon=3.0, delta=1e-5, privacy_unit="patient_id")
    for i in range(9):
        dp_query(con, SMALL.replace("0.3", ["0.1", "0.2", "0.3"][i % 3]))          # 1.8 spent in 9 answers
    with pytest.raises(PrivacyRequirementError):
        dp_query(con, SMALL.replace("0.3", "2"))                                   # refused: too much
    with pytest.raises(PolicyError):
        dp_query(con, SMALL.replace("COUNT(*)", "COUNT(nothing)"))                 # refused: does not fit
    con.close()
    con = duckdb.connect(str(db_path))
    dp_query(con, SMALL)
    drop_budget(con, "visits")
    create_budget(con, "visits", epsilon=1.0, delta=1e-5, privacy_unit="patient_id")
    dp_query(con, SMALL)
    shown = show_budgets(con, include_dropped=True)
    assert shown["queries"].tolist() == [10, 1]
    con.close()


def test_a_script_of_dp_queries_reconciles(db_path):
    script = ("CREATE PRIVACY BUDGET ON visits WITH (epsilon = 2.0, delta = 1e-5, privacy_unit = 'patient_id');\n"
              + (SMALL + ";\n") * 3
              + "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) "
                "AVG(age, contribution_bounds_per_group => (18, 80)) AS a FROM visits;\n"
              + SMALL.replace("0.3", "5") + ";\n")                                     # refused (exit 3)
    res = CliRunner().invoke(cli, ["run", "-", "--db", str(db_path)], input=script)
    assert res.exit_code == 3 and "edited by hand" not in res.output, res.output
    res = CliRunner().invoke(cli, ["run", "-", "--db", str(db_path)], input=SMALL.replace("0.3", "0.05") + ";")
    assert res.exit_code == 0, res.output
    with duckdb.connect(str(db_path)) as c:
        spent, queries = c.execute("SELECT spent_epsilon, queries FROM anon.privacy_budgets").fetchall()[0]
        logged = c.execute("SELECT sum(epsilon), count(*) FROM anon.privacy_ledger").fetchall()[0]
    assert queries == logged[1] and spent == pytest.approx(logged[0])
