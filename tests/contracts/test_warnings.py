"""The test run stays quiet and a new warning is seen (pyproject.toml's filterwarnings): a warning attributed to
anon_sql fails its test, the third-party notices silenced are matched by message and module, and nothing else is."""
from __future__ import annotations

import warnings

import pytest


def emit(message: str, category: type[Warning], module: str) -> None:
    """A warning as if raised in ``module`` (pandas and numpy attribute theirs to the caller: ours)."""
    warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1, module=module, registry={})


@pytest.mark.parametrize("category", [UserWarning, FutureWarning, DeprecationWarning, RuntimeWarning])
def test_a_warning_from_anon_sql_is_an_error(category):
    with pytest.raises(category):
        emit("anything", category, "anon_sql.metrics.utility")
    with pytest.raises(category):
        emit("anything", category, "anon_sql.udfs.kernels")


def test_the_silenced_notices_are_named():
    with warnings.catch_warnings(record=True) as seen:
        emit("PySpark does not yet fully support pandas >= 3.0.0.", FutureWarning, "pyspark.sql.pandas.conversion")
        emit("The copy keyword is deprecated and will be removed", DeprecationWarning, "pyspark.sql.pandas.types")
        emit("toPandas attempted Arrow optimization because", UserWarning, "pyspark.sql.pandas.conversion")
        emit("The default of observed=False is deprecated", FutureWarning, "pycanon.anonymity.utils")
    assert not seen


def test_other_third_party_warnings_are_seen():
    with warnings.catch_warnings(record=True) as seen:     # the run's filters as they are (pytest.warns resets them)
        emit("a new notice", FutureWarning, "pyspark.sql.pandas.conversion")
        emit("PySpark does not yet fully support pandas >= 3.0.0.", FutureWarning, "somebody_else")  # not pyspark's
    assert [str(w.message)[:12] for w in seen] == ["a new notice", "PySpark does"]
