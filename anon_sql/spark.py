"""Apache Spark engine: the same policies, compiled to Spark SQL and run on a SparkSession (``pip install
'anon-sql[spark]'``). ``release(spark, policy)`` mirrors :func:`anon_sql.runner.run.release_with_duckdb`; ``local_session()`` starts a
local session configured for it."""
from __future__ import annotations

from .runner.spark import release_with_spark as release
from .engines.spark.session import SparkSQL, local_session

__all__ = ["release", "local_session", "SparkSQL"]
