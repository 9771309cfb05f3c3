"""Sources as users hold them: table / view names, file paths, pandas, pyarrow, Polars and DuckDB relations work as
``source=`` for release, compile, metrics and the analytics; anything else is a SourceError naming the type.

Oracle: the same policy released from the table ``t`` itself (same plan, same released rows, same metrics)."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import anon_sql
from anon_sql.errors import SourceError

ROWS = 60


def frame() -> pd.DataFrame:
    return pd.DataFrame({"age": [20 + (i * 7) % 45 for i in range(ROWS)],
                         "sex": ["FM"[i % 2] for i in range(ROWS)],
                         "dx": [["flu", "cold", "asthma", "ulcer"][(i * 5) % 4] for i in range(ROWS)]})


def policy(name: str, method: str = "mondrian") -> dict:
    return {"name": name, "source": "t", "method": method, "seed": 0,
            "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [5, 10, 20]}},
                           "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                           "dx": {"role": "sensitive"}},
            "privacy": {"k": 4, "l_diversity": {"kind": "distinct", "l": 2}}}


@pytest.fixture
def db(con, tmp_path):
    df = frame()
    con.register("df_in", df)
    con.execute("CREATE TABLE t AS SELECT * FROM df_in")
    con.unregister("df_in")
    con.execute("CREATE VIEW v AS SELECT * FROM t")
    df.to_csv(tmp_path / "t.csv", index=False)
    con.execute(f"COPY t TO '{tmp_path / 't.parquet'}' (FORMAT parquet)")
    other = duckdb.connect()
    other.register("df_in", df)
    yield con, df, tmp_path, other
    other.close()


def _polars():
    return pytest.importorskip("polars", reason="polars is optional (dev extra)")


def make(kind: str, con, df: pd.DataFrame, tmp: Path, other):
    """The same 60 rows as the user might hold them."""
    return {
        "table": lambda: "t",
        "view": lambda: "v",
        "csv_path": lambda: str(tmp / "t.csv"),
        "parquet_pathlib": lambda: tmp / "t.parquet",
        "pandas": lambda: df,
        "arrow_table": lambda: pa.Table.from_pandas(df, preserve_index=False),
        "arrow_batch": lambda: pa.RecordBatch.from_pandas(df, preserve_index=False),
        "arrow_dataset": lambda: ds.dataset(pa.Table.from_pandas(df, preserve_index=False)),
        "polars": lambda: _polars().from_pandas(df),
        "polars_lazy": lambda: _polars().from_pandas(df).lazy(),
        "relation": lambda: con.table("t"),
        "relation_filtered": lambda: con.sql("SELECT * FROM t WHERE age >= 0"),
        "relation_other_connection": lambda: other.sql("SELECT * FROM df_in"),
    }[kind]()


KINDS = ["table", "view", "csv_path", "parquet_pathlib", "pandas", "arrow_table", "arrow_batch", "arrow_dataset",
         "polars", "polars_lazy", "relation", "relation_filtered", "relation_other_connection"]


def rows(con, table: str) -> list[tuple]:
    return con.execute(f'SELECT CAST(age AS VARCHAR), CAST(sex AS VARCHAR), dx, ec_id FROM "{table}"').fetchall()


@pytest.mark.parametrize("kind", KINDS)
def test_release_and_metrics_from_every_kind_of_source(db, kind):
    con, df, tmp, other = db
    expected = anon_sql.release(con, policy("ref"))
    src = make(kind, con, df, tmp, other)
    rel = anon_sql.release(con, policy("rel_" + kind), source=src)
    assert rel.records_in == ROWS == rel.records_out + rel.suppressed
    assert rel.checks["passed"].all()
    assert rows(con, "rel_" + kind) == rows(con, "ref")
    assert len(rel.classes) == len(expected.classes)
    names = ["k", "ncp", "kl_divergence", "dcp"]          # kl_divergence reads the source back
    assert anon_sql.metrics(con, "rel_" + kind, names) == pytest.approx(anon_sql.metrics(con, "ref", names))


@pytest.mark.parametrize("kind", ["pandas", "arrow_table", "polars", "relation_other_connection"])
def test_compile_plans_on_the_object_and_reads_the_policy_source(db, kind):
    con, df, tmp, other = db
    pol = policy("c_" + kind, method="optimal")
    expected = anon_sql.compile(pol, dialect="spark", con=con)          # planned on the table t
    src = make(kind, con, df, tmp, other)
    assert anon_sql.compile(pol, dialect="spark", con=con, source=src) == expected
    duck = anon_sql.compile(pol, dialect="duckdb", con=con, source=src)
    assert any('FROM "t"' in s or "FROM t" in s for s in duck)          # runnable where `t` is the data


@pytest.mark.parametrize("kind", ["csv_path", "pandas", "arrow_table", "polars_lazy", "relation",
                                  "relation_other_connection"])
def test_analytics_take_every_kind_and_leave_nothing_registered(db, kind):
    con, df, tmp, other = db
    before = set(con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall())
    src = make(kind, con, df, tmp, other)
    expected = anon_sql.leakage(con, "t", ["age", "sex"])
    pd.testing.assert_frame_equal(anon_sql.leakage(con, src, ["age", "sex"]), expected)
    fr = anon_sql.feature_relevance(con, make(kind, con, df, tmp, other), ["age", "sex"], "dx")
    pd.testing.assert_frame_equal(fr, anon_sql.feature_relevance(con, "t", ["age", "sex"], "dx"))
    after = set(con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall())
    assert after == before


@pytest.mark.parametrize("bad, named", [
    ([1, 2, 3], "builtins.list"),
    ({"age": [1]}, "builtins.dict"),
    (42, "builtins.int"),
    (pd.Series([1, 2]), "pandas"),
])
def test_unsupported_source_is_a_source_error_naming_type_and_what_is_accepted(db, bad, named):
    con = db[0]
    tables = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    with pytest.raises(SourceError, match="is not supported") as err:
        anon_sql.release(con, policy("bad"), source=bad)
    assert named in str(err.value) and "Polars DataFrame" in str(err.value) and "DuckDB relation" in str(err.value)
    with pytest.raises(SourceError, match="is not supported"):
        anon_sql.leakage(con, bad, ["age"])
    assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == tables


def test_one_shot_stream_and_closed_relation_are_refused_clearly(db):
    con, df, _, _ = db
    reader = pa.Table.from_pandas(df).to_reader()
    with pytest.raises(SourceError, match="read only once.*read_all"):
        anon_sql.release(con, policy("stream"), source=reader)
    gone = duckdb.connect()
    rel = gone.sql("SELECT 1 AS age")
    gone.close()
    with pytest.raises(SourceError, match="DuckDB relation"):
        anon_sql.release(con, policy("closed"), source=rel)
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('stream', 'closed')"
                           ).fetchall()[0][0]


def test_two_object_releases_keep_their_own_sources(db):
    """Each release registers its object under its own name: a later release does not swap an earlier one's data."""
    con, df, _, _ = db
    anon_sql.release(con, policy("first"), source=df)
    older = df.assign(age=df["age"] + 1)
    anon_sql.release(con, policy("second"), source=older)
    assert con.execute('SELECT sum(age) FROM "first__input"').fetchall()[0][0] == int(df["age"].sum())
    first = anon_sql.metrics(con, "first", ["kl_divergence"])
    assert first == pytest.approx(anon_sql.metrics(con, "first", ["kl_divergence"]))
