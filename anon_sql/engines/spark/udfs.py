"""The per-class kernels of udfs/kernels.py as Spark pandas UDFs ``anon_<kernel>``: the compiled tree's kernel calls
(:class:`anon_sql.common.sqlbuild.KernelCall`) render as calls of them in Spark SQL — one kernel, every engine.

The UDFs take the per-class list of sensitive-value counts (``sort_array(collect_list(count), false)``) and run the
same vectorized numpy function as the DuckDB arrow UDFs (:func:`anon_sql.udfs.kernels.batch`).
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

import numpy as np
import pandas as pd
from sqlglot import exp

from ...common.sqlbuild import KernelCall
from ...udfs import kernels

PREFIX = "anon_"


def _lists(s: pd.Series) -> list[np.ndarray]:
    return [np.asarray(a if a is not None else [], dtype=np.int64) for a in s]


def _first(s: pd.Series) -> Any:
    """The constant parameter of a batch (Spark passes literals as columns; 3.0 arrives as a Decimal)."""
    if not len(s):
        return None
    v = s.iloc[0]
    if isinstance(v, Decimal):
        return float(v)
    return v.item() if hasattr(v, "item") else v


def _counts_kernel(kernel: Callable[..., Any], n_args: int) -> Callable[..., pd.Series]:
    """A pandas UDF body: per-class count lists (+ constant parameters) → kernel values."""
    def body(counts: pd.Series, *params: pd.Series) -> pd.Series:
        args = [_first(p) for p in params[:n_args]]
        return pd.Series(kernels.batch(kernel, _lists(counts), *args))
    return body


def _threshold(m: pd.Series, mu: pd.Series) -> pd.Series:
    m, mu = m.astype(float).to_numpy(np.float64), mu.astype(float).to_numpy(np.float64)
    return pd.Series(np.asarray(kernels.theta_threshold(m, mu),
                                dtype=np.float64))


# macro name → (pandas UDF body, Spark return type)
KERNELS: dict[str, tuple[Callable[..., pd.Series], str]] = {
    "entropy_counts": (_counts_kernel(kernels.entropy_counts, 0), "double"),
    "simpson_diversity_counts": (_counts_kernel(kernels.simpson_diversity_counts, 0), "double"),
    "simpson_evenness_counts": (_counts_kernel(kernels.simpson_evenness_counts, 0), "double"),
    "theta_variance_counts": (_counts_kernel(kernels.theta_variance_counts, 0), "double"),
    "theta_ok_counts": (_counts_kernel(kernels.theta_ok_counts, 1), "boolean"),
    "recursive_l_ok_counts": (_counts_kernel(kernels.recursive_l_ok_counts, 2), "boolean"),
    "theta_threshold": (_threshold, "double"),
}


def register_spark_udfs(spark: Any) -> list[str]:
    """Register every kernel as a pandas UDF ``anon_<macro>`` in the session; returns the names."""
    from pyspark.sql.functions import pandas_udf

    names = []
    for macro, (body, rtype) in KERNELS.items():
        spark.udf.register(PREFIX + macro, pandas_udf(body, rtype))
        names.append(PREFIX + macro)
    return names


def register_pseudonym(spark: Any, key: bytes) -> str:
    """Register ``anon_pseudonym(STRING) -> STRING`` bound to ``key`` in the session as a pandas UDF running
    :func:`anon_sql.data.pseudonym.pseudonyms` — the DuckDB function's values. The key travels to the Python workers in
    the UDF's closure; it never appears in the SQL or the release."""
    from pyspark.sql.functions import pandas_udf

    from ...data import pseudonym

    def body(values: pd.Series) -> pd.Series:
        texts = [None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v)
                 for v in values]
        return pd.Series(pseudonym.pseudonyms(key, texts), dtype=object)

    spark.udf.register(pseudonym.FUNCTION, pandas_udf(body, "string"))
    return pseudonym.FUNCTION


def unknown_kernels(tree: exp.Expression) -> list[str]:
    """The kernels ``tree`` calls that have no Spark UDF (sorted): the release is refused before it runs them."""
    return sorted({k.name for k in tree.find_all(KernelCall)} - set(KERNELS))
