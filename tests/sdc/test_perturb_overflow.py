"""Hostile round 6, P02 (docs/hostile-round-6.md): `perturb = { kind = "noise", scale = 1e308 }` on `x` released
every one of 1,000 values as ±inf with exit 0. Now the release is refused (CLI exit 2) naming the key, the count of
values that overflowed and the fix, and the database is exactly as before; a large scale whose values stay finite
still releases."""
from __future__ import annotations

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.errors import PolicyError

POLICY = """
name = "rel"
source = "t"
method = "optimal"
seed = 3

[attributes.g]
role = "quasi"
taxonomy = {{ kind = "top" }}

[attributes.x]
role = "insensitive"
perturb = {{ kind = "noise", scale = {scale} }}

[privacy]
k = 2
"""


def _objects(con):
    return con.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL SELECT schema_name, view_name "
                       "FROM duckdb_views() WHERE NOT internal ORDER BY ALL").fetchall()


def _database(path) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT i % 4 AS g, CAST(i AS DOUBLE) * 1.5 AS x FROM range(1000) r(i)")
    anon_sql.install(con)
    con.close()


def test_p02_a_scale_of_1e308_is_refused_and_the_database_is_unchanged(tmp_path):
    db = tmp_path / "w.duckdb"
    _database(db)
    con = duckdb.connect(str(db))
    before = _objects(con), con.execute("SELECT count(*) FROM anon.releases").fetchall()
    con.close()
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(scale="1e308"))
    result = CliRunner().invoke(main, ["release", str(policy), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "attributes.x.perturb.scale = 1e+308" in result.output
    assert "in 1000 of 1000 values" in result.output and "scale = 0.1" in result.output
    con = duckdb.connect(str(db))
    assert (_objects(con), con.execute("SELECT count(*) FROM anon.releases").fetchall()) == before
    con.close()


def test_a_large_scale_with_finite_values_still_releases(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 4 AS g, CAST(i AS DOUBLE) * 1.5 AS x FROM range(1000) r(i)")
    anon_sql.install(con)
    anon_sql.release(con, _policy(1e300))
    values = np.array([v for (v,) in con.execute("SELECT x FROM rel").fetchall()], dtype=float)
    assert len(values) == 1000 and np.isfinite(values).all()


def test_a_correlated_group_names_the_group(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 4 AS g, CAST(i AS DOUBLE) AS x, CAST(i * 2 AS DOUBLE) AS y "
                "FROM range(200) r(i)")
    anon_sql.install(con)
    spec = {"kind": "noise", "scale": 1e308, "correlated": True, "group": "xy"}
    policy = {"name": "rel", "source": "t", "method": "optimal", "seed": 3,
              "attributes": {"g": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "x": {"role": "insensitive", "perturb": spec},
                             "y": {"role": "insensitive", "perturb": spec}},
              "privacy": {"k": 2}}
    with pytest.raises(PolicyError, match=r"perturbation group 'xy' .*scale = 1e\+308: the noise overflows"):
        anon_sql.release(con, policy)
    assert "rel" not in [name for (_, name) in _objects(con)]


def _policy(scale: float) -> dict:
    return {"name": "rel", "source": "t", "method": "optimal", "seed": 3,
            "attributes": {"g": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "x": {"role": "insensitive", "perturb": {"kind": "noise", "scale": scale}}},
            "privacy": {"k": 2}}
