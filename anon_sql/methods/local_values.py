"""Released quasi-identifier values of local-recoding classes, shared by every local-recoding method.

A numeric QI is released as ``[min-max]`` over the class (or the single value), a categorical QI as the lowest common
ancestor of the class's values in its taxonomy (``*`` when it has none and the class mixes values). NULL is a value
of its own: a class of only NULLs releases NULL, a class mixing NULL with other values releases ``*``.
This module also reads a method's data from the ``__source`` view into numpy (:func:`load_source`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from ..common.columns import is_integer, is_numeric
from ..errors import PolicyError, TaxonomyError
from ..data.base_counts import WEIGHT
from ..data.source import describe
from ..common.sqlbuild import alias, and_all, col, ident, null_safe_eq, record_count, render, table as table_ref
from ..data.taxonomy import TOP, Taxonomy
from .base import ROW_ID, MethodContext
from .people import SIZE_WEIGHT, people_counts

_NULL = "\x00NULL"   # label of the NULL pseudo-leaf inside the encoding (released as SQL NULL)
_NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_RANGE = re.compile(rf"^\[({_NUM})-({_NUM})\]$")


@dataclass
class QIColumn:
    """One quasi-identifier encoded for partitioning and local values.

    ``order`` is an int64 sort code per row: numeric columns the dense rank of the value (NULL = 0), categorical
    ones the leaf's rank in the taxonomy's depth-first order (so the leaves under any node are contiguous and the
    lowest common ancestor of a set of leaves is that of its first and last). Numeric columns carry ``x`` (float64,
    NaN = NULL); categorical ones ``tree``: the ancestor code of every leaf rank at every level (level 0 = the leaf,
    the last level a single top), with ``labels`` and ``leaves`` (leaves under each code) per level.
    """

    name: str
    numeric: bool
    order: np.ndarray
    x: np.ndarray | None = None
    tree: np.ndarray | None = None
    labels: list[np.ndarray] = field(default_factory=list)
    leaves: list[np.ndarray] = field(default_factory=list)
    total_leaves: int = 1
    _anc: np.ndarray | None = field(default=None, repr=False)

    @property
    def anc(self) -> np.ndarray | None:
        """Ancestor code of every row at every level (rows × levels; categorical columns only, built on demand)."""
        if self.tree is not None and self._anc is None:
            self._anc = self.tree[self.order]
        return self._anc

    @property
    def span(self) -> float:
        """Global range of a numeric column (0 when constant or all NULL)."""
        if self.x is None or np.all(np.isnan(self.x)):
            return 0.0
        return float(np.nanmax(self.x) - np.nanmin(self.x))

    def lca(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(level, code) of the lowest common ancestor of leaf ranks ``lo`` and ``hi`` (categorical columns)."""
        same = self.tree[lo] == self.tree[hi]
        same[:, -1] = True
        level = np.argmax(same, axis=1)
        return level, self.tree[lo, level]


def _dict_encode(values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array, bool]:
    """Arrow dictionary encoding: codes per row (NULL → len(dictionary)), the dictionary, whether NULL occurs."""
    enc = values.dictionary_encode()
    enc = enc.combine_chunks() if isinstance(enc, pa.ChunkedArray) else enc
    codes = enc.indices.to_numpy(zero_copy_only=False)
    has_null = enc.indices.null_count > 0
    if has_null:
        nulls = enc.indices.is_null().to_numpy(zero_copy_only=False)
        codes = np.where(nulls, len(enc.dictionary), np.nan_to_num(codes, nan=0))
    return np.asarray(codes, dtype=np.int64), enc.dictionary, has_null


def _factorize(values: Any) -> tuple[np.ndarray, list]:
    """Codes 0..u-1 per row and the distinct values (NULL, if present, is the last one, as None)."""
    if isinstance(values, (pa.ChunkedArray, pa.Array)):
        codes, dictionary, has_null = _dict_encode(values)
        return codes, dictionary.to_pylist() + ([None] if has_null else [])
    codes, uniq = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    uniques = list(uniq)
    if (codes < 0).any():
        codes = np.where(codes < 0, len(uniques), codes)
        uniques.append(None)
    return np.asarray(codes, dtype=np.int64), uniques


