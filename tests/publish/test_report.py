"""Release reports (text / HTML / JSON, charts optional) and parameter sweeps, from Python and the CLI."""
from __future__ import annotations

import json
import sys

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import PolicyError
from anon_sql.policy.model import Policy
from anon_sql.report.build import parse_values, render_report, set_param
from anon_sql.publish.report import build_report, sweep
from conftest import load_seed000, seed000_policy

ODD = "zip <&> 'x'"   # a column name that must be escaped in HTML


@pytest.fixture
def odd(con):
    con.execute(f'CREATE TABLE o (age INTEGER, "{ODD}" VARCHAR, dx VARCHAR)')
    con.executemany("INSERT INTO o VALUES (?, ?, ?)", [(20 + i % 7, "ab"[i % 2], "xyz"[i % 3]) for i in range(30)])
    rel = anon_sql.release(con, {"name": "o_rel", "source": "o", "method": "levels",
                                 "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval",
                                                                                     "widths": [5]}},
                                                ODD: {"role": "quasi", "taxonomy": {"kind": "top"}},
                                                "dx": {"role": "sensitive"}},
                                 "privacy": {"k": 2}, "method_params": {"levels": {"age": 1}}})
    return con, rel


def test_release_report_text_stays_and_gains_html_json(odd):
    _, rel = odd
    text = rel.report()
    assert "checks:" in text and "metrics:" in text and "o_rel" in text
    page = rel.report("html")
    assert page.startswith("<!DOCTYPE html>") and ODD not in page and "zip &lt;&amp;&gt;" in page
    data = json.loads(rel.report("json"))
    assert data["release"] == "o_rel" and {m["metric"] for m in data["metrics"]} >= {"k", "cavg"}
    with pytest.raises(PolicyError, match="report format"):
        rel.report("pdf")


def test_build_report_tables_and_json_nan_as_null(odd):
    con, _ = odd
    rep = build_report(con, "o_rel", params={"queries": 60})
    names = {m["metric"] for m in rep["metrics"]}
    assert {"ncp", "kl_divergence", "query_error", "reid_probability", "silhouette"} <= names
    assert set(rep["ncp_by_qi"]) == {"age", ODD}
    assert rep["query_error_table"] and rep["leakage"] and rep["class_sizes"]
    assert sum(c["records"] for c in rep["class_sizes"]) == 30
    data = json.loads(render_report(rep, "json"))                   # strict JSON: NaN (silhouette) becomes null
    assert next(m for m in data["metrics"] if m["metric"] == "silhouette")["value"] is None
    ncp = next(m for m in data["metrics"] if m["metric"] == "ncp")
    assert ncp["direction"] == "lower" and "NCP" in ncp["formula"]
    text = render_report(rep, "text")
    assert "query error by dim" in text and "entropy leakage" in text


def test_html_is_self_contained_with_verdict_cards_and_svg_charts(odd, monkeypatch):
    con, _ = odd
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # no plotting library is needed
    rep = build_report(con, "o_rel", ["k", "ncp", "prosecutor_risk_max"])
    page = render_report(rep, "html")
    assert rep["verdict"] == {"status": "pass", "checks": len(rep["checks"]), "failed": [], "unknown": []}
    assert "class='verdict pass'" in page and page.index("id='verdict'") < page.index("<h2>")
    assert "data-metric='prosecutor_risk_max'" in page and "data-metric='ncp'" in page
    assert page.count("<svg") >= 2 + 2 * 2                   # class sizes, records by size, 2 × (original, released)
    assert "src=" not in page and "<script" not in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", "")
    assert "zip &lt;&amp;&gt;" in page and ODD not in page   # the odd column name escaped in the charts too
    # the source's aggregates are labelled as the data owner's, not for sharing (hostile round 15, E55)
    assert "source" in rep["audience"] and "not this report" in rep["audience"]
    assert page.index("id='audience'") > page.index("id='distributions'") and "anon-sql export" in page


def test_distributions_are_recomputed_counts_of_original_and_release(odd):
    """Oracle: pandas value counts of the source and of the released table."""
    con, _ = odd
    dist = build_report(con, "o_rel", ["k"])["distributions"]
    src = con.execute("SELECT * FROM o").df()
    rel = con.execute("SELECT * FROM o_rel").df()
    odd_orig = {d["value"]: d["records"] for d in dist[ODD]["original"]}
    assert odd_orig == src[ODD].value_counts().astype(float).to_dict()
    odd_rel = {d["value"]: d["records"] for d in dist[ODD]["released"]}
    assert odd_rel == rel[ODD].astype(str).value_counts().astype(float).to_dict() == {"a": 15.0, "b": 15.0}
    age = dist["age"]                                        # integer ages 20..26: whole-number bins, binned alike?
    assert age["binned"] and sum(d["records"] for d in age["original"]) == 30
    lows = [int(d["value"].split("–")[0]) for d in age["original"]]
    assert lows == sorted(lows) and lows[0] == 20
    released = {d["value"]: d["records"] for d in age["released"]}    # generalized to width-5 intervals
    assert released == rel["age"].astype(str).value_counts().astype(float).to_dict()


