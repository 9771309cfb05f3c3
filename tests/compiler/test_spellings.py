"""How each dialect spells the nodes the compiled trees hold (anon_sql.common.sqlbuild's dialect classes): a kernel
call is DuckDB's macro ``anon.<kernel>`` and Spark's UDF ``anon_<kernel>``, an ordered list aggregate is Spark's
``sort_array(collect_list(x))``; every model's check renders for both, and no engine rewrites the tree."""
from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from anon_sql.common.sqlbuild import KernelCall, col, kernel_call, render
from anon_sql.engines.spark import udfs


def _ordered(desc: bool) -> exp.ArrayAgg:
    return exp.ArrayAgg(this=exp.Order(this=col("c"), expressions=[exp.Ordered(this=col("c"), desc=desc,
                                                                                   nulls_first=False)]))


def test_a_kernel_call_is_a_macro_on_duckdb_and_a_udf_on_spark():
    tree = exp.select(kernel_call("entropy_counts", col("x"))).from_("t")
    duck = sqlglot.parse_one(render(tree, "duckdb"), read="duckdb").find(exp.Dot)
    assert duck is not None and duck.this.name == "anon" and duck.expression.name == "entropy_counts"
    spark = sqlglot.parse_one(render(tree, "spark"), read="spark")
    assert spark.find(exp.Dot) is None
    assert [f.name.lower() for f in spark.find_all(exp.Anonymous)] == ["anon_entropy_counts"]
    assert isinstance(tree.expressions[0], KernelCall)          # rendering left the tree as it was


@pytest.mark.parametrize("desc", [True, False])
def test_an_ordered_list_is_sorted_on_spark_and_ordered_elsewhere(desc):
    tree = exp.select(_ordered(desc), exp.ArrayAgg(this=col("v"))).from_("t")
    text = render(tree, "spark")
    sorted_list = "SORT_ARRAY(COLLECT_LIST(`c`), FALSE)" if desc else "ARRAY_SORT(COLLECT_LIST(`c`))"   # both ascending
    assert text == f"SELECT {sorted_list}, COLLECT_LIST(`v`) FROM t"
    duck = render(tree, "duckdb")
    assert f'ORDER BY "c"{" DESC" if desc else ""}' in duck and "SORT_ARRAY" not in duck.upper()


def test_every_kernel_the_models_call_has_a_spark_udf():
    """Every registered model's example: the kernels its checks call have a Spark UDF, except slicing's (DuckDB list
    lambdas; Spark refuses those before anything runs: SparkEngine.render)."""
    import duckdb

    from anon_sql.models import ClassColumns, build_models, model_keys
    from anon_sql.policy.model import Policy

    con = duckdb.connect()
    cols = ClassColumns(lambda c: exp.column(c))
    called: set[str] = set()
    for entry in model_keys():
        for example in entry.examples:
            policy = {"name": "sp", "source": "sp_src", "method": "levels", "method_params": {"levels": {"zip": 0}},
                      "seed": 1, "attributes": {"zip": {"role": "quasi", "taxonomy": {"kind": "mask"}},
                                                "s": {"role": "sensitive"}},
                      "privacy": {"k": 1, "max_suppression": 1.0, entry.key.name: example}}
            try:
                models = build_models(Policy.from_dict(policy), con)
            except Exception:      # a model whose example needs more than this minimal policy (population, ...)
                continue
            for model in models:
                if model.whole_table:
                    continue
                for chk in model.sql_checks(cols):
                    called |= {k.name for node in (chk.value, chk.ok) for k in node.find_all(KernelCall)}
    assert {"entropy_counts", "simpson_diversity_counts", "theta_variance_counts"} <= called
    spark_less = udfs.unknown_kernels(exp.Tuple(expressions=[kernel_call(k) for k in sorted(called)]))
    assert set(spark_less) <= {"slicing_guide_share", "slicing_guide_ok", "capped_sum"}, spark_less
