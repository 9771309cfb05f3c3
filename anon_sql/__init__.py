"""anon_sql — privacy-preserving data publishing inside DuckDB.

Public API (everything else is private and may change)::

    anon_sql.install(con)                         # catalog schema `anon`, UDFs, macros (idempotent)
    anon_sql.Policy.from_toml(path)               # or Policy.from_sql(...), Policy.from_dict(...)
    anon_sql.release(con, policy) -> Release      # plan, compile, materialize, verify — one transaction
    anon_sql.compile(policy, dialect="duckdb")    # the release as SQL statements for an engine
    anon_sql.check(con, release_name)             # re-run the privacy checks on a materialized release
    anon_sql.assess(con, table, quasi=[...])      # risk measures of an existing table (nothing written)
    anon_sql.execute(con, sql_text)               # a SQL script: DuckDB SQL + CREATE/REFRESH/... ANONYMIZED VIEW
    anon_sql.refresh(con, name, keep_plan=False)  # re-run a release's stored policy on the current source
"""
from __future__ import annotations

from .catalog import install, load_taxonomy, store_taxonomy
from .errors import (AnonSQLError, PolicyError, PrivacyRequirementError, ReleaseExistsError, SourceError,
                     StatementError, TaxonomyError, UnknownViewError, ViewExistsError)
from .policy import Attribute, Policy, Privacy, Requirement
from .release import Release, release
from .api import check, compile, export, load_taxonomy_file
from .taxonomy import Taxonomy

__version__ = "0.1.0"

__all__ = [
    "install", "Policy", "Attribute", "Privacy", "Requirement", "release", "Release", "compile", "check",
    "export", "assess", "Assessment", "Taxonomy", "load_taxonomy", "store_taxonomy", "load_taxonomy_file",
    "AnonSQLError", "PolicyError", "PrivacyRequirementError", "ReleaseExistsError", "SourceError", "TaxonomyError",
    "execute", "refresh", "StatementError", "UnknownViewError", "ViewExistsError",
]


def __getattr__(name: str):
    """Analytics are imported lazily (scikit-learn / scipy load only when used)."""
    if name == "metrics":  # anon_sql.metrics(con, release, names) — the package module is callable
        import importlib
        return importlib.import_module(".metrics", __name__)
    if name in ("assess", "Assessment"):
        from . import assessment as module
        return getattr(module, name)
    if name == "execute":   # SQL scripts with the anonymized-view statements (anon_sql.statements)
        from .statements import execute
        return execute
    if name == "refresh":
        from .views import refresh
        return refresh
    if name == "leakage":
        from .analytics.leakage import leakage
        return leakage
    if name == "compare_leakage":
        from .analytics.leakage import compare_leakage
        return compare_leakage
    if name == "feature_relevance":
        from .analytics.relevance import feature_relevance
        return feature_relevance
    if name == "identity_vulnerability":
        from .analytics.vulnerability import identity_vulnerability
        return identity_vulnerability
    raise AttributeError(f"module 'anon_sql' has no attribute {name!r}")