def encode_numeric(name: str, values: Any) -> QIColumn:
    """A numeric QI: float values (NULL → NaN) and their dense rank (NULL → 0)."""
    if isinstance(values, (pa.ChunkedArray, pa.Array)):
        x = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    else:
        x = pd.to_numeric(pd.Series(values), errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    nan = np.isnan(x)
    order = np.zeros(len(x), dtype=np.int64)
    if (~nan).any():
        _, inv = np.unique(x[~nan], return_inverse=True)
        order[~nan] = inv + 1
    return QIColumn(name, True, order, x=x)


def encode_categorical(name: str, values: Any, taxonomy: Taxonomy | None = None) -> QIColumn:
    """A categorical QI (values as text, None = NULL) against its taxonomy, or a flat value → ``*`` hierarchy."""
    codes, uniques = _factorize(values)
    text = [(_NULL if v is None else str(v)) for v in uniques]
    if taxonomy is not None:
        levels = taxonomy.levels.copy()
    else:
        levels = pd.DataFrame({"level0": sorted(t for t in text if t != _NULL), "level1": TOP})
    levels = levels.astype(object)
    if len(levels) and levels.iloc[:, -1].nunique() > 1:   # several roots: one synthetic top over them
        levels[f"level{levels.shape[1]}"] = TOP
    if _NULL in text:
        top = levels.iloc[0, -1] if len(levels) else TOP
        row = [_NULL] * (max(levels.shape[1], 2) - 1) + [top]
        levels = pd.concat([levels, pd.DataFrame([row], columns=levels.columns)], ignore_index=True)
    idx = pd.Index(levels.iloc[:, 0]).get_indexer(text)
    if (idx < 0).any():
        missing = sorted(t for t, i in zip(text, idx) if i < 0)[:10]
        where = f"taxonomy {taxonomy.name!r}" if taxonomy is not None else "the flat hierarchy"
        raise TaxonomyError(f"quasi-identifier {name!r}: {where} has no leaf for value(s) {missing}; "
                            "add them to the taxonomy")
    tree = np.empty(levels.shape, dtype=np.int64)
    labels, leaves = [], []
    for j in range(levels.shape[1]):
        c, uniq = pd.factorize(levels.iloc[:, j], sort=True)
        tree[:, j] = c
        labels.append(np.array([None if u == _NULL else u for u in uniq], dtype=object))
        leaves.append(np.bincount(c, minlength=len(uniq)))
    by_rank = np.lexsort(tree.T)                      # depth-first: sort by the path from the top down
    rank = np.empty(len(levels), dtype=np.int64)
    rank[by_rank] = np.arange(len(levels))
    return QIColumn(name, False, rank[idx][codes], tree=tree[by_rank], labels=labels, leaves=leaves,
                    total_leaves=int(len(levels)))


def encode_qi_frame(frame: pd.DataFrame | pa.Table, quasi: Sequence[str], taxonomies: Mapping[str, Taxonomy],
           numeric: Iterable[str] | None = None) -> list[QIColumn]:
    """Encode the QI columns of a frame; numeric columns are those listed (default: numeric dtypes)."""
    if isinstance(frame, pa.Table):
        get = frame.column
        is_num = (lambda q: pa.types.is_integer(frame.schema.field(q).type)
                  or pa.types.is_floating(frame.schema.field(q).type)
                  or pa.types.is_decimal(frame.schema.field(q).type))
    else:
        get = frame.__getitem__
        is_num = (lambda q: pd.api.types.is_numeric_dtype(frame[q]) and not pd.api.types.is_bool_dtype(frame[q]))
    numeric = set(q for q in quasi if is_num(q)) if numeric is None else set(numeric)
    return [encode_numeric(q, get(q)) if q in numeric else encode_categorical(q, get(q), taxonomies.get(q))
            for q in quasi]


# -- class values ------------------------------------------------------------------------------------------------
def format_numbers(v: np.ndarray) -> np.ndarray:
    """Numbers as text: integral values without a decimal point, others in shortest round-trip form."""
    out = np.empty(len(v), dtype=object)
    with np.errstate(invalid="ignore"):    # NaN / inf: not integral, printed as repr (no warning on stderr: V01)
        integral = np.isfinite(v) & (np.mod(v, 1) == 0) & (np.abs(v) < 2 ** 53)
    out[integral] = v[integral].astype(np.int64).astype(str)
    out[~integral] = [repr(float(f)) for f in v[~integral]]   # per class, not per row
    return out


def segment_lca(c: QIColumn, rows: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(level, code) of the lowest common ancestor of each segment of ``rows`` (segments start at ``starts``)."""
    o = c.order[rows]
    return c.lca(np.minimum.reduceat(o, starts), np.maximum.reduceat(o, starts))


def lca_level(c: QIColumn, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Level of the lowest common ancestor of each segment of ``rows`` (segments start at ``starts``)."""
    return segment_lca(c, rows, starts)[0]


def class_values(ec: np.ndarray, columns: Sequence[QIColumn]) -> pd.DataFrame:
    """One row per class: ``ec_id`` and the released (text) value of every QI."""
    ec = np.asarray(ec, dtype=np.int64)
    order = np.argsort(ec, kind="stable")
    e = ec[order]
    starts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]]) if len(e) else np.zeros(0, dtype=np.int64)
    out: dict[str, Any] = {"ec_id": e[starts]}
    for c in columns:
        if c.numeric:
            x = c.x[order]
            nan = np.isnan(x).astype(np.int8)
            any_nan = np.maximum.reduceat(nan, starts) > 0
            all_nan = np.minimum.reduceat(nan, starts) > 0
            lo, hi = np.fmin.reduceat(x, starts), np.fmax.reduceat(x, starts)
            lo_s, hi_s = format_numbers(lo), format_numbers(hi)
            text = np.where(lo == hi, lo_s, "[" + lo_s + "-" + hi_s + "]").astype(object)
            text[any_nan] = TOP
            text[all_nan] = None
        else:
            level, code = segment_lca(c, order, starts)
            text = np.empty(len(starts), dtype=object)
            for lv in np.unique(level):
                m = level == lv
                text[m] = c.labels[lv][code[m]]
        out[c.name] = pd.Series(text, dtype="string")
    return pd.DataFrame(out)


