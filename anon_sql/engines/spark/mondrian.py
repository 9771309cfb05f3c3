"""Strict Mondrian on Spark: the partition tree of :mod:`anon_sql.methods.mondrian`, grown level by level where the
data lives.

Rows stay in Spark with their partition path (``"0110"``: left/right at each split). Per level: one aggregation
grouped by path gives every open partition's extent (normalized widths, taxonomy LCA); one aggregation grouped by
(path, attribute, key, sensitive codes) gives the weighted key histograms of all attributes at once, from which the
driver runs the DuckDB method's rounds (its ``median_cut``, and the models' numpy ``check`` on both halves through
its ``StatsBuilder``); one pass moves the rows of the split partitions one level down. The number of Spark jobs grows
with the depth of the tree, not with its size. Decisions, ties and ids are those of the DuckDB method: leaves in
depth-first order are the lexicographic order of their paths.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from ...methods.base import ROW_ID, AssignmentPlan
from ...common.columns import is_numeric
from ...methods.local_values import QIColumn, class_values, encode_categorical, encode_numeric
from ...methods.mondrian import (Mondrian, StatsBuilder, all_ok, categorical_width, check_root, median_cut,
        numeric_width)
from ...models import PrivacyModel
from ...common.sqlbuild import alias, col, ident
from .session import SparkSQL, duck_type

_BIG = np.iinfo(np.int64).max


class _Encoded:
    """The source's rows in Spark with internal column names (r, w, x<j>/o<j>, a<j>_<l>, s<i>) and the driver-side
    encodings of the quasi-identifiers and sensitive attributes."""

    def __init__(self, sq: SparkSQL, policy: Any, source_view: str, taxonomies: dict, models: Sequence[PrivacyModel]):
        from pyspark.sql import functions as F, types as T

        spark = sq.spark
        view = exp.Table(this=ident(source_view))
        types = {f.name: duck_type(f.dataType.simpleString()) for f in spark.table(source_view).schema.fields}
        items: list[exp.Expression] = [alias(col(ROW_ID), "r")]
        weight = col(policy.count_column) if policy.count_column else exp.Literal.number(1)
        items.append(alias(exp.Cast(this=weight, to=exp.DataType.build("DOUBLE")), "w"))
        self.numeric = [is_numeric(types.get(q, "")) for q in policy.quasi]
        for j, q in enumerate(policy.quasi):
            to = "DOUBLE" if self.numeric[j] else "VARCHAR"
            items.append(alias(exp.Cast(this=col(q), to=exp.DataType.build(to)), f"v{j}"))
        for i, s in enumerate(policy.sensitive):
            items.append(alias(col(s), f"sv{i}"))
        raw = sq.run(exp.select(*items).from_(view))
        self.columns: list[QIColumn] = []
        for j, q in enumerate(policy.quasi):
            distinct = raw.select(f"v{j}").distinct().toPandas()[f"v{j}"]
            if self.numeric[j]:
                c = encode_numeric(q, distinct.to_numpy(dtype=np.float64, na_value=np.nan))
                fields = [T.StructField("__k", T.DoubleType()), T.StructField(f"o{j}", T.LongType())]
                rows = [(None if np.isnan(x) else float(x), int(o)) for x, o in zip(c.x, c.order)]
            else:
                values = distinct.astype(object).where(distinct.notna(), None).tolist()
                c = encode_categorical(q, values, taxonomies.get(q))
                anc = c.tree[c.order]   # ancestor code of each value at every level
                fields = [T.StructField("__k", T.StringType()), T.StructField(f"o{j}", T.LongType())]
                fields += [T.StructField(f"a{j}_{l}", T.LongType()) for l in range(anc.shape[1])]
                rows = [(v, int(o), *map(int, a)) for v, o, a in zip(values, c.order, anc)]
            self.columns.append(c)
            mapping = F.broadcast(spark.createDataFrame(rows, T.StructType(fields)))
            raw = raw.join(mapping, raw[f"v{j}"].eqNullSafe(mapping["__k"]), "left").drop("__k")
        self.sensitive: list[np.ndarray] = []
        self.labels: dict[str, np.ndarray] = {}
        self.global_freq: dict[str, np.ndarray] = {}
        for i, s in enumerate(policy.sensitive):
            # codes follow the sorted distinct values, NULL last (pd.factorize(sort=True), as the DuckDB method)
            distinct = raw.groupBy(f"sv{i}").agg(F.sum("w").alias("n")).toPandas()
            codes, uniq = pd.factorize(distinct[f"sv{i}"], sort=True, use_na_sentinel=False)
            freq = np.bincount(codes, weights=distinct["n"].to_numpy(np.float64), minlength=len(uniq))
            self.labels[s] = np.asarray(pd.Series(uniq).astype(object).where(pd.Series(uniq).notna(), None))
            self.global_freq[s] = freq
            mapping = spark.createDataFrame(
                [(None if pd.isna(v) else (v.item() if hasattr(v, "item") else v), int(k))
                 for v, k in zip(distinct[f"sv{i}"], codes)],
                T.StructType([T.StructField("__sv", raw.schema[f"sv{i}"].dataType), T.StructField(f"s{i}", T.LongType())]))
            raw = raw.join(F.broadcast(mapping), raw[f"sv{i}"].eqNullSafe(mapping["__sv"]), "left").drop("__sv")
        self.n_sens = len(policy.sensitive)
        self.sens_names = list(policy.sensitive)
        keep = ["r", "w"] + [n for n in raw.columns if n[0] in "oas" and n[1:2].isdigit()]
        keep += [f"v{j}" for j in range(len(self.columns)) if self.numeric[j]]
        self.frame = raw.select(*keep)
        self.needs_sensitive = any(m.needs_sensitive for m in models)

    def stats(self, agg: pd.DataFrame) -> StatsBuilder:
        """A StatsBuilder over aggregated rows (columns w, s<i>): the DuckDB method's statistics, from counts."""
        sens = {s: agg[f"s{i}"].to_numpy(np.int64) for i, s in enumerate(self.sens_names)}
        return StatsBuilder(agg["w"].to_numpy(np.float64), sens, self.labels, self.global_freq, self.needs_sensitive)


