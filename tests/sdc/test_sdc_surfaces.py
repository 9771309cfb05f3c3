"""Issue 26's "every kind works from TOML, SQL and the API, tested against its oracle" (docs/sdc.md, "Surfaces"):
each perturbation kind, each mask and local suppression released three times — from TOML text, from the
CREATE ANONYMIZED VIEW statement and from the Python dict — gives one release (same seed, same rows), and that
release holds what an independent oracle (pandas, Python's hashlib, brute-force matching) says."""
from __future__ import annotations

from datetime import timedelta

import duckdb
import pandas as pd
import pytest

import anon_sql
from test_sdc_masking_oracle import hash_oracle, partial_email_oracle, partial_oracle

N = 90


def _connect(path: str = ":memory:") -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(path)
    con.execute("""CREATE TABLE t AS SELECT i AS id, 20 + i % 30 AS age, ['a', 'b', 'c'][1 + i % 3] AS grp,
        CAST((i * 37) % 101 AS DOUBLE) AS x, CAST((i * 17) % 53 AS DOUBLE) AS y,
        CASE WHEN i % 10 = 0 THEN 'nomail' || i ELSE 'ab' || i || '@x.example.org' END AS v,
        DATE '2020-01-01' + CAST(i AS INTEGER) AS d FROM range(?) r(i)""", [N])
    anon_sql.install(con)
    return con