def test_failing_checks_give_a_fail_verdict():
    from anon_sql.report.build import render_text, verdict

    checks = [{"check": "k_anonymity", "passed": True}, {"check": "l_diversity", "passed": False}]
    v = verdict(checks)
    assert v["status"] == "fail" and v["failed"] == ["l_diversity"]
    assert verdict([{"check": "checks view", "passed": None}])["status"] == "unknown"
    report = {"release": "r", "method": "levels", "source": "s", "records_in": 1, "records_out": 1, "suppressed": 0,
              "noise": 0, "classes": 1, "plan": {}, "checks": checks, "metrics": [], "verdict": v}
    assert render_text(report).startswith("FAIL: l_diversity failed")
    assert "class='verdict fail'" in render_report(report, "html") and "failed: l_diversity" in render_report(report, "html")


def test_set_param_and_parse_values():
    d = seed000_policy()
    d["attributes"]["genetic_risk"] = {"role": "sensitive"}
    pol = Policy.from_dict(d)
    assert set_param(pol, "k", 7).privacy.k == 7
    assert set_param(pol, "privacy.max_suppression", 0.1).privacy.max_suppression == 0.1
    assert set_param(pol, "l_diversity.l", 3).privacy.l_diversity == {"l": 3}
    assert set_param(pol, "method", "mondrian").method == "mondrian"
    assert set_param(set_param(pol, "method", "theta"), "window", 8).method_params["window"] == 8
    with pytest.raises(PolicyError, match=r"unknown key `window` in \[method_params\] of method 'levels'"):
        set_param(pol, "window", 8)
    assert parse_values("2, 5,0.5,abc,true") == [2, 5, 0.5, "abc", True]
    with pytest.raises(PolicyError, match="comma-separated"):
        parse_values(" , ")


def test_sweep_tabulates_dry_runs_and_creates_nothing(con):
    load_seed000(con)
    pol = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    table = sweep(con, pol, "k", [2, 3, 60], ["k", "ncp", "dcp"])
    assert table["k"].tolist() == [2, 3, 60]                 # the swept value, not the achieved k
    assert table["status"].tolist() == ["ok", "ok", "failed"]
    assert (table["k_achieved"][:2] >= table["k"][:2]).all()
    assert table["ncp"][0] == table["ncp"][1]                # same plan, same loss
    assert "max_suppression" in table["message"][2]
    assert not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'r000%'"
                           ).fetchall()[0][0]


def test_cli_report_writes_html_and_json_and_classifies(seed_db):
    db, _, tmp = seed_db
    html_path, json_path = str(tmp / "r.html"), str(tmp / "r.json")
    res = CliRunner().invoke(main, ["report", "r000", "--db", db, "--html", html_path, "--json", json_path,
                                    "--classify", "genetic_risk", "--models", "naive_bayes,c45", "--folds", "3",
                                    "--sample", "0"])
    assert res.exit_code == 0, res.output
    assert "classification accuracy" in res.output and "ncp" in res.output
    data = json.loads((tmp / "r.json").read_text(encoding="utf-8"))
    assert {r["model"] for r in data["classification"]} == {"naive_bayes", "c45"}
    assert "<h2>Classification accuracy" in (tmp / "r.html").read_text(encoding="utf-8")


def test_cli_report_unknown_release_fails_clearly(seed_db):
    db, _, _ = seed_db
    res = CliRunner().invoke(main, ["report", "nope", "--db", db])
    assert res.exit_code == 2 and "not a materialized release" in res.output


def test_cli_sweep_grid_and_csv(seed_db):
    db, policy, tmp = seed_db
    out = str(tmp / "s.csv")
    res = CliRunner().invoke(main, ["sweep", policy, "--db", db, "--param", "max_suppression=0,0.5",
                                    "--param", "k=3,20", "--metrics", "k,ncp", "--csv", out])
    assert res.exit_code == 0, res.output
    import pandas as pd

    table = pd.read_csv(out)
    assert len(table) == 4 and set(table["status"]) <= {"ok", "failed"}
    assert table.loc[(table["k"] == 3) & (table["max_suppression"] == 0), "status"].item() == "ok"
    bad = CliRunner().invoke(main, ["sweep", policy, "--db", db, "--param", "k"])
    assert bad.exit_code == 2 and "NAME=V1,V2" in bad.output
