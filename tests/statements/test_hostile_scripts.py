"""Issue 28.6: scripts say what happened. Binary and undecodable input, random tokens and truncated statements are
an error line with exit code 2 (3 for a privacy refusal) through ``execute``, ``anon-sql run`` and ``anon-sql shell``
— never a traceback; a script that ends inside a transaction it opened fails and keeps nothing of it."""
from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from anon_sql.cli.main import main
from anon_sql.errors import AnonSQLError, StatementError
from anon_sql.statements.script import execute

SETUP = ("CREATE TABLE t AS SELECT range AS id, 20 + range % 7 AS age, ['a', 'b'][1 + range % 2] AS sex, "
         "['x', 'y', 'z'][1 + range % 3] AS d FROM range(30)")
VALID = ("CREATE ANONYMIZED VIEW v WITH (method = 'levels', k = 2, max_suppression = 0.5, "
         "method_params = {'levels': {'age': 0}}) AS SELECT identifier(id), quasi(age, taxonomy => 'adult_age'), "
         "sensitive(d), insensitive(sex) FROM t; REFRESH ANONYMIZED VIEW v KEEP PLAN; SHOW ANONYMIZED VIEWS; "
         "EXPLAIN ANONYMIZED VIEW v; CHECK ANONYMIZED VIEW v; BEGIN; INSERT INTO t VALUES (99, 30, 'a', 'x'); "
         "COMMIT; DROP ANONYMIZED VIEW v;")
WORDS = ["CREATE", "OR", "REPLACE", "ANONYMIZED", "VIEW", "REFRESH", "KEEP", "PLAN", "DROP", "IF", "EXISTS", "SHOW",
         "VIEWS", "EXPLAIN", "CHECK", "EXPORT", "TO", "WITH", "AS", "SELECT", "FROM", "t", "v", "quasi(age)",
         "identifier(id)", "(", ")", ",", ";", "=", "'x.parquet'", '"v"', "k", "5", "BEGIN", "COMMIT", "ROLLBACK",
         "$$", "--", "/*", "*/", "\x00", "é", "'", '"']
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute(SETUP)
    yield c
    c.close()


def _ok_or_clean_error(con, text: str) -> None:
    try:
        execute(con, text)
    except AnonSQLError as err:
        assert err.exit_code in (2, 3, 4), err
        assert str(err)
    # the connection is still usable and holds no transaction of the script
    con.execute("SELECT 1").fetchall()
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'never'").fetchall()[0][0]


@SETTINGS
@given(st.text(max_size=60))                          # any Unicode, lone surrogates (undecodable bytes) included
def test_execute_random_text(con, text):
    _ok_or_clean_error(con, text)


@SETTINGS
@given(st.lists(st.sampled_from(WORDS), max_size=14))
def test_execute_random_tokens(con, words):
    _ok_or_clean_error(con, " ".join(words))


@SETTINGS
@given(st.integers(0, len(VALID)))
def test_execute_truncated_statements(con, cut):
    _ok_or_clean_error(con, VALID[:cut])


def _cli(args: list[str], data: bytes):
    result = CliRunner().invoke(main, args, input=data)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.binary(max_size=40))
def test_run_and_shell_random_bytes(data):
    for args in (["run", "-"], ["shell"]):
        result = _cli(args, data)
        assert result.exit_code in (0, 2), (args, data, result.output)
        if result.exit_code:
            assert "error" in result.output


@pytest.mark.parametrize("args", [["run", "-"], ["shell"]])
def test_undecodable_bytes_are_an_exit_2_error_line(args):
    result = _cli(args, b"SELECT 1;\n\xff\xfe\x00 SELECT 2;\n")
    assert result.exit_code == 2
    assert "not UTF-8" in result.output or "not valid text" in result.output


def test_a_script_ending_inside_its_transaction_fails_and_keeps_nothing(con):
    with pytest.raises(StatementError, match="ended inside the transaction") as err:
        execute(con, "CREATE TABLE kept AS SELECT 1 AS a; BEGIN; INSERT INTO kept VALUES (2); CREATE TABLE never AS "
                     "SELECT 1 AS b")
    assert err.value.exit_code == 2 and err.value.number == 2      # points at the BEGIN
    assert con.execute("SELECT count(*) FROM kept").fetchall()[0][0] == 1
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'never'").fetchall()[0][0]
    execute(con, "BEGIN; INSERT INTO kept VALUES (3); COMMIT")     # closed: fine
    assert con.execute("SELECT count(*) FROM kept").fetchall()[0][0] == 2


@pytest.mark.parametrize("args", [["run", "-"], ["shell"]])
def test_cli_open_transaction_at_the_end_exits_2(tmp_path, args):
    db = str(tmp_path / "x.duckdb")
    duckdb.connect(db).close()         # an existing database (a new one is removed again when the command fails)
    result = _cli([*args, "--db", db], b"CREATE TABLE a AS SELECT 1 AS x;\nBEGIN;\nINSERT INTO a VALUES (2);\n")
    assert result.exit_code == 2 and "ended inside the transaction" in result.output
    c = duckdb.connect(db)
    assert c.execute("SELECT count(*) FROM a").fetchall()[0][0] == 1
    c.close()
