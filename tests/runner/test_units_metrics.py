"""Registered metrics with a privacy unit (docs/units.md): the sensitive-value metrics count the people holding a
value, the size metrics count people, the utility metrics keep weighting records. Oracle: pandas over the source."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import anon_sql
from units_fixtures import con  # noqa: F401 (a fixture)




def test_sensitive_metrics_count_people(con):
    """Class (30, F): person 1 has flu on 5 rows, person 2 cold once; class (40, M): persons 3, 4, 5 hold a, a, b.
    Over people the entropy l of (30, F) is 2 (flu 1, cold 1); over rows it would be exp(H(5/6, 1/6)) ≈ 1.57."""
    rows = [(1, 30, "F", "flu")] * 5 + [(2, 30, "F", "cold"), (3, 40, "M", "a"), (4, 40, "M", "a"),
                                       (5, 40, "M", "b")]
    src = pd.DataFrame(rows, columns=["pid", "age", "sex", "diagnosis"])
    con.register("src_df", src)
    con.execute("CREATE TABLE visits AS SELECT * FROM src_df")
    policy = {"name": "m", "source": "visits", "privacy_unit": "pid", "method": "levels",
              "attributes": {"pid": {"role": "identifier"},
                             "age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 100]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "diagnosis": {"role": "sensitive"}},
              "privacy": {"k": 2},
              "metrics": {"compute": "all"}}
    rel = anon_sql.release(con, policy)

    def entropy_l(g: pd.DataFrame) -> float:
        held = g.drop_duplicates(["pid", "diagnosis"]).groupby("diagnosis").size()
        p = held / held.sum()
        return math.exp(-(p * p.apply(math.log)).sum())

    classes = src.groupby(["age", "sex"])
    assert rel.metrics["l_entropy"] == pytest.approx(min(entropy_l(g) for _, g in classes))
    # (30, F) is 2 in people, so the minimum is (40, M)'s exp(H(2/3, 1/3)) ≈ 1.89, not the rows' 1.57
    assert rel.metrics["l_entropy"] == pytest.approx(math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))))
    assert rel.metrics["l_distinct"] == 2
    # t-closeness over the normalized shares: table W = flu 1, cold 1, a 2, b 1 over 5 holdings
    held = src.drop_duplicates(["pid", "diagnosis"])
    W = held.groupby("diagnosis").size() / len(held)
    worst = 0.0
    for _, g in classes:
        h = g.drop_duplicates(["pid", "diagnosis"]).groupby("diagnosis").size()
        p = (h / h.sum()).reindex(W.index, fill_value=0.0)
        worst = max(worst, 0.5 * (p - W).abs().sum())
    assert rel.metrics["t_closeness"] == pytest.approx(worst)
    # size metrics: people
    assert rel.metrics["k"] == 2 and rel.metrics["sample_uniques"] == 0.0
    assert "pid" not in con.execute("SELECT * FROM m").df().columns
    assert "__unit" not in con.execute("SELECT * FROM m").df().columns
