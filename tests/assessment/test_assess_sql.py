"""The persisted table macros (anon.k_anonymity, anon.l_diversity, anon.sample_uniques, anon.prosecutor_risk) run
in a plain DuckDB process that never imports anon_sql, and agree with the numpy kernels of udfs/risk_kernels.py."""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import numpy as np
import pandas as pd
import pytest

import anon_sql
from anon_sql.udfs import kernels
from anon_sql.udfs import risk_kernels as rk

PLAIN = r"""
import json, sys
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
out = {}
for name, sql in json.loads(sys.argv[2]).items():
    cur = con.execute(sql)
    out[name] = dict(zip([d[0] for d in cur.description], cur.fetchall()[0]))
assert "anon_sql" not in sys.modules
print(json.dumps(out))
"""


def _plain_duckdb(path, queries: dict[str, str]) -> dict:
    res = subprocess.run([sys.executable, "-c", PLAIN, str(path), json.dumps(queries)], capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_macros_in_a_plain_duckdb_process(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = 400
    frame = pd.DataFrame({"age group": rng.integers(0, 12, n), "sex": rng.choice(["f", "m", None], n),
                          "zip": rng.integers(0, 6, n), "disease": rng.choice(["a", "b", "c", "d", None], n)})
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    anon_sql.install(con)
    con.execute("CREATE TABLE patients AS SELECT * FROM frame")
    con.close()
    qi = ["age group", "sex", "zip"]
    qi_sql = "['age group', 'sex', 'zip']"
    got = _plain_duckdb(path, {
        "k": f"SELECT * FROM anon.k_anonymity('patients', {qi_sql})",
        "l": f"SELECT * FROM anon.l_diversity('patients', {qi_sql}, ['disease'])",
        "su": f"SELECT * FROM anon.sample_uniques('patients', {qi_sql})",
        "pr": f"SELECT * FROM anon.prosecutor_risk('patients', {qi_sql}, threshold := 0.3)",
    })
    sizes = frame.groupby(qi, dropna=False).size().to_numpy()
    want = rk.size_measures(*rk.histogram(sizes), threshold=0.3)
    assert got["k"] == {"k": want["k"], "classes": want["classes"], "records": n}
    assert got["su"]["sample_uniques"] == pytest.approx(want["sample_uniques"])
    assert got["pr"]["highest"] == pytest.approx(want["prosecutor_risk_highest"])
    assert got["pr"]["lowest"] == pytest.approx(want["prosecutor_risk_lowest"])
    assert got["pr"]["avg_records"] == pytest.approx(want["prosecutor_risk_avg_records"])
    assert got["pr"]["avg_classes"] == pytest.approx(want["prosecutor_risk_avg_classes"])
    assert got["pr"]["records_at_risk"] == pytest.approx(want["records_at_risk"])
    cls = frame.groupby(qi, dropna=False, sort=False).ngroup().to_numpy()
    codes = kernels.value_codes(frame["disease"])
    counts, seg, n_cls = kernels.group_counts(codes, cls, int(cls.max()) + 1)
    assert got["l"]["l_distinct"] == np.bincount(seg, minlength=n_cls).min()
    assert got["l"]["l_entropy"] == pytest.approx(np.exp(kernels.entropy_segments(counts, seg, n_cls)).min())
    # and the Python API reads the same values
    m = anon_sql.assess(duckdb.connect(), frame, qi, ["disease"], threshold=0.3).measures
    assert (m["k"], m["l_distinct"]) == (got["k"]["k"], got["l"]["l_distinct"])
    assert m["l_entropy"] == pytest.approx(got["l"]["l_entropy"])


def test_macros_on_adult_match_assess(adult):
    qi = ["age", "sex", "race"]
    k = adult.sql("SELECT * FROM anon.k_anonymity('adult', ['age', 'sex', 'race'])").fetchall()[0]
    m = anon_sql.assess(adult, "adult", qi, ["salary-class"]).measures
    assert k == (m["k"], m["classes"], m["records"])
    pr = adult.sql("SELECT highest, avg_records, avg_classes, records_at_risk FROM "
                   "anon.prosecutor_risk('adult', ['age', 'sex', 'race'])").fetchall()[0]
    assert pr == pytest.approx((m["prosecutor_risk_highest"], m["prosecutor_risk_avg_records"],
                                m["prosecutor_risk_avg_classes"], m["records_at_risk"]))
    l = adult.sql("SELECT * FROM anon.l_diversity('adult', ['age', 'sex', 'race'], ['salary-class'])").fetchall()[0]
    assert l == pytest.approx((m["l_distinct"], m["l_entropy"]))
