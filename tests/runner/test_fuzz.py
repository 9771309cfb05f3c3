"""Hostile fuzz suite (issue 13.9): random small tables × random policies, for every method and the models it takes.

Each example either releases — and then the release passes an independent pandas recomputation from the released
table alone, grouped by every *declared* quasi-identifier as released (k, distinct / entropy / recursive
l-diversity, t-closeness, the ``[[privacy.requirements]]`` group rules; slicing: bucket size and p(t, s)), with
every record reconciled (in = released + suppressed, noise flagged) — or it is refused with a clean
:class:`AnonSQLError` and the database exactly as before (every object and its row count).

Tables: 1–24 rows; integer QIs with NULLs and skew, text QIs with quotes, unicode, empty strings, ``*`` and
numbers-as-text, duplicates; column, source and release names with quotes, spaces, unicode and SQL; sometimes a
``count_column`` (each row stands for that many records: the oracle weighs every count by it), with a NULL, zero or
negative count in some examples, which must be refused.
Profiles: ``ci`` (default, a few examples per method: well under two minutes in all) and ``large``
(``ANON_SQL_FUZZ=large``); docs/testing.md records the large profile's counts and time.
"""
from __future__ import annotations

import math
import os
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.errors import AnonSQLError
from anon_sql.common.sqlbuild import ident, render
from conftest import working

from test_attribute_focused import independent_max_p

# ci: no shrinking (a failure prints its example; shrinking a release can take minutes)
settings.register_profile("ci", max_examples=6, deadline=None, derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("large", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = "large" if os.environ.get("ANON_SQL_FUZZ") == "large" else "ci"

LEVEL_METHODS = ("levels", "iab", "exhaustive", "greedy", "optimal")
LOCAL_METHODS = ("mondrian", "fixed_interval", "upa", "theta", "adaptive")
BUCKET_METHODS = ("slicing", "attribute_focused")   # bucket semantics: classes are the buckets (docs/slicing.md)
METHODS = LEVEL_METHODS + LOCAL_METHODS + BUCKET_METHODS

# hostile column names: quotes, spaces, unicode, SQL; distinct case-insensitively (DuckDB folds identifier case)
NAMES = ["age", "a b", 'q"uote', "it's", "ünï", "名前", "x; DROP TABLE t", "select", "Zip-Code", "e\u0301"]
TEXT = ["a", "b'c", 'd"e', "ü", "", " ", "NULL", "*", "1", "01", "10", "名", "a;b", "\\"]
SENSITIVE = ["flu", "flu", "flu", "cold", "hiv", "ça va", "x'y", None]
COUNT = 'n "records"'   # the count column's name (not one of NAMES, case-insensitively)


@st.composite
def tables(draw):
    """A small table: integer QI(s), text QI(s), one sensitive column, one insensitive column."""
    n = draw(st.integers(1, 24))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=5, max_size=5, unique_by=str.lower))
    n_num = draw(st.integers(1, 2))
    num_pool = draw(st.lists(st.integers(-5, 90), min_size=1, max_size=6))
    text_pool = draw(st.lists(st.sampled_from(TEXT), min_size=1, max_size=5))
    nulls = draw(st.booleans())
    cols: dict[str, list] = {}
    quasi, numeric = [], []
    for j in range(4):
        name = names[j]
        if j < n_num:
            vals = draw(st.lists(st.sampled_from(num_pool + ([None] if nulls else [])), min_size=n, max_size=n))
            cols[name] = pd.array(vals, dtype="Int64")
            numeric.append(name)
        else:
            vals = draw(st.lists(st.sampled_from(text_pool + ([None] if nulls else [])), min_size=n, max_size=n))
            cols[name] = pd.array(vals, dtype="string")
        quasi.append(name)
    n_quasi = draw(st.integers(n_num, 4))
    quasi = quasi[:n_quasi]
    insensitive = [q for q in names[:4] if q not in quasi]
    pool = SENSITIVE if nulls else [s for s in SENSITIVE if s is not None]
    cols[names[4]] = pd.array(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype="string")
    frame = pd.DataFrame(cols)
    return frame, quasi, numeric, names[4], insensitive


def taxonomy_for(draw, column: str, numeric: bool) -> dict:
    if numeric:
        return draw(st.sampled_from([{"kind": "interval", "widths": [10, 50]}, {"kind": "interval", "widths": [5]},
                                     {"kind": "top"}]))
    return draw(st.sampled_from([{"kind": "top"}, {"kind": "mask"}]))