def _attr_key(enc: _Encoded, j: int) -> Any:
    """The split key of a row on attribute j: its order code (numeric) or its ancestor code at the level in the
    partition's column ``l<j>`` (the LCA's level − 1, categorical)."""
    from pyspark.sql import functions as F

    if enc.numeric[j]:
        return F.col(f"o{j}")
    value = None
    for lv in range(enc.columns[j].tree.shape[1]):
        hit = F.col(f"l{j}") == lv
        value = F.when(hit, F.col(f"a{j}_{lv}")) if value is None else value.when(hit, F.col(f"a{j}_{lv}"))
    return value


def _split_key(enc: _Encoded) -> Any:
    """The key of the attribute a partition split on (column ``attr``), levels in ``l<j>``."""
    from pyspark.sql import functions as F

    key = None
    for j in range(len(enc.columns)):
        hit = F.col("attr") == j
        key = F.when(hit, _attr_key(enc, j)) if key is None else key.when(hit, _attr_key(enc, j))
    return key


def _extent_aggs(enc: _Encoded) -> list:
    """Per group: row count; numeric: min, max, non-NULL count; categorical: min and max leaf rank (their LCA is the
    group's) and the distinct leaves (the tie-break)."""
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n")]
    for j in range(len(enc.columns)):
        if enc.numeric[j]:
            aggs += [F.min(f"v{j}").alias(f"lo{j}"), F.max(f"v{j}").alias(f"hi{j}"), F.count(f"v{j}").alias(f"nn{j}")]
        else:
            aggs += [F.min(f"o{j}").alias(f"lo{j}"), F.max(f"o{j}").alias(f"hi{j}"),
                     F.countDistinct(f"o{j}").alias(f"d{j}")]
    return aggs


