"""The released row order never follows the source's (issue 17.5): rows are ordered by class, then by a seeded hash of
their released values — so it depends on the released values alone, not on where a row sat in the source."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

import anon_sql

from conftest import load_adult

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"age": 4, "education": 2, "marital-status": 1, "race": 1, "sex": 0, "native-country": 1,
          "workclass": 2, "occupation": 1}


def _policy(name: str, source: str, seed: int = 0) -> dict:
    return {"name": name, "source": source, "method": "levels", "seed": seed, "default_role": "insensitive",
            "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in QIS},
                           "salary-class": {"role": "sensitive"}},
            "privacy": {"k": 5, "max_suppression": 0.05}, "method_params": {"levels": LEVELS}}


def _released_positions(con, table: str) -> np.ndarray:
    """The source position (column ``pos``) of each released row, in the release's stored order."""
    return np.array([r[0] for r in con.execute(f'SELECT pos FROM "{table}"').fetchall()])


def test_released_order_does_not_follow_a_sorted_source(con):
    load_adult(con)
    # the source sorted by an insensitive column: its position
    con.execute("CREATE TABLE src AS SELECT row_number() OVER () AS pos, * FROM adult ORDER BY pos")
    anon_sql.release(con, _policy("rel", "src"))
    released = _released_positions(con, "rel")
    assert len(released) > 25_000 and len(set(released)) == len(released)
    rho = spearmanr(released, np.arange(len(released))).statistic
    assert abs(rho) < 0.05, rho
    # not ordered within each class either (the first 1,000 rows already span many source positions)
    assert abs(spearmanr(released[:1000], np.arange(1000)).statistic) < 0.2


def test_released_order_is_the_same_whatever_the_source_order(con):
    load_adult(con)
    con.execute("CREATE TABLE src AS SELECT row_number() OVER () AS pos, * FROM adult")
    con.execute("CREATE TABLE src_reversed AS SELECT * FROM src ORDER BY pos DESC")
    anon_sql.release(con, _policy("a", "src"))
    anon_sql.release(con, _policy("b", "src_reversed"))
    a = con.execute('SELECT * FROM "a"').fetchall()
    b = con.execute('SELECT * FROM "b"').fetchall()
    assert a == b


def test_the_seed_changes_the_order_within_classes_not_the_rows(con):
    load_adult(con)
    con.execute("CREATE TABLE src AS SELECT row_number() OVER () AS pos, * FROM adult")
    anon_sql.release(con, _policy("s0", "src", seed=0))
    anon_sql.release(con, _policy("s1", "src", seed=1))
    s0, s1 = _released_positions(con, "s0"), _released_positions(con, "s1")
    assert sorted(s0) == sorted(s1) and list(s0) != list(s1)
    ec0 = [r[0] for r in con.execute('SELECT ec_id FROM "s0"').fetchall()]
    assert ec0 == sorted(ec0)   # rows of a class stay together, classes in ec_id order


def test_rows_join_their_class_on_one_hash_key_and_a_shared_hash_stops_the_release(con, monkeypatch):
    """A table with insensitive columns joins each row to its class on a seeded hash of its QI tuple (issue 17.5);
    that is exact only while no two tuples of the source share a hash, which the row map checks: forced collisions
    (the hash taken modulo 3) stop the release with an error and leave no table behind."""
    load_adult(con)
    con.execute("CREATE TABLE src AS SELECT row_number() OVER () AS pos, * FROM adult")
    import anon_sql.compiler.release as compiler
    from sqlglot import exp

    real = compiler.tuple_hash
    monkeypatch.setattr(compiler, "tuple_hash",
                        lambda ci, columns: exp.Mod(this=real(ci, columns), expression=exp.Literal.number(3)))
    with pytest.raises(Exception, match="share one 64-bit hash"):
        anon_sql.release(con, _policy("collide", "src"))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'collide'").fetchall()[0][0]
    monkeypatch.undo()
    con.execute("UPDATE src SET education = NULL WHERE pos % 11 = 0")   # NULL is a value of the tuple too
    anon_sql.release(con, _policy("hashed", "src"))
    # the other path: the classes joined inline on the n null-safe keys
    monkeypatch.setattr(compiler, "uses_row_map", lambda ci: False)
    anon_sql.release(con, _policy("inline", "src"))
    hashed = con.execute('SELECT * FROM "hashed"').fetchall()
    assert len(hashed) > 25_000 and hashed == con.execute('SELECT * FROM "inline"').fetchall()
