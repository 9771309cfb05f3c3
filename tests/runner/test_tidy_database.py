"""Issue 13.4: a tidy working database. The user's schema holds only the released tables; the working objects live in
the product's schema ``anon_work``, only those that check / metrics read stay after the release, a user object named
like one in ``main`` is never touched, and nothing a release persists depends on the session that made it: after
releases from a table, from a registered DataFrame and with pseudonymized identifiers, a plain ``duckdb`` process (no
anon_sql imported) opens the file and reads every table and view without an error."""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pytest

import anon_sql
from conftest import load_seed000, load_theta_noise, seed000_policy, theta_noise_policy, working

READ_ALL = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
objs = con.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "
                   "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()
errors = {}
for schema, name in objs:
    try:
        con.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchall()
    except duckdb.Error as err:
        errors[f"{schema}.{name}"] = str(err).splitlines()[0]
print(json.dumps({"objects": sorted(f"{s}.{n}" for s, n in objs), "errors": errors}))
"""


def read_every_object(path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", READ_ALL, path], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_reopened_file_has_nothing_broken(tmp_path, monkeypatch):
    db = str(tmp_path / "work.duckdb")
    con = duckdb.connect(db)
    load_seed000(con)
    levels = {"method_params": {"levels": {"zip": 1, "age": 1}}}
    anon_sql.release(con, seed000_policy(name="from_table", **levels))
    frame = con.execute("SELECT * FROM t1").df()
    anon_sql.release(con, {**seed000_policy(name="from_frame", **levels), "source": "ignored"}, source=frame)
    monkeypatch.setenv("ANON_SQL_KEY", "a-very-secret-key-0123456789")
    pol = seed000_policy(name="pseudonymized", **levels)
    pol["attributes"]["row"] = {"role": "identifier", "action": "pseudonymize"}
    anon_sql.release(con, pol)
    mondrian = seed000_policy(name="local", method="mondrian")
    anon_sql.release(con, mondrian)
    con.close()
    found = read_every_object(db)
    assert found["errors"] == {}
    names = set(found["objects"])
    # the user's schema: the source and the four released tables, nothing else
    assert sorted(n for n in names if n.startswith("main.")) == ["main.from_frame", "main.from_table", "main.local",
                                                                 "main.pseudonymized", "main.t1"]
    work = sorted(n for n in names if n.startswith("anon_work."))
    # kept: the __source views that read a table (metrics compare with them), the plan's tables; session-bound
    # sources and the views nothing reads after the release (__general, __classes, __checks) are gone
    assert work == ["anon_work.from_table__source", "anon_work.local__assignment", "anon_work.local__ec_values",
                    "anon_work.local__source"]


def snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    """Every table's row count and every view's SQL, by schema-qualified name."""
    tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY 1, 2").fetchall()
    out: dict[str, object] = {f"{s}.{t}": con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall()[0][0]
                              for s, t in tables}
    out.update({f"view {s}.{v}": sql for s, v, sql in con.execute(
        "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()})
    return out


def test_user_objects_named_like_working_ones_are_never_touched(con):
    load_seed000(con)
    con.execute("CREATE TABLE r__assignment AS SELECT 7 AS mine")
    con.execute("CREATE TABLE r__source AS SELECT 8 AS mine")
    con.execute("CREATE VIEW r__checks AS SELECT 9 AS mine")
    mine = {k: v for k, v in snapshot(con).items() if "r__" in k}
    rel = anon_sql.release(con, seed000_policy(name="r", method="mondrian"))
    assert rel.checks["passed"].all()
    assert (con.execute(f"SELECT count(*) FROM {working('r', 'assignment')}").fetchall()
            == con.execute("SELECT count(*) FROM t1").fetchall())
    assert {k: v for k, v in snapshot(con).items() if k.startswith(("main.", "view main."))
            and "r__" in k} == mine
    anon_sql.execute(con, "DROP ANONYMIZED VIEW r")
    after = snapshot(con)
    assert not [k for k in after if "anon_work." in k]            # DROP removed every working object
    assert {k: v for k, v in after.items() if "r__" in k} == mine  # and not the user's


def test_a_foreign_table_in_the_working_schema_is_refused(con):
    load_seed000(con)
    con.execute("CREATE SCHEMA anon_work")
    con.execute("CREATE TABLE anon_work.r__assignment AS SELECT 7 AS mine")
    before = snapshot(con)
    with pytest.raises(anon_sql.errors.ReleaseExistsError, match="r__assignment"):
        anon_sql.release(con, seed000_policy(name="r", method="mondrian"))
    assert snapshot(con) == before


def test_theta_noise_marks_never_reach_the_shared_file(con, tmp_path):
    """θ's noise records are marked in the working database only (the release's flag column, the working
    ``__noise`` table); the shared file holds the noise records unmarked and nothing of the working schema."""
    load_theta_noise(con)
    pol = theta_noise_policy()
    target = tmp_path / "rn.duckdb"
    rel = anon_sql.release(con, pol, to=str(target))
    assert rel.noise == 1
    assert con.execute(f"SELECT count(*) FROM {working('rn', 'noise')}").fetchall() == [(1,)]
    assert con.execute("SELECT count(*) FROM rn WHERE is_noise").fetchall() == [(1,)]
    shared = duckdb.connect(str(target), read_only=True)
    objects = shared.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "
                             "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    assert sorted(objects) == [("main", "rn"), ("main", "rn__classes"), ("main", "rn__metadata")]
    assert "is_noise" not in [r[0] for r in shared.execute("DESCRIBE rn").fetchall()]
    assert shared.execute("SELECT count(*) FROM rn").fetchall() == [(rel.records_out,)]   # noise kept, unmarked
    metadata = shared.execute("SELECT * FROM rn__metadata").df().iloc[0].astype(str).str.cat()
    assert "is_noise" not in metadata and "noise_flag" not in metadata
    shared.close()


def _as_made_before_anon_work(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Rebuild a release's working objects the way anon_sql kept them before the anon_work schema: beside the
    released table in main — the plan's tables, the __source view and the __general / __classes / __checks views."""
    for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'anon_work' "
                            "AND starts_with(table_name, ?)", [name + "__"]).fetchall():
        con.execute(f'CREATE TABLE main."{t}" AS SELECT * FROM anon_work."{t}"')
        con.execute(f'DROP TABLE anon_work."{t}"')
    con.execute(f'DROP VIEW IF EXISTS anon_work."{name}__source"')
    con.execute(f'CREATE VIEW main."{name}__source" AS SELECT *, row_number() OVER () AS __row FROM t1')
    con.execute(f'CREATE VIEW main."{name}__general" AS SELECT * FROM "{name}__source"')
    con.execute(f'CREATE VIEW main."{name}__classes" AS SELECT count(*) AS __size FROM "{name}__general"')
    con.execute(f'CREATE VIEW main."{name}__checks" AS SELECT count(*) AS __size FROM "{name}"')


