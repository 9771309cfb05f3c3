"""The Spark engine's hoisting of common table expressions (anon_sql.engines.spark.ctes): the tree rewrite alone, no Spark
session."""
import sqlglot
from sqlglot import exp

from anon_sql.compiler import population as population_match
from anon_sql.engines.spark import ctes

QUERY = """WITH once AS (SELECT a FROM src), twice AS (SELECT a FROM once), kept AS MATERIALIZED (SELECT b FROM src)
SELECT * FROM twice AS x JOIN twice AS y ON x.a = y.a JOIN kept ON kept.b = x.a"""


def test_shared_and_materialized_ctes_become_views():
    tree = sqlglot.parse_one(QUERY, read="duckdb")
    hoisted = ctes.hoist_shared(tree, "r")
    # ``twice`` (read twice) takes ``once`` (read only by it) along; ``kept`` (MATERIALIZED, read once) is flagged
    assert [(h.name, h.materialized) for h in hoisted] == [("r__cte1", False), ("r__cte2", True)]
    assert [c.alias for c in hoisted[0].body.args["with_"].expressions] == ["once"]
    assert {t.name for t in hoisted[1].body.find_all(exp.Table)} == {"src"}
    tables = sorted((t.name, t.alias) for t in tree.find_all(exp.Table))
    assert tables == [("r__cte1", "x"), ("r__cte1", "y"), ("r__cte2", "kept")]
    assert tree.args.get("with_") is None and "MATERIALIZED" not in tree.sql("spark")


def test_a_materialized_cte_reading_an_enclosing_one_stays_unmarked():
    tree = sqlglot.parse_one("WITH o AS (SELECT 1 AS a) SELECT * FROM (WITH i AS MATERIALIZED (SELECT a FROM o) "
                             "SELECT a FROM i) AS s", read="duckdb")
    assert ctes.hoist_shared(tree, "r") == []
    assert "MATERIALIZED" not in tree.sql("spark")   # Spark has no such hint: the CTE is inlined as before


def test_population_match_reads_its_shared_relations_as_checkpointed_views():
    """Every cover branch of the k-map / δ-presence query reads the released tuples, the population combinations
    and each QI's distinct values through MATERIALIZED CTEs: on Spark each becomes one checkpointed view."""
    quasi = ["age", "sex", "race"]
    query = population_match.match_counts(exp.Table(this=exp.to_identifier("released")), ["ec_id"], quasi,
                                          [quasi], exp.select("*").from_("population"),
                                          {"age": "BIGINT", "sex": "VARCHAR", "race": "VARCHAR"}, {}, {})
    assert "MATERIALIZED" in query.sql("duckdb")
    hoisted = ctes.hoist_shared(query, "r")
    assert sum(h.materialized for h in hoisted) == 2 + 2 * len(quasi)   # __pc, __rt, __rv<i>, __pv<i>
    assert "MATERIALIZED" not in query.sql("spark")
    # the released relation and the population are read once each, by the checkpointed views
    reads = [t.name for h in hoisted for t in h.body.find_all(exp.Table)] + [t.name for t in query.find_all(exp.Table)]
    assert reads.count("released") == 1 and reads.count("population") == 1
