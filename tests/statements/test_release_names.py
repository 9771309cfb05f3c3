"""Issue 28.7: the name a release is created under is the name every later command finds — CHECK, EXPLAIN,
REFRESH, SHOW, EXPORT, DROP, and the CLI's check, report and export — or the name is refused up front (exit 2) with
the database unchanged. Names are drawn by hypothesis (quotes, dots, spaces, mixed case, unicode), written quoted,
qualified with the current schema or not; names qualified with another schema are refused.

On the code before this, a quoted name with a dot (``"Sales.2024"``) was created but CHECK and EXPLAIN reported its
table missing, and ``main.x`` was created as ``x`` while REFRESH, DROP, CHECK and EXPLAIN refused the dotted name.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from anon_sql.cli.demo import load_demo_data
from anon_sql.errors import StatementError
from anon_sql.statements.script import execute

from test_ownership_identity import state

BODY = """WITH (method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0}}, seed = 0, k = 5,
      max_suppression = 0.1, default_role = 'insensitive')
AS SELECT identifier(patient_id), quasi(age, taxonomy => 'adult_age'), quasi(sex, taxonomy => 'adult_sex'),
          sensitive(occupation) FROM adult"""

NAMES = st.text(alphabet=st.sampled_from(list("aZbY09 ._-\"'éß")), min_size=1, max_size=10)
QUALIFIERS = st.sampled_from(["", "main.", '"main".', "MAIN.", "memory.main."])


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = tmp_path_factory.mktemp("names") / "base.duckdb"
    c = duckdb.connect(str(path))
    load_demo_data(c, "adult")
    execute(c, "CREATE ANONYMIZED VIEW warmup " + BODY)     # the catalog installed, the program cache warm
    execute(c, "DROP ANONYMIZED VIEW warmup")
    c.close()
    return path


def fresh(base, tmp_path_factory):
    path = tmp_path_factory.mktemp("n") / "db.duckdb"
    shutil.copy(base, path)
    return path


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=NAMES, qualifier=QUALIFIERS)
def test_every_statement_finds_the_name_a_view_was_created_under(base, tmp_path_factory, name, qualifier):
    path = fresh(base, tmp_path_factory)
    con = duckdb.connect(str(path))
    written = qualifier + quoted(name)
    before = state(con)
    try:
        execute(con, f"CREATE ANONYMIZED VIEW {written} {BODY}")
    except StatementError as err:               # refused up front: exit 2, nothing changed
        assert err.exit_code == 2, err
        assert state(con) == before
        con.close()
        return
    assert con.execute("SELECT release FROM anon.releases WHERE status = 'released'").fetchall() == [(name,)]
    for statement in (f"CHECK ANONYMIZED VIEW {written}", f"EXPLAIN ANONYMIZED VIEW {written}",
                      f"REFRESH ANONYMIZED VIEW {written} KEEP PLAN",
                      f"EXPORT ANONYMIZED VIEW {written} TO '{tmp_path_factory.mktemp('x') / 'out.parquet'}'"):
        execute(con, statement)
    assert name in execute(con, "SHOW ANONYMIZED VIEWS")[-1].frame["name"].tolist()
    con.close()
    for args in (["check", name], ["report", name], ["export", name, "--to",
                                                     str(tmp_path_factory.mktemp("y") / "out.duckdb")]):
        done = subprocess.run([sys.executable, "-m", "anon_sql.cli", *args, "--db", str(path)], capture_output=True,
                              text=True)
        assert done.returncode == 0, (args, done.stderr)
    con = duckdb.connect(str(path))
    execute(con, f"DROP ANONYMIZED VIEW {written}")
    assert con.execute("SELECT count(*) FROM anon.releases WHERE status = 'released'").fetchall()[0][0] == 0
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0]
    con.close()


@pytest.mark.parametrize("written", ["other.x", '"temp".x', "nowhere.main.x"])
def test_a_name_qualified_with_another_schema_is_refused_up_front(base, tmp_path_factory, written):
    path = fresh(base, tmp_path_factory)
    con = duckdb.connect(str(path))
    before = state(con)
    with pytest.raises(StatementError, match="not qualified with another schema") as err:
        execute(con, f"CREATE ANONYMIZED VIEW {written} {BODY}")
    assert err.value.exit_code == 2 and state(con) == before
    for statement in (f"CHECK ANONYMIZED VIEW {written}", f"DROP ANONYMIZED VIEW {written}",
                      f"REFRESH ANONYMIZED VIEW {written}"):
        with pytest.raises(StatementError) as err:
            execute(con, statement)
        assert err.value.exit_code == 2
    assert state(con) == before
    con.close()


@pytest.mark.parametrize("written, name", [('"Sales.2024"', "Sales.2024"), ("main.x", "x"),
                                           ('main."a b"', "a b"), ("MAIN.Mixed", "Mixed"), ('"it""s"', 'it"s')])
def test_the_names_of_the_issue(base, tmp_path_factory, written, name):
    path = fresh(base, tmp_path_factory)
    con = duckdb.connect(str(path))
    execute(con, f"CREATE ANONYMIZED VIEW {written} {BODY}")
    for statement in (f"CHECK ANONYMIZED VIEW {written}", f"EXPLAIN ANONYMIZED VIEW {written}",
                      f"REFRESH ANONYMIZED VIEW {written}", f"DROP ANONYMIZED VIEW {written}"):
        execute(con, statement)
    assert con.execute("SELECT count(*) FROM anon.releases WHERE release = ? AND status = 'released'",
                       [name]).fetchall()[0][0] == 0
    con.close()


def test_a_source_table_whose_name_has_a_dot_is_read_as_one_name():
    """``FROM "Sales.2024"`` names the table "Sales.2024" (found by the new-user walk: it was read as the table 2024
    of a schema Sales and refused, while the error listed "Sales.2024" among the tables); a real schema.table still
    resolves when no table has the whole dotted name."""
    con = duckdb.connect()
    load_demo_data(con, "adult")
    con.execute('CREATE TABLE "Sales.2024" AS SELECT * FROM adult')
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.adult2 AS SELECT * FROM adult")
    for source in ('"Sales.2024"', "s.adult2"):
        name = "r_" + source.strip('"').replace(".", "_")
        execute(con, f"CREATE ANONYMIZED VIEW {name} " + BODY.replace("FROM adult", f"FROM {source}"))
        assert con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] > 0
        assert execute(con, f"CHECK ANONYMIZED VIEW {name}") is not None
    con.close()
