"""The engines a release runs on, behind one interface (:class:`~anon_sql.engines.base.Engine`): DuckDB here,
Spark in :mod:`anon_sql.engines.spark.session`."""
from __future__ import annotations

from .base import Engine
from .duckdb_engine import DuckDBEngine

__all__ = ["Engine", "DuckDBEngine"]