@st.composite
def cases(draw, method: str):
    frame, quasi, numeric, sens, insensitive = draw(tables())
    n = len(frame)
    k = draw(st.integers(1, 4))
    privacy: dict = {"k": k, "max_suppression": draw(st.sampled_from([0.0, 0.0, 0.2, 0.5, 1.0]))}
    params: dict = {}
    attributes: dict = {}
    for q in quasi:
        spec: dict = {"role": "quasi"}
        needs = method in LEVEL_METHODS or method == "adaptive"
        if needs or draw(st.booleans()):
            spec["taxonomy"] = taxonomy_for(draw, q, q in numeric)
        attributes[q] = spec
    attributes[sens] = {"role": "sensitive"}
    for c in insensitive:
        attributes[c] = {"role": "insensitive"}
    if method in BUCKET_METHODS:
        privacy["l_diversity"] = {"kind": "slicing", "l": draw(st.sampled_from([1, 1.5, 2]))}
        params["columns"] = draw(st.integers(1, 2))
    else:
        model = draw(st.sampled_from(["none", "distinct", "entropy", "recursive", "t", "simpson", "p"]))
        if method == "theta":
            privacy["k"] = max(k, 2)
            privacy["theta"] = {"mu": draw(st.sampled_from([0.5, 0.8, 1.0]))}
        elif model in ("distinct", "entropy"):
            privacy["l_diversity"] = {"kind": model, "l": draw(st.sampled_from([1, 2]))}
        elif model == "recursive":
            privacy["l_diversity"] = {"kind": "recursive", "c": draw(st.sampled_from([1, 2, 3])), "l": 2}
        elif model == "t":
            privacy["t_closeness"] = draw(st.sampled_from([0.3, 0.6, 1.0]))
        elif model == "simpson":
            privacy["simpson"] = draw(st.sampled_from([{"diversity": 1.5}, {"evenness": 0.8},
                                                       {"diversity": 1.2, "evenness": 0.5}]))
        elif model == "p":
            privacy["p_sensitive"] = {"p": draw(st.integers(1, 3))}
        if len(quasi) > 1 and method != "upa" and draw(st.booleans()):
            privacy["requirements"] = [{"quasi": [quasi[0]], "k": draw(st.integers(1, 5))}]
    if method == "levels":
        params["levels"] = {q: draw(st.integers(0, 1)) for q in quasi}
    if method == "adaptive":
        params["iv"] = {q: 1.0 for q in quasi}
    if method == "upa":
        params["init"] = "k-means++"
    policy = {"name": draw(st.sampled_from(["rel", "rél \"1\"", "r'; DROP TABLE x; --"])),
              "source": draw(st.sampled_from(["src", "sŕc 'x'", "Source \"q\""])),
              "method": method, "seed": draw(st.integers(0, 3)),
              "attributes": attributes, "privacy": privacy, "method_params": params}
    counted = draw(st.sampled_from(["none", "none", "valid", "valid", "bad"]))
    if counted != "none":       # weighted records: each row stands for `count` records
        counts: list = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
        if counted == "bad":
            counts[draw(st.integers(0, n - 1))] = draw(st.sampled_from([None, 0, -1]))
        frame = frame.assign(**{COUNT: pd.array(counts, dtype="Int64")})
        policy["count_column"] = COUNT
    return frame, policy, numeric, n


# -- database snapshots ----------------------------------------------------------------------------------------
def _count(con, schema: str, name: str) -> int:
    q = exp.select(exp.Count(this=exp.Star())).from_(exp.Table(this=ident(name), db=ident(schema)))
    return con.execute(render(q)).fetchall()[0][0]


