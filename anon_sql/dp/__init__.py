"""Differential privacy: DP aggregate queries over a per-table privacy budget (BigQuery's SELECT WITH
DIFFERENTIAL_PRIVACY, mechanisms from OpenDP, a ledger in the catalog), and SafePub's (ε,δ)-DP release parameters.

Entry points for the statement runner and the CLI:
    is_dp_statement(text) -> bool
    run_dp_statement(con, text) -> pandas.DataFrame      CREATE / SHOW / DROP PRIVACY BUDGET, SELECT WITH DIFFERENTIAL_PRIVACY
Python API: create_budget, show_budgets, drop_budget, dp_query; safepub_parameters, sample_records, suppressed_classes.
"""
from anon_sql.dp.ledger import create_budget, drop_budget, show_budgets
from anon_sql.dp.query import is_dp_statement
from anon_sql.dp.run import dp_query, run_dp_statement
from anon_sql.dp.safepub import (SafePubParameters, safepub_parameters, sample_records, suppressed_classes,
                                 suppression_summary)

__all__ = ["is_dp_statement", "run_dp_statement", "dp_query", "create_budget", "show_budgets", "drop_budget",
           "SafePubParameters", "safepub_parameters", "sample_records", "suppressed_classes", "suppression_summary"]
