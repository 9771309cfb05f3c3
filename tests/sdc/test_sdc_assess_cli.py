"""Issue 26 part 4–5 through the surfaces: `assess(..., suda=True, weights=, household=)` and `anon-sql assess
--suda --weights --household` against the spec's golden SUDA2 case and hand-computed Benedetti–Franconi risks;
`anon-sql analyze TABLE --detect` printing policy lines that paste into a valid policy."""
from __future__ import annotations

import json
import math
import re

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.assessment.measures import assess
from anon_sql.cli.main import main
from anon_sql.errors import PolicyError


def test_assess_suda_golden_case_of_sdcmicro():
    """spec/10-sdc.md: a = (2, 1, 1), b = (0, 3, 0), c = (0, 6, 0): MSUs r1 {a}; r2 {b}, {c}; r3 {a,b}, {a,c};
    scores (2, 4, 2); contributions a 50 %, b 37.5 %, c 37.5 %."""
    con = duckdb.connect()
    con.execute("CREATE TABLE g AS SELECT * FROM (VALUES (2, 0, 0), (1, 3, 6), (1, 0, 0)) v(a, b, c)")
    a = assess(con, "g", ["a", "b", "c"], suda=True)
    assert (a.measures["suda_msus_size_1"], a.measures["suda_msus_size_2"], a.measures["suda_msus_size_3"]) == (3, 2, 0)
    assert list(a.records["suda_score"]) == [2, 4, 2]
    got = dict(zip(a.contributions["variable"], a.contributions["contribution"]))
    assert got == pytest.approx({"a": 50.0, "b": 37.5, "c": 37.5})
    assert "suda_contributions" in a.to_dict() and "SUDA contribution" in a.report()


def _weighted(con):
    # class x: 1 record, weight 4; class y: 2 records, weights 3 + 3; class z: 3 records, weights 2 + 2 + 2
    con.execute("""CREATE TABLE w AS SELECT * FROM (VALUES ('x', 4.0, 1), ('y', 3.0, 1), ('y', 3.0, 2),
        ('z', 2.0, 2), ('z', 2.0, 3), ('z', 2.0, 3)) v(k, wt, hh)""")


def test_assess_individual_and_household_risk_by_hand():
    con = duckdb.connect()
    _weighted(con)
    p1, p2, p3 = 1 / 4, 2 / 6, 3 / 6
    r1 = p1 / (1 - p1) * math.log(1 / p1)                                     # f = 1
    r2 = p2 / (1 - p2) - (p2 / (1 - p2)) ** 2 * math.log(1 / p2)               # f = 2
    r3 = p3 / (3 - (1 - p3))                                                   # f > 2
    a = assess(con, "w", ["k"], weights="wt")
    assert a.measures["risk_expected_reidentifications"] == pytest.approx(r1 + 2 * r2 + 3 * r3)
    assert a.measures["risk_max"] == pytest.approx(max(r1, r2, r3))
    h = assess(con, "w", ["k"], weights="wt", household="hh")
    by_hand = {1: 1 - (1 - r1) * (1 - r2), 2: 1 - (1 - r2) * (1 - r3), 3: 1 - (1 - r3) ** 2}
    got = h.risk_records.groupby("hh")["household_risk"].first().to_dict()
    assert got == pytest.approx(by_hand)
    assert h.measures["households"] == 3


def test_assess_refuses_bad_sdc_arguments():
    con = duckdb.connect()
    _weighted(con)
    with pytest.raises(PolicyError, match="nope"):
        assess(con, "w", ["k"], weights="nope")
    with pytest.raises(PolicyError, match="count_column"):
        assess(con, "w", ["k"], suda=True, count_column="hh")
    with pytest.raises(PolicyError, match="household"):
        assess(con, "w", ["k", "hh"], household="hh")


def test_cli_assess_flags(tmp_path):
    db = str(tmp_path / "w.duckdb")
    con = duckdb.connect(db)
    _weighted(con)
    con.close()
    out = tmp_path / "a.json"
    r = CliRunner().invoke(main, ["assess", "w", "--db", db, "--quasi", "k", "--suda", "--weights", "wt",
                                  "--household", "hh", "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["measures"]["suda_msus_size_1"] == 1 and "household_risk_max" in data["measures"]
    assert data["suda_contributions"] == [{"variable": "k", "contribution": 100.0}]
    bad = CliRunner().invoke(main, ["assess", "w", "--db", db, "--quasi", "k", "--household", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_cli_analyze_detect_prints_pasteable_policy_lines(tmp_path):
    db = str(tmp_path / "p.duckdb")
    con = duckdb.connect(db)
    con.execute("""CREATE TABLE people AS SELECT i AS id, 'user' || i || '@mail.example.org' AS "e mail",
        20 + (i * 7) % 50 AS age, ['m', 'f'][1 + i % 2] AS sex FROM range(300) r(i)""")
    con.close()
    r = CliRunner().invoke(main, ["analyze", "people", "--db", db, "--detect"])
    assert r.exit_code == 0, r.output
    lines = r.output.split("Policy lines to paste:", 1)[1]
    assert re.search(r'\[attributes\."e mail"\]\nrole = "identifier"', lines)
    policy = anon_sql.Policy.from_toml('name = "r"\nsource = "people"\n' + lines)
    assert policy.attributes["e mail"].role == "identifier" and policy.attributes["age"].role == "quasi"
    # only --detect: no leakage table (that is the default analysis alone)
    assert "Entropy leakage" not in r.output