def _three_releases(policy: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The policy released from TOML, from SQL and from the dict (each in a fresh database): the released rows
    (all three equal, asserted) and the source."""
    p = anon_sql.Policy.from_dict(policy)
    out = []
    for form in (p.to_toml(), p.to_sql(), policy):
        if isinstance(form, str):   # the text is parsed by its own front end (TOML or the SQL statement)
            form = anon_sql.Policy.from_sql(form) if form.lstrip().upper().startswith("CREATE") else \
                anon_sql.Policy.from_toml(form)
        con = _connect()
        rel = anon_sql.release(con, form)
        assert rel.passed
        out.append(con.execute('SELECT * FROM "r" ORDER BY id').df())
        source = con.execute("SELECT * FROM t ORDER BY id").df()
        con.close()
    pd.testing.assert_frame_equal(out[0], out[1])
    pd.testing.assert_frame_equal(out[0], out[2])
    return out[0], source


def _policy(column: str, key: str, spec: dict, others: dict | None = None) -> dict:
    attrs = {"id": {"role": "insensitive"}, "age": {"role": "quasi"}, "grp": {"role": "insensitive"},
             "x": {"role": "insensitive"}, "y": {"role": "insensitive"}, "v": {"role": "insensitive"},
             "d": {"role": "insensitive"}}
    attrs[column] = {"role": "insensitive", key: spec}
    attrs.update(others or {})
    return {"name": "r", "source": "t", "method": "mondrian", "seed": 11, "attributes": attrs, "privacy": {"k": 3}}


# -- perturbations ---------------------------------------------------------------------------------------------------
def test_top_and_bottom_coding_from_every_surface_equal_pandas():
    out, src = _three_releases(_policy("x", "perturb", {"kind": "top_code", "above": 60, "replacement": 61},
                                       {"y": {"role": "insensitive",
                                              "perturb": {"kind": "bottom_code", "below": 10}}}))
    assert out["x"].tolist() == src["x"].where(src["x"] <= 60, 61.0).tolist()
    assert out["y"].tolist() == src["y"].clip(lower=10).tolist()


@pytest.mark.parametrize("method", ["mdav", "individual_ranking"])
def test_microaggregation_from_every_surface_keeps_totals_and_group_sizes(method):
    out, src = _three_releases(_policy("x", "perturb", {"kind": "microaggregation", "k": 4, "method": method}))
    assert out["x"].sum() == pytest.approx(src["x"].sum(), rel=1e-12)
    groups = pd.DataFrame({"new": out["x"], "old": src["x"]}).groupby("new")
    assert groups.size().min() >= 4
    for value, g in groups:   # each released value is its group's mean
        assert value == pytest.approx(g["old"].mean(), rel=1e-12)


def test_multivariate_mdav_from_every_surface_groups_rows_of_k_to_2k_minus_1():
    spec = {"kind": "microaggregation", "k": 3, "group": "g"}
    out, src = _three_releases(_policy("x", "perturb", spec, {"y": {"role": "insensitive", "perturb": spec}}))
    sizes = out.groupby(["x", "y"]).size()
    assert sizes.min() >= 3 and sizes.max() <= 5
    assert (out["x"].sum(), out["y"].sum()) == pytest.approx((src["x"].sum(), src["y"].sum()), rel=1e-12)


@pytest.mark.parametrize("correlated", [False, True])
def test_noise_from_every_surface_is_seeded_and_of_its_scale(correlated):
    spec = {"kind": "noise", "scale": 0.2, **({"correlated": True, "group": "g"} if correlated else {})}
    others = {"y": {"role": "insensitive", "perturb": spec}} if correlated else None
    out, src = _three_releases(_policy("x", "perturb", spec, others))   # the same draws from the three forms
    e = out["x"] - src["x"]
    assert (e != 0).mean() > 0.9
    assert e.std(ddof=1) == pytest.approx(0.2 * src["x"].std(ddof=1), rel=0.35)


def test_swap_from_every_surface_permutes_the_column_within_the_window():
    out, src = _three_releases(_policy("x", "perturb", {"kind": "swap", "window": 10}))
    assert sorted(out["x"]) == sorted(src["x"]) and (out["x"] != src["x"]).any()
    ranks = src["x"].rank(method="first")
    moved = out["x"] != src["x"]
    assert (src["x"][moved].map(dict(zip(src["x"], ranks))) - out["x"][moved].map(dict(zip(src["x"], ranks))))\
        .abs().max() <= 0.10 * N + 1


def test_pram_from_every_surface_keeps_the_categories_and_about_the_retain_share():
    out, src = _three_releases(_policy("grp", "perturb", {"kind": "pram", "retain": 0.8, "invariant": True}))
    assert set(out["grp"]) <= set(src["grp"])
    assert 0.6 <= (out["grp"] == src["grp"]).mean() <= 0.98


# -- masks -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, oracle", [
    ({"function": "partial", "keep_start": 2, "pad": "XXXX", "keep_end": 3}, lambda v: partial_oracle(v, 2, "XXXX", 3)),
    ({"function": "partial_email"}, partial_email_oracle),
    ({"function": "hash", "salt": "pepper"}, lambda v: hash_oracle(v, "pepper")),
    ({"function": "redact"}, lambda v: "[REDACTED]"),
    ({"function": "redact", "replacement": "gone"}, lambda v: "gone"),
])
def test_text_masks_from_every_surface_equal_the_python_oracles(spec, oracle):
    out, src = _three_releases(_policy("v", "mask", spec))
    assert out["v"].tolist() == [oracle(v) for v in src["v"]]


def test_noise_and_dnoise_masks_from_every_surface_stay_in_their_bounds():
    out, src = _three_releases(_policy("x", "mask", {"function": "noise", "ratio": 0.1},
                                       {"d": {"role": "insensitive",
                                              "mask": {"function": "dnoise", "interval": "10 days"}}}))
    assert ((out["x"] - src["x"]).abs() <= 0.1 * src["x"].abs() + 1e-9).all() and (out["x"] != src["x"]).any()
    shift = (pd.to_datetime(out["d"]) - pd.to_datetime(src["d"])).abs()
    assert shift.max() <= timedelta(days=10) and (shift > timedelta(0)).any()


def test_shuffle_and_fake_from_every_surface():
    pytest.importorskip("faker")
    out, src = _three_releases(_policy("grp", "mask", {"function": "shuffle"},
                                       {"v": {"role": "insensitive",
                                              "mask": {"function": "fake", "provider": "first_name"}}}))
    assert sorted(out["grp"]) == sorted(src["grp"]) and (out["grp"] != src["grp"]).any()
    pairs = pd.DataFrame({"src": src["v"], "fake": out["v"]})
    assert pairs.groupby("src")["fake"].nunique().max() == 1 and not set(out["v"]) & set(src["v"])


# -- local suppression -------------------------------------------------------------------------------------------------
def test_local_suppression_from_every_surface_is_k_anonymous_by_brute_force():
    policy = {"name": "r", "source": "t", "method": "local_suppression", "default_role": "insensitive",
              "attributes": {"age": {"role": "quasi"}, "grp": {"role": "quasi"}, "y": {"role": "quasi"}},
              "method_params": {"importance": {"grp": 2, "age": 1}}, "privacy": {"k": 3}}
    out, src = _three_releases(policy)
    cells = out[["age", "grp", "y"]].astype(str).to_numpy()
    star = cells == "*"
    matches = ((cells[:, None, :] == cells[None, :, :]) | star[:, None, :] | star[None, :, :]).all(axis=2).sum(1)
    assert len(out) == N and matches.min() >= 3 and star.any()
    kept = ~star
    assert (cells[kept] == src[["age", "grp", "y"]].astype(str).to_numpy()[kept]).all()


# -- bad parameters: exit 2 from a TOML or SQL file, PolicyError from the API, the database unchanged ------------------
BAD = [
    ("x", "perturb", {"kind": "microaggregation", "k": 1}, "k"),
    ("grp", "perturb", {"kind": "pram", "retain": 1.5}, "retain"),
    ("v", "perturb", {"kind": "noise", "scale": 0.1}, "numeric"),          # a number-only kind on a text column
    ("v", "mask", {"function": "fake", "provider": "no_such_provider"}, "provider"),
    ("v", "mask", {"function": "partial", "keep_start": 2, "pad": 7, "keep_end": 1}, "pad"),
]


def _state(con) -> tuple:
    """Every table and view with its row count: what 'the database unchanged' compares."""
    objs = con.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL SELECT schema_name, view_name "
                       "FROM duckdb_views() WHERE NOT internal ORDER BY ALL").fetchall()
    return tuple((s, n, con.execute(f'SELECT count(*) FROM "{s}"."{n}"').fetchone()[0]) for s, n in objs)


@pytest.mark.parametrize("column, key, spec, word", BAD)
def test_bad_parameters_from_every_surface_exit_2_and_leave_the_database(tmp_path, column, key, spec, word):
    from click.testing import CliRunner

    from anon_sql.cli.main import main
    from anon_sql.errors import PolicyError

    policy = _policy(column, key, spec)
    db = str(tmp_path / "d.duckdb")
    con = _connect(db)
    before = _state(con)
    # the text forms: a valid policy's TOML with the bad table written in (a bad policy has no to_toml)
    toml_text = anon_sql.Policy.from_dict({**policy, "attributes": {**policy["attributes"],
                                                                    column: {"role": "insensitive"}}}).to_toml()
    with pytest.raises(PolicyError, match=word):
        anon_sql.release(con, policy)
    assert _state(con) == before
    con.close()
    bad_line = "{ " + ", ".join(f"{k} = {json_value(v)}" for k, v in spec.items()) + " }"
    toml_bad = toml_text.replace(f"[attributes.{column}]\nrole = \"insensitive\"\n",
                                 f"[attributes.{column}]\nrole = \"insensitive\"\n{key} = {bad_line}\n")
    assert toml_bad != toml_text
    sql_bad = ("CREATE ANONYMIZED VIEW r WITH (method = 'mondrian', k = 3, seed = 11) AS SELECT insensitive(id), "
               "quasi(age), " + ", ".join(
                   f"insensitive({c}, {key} => {sql_struct(spec)})" if c == column else f"insensitive({c})"
                   for c in ("grp", "x", "y", "v", "d")) + " FROM t")
    for name, text in (("p.toml", toml_bad), ("p.sql", sql_bad)):
        path = tmp_path / name
        path.write_text(text)
        r = CliRunner().invoke(main, ["release", str(path), "--db", db])
        assert r.exit_code == 2, (name, r.output)
        assert word in r.output, (name, r.output)
        con = duckdb.connect(db)
        assert _state(con) == before, name
        con.close()


def json_value(v) -> str:
    return ('"' + v + '"') if isinstance(v, str) else ("true" if v is True else "false" if v is False else str(v))


def sql_struct(spec: dict) -> str:
    one = lambda v: repr(v) if isinstance(v, str) else ("true" if v is True else "false" if v is False else str(v))  # noqa: E731
    return "{" + ", ".join(f"'{k}': {one(v)}" for k, v in spec.items()) + "}"
