"""Vectorized DuckDB (arrow) UDFs over the kernels, and the installer of the persistent SQL macros (sql/macros.sql).

`register(con)` adds, per connection: anon_entropy(LIST), anon_simpson_diversity(LIST), anon_simpson_evenness(LIST),
anon_theta_variance(LIST) -> DOUBLE and anon_theta_ok(LIST, mu) -> BOOLEAN. The parameters are registered untyped
(`parameters=None`, which DuckDB 2.0 binds as ANY), so lists of any element type arrive as they are: a declared
VARCHAR[] parameter would not accept INTEGER[] (DuckDB has no implicit numeric-to-text list cast). A NULL list gives
NULL, an empty list NULL; NULL elements count as one value (NaN doubles are a value distinct from NULL, as in SQL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sql import macro_statements
from . import kernels, slicing

try:   # DuckDB >= 1.4 names the type module `sqltypes`; 1.1-1.3 call it `typing`
    from duckdb import sqltypes
except ImportError:  # pragma: no cover - exercised by CI's oldest-versions run
    from duckdb import typing as sqltypes

__all__ = ["UDF_NAMES", "install_macros", "macro_statements", "register_udfs"]


def _as_list_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def _flat_codes(flat: pa.Array) -> np.ndarray:
    """Dense codes of the flattened elements; NULL gets a code of its own."""
    if len(flat) == 0:
        return np.zeros(0, dtype=np.int64)
    if pa.types.is_null(flat.type):
        return np.zeros(len(flat), dtype=np.int64)
    try:
        enc = pc.dictionary_encode(flat, null_encoding="encode")
        return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        # nested / unusual element types: count the Python values (NaN and None stay apart, as in SQL)
        return kernels.value_codes([("__null__",) if v is None else kernels.hashable(v) for v in flat.to_pylist()])


def _segmented(lists: pa.Array | pa.ChunkedArray) -> tuple[kernels.Seg, np.ndarray, np.ndarray]:
    """Segmented counts of a LIST column, with its null mask and the length of every list."""
    arr = _as_list_array(lists)
    n = len(arr)
    if pa.types.is_null(arr.type):
        empty = np.zeros(0, dtype=np.int64)
        return (empty, empty, n), np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64)
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type)):
        raise TypeError(f"anon_* diversity functions take a LIST, got {arr.type}")
    is_null = arr.is_null().to_numpy(zero_copy_only=False)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = arr.flatten()
    parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    return kernels.group_counts(_flat_codes(flat), parents, n), is_null, lengths


def _out(values: np.ndarray, null: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.array(values, type=typ, mask=null)


def _double_udf(seg_kernel: Callable[..., np.ndarray]) -> Callable[[pa.ChunkedArray], pa.Array]:
    def udf(lists: pa.ChunkedArray) -> pa.Array:
        seg, is_null, lengths = _segmented(lists)
        return _out(seg_kernel(*seg), is_null | (lengths == 0), pa.float64())

    udf.__name__ = f"udf_{seg_kernel.__name__}"
    return udf


def _theta_ok_udf(lists: pa.ChunkedArray, mu: pa.ChunkedArray) -> pa.Array:
    seg, is_null, lengths = _segmented(lists)
    mu_arr = pc.cast(_as_list_array(mu), pa.float64())
    if len(mu_arr) != len(is_null):  # a constant broadcast by DuckDB as one value
        mu_arr = pa.array(np.full(len(is_null), mu_arr[0].as_py() if len(mu_arr) else None), type=pa.float64())
    mu_null = mu_arr.is_null().to_numpy(zero_copy_only=False)
    mu_np = pc.fill_null(mu_arr, 0.0).to_numpy(zero_copy_only=False)
    return _out(kernels.theta_ok_segments(*seg, mu_np), is_null | mu_null | (lengths == 0), pa.bool_())


_DOUBLE_UDFS: dict[str, Callable[..., np.ndarray]] = {
    "anon_entropy": kernels.entropy_segments,
    "anon_simpson_diversity": kernels.simpson_diversity_segments,
    "anon_simpson_evenness": kernels.simpson_evenness_segments,
    "anon_theta_variance": kernels.theta_variance_segments,
}
UDF_NAMES: tuple[str, ...] = (*_DOUBLE_UDFS, "anon_theta_ok", "anon_slicing_diversity")


def _create(con: duckdb.DuckDBPyConnection, name: str, fn: Callable[..., Any], return_type: Any) -> None:
    try:
        con.remove_function(name)  # re-registering a name raises, so replace it
    except (duckdb.InvalidInputException, duckdb.CatalogException):
        pass
    try:
        con.create_function(name, fn, None, return_type, type="arrow", null_handling="special", side_effects=False)
    except (duckdb.NotImplementedException, duckdb.CatalogException) as err:
        # another connection to the same database instance registered it already: the same kernel serves both
        if "already exists" not in str(err):
            raise


def register_udfs(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Register the anon_* arrow UDFs on `con` (idempotent); returns `con`."""
    for name, seg_kernel in _DOUBLE_UDFS.items():
        _create(con, name, _double_udf(seg_kernel), sqltypes.DOUBLE)
    _create(con, "anon_theta_ok", _theta_ok_udf, sqltypes.BOOLEAN)
    _create(con, "anon_slicing_diversity", slicing.slicing_diversity_udf, sqltypes.DOUBLE)
    return con


def install_macros(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """CREATE SCHEMA IF NOT EXISTS anon and (re)create the anon.* macros; they persist in a database file."""
    con.execute("CREATE SCHEMA IF NOT EXISTS anon")
    for stmt in macro_statements():
        con.execute(stmt)
    return con
