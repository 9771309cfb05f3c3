"""A released table is written from its rows with counts cut into pieces (compiler/release.py ``pieces_query``), so
that DuckDB repeats them on every thread: the table's statement (``written_rows``: the pieces, or the rows when
none were cut) must write exactly the records of the rows in exactly their order, whatever the counts, the threads
and the row-group size — and nothing is cut when the records are few, when the rows fill the threads already, or
when the connection does not preserve insertion order. The ``__assignment`` of a plan with QI tuples is written
from its spans of row numbers cut the same way, and must number the same rows in the same order."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlglot import exp

import anon_sql
from anon_sql.common.sqlbuild import render
from anon_sql.compiler import views
from anon_sql.compiler.general import assignment_from_spans, assignment_query, uses_tuple_map
from anon_sql.compiler.release import pieces_or_rows, pieces_query, repeated_rows, written_rows

from conftest import data_path

COLS = ["a", "b"]
ROWS = exp.Table(this=exp.to_identifier("r", quoted=True))
PIECES = exp.Table(this=exp.to_identifier("p", quoted=True))


def _expanded(con: duckdb.DuckDBPyConnection, table: exp.Table) -> list[tuple]:
    """The records a table of rows with counts stands for, in its order."""
    return con.execute(render(repeated_rows(table, COLS))).fetchall()


def _written(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """What the released table's statement writes from ``p`` and ``r``, in its order (as a table, as it runs)."""
    con.execute(f"CREATE OR REPLACE TABLE t AS {render(written_rows(PIECES, ROWS, COLS))}")
    return con.execute("SELECT * FROM t ORDER BY rowid").fetchall()


def _cut(con: duckdb.DuckDBPyConnection, row_group_rows: int | None = None) -> int:
    """Write ``p`` from ``r`` (pieces); its rows."""
    query = pieces_query(ROWS, COLS) if row_group_rows is None else pieces_query(ROWS, COLS, row_group_rows)
    con.execute(f"CREATE OR REPLACE TABLE p AS {render(query)}")
    return con.execute("SELECT count(*) FROM p").fetchall()[0][0]


def _rows(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    con.register("frame_view", frame)
    con.execute("CREATE OR REPLACE TABLE r AS SELECT a, b, ec_id, CAST(__w AS BIGINT) AS __w FROM frame_view")
    con.unregister("frame_view")


row = st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.integers(-3, 3), st.integers(0, 5),
                st.integers(1, 40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row, max_size=30), row_group_rows=st.integers(1, 16), threads=st.integers(1, 3))