def test_a_release_made_before_the_working_schema_is_migrated_when_replaced_or_dropped(con):
    """A database made before anon_work keeps each release's working objects beside its table. The current code
    checks such a release as it is; replacing it (or REFRESH) leaves its working objects in anon_work only, DROP
    removes them — and a replace that fails leaves the database exactly as before."""
    load_seed000(con)
    anon_sql.release(con, seed000_policy(name="r", method="mondrian"))
    anon_sql.release(con, seed000_policy(name="q", method_params={"levels": {"zip": 1, "age": 1}}))
    for name in ("r", "q"):
        _as_made_before_anon_work(con, name)
    con.execute("DROP SCHEMA anon_work")
    old = snapshot(con)
    assert {"main.r__assignment", "main.r__ec_values", "view main.r__checks", "view main.q__source"} <= set(old)
    assert anon_sql.check(con, "r")["passed"].all() and anon_sql.check(con, "q")["passed"].all()

    failing = seed000_policy(name="r", method_params={"levels": {"zip": 0, "age": 0}})   # k fails: refused
    with pytest.raises(anon_sql.errors.PrivacyRequirementError):
        anon_sql.release(con, failing, replace=True)
    assert {k: v for k, v in snapshot(con).items() if not k.startswith("anon.")} == \
        {k: v for k, v in old.items() if not k.startswith("anon.")}

    anon_sql.release(con, seed000_policy(name="r", method="mondrian"), replace=True)
    now = snapshot(con)
    assert sorted(k for k in now if "r__" in k) == ["anon_work.r__assignment", "anon_work.r__ec_values",
                                                    "view anon_work.r__source"]
    assert {k: v for k, v in now.items() if "q__" in k} == {k: v for k, v in old.items() if "q__" in k}
    anon_sql.execute(con, "DROP ANONYMIZED VIEW q")
    assert not [k for k in snapshot(con) if "q__" in k or k.endswith(".q")]