def snapshot(con) -> dict:
    """Every table (with its row count and contents' checksum) and view of the database; the catalog's failure log
    (anon.releases rows with status 'failed') is the one write a refusal is meant to make, so it is left out."""
    out = {}
    for schema, name, temp in con.execute("SELECT schema_name, table_name, temporary FROM duckdb_tables()").fetchall():
        if (schema, name) == ("anon", "releases"):
            n = con.execute("SELECT count(*) FROM anon.releases WHERE status <> 'failed'").fetchall()[0][0]
        else:
            n = _count(con, schema, name)
        out[("table", schema, name, temp)] = n
    for schema, name in con.execute("SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        out[("view", schema, name)] = 0
    return out


def source_rows(con, source: str) -> list:
    q = exp.select("*").from_(exp.Table(this=ident(source)))
    return sorted(map(repr, con.execute(render(q)).fetchall()))


# -- the independent oracle -------------------------------------------------------------------------------------
WEIGHT: str | None = None     # the count column of the case being verified (None: one record per row)


def records(frame: pd.DataFrame) -> pd.Series:
    """Records each row stands for: its count (count_column), else 1."""
    return frame[WEIGHT].astype("int64") if WEIGHT else pd.Series(1, index=frame.index, dtype="int64")


def value_counts(frame: pd.DataFrame, column: str, normalize: bool = False) -> pd.Series:
    """Records per value of ``column`` (NULL a value of its own), weighted by the count column."""
    key = frame[column].astype(object).where(frame[column].notna(), "\x00")
    counts = records(frame).groupby(key.to_numpy()).sum()
    return counts / counts.sum() if normalize else counts


def _l_checks(groups, sens: str, privacy: dict) -> None:
    ld = privacy.get("l_diversity")
    if not ld or ld.get("kind") == "slicing":
        return
    for key, g in groups:
        counts = value_counts(g, sens).sort_values(ascending=False).to_numpy(dtype=float)
        where = f"class {key}: {dict(value_counts(g, sens))}"
        if ld["kind"] == "distinct":
            assert len(counts) >= ld["l"], where
        elif ld["kind"] == "entropy":
            p = counts / counts.sum()
            assert math.exp(-(p * np.log(p)).sum()) >= ld["l"] - 1e-9, where
        else:
            l, c = int(ld["l"]), float(ld["c"])
            assert counts[0] < c * counts[l - 1:].sum(), where


def _simpson_p_checks(groups, sens: str, privacy: dict) -> None:
    simpson, psens = privacy.get("simpson"), privacy.get("p_sensitive")
    for key, g in groups:
        counts = value_counts(g, sens).to_numpy(dtype=float)
        if simpson:
            p = counts / counts.sum()
            d = 1.0 / (p * p).sum()
            assert d >= simpson.get("diversity", 0) - 1e-9, f"class {key}: Simpson D = {d}"
            assert d / len(counts) >= simpson.get("evenness", 0) - 1e-9, f"class {key}: Simpson E"
        if psens:
            assert len(counts) >= psens["p"], f"class {key}: {len(counts)} sensitive values < p = {psens['p']}"


def _t_check(out: pd.DataFrame, groups, sens: str, privacy: dict) -> None:
    t = privacy.get("t_closeness")
    if t is None:
        return
    q = value_counts(out, sens, normalize=True)
    for key, g in groups:
        p = value_counts(g, sens, normalize=True).reindex(q.index, fill_value=0)
        d = 0.5 * (p - q).abs().sum()
        assert d <= t + 1e-9, f"class {key}: t-closeness distance {d} > {t}"


def verify_release(con, rel, policy: dict, frame: pd.DataFrame, numeric: list[str]) -> None:
    """Recompute every model from the released table (pandas) and reconcile every record (weighted by the count
    column, when the policy has one)."""
    global WEIGHT
    WEIGHT = policy.get("count_column")
    declared = [c for c, a in policy["attributes"].items() if a["role"] == "quasi"]
    sens = next(c for c, a in policy["attributes"].items() if a["role"] == "sensitive")
    privacy = policy["privacy"]
    out = con.execute(render(exp.select("*").from_(exp.Table(this=ident(policy["name"]))))).df()
    flag = rel.plan.get("noise_flag")
    flagged = bool(flag) and flag in out
    noise = int(out[flag].sum()) if flagged else rel.noise    # θ's noise: flagged in the release, or counted
    assert noise == rel.noise and (noise == 0 or policy["method"] == "theta")
    # reconciliation: in = released + suppressed (noise apart); the budget holds
    records_in, released = int(records(frame).sum()), int(records(out).sum())
    assert rel.records_in == records_in
    assert released == rel.records_out
    assert rel.records_in == released - noise + rel.suppressed
    assert 0 <= rel.suppressed <= privacy["max_suppression"] * records_in + 1e-9
    # nothing made up: the released sensitive and insensitive values are a sub-multiset of the source's (with
    # unflagged noise, whose records take values of the source's domain: a subset)
    real = out[~out[flag].astype(bool)] if flagged else out
    for c in [c for c, a in policy["attributes"].items() if a["role"] in ("sensitive", "insensitive")]:
        source_values = frame[c].astype(object).where(frame[c].notna(), None).tolist()
        released_values = real[c].astype(object).where(real[c].notna(), None).tolist()
        if noise and not flagged:
            nulls = {None} if policy["attributes"][c]["role"] == "insensitive" else set()   # columns noise lacks
            assert set(released_values) <= set(source_values) | nulls, f"column {c!r}: values not in the source"
            continue
        left: Counter = Counter()
        for value, weight in zip(source_values, records(frame)):
            left[value] += int(weight)
        for value, weight in zip(released_values, records(real)):
            left[value] -= int(weight)
        assert min(left.values(), default=0) >= 0, f"column {c!r}: released values not in the source"
    if not len(out):
        return
    bucket = policy["method"] in BUCKET_METHODS
    keys = ["ec_id"] if bucket else declared    # over every declared QI as released
    groups = list(out.groupby(keys, dropna=False))
    sizes = [int(records(g).sum()) for _, g in groups]
    assert min(sizes) >= privacy["k"], f"class of {min(sizes)} < k = {privacy['k']} over {keys}"
    assert rel.metrics["k"] <= min(sizes) or bucket
    if not bucket:
        _l_checks(groups, sens, privacy)
        _t_check(out, groups, sens, privacy)
        _simpson_p_checks(groups, sens, privacy)
        for r in privacy.get("requirements", []):
            smallest = records(out).groupby([out[q] for q in r["quasi"]], dropna=False).sum().min()
            assert smallest >= r["k"], f"requirement {r}: a group of {smallest}"
    elif policy["method"] == "slicing" and not frame[declared + [sens]].isna().any().any():
        # (the oracle's p(t, s) groups by value: it has no NULL of its own, so NULL rows are left to the SQL check)
        src = con.execute(f"SELECT * FROM {working(policy['name'], 'source')} ORDER BY __row").df()
        src = src[src["__row"].isin(con.execute(
            f"SELECT __row FROM {working(policy['name'], 'assignment')}").df()["__row"])]
        maxp = independent_max_p(out, src.reset_index(drop=True), rel.plan["columns"], sens)
        assert maxp.max() <= 1 / privacy["l_diversity"]["l"] + 1e-9


def run_case(frame: pd.DataFrame, policy: dict, numeric: list[str]) -> str:
    con = duckdb.connect()
    try:
        anon_sql.install(con)
        con.register("__fuzz_frame", frame)
        con.execute(render(exp.Create(this=exp.Table(this=ident(policy["source"])), kind="TABLE",
                                      expression=exp.select("*").from_("__fuzz_frame"))))
        con.unregister("__fuzz_frame")
        before, rows = snapshot(con), source_rows(con, policy["source"])
        try:
            rel = anon_sql.release(con, policy)
        except AnonSQLError as err:
            assert str(err).strip(), "an error without a message"
            assert snapshot(con) == before, f"refused ({err}) but the database changed"
            assert source_rows(con, policy["source"]) == rows
            return type(err).__name__
        assert source_rows(con, policy["source"]) == rows, "the source changed"
        verify_release(con, rel, policy, frame, numeric)
        return "released"
    finally:
        con.close()


OUTCOMES: Counter = Counter()


@pytest.mark.parametrize("method", METHODS)
def test_fuzz_release_or_clean_refusal(method):
    @settings(settings.get_profile(PROFILE))
    @given(cases(method))
    def run(case):
        frame, policy, numeric, _ = case
        outcome = run_case(frame, policy, numeric)
        counts = frame[COUNT] if COUNT in frame else None
        bad = counts is not None and bool(counts.isna().any() or (counts.fillna(0) <= 0).any())
        if bad:
            assert outcome == "SourceError", f"a NULL, zero or negative count was not refused: {outcome}"
        else:
            assert outcome != "SourceError", "a valid table was refused as bad data"
        OUTCOMES[(method, outcome + (" (counted)" if counts is not None else ""))] += 1

    run()


@pytest.fixture(scope="module", autouse=True)
def _outcome_summary():
    """Print how often each method released or refused (run with -s; docs/testing.md records the large run)."""
    yield
    by_method: dict[str, dict[str, int]] = {}
    for (method, outcome), n in sorted(OUTCOMES.items()):
        by_method.setdefault(method, {})[outcome] = n
    print("\nfuzz outcomes (profile %s):" % PROFILE)
    for method, counts in by_method.items():
        print(f"  {method:18s} {counts}")