def local_values(frame: pd.DataFrame, ec: np.ndarray | Sequence[int], quasi: Sequence[str],
                 taxonomies: Mapping[str, Taxonomy], numeric: Iterable[str] | None = None) -> pd.DataFrame:
    """Released values of each class for the rows of ``frame`` assigned to classes ``ec`` (see module docstring)."""
    return class_values(np.asarray(ec), encode_qi_frame(frame, quasi, taxonomies, numeric))


def parse_range(label: str | None) -> tuple[float, float] | None:
    """``"[lo-hi]"`` → (lo, hi); a plain number → (v, v); anything else (``*``, categories, NULL) → None."""
    if label is None:
        return None
    m = _RANGE.match(label)
    if m:
        return float(m.group(1)), float(m.group(2))
    try:
        v = float(label)
    except ValueError:
        return None
    return v, v


# -- reading a method's data -------------------------------------------------------------------------------------
@dataclass
class SourceData:
    """A method's input in numpy, rows in ``__row`` order: encoded QIs, record weights, sensitive-value codes."""

    rows: np.ndarray                        # the ``__row`` key of each row
    columns: list[QIColumn]
    weights: np.ndarray                     # records per row (the count column, else 1)
    sensitive: dict[str, np.ndarray]        # attribute → value code per row (codes follow the sorted values)
    sensitive_values: dict[str, pd.Series]  # attribute → the distinct values in code order (NULL last)
    types: dict[str, str]
    # with a privacy unit (load_combinations): each combination's share of a class's size in people, while
    # ``weights`` counts the people holding its sensitive value (methods/people.py); None: ``weights`` is both
    sizes: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.rows)


def _sorted_codes(values: pa.ChunkedArray) -> tuple[np.ndarray, pd.Series]:
    """Codes that follow the sorted distinct values (NULL last), and those values in their original type."""
    codes, dictionary, has_null = _dict_encode(values)
    uniq = dictionary.to_pandas()
    if has_null:
        uniq = pd.concat([uniq, pd.Series([None], dtype=uniq.dtype if len(uniq) else object)], ignore_index=True)
    order = uniq.sort_values(na_position="last", kind="stable").index.to_numpy()
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    return remap[codes], uniq.iloc[order].reset_index(drop=True)


def _source_types(ctx: MethodContext) -> dict[str, str]:
    return {r[0]: str(r[1]) for r in describe(ctx.con, table_ref(ctx.source_view))}


