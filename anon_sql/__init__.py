"""anon_sql — privacy-preserving data publishing inside DuckDB.

Public API (everything else is private and may change)::

    anon_sql.install(con)                         # catalog schema `anon`, UDFs, macros (idempotent)
    anon_sql.Policy.from_toml(path)               # or Policy.from_sql(...), Policy.from_dict(...)
    anon_sql.release(con, policy) -> Release      # plan, compile, materialize, verify — one transaction
    anon_sql.release(con, policy, to="r.duckdb")  # ... and write the shareable file (table, classes, metadata)
    anon_sql.compile(policy, dialect="duckdb")    # the release as SQL statements for an engine
    anon_sql.check(con, release_name)             # re-verify a release from its stored policy (tamper-evident)
    anon_sql.export(con, release_name, path)      # the shareable file of a recorded release
    anon_sql.assess(con, table, quasi=[...])      # risk measures of an existing table (nothing written)
    anon_sql.execute(con, sql_text)               # a SQL script: DuckDB SQL + CREATE/REFRESH/... ANONYMIZED VIEW
                                                  # + CREATE/SHOW/DROP PRIVACY BUDGET, SELECT WITH DIFFERENTIAL_PRIVACY
    anon_sql.refresh(con, name, keep_plan=False)  # re-run a release's stored policy on the current source
    anon_sql.create_budget(con, table, epsilon=1.0, delta=1e-7, privacy_unit="person_id")   # DP (docs/dp.md)
    anon_sql.dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY ...")  # -> DataFrame; show_budgets, drop_budget
"""
from __future__ import annotations

import importlib

from .errors import (AnonSQLError, PolicyError, PrivacyRequirementError, ReleaseExistsError, SourceError,
                     StatementError, TargetError, TaxonomyError, UnknownViewError, ViewExistsError)

__version__ = "0.1.0"

# Every other public name is imported on first use (PEP 562), so that `import anon_sql` — and the CLI, which must
# start at once — does not load pandas, scikit-learn or scipy before a command needs them.
_LAZY = {
    "install": ".catalog.store", "load_taxonomy": ".catalog.store", "store_taxonomy": ".catalog.store",
    "drop_taxonomy": ".catalog.store",
    "Attribute": ".policy.model", "Policy": ".policy.model", "Privacy": ".policy.model", "Requirement": ".policy.model",
    "Release": ".runner.result", "release": ".api",      # api.release: the runner, plus the shareable file (to=)
    "check": ".api", "compile": ".api", "export": ".api", "load_taxonomy_file": ".api",
    "Taxonomy": ".data.taxonomy",
    "assess": ".assessment.measures", "Assessment": ".assessment.measures",
    "execute": ".statements.script",          # SQL scripts with the anonymized-view statements
    "refresh": ".statements.views",
    "create_budget": ".dp", "show_budgets": ".dp", "drop_budget": ".dp", "dp_query": ".dp",   # differential privacy
    "leakage": ".analytics.leakage", "compare_leakage": ".analytics.leakage",
    "feature_relevance": ".analytics.relevance", "identity_vulnerability": ".analytics.vulnerability",
}

__all__ = [
    "install", "Policy", "Attribute", "Privacy", "Requirement", "release", "Release", "compile", "check",
    "export", "assess", "Assessment", "Taxonomy", "load_taxonomy", "store_taxonomy", "drop_taxonomy", "load_taxonomy_file",
    "AnonSQLError", "PolicyError", "PrivacyRequirementError", "ReleaseExistsError", "SourceError", "TaxonomyError",
    "execute", "refresh", "StatementError", "TargetError", "UnknownViewError", "ViewExistsError",
    "create_budget", "show_budgets", "drop_budget", "dp_query",
]


def __getattr__(name: str):
    """Import a public name on first use; ``anon_sql.metrics`` is the (callable) metrics package itself."""
    if name == "metrics":  # anon_sql.metrics(con, release, names)
        return importlib.import_module(".metrics", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anon_sql' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"metrics"})