def _lca(c: QIColumn, ext: pd.DataFrame, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: (level, code) of the lowest common ancestor of its leaves."""
    return c.lca(ext[f"lo{j}"].to_numpy(np.int64), ext[f"hi{j}"].to_numpy(np.int64))


def _widths(enc: _Encoded, ext: pd.DataFrame, mode: str) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """The DuckDB method's normalized widths and tie-breaks (the same functions), from the per-partition extents."""
    widths = np.zeros((len(ext), len(enc.columns)))
    ties = np.zeros((len(ext), len(enc.columns)))
    lcas = {}
    for j, c in enumerate(enc.columns):
        if enc.numeric[j]:
            lo = ext[f"lo{j}"].to_numpy(np.float64, na_value=np.nan)
            hi = ext[f"hi{j}"].to_numpy(np.float64, na_value=np.nan)
            nn, n = ext[f"nn{j}"].to_numpy(np.int64), ext["n"].to_numpy(np.int64)
            widths[:, j] = ties[:, j] = numeric_width(c, hi - lo, (nn > 0) & (nn < n))
        else:
            level, code = _lca(c, ext, j)
            widths[:, j], ties[:, j] = categorical_width(c, level, code, ext[f"d{j}"].to_numpy(np.float64), mode)
            lcas[j] = level
    return widths, ties, lcas


def plan_mondrian(sq: SparkSQL, policy: Any, source_view: str, taxonomies: dict, models: Sequence[PrivacyModel],
         progress: Callable[[str], None] = lambda m: None) -> AssignmentPlan:
    """Mondrian's assignment plan, computed in Spark (identical to ``method = "mondrian"`` on DuckDB)."""
    from pyspark.sql import functions as F, types as T

    spark = sq.spark
    mode = Mondrian(**policy.method_params).categorical_width   # the DuckDB method's parameter check
    enc = _Encoded(sq, policy, source_view, taxonomies, models)
    sens_cols = [f"s{i}" for i in range(enc.n_sens)]
    root = enc.frame.groupBy(*sens_cols).agg(F.sum("w").alias("w")).toPandas() if sens_cols else \
        enc.frame.agg(F.sum("w").alias("w")).toPandas()
    check_root(models, enc.stats(root))
    q = len(enc.columns)
    lvl_cols = [f"l{j}" for j in range(q)]
    part_schema = T.StructType([T.StructField("p", T.StringType()), T.StructField("seg", T.LongType())]
                               + [T.StructField(c, T.LongType()) for c in lvl_cols])
    rows = enc.frame.withColumn("p", F.lit("")).localCheckpoint()
    done = []     # (r, p) of the rows of closed partitions, one frame per level
    depth = 0
    while True:
        # 1. extents of every open partition → widths, attribute ranking, categorical LCA levels
        ext = rows.groupBy("p").agg(*_extent_aggs(enc)).toPandas().sort_values("p", kind="stable")
        ext = ext.reset_index(drop=True)
        m = len(ext)
        if m == 0:
            break
        widths, ties, lcas = _widths(enc, ext, mode)
        ranked = np.lexsort((-ties, -widths), axis=1)
        levels = np.column_stack([lcas[j] - 1 if j in lcas else np.zeros(m, dtype=np.int64) for j in range(q)])
        # 2. one aggregation: per partition, attribute, key value (and sensitive values) the records
        movable = np.flatnonzero((widths > 0).any(axis=1))
        part = spark.createDataFrame([(ext["p"][i], int(i), *map(int, levels[i])) for i in movable], part_schema)
        keyed = rows.join(F.broadcast(part), on="p")
        pairs = F.explode(F.array(*[F.struct(F.lit(j).alias("j"), _attr_key(enc, j).alias("key"))
                                    for j in range(q)])).alias("jk")
        hist = (keyed.select("seg", "w", *sens_cols, pairs).where(F.col("jk.key").isNotNull())
                .groupBy("seg", F.col("jk.j").alias("j"), F.col("jk.key").alias("key"), *sens_cols)
                .agg(F.sum("w").alias("w")).toPandas())
        h_seg, h_j, h_key = (hist[c].to_numpy(np.int64) for c in ("seg", "j", "key"))
        # 3. the DuckDB method's rounds, on the driver: widest attribute first, median cut, both halves checked
        decided = np.zeros(m, dtype=bool)
        cut_of = np.zeros(m, dtype=np.int64)
        attr_of = np.zeros(m, dtype=np.int64)
        for r in range(q):
            attr = ranked[:, r]
            cand = ~decided & (widths[np.arange(m), attr] > 0)
            if not cand.any():
                continue
            sel = np.flatnonzero(cand[h_seg] & (h_j == attr[h_seg]))
            seg, key = h_seg[sel], h_key[sel]
            cut = median_cut(seg, key, hist["w"].to_numpy(np.float64)[sel], m)
            side = (key > cut[seg]).astype(np.int64)
            cidx = np.flatnonzero(cand)
            remap = np.full(m, -1, dtype=np.int64)
            remap[cidx] = np.arange(len(cidx))
            stats = enc.stats(hist).build(sel, remap[seg] * 2 + side, 2 * len(cidx))
            ok = all_ok(models, stats).reshape(-1, 2).all(axis=1)
            won = cidx[ok]
            decided[won] = True
            cut_of[won], attr_of[won] = cut[won], attr[won]
        # 4. rows of closed partitions are done; the others move one level down
        closed = ext["p"][~decided].tolist()
        if closed:
            gone = rows.join(F.broadcast(spark.createDataFrame([(p,) for p in closed], "p string")), on="p")
            done.append(gone.select("r", "p"))
        if not decided.any():
            break
        depth += 1
        won = np.flatnonzero(decided)
        moves = spark.createDataFrame(
            [(ext["p"][i], int(attr_of[i]), int(cut_of[i]), *map(int, levels[i])) for i in won],
            T.StructType([T.StructField("p", T.StringType()), T.StructField("attr", T.LongType()),
                          T.StructField("cut", T.LongType())] + [T.StructField(c, T.LongType()) for c in lvl_cols]))
        step = F.when(_split_key(enc) > F.col("cut"), F.lit("1")).otherwise(F.lit("0"))
        rows = (rows.join(F.broadcast(moves), on="p").withColumn("p", F.concat(F.col("p"), step))
                .drop("attr", "cut", *lvl_cols).localCheckpoint())
        progress(f"mondrian (spark): depth {depth}, {len(won)} partitions split")
    # leaves in depth-first order = lexicographic order of their paths
    closed_rows = done[0]
    for frame in done[1:]:
        closed_rows = closed_rows.unionByName(frame)
    leaves = sorted(closed_rows.select("p").distinct().toPandas()["p"].tolist())
    ids = spark.createDataFrame([(p, i + 1) for i, p in enumerate(leaves)], "p string, ec_id long")
    assigned = closed_rows.join(ids, on="p").select(F.col("r").alias(ROW_ID), "ec_id")
    values = _class_values(enc, enc.frame.join(assigned.withColumnRenamed(ROW_ID, "r"), on="r"), policy.quasi)
    info: dict[str, Any] = {"partitions": len(leaves), "depth": depth}
    if mode != "leaves":
        info["categorical_width"] = mode
    return AssignmentPlan(assigned, values, None, info)


def _class_values(enc: _Encoded, frame: Any, quasi: Sequence[str]) -> pd.DataFrame:
    """Released values per class through the shared ``class_values``, fed three pseudo-rows per class that carry
    exactly the class's extents (min, max, and a NULL marker)."""
    ext = frame.groupBy("ec_id").agg(*_extent_aggs(enc)).toPandas().sort_values("ec_id").reset_index(drop=True)
    n = len(ext)
    ec = np.repeat(ext["ec_id"].to_numpy(np.int64), 3)
    pseudo = []
    for j, c in enumerate(enc.columns):
        if enc.numeric[j]:
            lo = ext[f"lo{j}"].to_numpy(np.float64, na_value=np.nan)
            hi = ext[f"hi{j}"].to_numpy(np.float64, na_value=np.nan)
            some_null = ext[f"nn{j}"].to_numpy(np.int64) < ext["n"].to_numpy(np.int64)
            x = np.column_stack([lo, hi, np.where(some_null, np.nan, lo)]).ravel()
            pseudo.append(QIColumn(c.name, True, np.zeros(3 * n, dtype=np.int64), x=x))
        else:
            lo, hi = ext[f"lo{j}"].to_numpy(np.int64), ext[f"hi{j}"].to_numpy(np.int64)
            order = np.column_stack([lo, hi, lo]).ravel()
            pseudo.append(QIColumn(c.name, False, order, tree=c.tree, labels=c.labels, leaves=c.leaves,
                                   total_leaves=c.total_leaves))
    return class_values(ec, pseudo)