def test_pieces_stand_for_the_same_records_in_the_same_order(rows, row_group_rows, threads):
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    _rows(con, pd.DataFrame(rows, columns=["a", "b", "ec_id", "__w"]).astype({"b": "int64", "ec_id": "int64"})
          if rows else pd.DataFrame({"a": pd.Series([], dtype=object), "b": pd.Series([], dtype="int64"),
                                     "ec_id": pd.Series([], dtype="int64"), "__w": pd.Series([], dtype="int64")}))
    pieces = _cut(con, row_group_rows)
    assert _written(con) == _expanded(con, ROWS)
    assert con.execute("SELECT count(*) FROM p WHERE __w < 1").fetchall()[0][0] == 0
    total = sum(r[3] for r in rows)
    pays = total >= 4 * row_group_rows and len(rows) < threads * 2 * row_group_rows
    assert (pieces > 0) == pays
    if pays:   # cut: the pieces are those records, none larger than the size the statement chose
        assert _expanded(con, PIECES) == _expanded(con, ROWS)
        step = -(-total // (threads * 2 * row_group_rows))
        assert con.execute("SELECT max(__w) FROM p").fetchall()[0][0] <= step


def test_a_large_table_is_cut_and_repeats_in_order():
    """1M records in 50 rows, DuckDB's own row-group size: cut into several row groups of pieces, the records and
    their order unchanged."""
    con = duckdb.connect()
    con.execute("SET threads = 2")
    _rows(con, pd.DataFrame({"a": [f"v{i % 7}" for i in range(50)], "b": range(50),
                             "ec_id": [i // 5 for i in range(50)], "__w": [20_000] * 50}))
    pieces = _cut(con)
    assert pieces > 2 * 122_880          # at least two row groups: more than one thread repeats them
    assert _written(con) == _expanded(con, PIECES) == _expanded(con, ROWS)


def test_nothing_is_cut_when_it_does_not_pay():
    con = duckdb.connect()
    con.execute("SET threads = 2")
    _rows(con, pd.DataFrame({"a": ["x", "y"], "b": [1, 2], "ec_id": [0, 1], "__w": [1000, 5]}))
    assert _cut(con) == 0                # below four row groups of records
    assert _written(con) == _expanded(con, ROWS)
    _rows(con, pd.DataFrame({"a": ["x"] * 10, "b": range(10), "ec_id": range(10), "__w": [100_000] * 10}))
    con.execute("SET preserve_insertion_order = false")
    assert _cut(con) == 0                # no order to keep: pieces would not keep the release order either
    con.execute("SET preserve_insertion_order = true")
    assert _cut(con) > 10
    # rows that fill two row groups per thread already: a copy into pieces would cost without helping
    con.execute("CREATE OR REPLACE TABLE r AS SELECT 'x' AS a, i AS b, i AS ec_id, CAST(2 AS BIGINT) AS __w "
                "FROM range(2 * 2 * 122880) t(i)")
    assert _cut(con) == 0
    assert _written(con) == _expanded(con, ROWS)


def test_an_empty_table_has_no_pieces():
    con = duckdb.connect()
    con.execute("CREATE TABLE r (a VARCHAR, b BIGINT, ec_id BIGINT, __w BIGINT)")
    assert _cut(con) == 0


def _big_adult(path) -> duckdb.DuckDBPyConnection:
    """A file database with anon_sql installed and table ``big``: 17 copies of Adult's age, sex, salary-class and
    race and its even ages once more (~530,000 rows: counts of every parity, so that a piece too many shows)."""
    con = duckdb.connect(str(path))
    anon_sql.install(con)
    adult = data_path("adult", "adult.csv")
    con.execute("CREATE TABLE a AS SELECT * FROM read_csv(?, delim = ';', header = true)", [str(adult)])
    con.execute("CREATE TABLE big AS SELECT a.age, a.sex, a.\"salary-class\", a.race FROM range(17) r(i), a "
                "UNION ALL SELECT age, sex, \"salary-class\", race FROM a WHERE age % 2 = 0")
    return con


def test_a_large_release_written_from_pieces_checks(tmp_path):
    """A level release of 600,000 records (its rows cut into pieces): every record written once, in class order,
    and the release's own digests and checks hold when checked again."""
    con = _big_adult(tmp_path / "big.duckdb")
    policy = {"name": "big_rel", "source": "big", "method": "levels", "default_role": "insensitive",
              "attributes": {"age": {"role": "quasi", "taxonomy": {"kind": "interval", "widths": [10, 20]}},
                             "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "salary-class": {"role": "sensitive"}},
              "privacy": {"k": 5}, "method_params": {"levels": {"age": 1, "sex": 0}}}
    rel = anon_sql.release(con, policy)
    n = con.execute("SELECT count(*) FROM big").fetchall()[0][0]
    assert rel.records_out == n == con.execute("SELECT count(*) FROM big_rel").fetchall()[0][0] > 4 * 122_880
    out_of_order = con.execute("SELECT count(*) FROM (SELECT ec_id, lag(ec_id) OVER (ORDER BY rowid) AS before "
                               "FROM big_rel) WHERE ec_id < before").fetchall()[0][0]
    assert out_of_order == 0
    # the raw columns' records as in the source, and every class as large as the catalog recorded it
    pairs = "SELECT sex, \"salary-class\", count(*) FROM {} GROUP BY ALL"
    released = sorted(con.execute(pairs.format("big_rel")).fetchall())
    assert released == sorted(con.execute(pairs.format("big")).fetchall())
    sizes = "SELECT ec_id, {} FROM {} {}"
    assert (sorted(con.execute(sizes.format("count(*)", "big_rel", "GROUP BY ec_id")).fetchall())
            == sorted(con.execute(sizes.format("size", "anon.equivalence_classes", "WHERE release = 'big_rel'"))
                      .fetchall()))
    checks = anon_sql.check(con, "big_rel")
    assert bool(checks["passed"].all()), checks[~checks["passed"]]


# -- the assignment of a plan with QI tuples (Mondrian): its spans of row numbers cut the same way ---------------
SPANS = exp.Table(this=exp.to_identifier("s", quoted=True))
SPAN_PIECES = exp.Table(this=exp.to_identifier("sp", quoted=True))


def _assigned(con: duckdb.DuckDBPyConnection, relation: exp.Expression) -> list[tuple]:
    return con.execute(render(assignment_from_spans(relation))).fetchall()


span = st.tuples(st.integers(0, 5), st.integers(1, 40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=st.lists(span, max_size=30), row_group_rows=st.integers(1, 16), threads=st.integers(1, 3))
def test_assignment_pieces_number_the_same_rows_in_the_same_order(spans, row_group_rows, threads):
    """Spans (first row number less one, class, rows) cut into pieces whose first row number advances by the rows
    of the pieces before: the same (row, class) pairs, in the same order, whether cut or not."""
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    starts = [sum(w for _, w in spans[:i]) for i in range(len(spans))]
    con.execute("CREATE TABLE s (__start BIGINT, ec_id BIGINT, __w BIGINT)")
    if spans:
        con.executemany("INSERT INTO s VALUES (?, ?, ?)", [(s, e, w) for s, (e, w) in zip(starts, spans)])
    con.execute(f"CREATE TABLE sp AS {render(pieces_query(SPANS, ['__start'], row_group_rows, offset='__start'))}")
    uncut = _assigned(con, exp.Subquery(this=exp.select("*").from_(SPANS), alias=exp.TableAlias(
        this=exp.to_identifier("k"))))
    assert uncut == [(starts[i] + j + 1, e) for i, (e, w) in enumerate(spans) for j in range(w)]
    assert _assigned(con, pieces_or_rows(SPAN_PIECES, SPANS, ["__start"])) == uncut
    total = sum(w for _, w in spans)
    cut = con.execute("SELECT count(*) FROM sp").fetchall()[0][0]
    assert (cut > 0) == (total >= 4 * row_group_rows and len(spans) < threads * 2 * row_group_rows)


def test_a_large_mondrian_assignment_from_pieces_is_the_one_statement_assignment(tmp_path, monkeypatch):
    """A Mondrian release of ~530,000 records (its assignment spans cut into pieces): the ``__assignment`` table is
    the one the single statement (:func:`assignment_query`, the form other engines run) writes, row for row and in
    order, and it numbers every row once."""
    con = _big_adult(tmp_path / "m.duckdb")
    policy = {"name": "cut", "source": "big", "method": "mondrian", "default_role": "insensitive", "seed": 3,
              "attributes": {"age": {"role": "quasi"}, "sex": {"role": "quasi", "taxonomy": {"kind": "top"}},
                             "salary-class": {"role": "sensitive"}},
              "privacy": {"k": 5}}
    rel = anon_sql.release(con, policy)
    assert "__spanpieces" in "\n".join(rel.sql)
    n = con.execute("SELECT count(*) FROM big").fetchall()[0][0]
    cut = con.execute("SELECT __row, ec_id FROM anon_work.cut__assignment ORDER BY rowid").fetchall()
    assert [r for r, _ in cut] == list(range(1, n + 1))

    def one_statement(ci, names):
        if not (uses_tuple_map(ci) and ci.plan.assignment is None):
            return []
        return [("assignment", exp.Create(this=names.assignment.copy(), kind="TABLE", replace=True,
                                          expression=assignment_query(ci, names)))]

    monkeypatch.setattr(views, "STEPS", tuple(one_statement if s is views.assignment_step else s
                                              for s in views.STEPS))
    whole = anon_sql.release(con, {**policy, "name": "whole"})
    assert "__spanpieces" not in "\n".join(whole.sql)
    assert con.execute("SELECT __row, ec_id FROM anon_work.whole__assignment ORDER BY rowid").fetchall() == cut
    assert not [t for t, in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
                if t.startswith(("cut__", "whole__"))]
