"""``anon_sql.spark.release(spark, policy)``: the release runner of :mod:`anon_sql.runner.run` on a
:class:`~anon_sql.engines.spark.engine.SparkEngine`.

The policy is resolved by the same code as on DuckDB (its small queries transpiled to Spark SQL), the release views
are the compiler's sqlglot trees rendered for Spark (temporary views; the released rows cached),
and the verification is the same SQL checks view over the released table, read back by the same code. How a method
gets its data on Spark is :mod:`anon_sql.engines.spark.planning`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import duckdb

from ..errors import PolicyError, ReleaseExistsError
from ..policy.model import Policy, coerce_policy
from .run import release_on
from .result import Release
from ..engines.spark.engine import SparkEngine


def release_with_spark(spark: Any, policy: Policy | dict | str, *, source: Any = None, output: str | None = None,
            replace: bool = False, catalog: duckdb.DuckDBPyConnection | None = None,
            progress: Callable[[str], None] | None = None) -> Release:
    """Plan, materialize and verify a release on Spark; ``Release.name`` is a temporary view of the session.

    ``source`` overrides the policy's source (a table / view name, a Parquet/CSV path, or a Spark DataFrame);
    ``output`` also writes the released rows as Parquet; ``catalog`` is a DuckDB connection whose ``anon`` catalog
    holds named taxonomies (built-in and file taxonomies need none). A failed check drops everything the release
    created and raises :class:`PrivacyRequirementError`.
    """
    policy = coerce_policy(policy)
    if not _SPARK_VIEW_NAME.fullmatch(policy.name):
        # refused before anything runs: Spark fails on the first temporary view, with its own message
        raise PolicyError(f"name {policy.name!r}: a release on Spark is a temporary view of the session, and Spark's view "
                          "names are ASCII letters, digits and underscores; choose e.g. "
                          f"{re.sub(r'[^A-Za-z0-9_]', '_', policy.name)!r} (DuckDB releases take any name)")
    if output is not None and not replace and _exists_here(output):
        # refused before anything runs (Spark would fail only when writing, after the whole release)
        raise ReleaseExistsError(f"output {output!r} already exists; pass replace=True (CLI: --replace) to overwrite "
                                 "it, or choose another path")
    engine = SparkEngine(spark, catalog, output=output, replace=replace)
    return release_on(engine, policy, replace=replace, source=source, progress=progress)


# what SparkSession.createOrReplaceTempView accepts (probed on Spark 4: a space, a dot, a quote, '-' or a non-ASCII
# letter fail with "Invalid view name")
_SPARK_VIEW_NAME = re.compile(r"[A-Za-z0-9_]+")


def _exists_here(path: str) -> bool:
    """Whether a local output path (``file:`` URLs included) exists; another file system's URL is left to Spark,
    which refuses to overwrite it."""
    if path.startswith("file:"):
        return Path(path.removeprefix("file:").removeprefix("//")).exists()
    return "://" not in path and Path(path).exists()
