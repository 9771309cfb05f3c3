"""Local suppression on Spark (docs/sdc.md, "Engines"): the quasi-identifiers' distinct combinations and their record
counts are aggregated in Spark, coded as DuckDB codes them (dense rank of each QI's values, NULL = −1) and read by
the driver in code order; the driver runs the DuckDB method's heuristic
(:func:`anon_sql.sdc.local_suppression.decide_suppression`) on them, so the same cells are suppressed; Spark joins the
decision back to the rows. No row reaches the driver."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from ...common.sqlbuild import alias, col, ident
from ...errors import PolicyError
from ...methods.base import ROW_ID, AssignmentPlan
from ...methods.local_suppression import WILDCARD, LocalSuppression, suppression_plan, wildcard_model
from ...sdc.local_suppression import SUPPRESSED, decide_suppression, validate_local_suppression
from .session import SparkSQL

PATTERN_COUNT = "__anon_n"


def _quoted(name: str, prefix: str = "") -> str:
    """A column or view name as Spark reads it in a DataFrame expression (backticks doubled), after ``prefix.``."""
    return (f"{prefix}." if prefix else "") + "`" + name.replace("`", "``") + "`"


def _code(q: str, j: int) -> exp.Expression:
    """``CASE WHEN q IS NULL THEN -1 ELSE DENSE_RANK() OVER (ORDER BY q NULLS LAST) - 1 END``: DuckDB's code of a
    value (its default puts NULLs last; Spark's first, so the order is spelled out), over the distinct
    combinations (the same ranks as over the rows: a dense rank reads distinct values only)."""
    rank = exp.Window(this=exp.func("DENSE_RANK"),
                      order=exp.Order(expressions=[exp.Ordered(this=col(q), nulls_first=False)]))
    return alias(exp.If(this=exp.Is(this=col(q), expression=exp.Null()), true=exp.Literal.number(SUPPRESSED),
                        false=exp.Sub(this=rank, expression=exp.Literal.number(1))), f"__anon_code_{j}")


def plan_local_suppression(sq: SparkSQL, policy: Any, source_view: str, taxonomies: dict, models: list,
                           progress: Any = None) -> AssignmentPlan:
    """The local-suppression plan of a Spark release: the same cells as :class:`anon_sql.methods.local_suppression.
    LocalSuppression` suppresses on DuckDB, the per-row released values left in Spark (DataFrames)."""
    from pyspark.sql import functions as F

    model = wildcard_model(policy, models)
    quasi, k = list(model.quasi), int(model.k)
    importance = LocalSuppression(**policy.method_params).params.get("importance")   # the method's parameter check
    view = exp.Table(this=ident(source_view))
    columns = [f.name for f in sq.spark.table(_quoted(source_view)).schema.fields]
    validate_local_suppression(quasi, k, importance, columns)
    code_names = [f"__anon_code_{j}" for j in range(len(quasi))]
    clash = sorted(set(code_names + [PATTERN_COUNT]) & set(columns))
    if clash:
        raise PolicyError(f"the source has a column named {clash[0]!r}, which local suppression uses; rename it")
    counted = exp.select(*[col(q) for q in quasi], alias(exp.func("COUNT", exp.Star()), PATTERN_COUNT)) \
        .from_(view).group_by(*[col(q) for q in quasi])
    coded = exp.select(*[col(q) for q in quasi], *[_code(q, j) for j, q in enumerate(quasi)], col(PATTERN_COUNT)) \
        .from_(counted.subquery("__patterns"))
    patterns = sq.run(coded).localCheckpoint(eager=True)   # read twice: by the driver, then by the join back
    try:
        found = patterns.select(*code_names, PATTERN_COUNT).orderBy(*code_names).toPandas()
        codes = (found[code_names].to_numpy(dtype=np.int64) if len(found)
                 else np.zeros((0, len(quasi)), dtype=np.int64))
        flags, done = decide_suppression(codes, found[PATTERN_COUNT].to_numpy(dtype=np.int64), quasi, k, importance)
        blanks = pd.DataFrame({**{c: codes[:, j] for j, c in enumerate(code_names)},
                               **{f"__anon_blank_{j}": flags[:, j] for j in range(len(quasi))}})
        blanks = blanks[flags.any(axis=1)]
        decided = patterns.join(sq.spark.createDataFrame(blanks) if len(blanks) else
                                patterns.select(*code_names, *[F.lit(False).alias(f"__anon_blank_{j}")
                                                               for j in range(len(quasi))]).limit(0),
                                on=code_names, how="left")
        rows = sq.spark.table(_quoted(source_view)).alias("s")
        on = [F.col(_quoted(q, "s")).eqNullSafe(F.col(_quoted(q, "d"))) for q in quasi]
        cells = [F.when(F.coalesce(F.col(f"d.__anon_blank_{j}"), F.lit(False)), F.lit(WILDCARD))
                 .otherwise(F.coalesce(F.col(_quoted(q, "s")).cast("string"), F.lit(WILDCARD))).alias(q)
                 for j, q in enumerate(quasi)]
        values = rows.join(decided.alias("d"), on=on, how="left") \
            .select(F.col(_quoted(ROW_ID, "s")).cast("bigint").alias(ROW_ID), F.lit(1).cast("bigint").alias("ec_id"),
                    *cells).localCheckpoint(eager=True)
    finally:
        patterns.unpersist()
    return suppression_plan(values.select(ROW_ID, "ec_id"), values, done, quasi, k)


__all__ = ["plan_local_suppression"]
