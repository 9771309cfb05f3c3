"""Hostile round 20 (docs/hostile-round-20.md): the standalone SDC functions' outputs never land on, replace or hide
a user's object. M54: the mark (a table comment) was written through an unqualified name, which DuckDB resolves to a
TEMP object first — the user's TEMP table or view lost its comment and the output stayed unmarked. M55: TEMP outputs
(``temporary=True``, ``fake_select``'s ``mapping_table``) replaced a user's TEMP table. Also S16 (a TEMP mapping
hiding a table), S19 (a dotted output name), R01 (a read-only database)."""
from __future__ import annotations

import duckdb
import pytest

from anon_sql.errors import PolicyError
from anon_sql.sdc.local_suppression import local_suppression
from anon_sql.sdc.masking import fake_select
from anon_sql.sdc.perturb import perturb
from anon_sql.sdc.sqlparts import SDC_OUTPUT_MARK

MICRO = {"income": {"kind": "microaggregation", "k": 3}}
TEMP_OBJECTS = ("SELECT 'table', table_name, comment FROM duckdb_tables() WHERE temporary UNION ALL SELECT 'view', "
                "view_name, comment FROM duckdb_views() WHERE temporary AND NOT internal ORDER BY ALL")


@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT range AS id, (range * 7) % 50 AS income, (range % 3)::VARCHAR AS g, "
              "(range % 5)::VARCHAR AS z FROM range(60)")
    return c


def _temp_state(c):
    rows = c.execute(TEMP_OBJECTS).fetchall()
    return rows, [c.execute(f'SELECT * FROM temp.main."{name}"').fetchall() for _, name, _ in rows]


@pytest.mark.parametrize("kind", ["TABLE", "VIEW"])
@pytest.mark.parametrize("call", ["perturb", "local_suppression"])
def test_a_temp_object_named_like_the_output_is_left_alone(con, kind, call):
    """M54: a user's TEMP table or view named like the default output: refused, its comment and rows as before,
    and no persistent output written behind it."""
    name = "t__perturbed" if call == "perturb" else "t__suppressed"
    con.execute(f"CREATE TEMP {kind} {name} AS SELECT 'mine' AS x")
    con.execute(f"COMMENT ON {kind} temp.main.{name} IS 'my notes'")
    before = _temp_state(con)
    with pytest.raises(PolicyError, match=f"TEMP {kind.lower()}"):
        if call == "perturb":
            perturb(con, "t", MICRO, seed=1)
        else:
            local_suppression(con, "t", ["g", "z"], 3)
    assert _temp_state(con) == before
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND table_name = ?",
                       [name]).fetchall()[0][0] == 0


def test_the_mark_lands_on_the_output_in_the_current_schema(con):
    """The output is written and marked by its whole name (database, schema), in the schema in use; a second call
    replaces its own marked output."""
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.t AS SELECT * FROM main.t")
    con.execute("USE s")
    perturb(con, "t", MICRO, seed=1, output="out")
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE schema_name = 's' AND table_name = 'out'"
                          ).fetchall()
    assert comment == [(SDC_OUTPUT_MARK,)]
    perturb(con, "t", MICRO, seed=2, output="out")   # its own output: replaced
    assert con.execute("SELECT count(*) FROM s.out").fetchall()[0][0] == 60


@pytest.mark.parametrize("call", ["perturb", "local_suppression", "fake_select"])
def test_a_temp_output_never_replaces_a_users_temp_table(con, call):
    """M55: ``temporary=True`` and ``mapping_table=`` over a user's TEMP table: refused, its rows as before."""
    con.execute("CREATE TEMP TABLE mine AS SELECT 'mine' AS x")
    before = _temp_state(con)
    with pytest.raises(PolicyError, match="TEMP table"):
        if call == "perturb":
            perturb(con, "t", MICRO, seed=1, output="mine", temporary=True)
        elif call == "local_suppression":
            local_suppression(con, "t", ["g", "z"], 3, output="mine", temporary=True)
        else:
            fake_select(con, "t", "g", {"provider": "first_name"}, seed=1, mapping_table="mine")
    assert _temp_state(con) == before


def test_a_temp_output_never_hides_a_table(con):
    """S16: a TEMP mapping table named like a table of the database would hide it for the session: refused."""
    con.execute("CREATE TABLE mymap AS SELECT 1 AS x")
    with pytest.raises(PolicyError, match="would hide it"):
        fake_select(con, "t", "g", {"provider": "first_name"}, seed=1, mapping_table="mymap")
    assert con.execute("SELECT * FROM mymap").fetchall() == [(1,)]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall()[0][0] == 0


def test_a_dotted_output_name_is_refused(con):
    """S19: ``output='main.t2'`` made one table literally named ``main.t2``."""
    with pytest.raises(PolicyError, match="bare table name"):
        perturb(con, "t", MICRO, seed=1, output="main.t2")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '%t2%'").fetchall()[0][0] == 0


def test_a_read_only_database_is_refused_in_one_line(tmp_path):
    """R01 / R02: DuckDB's raw error before; now a PolicyError naming the fix."""
    path = str(tmp_path / "ro.duckdb")
    duckdb.connect(path).execute("CREATE TABLE t AS SELECT range AS id, range % 50 AS income, (range % 3)::VARCHAR "
                                 "AS g, (range % 5)::VARCHAR AS z FROM range(60)").close()
    ro = duckdb.connect(path, read_only=True)
    with pytest.raises(PolicyError, match="read-only"):
        perturb(ro, "t", MICRO, seed=1)
    with pytest.raises(PolicyError, match="read-only"):
        local_suppression(ro, "t", ["g", "z"], 3)


def test_a_privacy_budget_statement_on_a_read_only_database_is_refused_in_one_line(tmp_path):
    """R05a (round 19's G20): CREATE / DROP PRIVACY BUDGET on a read-only database gave DuckDB's raw error, exit 4."""
    import anon_sql

    path = str(tmp_path / "ro.duckdb")
    duckdb.connect(path).execute("CREATE TABLE v AS SELECT range % 30 AS pid, range % 90 AS age FROM range(300)"
                                 ).close()
    ro = duckdb.connect(path, read_only=True)
    for statement in ("CREATE PRIVACY BUDGET ON v WITH (epsilon = 1.0, delta = 1e-5, privacy_unit = 'pid')",
                      "DROP PRIVACY BUDGET ON v"):
        with pytest.raises(anon_sql.AnonSQLError, match="read-only") as err:
            anon_sql.execute(ro, statement)
        assert getattr(err.value, "exit_code", 2) == 2