def _qi_items(policy: Any, types: Mapping[str, str], source: str | None = None
              ) -> tuple[list[exp.Expression], list[str]]:
    """``CAST(q AS DOUBLE | VARCHAR)`` per QI (numeric types as DOUBLE), unaliased, and the numeric QIs."""
    numeric = [q for q in policy.quasi if is_numeric(types.get(q, ""))]
    items = [exp.Cast(this=col(q, source), to=exp.DataType.build("DOUBLE" if q in numeric else "VARCHAR"))
             for q in policy.quasi]
    return items, numeric


def _source_data(table: pa.Table, policy: Any, ctx: MethodContext, types: dict[str, str], numeric: list[str],
                 rows: np.ndarray | None) -> SourceData:
    quasi = table.select([f"q{i}" for i in range(len(policy.quasi))]).rename_columns(list(policy.quasi))
    columns = encode_qi_frame(quasi, policy.quasi, ctx.taxonomies, numeric)
    weights = (np.nan_to_num(np.asarray(table.column("w").to_numpy(zero_copy_only=False), dtype=np.float64))
               if "w" in table.column_names else np.ones(table.num_rows, dtype=np.float64))
    sens, sens_values = {}, {}
    for i, s in enumerate(policy.sensitive):
        sens[s], sens_values[s] = _sorted_codes(table.column(f"s{i}"))
    if rows is None:
        rows = np.asarray(table.column("r").to_numpy(zero_copy_only=False), dtype=np.int64)
    sizes = (np.asarray(table.column(SIZE_WEIGHT).to_numpy(zero_copy_only=False), dtype=np.float64)
             if SIZE_WEIGHT in table.column_names else None)
    return SourceData(rows, columns, weights, sens, sens_values, types, sizes)


def load_source(ctx: MethodContext) -> SourceData:
    """Read ``__row``, the QIs (numeric as DOUBLE, others as VARCHAR), sensitive attributes and the count column."""
    policy = ctx.policy
    types = _source_types(ctx)
    casts, numeric = _qi_items(policy, types)
    items: list[exp.Expression] = [alias(col(ROW_ID), "r")]
    items += [alias(c, f"q{i}") for i, c in enumerate(casts)]
    items += [alias(col(s), f"s{i}") for i, s in enumerate(policy.sensitive)]
    if policy.count_column:
        items.append(alias(col(policy.count_column), "w"))
    view = table_ref(ctx.source_view)
    table = ctx.con.sql(render(exp.select(*items).from_(view).order_by(col(ROW_ID)))).to_arrow_table()
    return _source_data(table, policy, ctx, types, numeric, None)


def load_combinations(ctx: MethodContext) -> tuple[SourceData, pa.Table]:
    """The source aggregated in the engine to its distinct (QI, sensitive) combinations, each weighted by its
    records (``SUM`` of the count column, else ``COUNT(*)``): for a method whose decisions depend only on the QI
    values and weighted statistics of sets of rows (Mondrian), the same input as :func:`load_source` in the size of
    the combinations, not of the table — and no ``__row`` sort while planning. ``rows`` numbers the combinations;
    the second value is their QI columns as read (``q<i>``), for :func:`assign_rows`. A count column that is not an
    integer type keeps one row per source row, in ``__row`` order (float sums in the same order as per row)."""
    policy = ctx.policy
    types = _source_types(ctx)
    casts, numeric = _qi_items(policy, types)
    keys: list[exp.Expression] = [alias(c, f"q{i}") for i, c in enumerate(casts)]
    keys += [alias(col(s), f"s{i}") for i, s in enumerate(policy.sensitive)]
    per_row = bool(policy.count_column) and not is_integer(types.get(policy.count_column, ""))
    if per_row:
        keys.insert(0, alias(col(ROW_ID), "r"))
    # the base counts resolve made (the same keys, grouped raw, with their records): their rows grouped again, not
    # the source's (issue 29.2: one aggregation of the rows serves the coverage check, this plan and the release)
    from_base = ctx.base is not None and not per_row and not getattr(policy, "privacy_unit", None)
    weight = exp.Cast(this=exp.Sum(this=col(WEIGHT)) if from_base else record_count(policy.count_column),
                      to=exp.DataType.build("DOUBLE"))
    query = (exp.select(*keys, alias(weight, "w")).from_(ctx.base.copy() if from_base else table_ref(ctx.source_view))
             .group_by(*[exp.Column(this=ident(k.alias)) for k in keys]))
    if getattr(policy, "privacy_unit", None):   # people, not rows (docs/units.md)
        if len(policy.sensitive) > 1:
            raise PolicyError(f"method {policy.method!r} with privacy_unit counts people per sensitive value of one "
                              f"attribute; the policy has {policy.sensitive}: use method 'levels' (its checks "
                              "count people per attribute) or one sensitive attribute")
        # the base counts resolve made hold one row per (QIs, sensitive values, unit): the same people, a tenth of
        # the rows when a person has ten (issue 24.6)
        people_of = ctx.base.copy() if ctx.base is not None and not per_row else table_ref(ctx.source_view)
        query = people_counts(people_of, keys, [f"s{i}" for i in range(len(policy.sensitive))], "w")
    if per_row:
        query = query.order_by(col("r"))
    table = ctx.con.sql(render(query)).to_arrow_table()
    data = _source_data(table, policy, ctx, types, numeric, np.arange(table.num_rows, dtype=np.int64))
    return data, table.select([f"q{i}" for i in range(len(policy.quasi))])


