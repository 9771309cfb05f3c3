"""The Spark engine's level maps by name (anon_sql.engines.spark.maps): the tree rewrite alone, no Spark session."""
import sqlglot
from sqlglot import exp

from anon_sql.engines.spark import maps

QUERY = """SELECT COALESCE(m0.value, '*') AS age, COALESCE(m1.value, '*') AS sex
FROM src AS g
LEFT JOIN (VALUES ('17', '[15-20['), ('18', '[15-20[')) AS m0(leaf, value) ON CAST(g.age AS TEXT) = m0.leaf
LEFT JOIN (VALUES ('Male', '*'), ('Female', '*')) AS m1(leaf, value) ON CAST(g.sex AS TEXT) = m1.leaf
WHERE g.x IN (SELECT a FROM (VALUES (1, 2)) AS v(a, b))"""


def test_each_level_map_is_read_by_name_and_aliased_as_before():
    tree = sqlglot.parse_one(QUERY, read="duckdb")
    before = tree.sql("duckdb")
    seen: list[tuple] = []

    def view(rows):
        seen.append(rows)
        return f"r__map{len(seen)}"

    out = maps.by_name(tree, view)
    assert tree.sql("duckdb") == before                      # the compiler's tree is not modified
    assert seen == [(("17", "[15-20["), ("18", "[15-20[")), (("Male", "*"), ("Female", "*"))]
    tables = {t.name: t.alias for t in out.find_all(exp.Table)}
    assert tables == {"src": "g", "r__map1": "m0", "r__map2": "m1"}
    # a VALUES table that is not a (leaf, value) map of strings stays inline
    assert [v.alias for v in out.find_all(exp.Values)] == ["v"]


def test_a_tree_without_maps_is_returned_as_is():
    tree = sqlglot.parse_one("SELECT a FROM (VALUES (1, 2)) AS v(a, b)", read="duckdb")
    assert maps.by_name(tree, lambda rows: 1 / 0) is tree


def test_the_script_statement_holds_the_rows():
    text = maps.statement("r__map1", (("17", "[15-20["), ("O'Neil", "*")))
    parsed = sqlglot.parse_one(text, read="spark")
    assert isinstance(parsed, exp.Create) and parsed.this.name == "r__map1"
    rows = [tuple(v.this for v in t.expressions) for t in parsed.find(exp.Values).expressions]
    assert rows == [("17", "[15-20["), ("O'Neil", "*")]
