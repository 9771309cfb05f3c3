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

import importlib
import sys
import types

from .errors import (AnonSQLError, PolicyError, PrivacyRequirementError, ReleaseExistsError, SourceError,
                     StatementError, TaxonomyError, UnknownViewError, ViewExistsError)

__version__ = "0.1.0"

# Every other public name is imported on first use (PEP 562), so that `import anon_sql` — and the CLI, which must
# start at once — does not load pandas, scikit-learn or scipy before a command needs them.
_LAZY = {
    "install": ".catalog", "load_taxonomy": ".catalog", "store_taxonomy": ".catalog",
    "Attribute": ".policy", "Policy": ".policy", "Privacy": ".policy", "Requirement": ".policy",
    "Release": ".release", "release": ".release",
    "check": ".api", "compile": ".api", "export": ".api", "load_taxonomy_file": ".api",
    "Taxonomy": ".taxonomy",
    "assess": ".assessment", "Assessment": ".assessment",
    "execute": ".statements",          # SQL scripts with the anonymized-view statements
    "refresh": ".views",
    "leakage": ".analytics.leakage", "compare_leakage": ".analytics.leakage",
    "feature_relevance": ".analytics.relevance", "identity_vulnerability": ".analytics.vulnerability",
}

__all__ = [
    "install", "Policy", "Attribute", "Privacy", "Requirement", "release", "Release", "compile", "check",
    "export", "assess", "Assessment", "Taxonomy", "load_taxonomy", "store_taxonomy", "load_taxonomy_file",
    "AnonSQLError", "PolicyError", "PrivacyRequirementError", "ReleaseExistsError", "SourceError", "TaxonomyError",
    "execute", "refresh", "StatementError", "UnknownViewError", "ViewExistsError",
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


class _Package(types.ModuleType):
    """Importing the submodule ``anon_sql.release`` must not replace the public function ``anon_sql.release``."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in _LAZY and _LAZY[name] == f".{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
