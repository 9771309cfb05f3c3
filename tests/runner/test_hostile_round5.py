"""Hostile round 5 (docs/hostile-round-5.md): runner findings, each failing on the code before its fix."""
from __future__ import annotations

import pytest

from anon_sql.errors import PolicyError

POLICY = {"source": "visits", "privacy_unit": "pid", "method": "levels",
          "attributes": {"pid": {"role": "identifier"}, "age": {"role": "quasi", "taxonomy": {"kind": "top"}}},
          "privacy": {"k": 2}, "method_params": {"levels": {"age": 0}}}


@pytest.mark.parametrize(("name", "suggested"), [("s v", "s_v"), ("Rélease", "R_lease"), ("a-b", "a_b"),
                                                 ("a.b", "a_b"), ("x'y", "x_y")])
def test_a_release_name_spark_cannot_use_is_refused_before_spark_runs(name, suggested):
    """SP07, SP19: on Spark a release named "s v" failed inside Spark ("error: spark: Invalid view name: s v__input.",
    exit 1) after the policy was resolved; it is now a PolicyError (exit 2) naming the rule and a name that works, raised
    before the session is touched (``spark=None`` here: nothing reaches it)."""
    from anon_sql.runner.spark import release_with_spark

    with pytest.raises(PolicyError, match=f"name {name!r}.*ASCII letters, digits and underscores.*'{suggested}'") as info:
        release_with_spark(None, {**POLICY, "name": name})
    assert info.value.exit_code == 2


def test_assess_with_a_privacy_unit_compares_the_population_with_people():
    """A14: with --privacy-unit, "population size 100 is smaller than the 200 records assessed" counted people (600
    rows of 200 people) but called them records."""
    import duckdb

    import anon_sql

    con = duckdb.connect()
    con.execute("CREATE TABLE visits AS SELECT i AS pid, 30 + i % 5 AS age, 'd' || (v % 3) AS diag "
                "FROM range(200) t(i), range(3) s(v)")
    with pytest.raises(PolicyError, match="smaller than the 200 people assessed"):
        anon_sql.assess(con, "visits", ["age"], privacy_unit="pid", population=100)
    with pytest.raises(PolicyError, match="smaller than the 600 records assessed"):
        anon_sql.assess(con, "visits", ["age"], population=100)