def tuple_classes(combinations: pa.Table, ec: np.ndarray) -> pa.Table | None:
    """Each distinct QI tuple of ``combinations`` (:func:`load_combinations`'s, columns ``q<i>``) with its
    ``ec_id`` (``ec`` per row of ``combinations``), or None when some tuple has rows in two classes (the
    assignment is then not a function of the QI values and must stay per row)."""
    names = [f"q{i}" for i in range(combinations.num_columns)]
    keyed = combinations.append_column("ec_id", pa.array(np.asarray(ec, dtype=np.int64)))
    grouped = keyed.group_by(names, use_threads=False).aggregate([("ec_id", "min"), ("ec_id", "max")])
    lo, hi = grouped.column("ec_id_min"), grouped.column("ec_id_max")
    if not np.array_equal(lo.to_numpy(), hi.to_numpy()):
        return None
    return pa.table([*[grouped.column(n) for n in names], lo], names=[*names, "ec_id"])


def tuple_casts(policy: Any, tuples: pa.Table, source: str | None = None) -> list[exp.Expression]:
    """Each QI of the source cast the way ``tuples`` (:func:`tuple_classes`'s) holds it: DOUBLE or VARCHAR."""
    return [exp.Cast(this=col(q, source), to=exp.DataType.build(
                "DOUBLE" if pa.types.is_floating(tuples.schema.field(f"q{i}").type) else "VARCHAR"))
            for i, q in enumerate(policy.quasi)]


def assign_rows(ctx: MethodContext, tuples: pa.Table) -> pd.DataFrame:
    """Per source row, ``__row`` and the ``ec_id`` of its QI tuple (``tuples``: :func:`tuple_classes`'s): a join in
    the engine of the ``__source`` view with the distinct QI tuples, ordered by ``__row`` — the row-level assignment
    (a sort of every row for the row key), for plans that need it in memory."""
    name = "__anon_row_classes"
    names = [f"q{i}" for i in range(len(ctx.policy.quasi))]
    on = and_all(null_safe_eq(c, col(n, "k")) for c, n in zip(tuple_casts(ctx.policy, tuples, "s"), names))
    query = (exp.select(alias(col(ROW_ID, "s"), ROW_ID), col("ec_id", "k"))
             .from_(table_ref(ctx.source_view, alias="s"))
             .join(exp.Table(this=ident(name), alias=exp.TableAlias(this=ident("k"))), on=on)
             .order_by(col(ROW_ID, "s")))
    ctx.con.register(name, tuples)
    try:
        out = ctx.con.sql(render(query)).to_arrow_table()
    finally:
        ctx.con.unregister(name)
    return pd.DataFrame({ROW_ID: out.column(ROW_ID).to_numpy(), "ec_id": out.column("ec_id").to_numpy()})


__all__ = ["QIColumn", "SourceData", "assign_rows", "class_values", "encode_qi_frame", "encode_categorical",
           "encode_numeric", "lca_level", "load_combinations", "load_source", "local_values", "parse_range",
           "segment_lca", "tuple_casts", "tuple_classes"]
