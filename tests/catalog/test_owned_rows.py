"""Issue 28.1 for catalog rows: a taxonomy or a privacy budget that anon_sql did not write (a row inserted by hand, or
one it wrote and someone edited) is never replaced, dropped or charged — by `taxonomy build/load --replace`,
`taxonomy drop`, `store_taxonomy`, DROP PRIVACY BUDGET or a DP query — and the database is exactly as it was. On
the code before this, each of these replaced or dropped the row with exit 0."""
from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

import anon_sql
from anon_sql.catalog import store
from anon_sql.data.taxonomy import from_mapping
from anon_sql.dp import create_budget, dp_query, drop_budget
from anon_sql.errors import PolicyError, StatementError, TaxonomyError
from anon_sql.statements.script import execute

from test_ownership_identity import state

AGES = {"10": ["10-19"], "15": ["10-19"], "20": ["20-29"], "25": ["20-29"]}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "anon_sql.cli", *args], capture_output=True, text=True)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "rows.duckdb"
    c = duckdb.connect(str(p))
    c.execute("CREATE TABLE people AS SELECT range AS pid, (10 + range % 20)::INTEGER AS age FROM range(200)")
    anon_sql.install(c)
    c.close()
    return p


def _hand_taxonomy(con, name: str = "ages") -> None:
    """A taxonomy written by hand, straight into the catalog tables."""
    con.execute("INSERT INTO anon.taxonomies (name, kind, height, leaves, spec) VALUES (?, 'explicit', 1, 2, '{}')",
                [name])
    con.execute("INSERT INTO anon.taxonomy_nodes VALUES (?, '10', 0, '10'), (?, '10', 1, 'young'), "
                "(?, '20', 0, '20'), (?, '20', 1, 'young')", [name] * 4)


def _edit_stored_taxonomy(con, name: str = "ages") -> None:
    """anon_sql stored it; a user then edits one of its values by hand."""
    store.store_taxonomy(con, from_mapping(name, AGES))
    con.execute("UPDATE anon.taxonomy_nodes SET value = 'teen' WHERE taxonomy = ? AND level = 1 AND leaf = '10'",
                [name])


@pytest.mark.parametrize("make", [_hand_taxonomy, _edit_stored_taxonomy], ids=["by-hand", "edited"])
def test_a_taxonomy_anon_sql_did_not_write_is_never_replaced_or_dropped(path, make):
    con = duckdb.connect(str(path))
    make(con)
    before = state(con)
    with pytest.raises(TaxonomyError, match="'ages' is not one anon_sql stored"):
        store.store_taxonomy(con, from_mapping("ages", AGES))
    with pytest.raises(TaxonomyError, match="never drops"):
        store.drop_taxonomy(con, "ages")
    assert state(con) == before
    con.close()
    for args in (["taxonomy", "build", "ages", "--db", str(path), "--table", "people", "--column", "age",
                  "--kind", "interval", "--widths", "5,10", "--replace"],
                 ["taxonomy", "drop", "ages", "--db", str(path)]):
        out = cli(*args)
        assert out.returncode == 2, out.stderr
        assert "taxonomy 'ages' is not one anon_sql stored" in out.stderr
        assert "anon.taxonomy_nodes yourself" in out.stderr and "Traceback" not in out.stderr
    con = duckdb.connect(str(path))
    assert state(con) == before
    con.close()


def test_its_own_taxonomy_is_replaced_and_dropped(path):
    out = cli("taxonomy", "build", "ages", "--db", str(path), "--table", "people", "--column", "age",
              "--kind", "interval", "--widths", "5,10")
    assert out.returncode == 0, out.stderr
    out = cli("taxonomy", "build", "ages", "--db", str(path), "--table", "people", "--column", "age",
              "--kind", "interval", "--widths", "2,10", "--replace")
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(path))
    assert store.load_taxonomy(con, "ages").mapping(1)["10"] == "[10-11]"
    assert con.execute("SELECT count(*) FROM anon.owned_objects WHERE schema_name = 'anon.taxonomies'"
                       ).fetchall()[0][0] == 1
    con.close()
    out = cli("taxonomy", "drop", "ages", "--db", str(path))
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(path))
    assert store.taxonomy_names(con) == []
    assert con.execute("SELECT count(*) FROM anon.taxonomy_nodes").fetchall()[0][0] == 0
    assert con.execute("SELECT count(*) FROM anon.owned_objects").fetchall()[0][0] == 0
    con.close()
    assert cli("taxonomy", "drop", "ages", "--db", str(path)).returncode == 2      # nothing left to drop


def test_a_catalog_from_before_markers_keeps_its_taxonomies_replaceable(path):
    """Taxonomies stored before markers existed (no marker column, no identity rows) were anon_sql's: adopted."""
    con = duckdb.connect(str(path))
    store.store_taxonomy(con, from_mapping("ages", AGES))
    con.execute("DELETE FROM anon.owned_objects")
    con.execute("ALTER TABLE anon.taxonomies DROP COLUMN marker")
    store.store_taxonomy(con, from_mapping("ages", {**AGES, "30": ["30-39"]}), replace=True)
    assert "30" in store.load_taxonomy(con, "ages").leaves
    store.drop_taxonomy(con, "ages")
    assert store.taxonomy_names(con) == []
    con.close()


def _hand_budget(con) -> None:
    con.execute("INSERT INTO anon.privacy_budgets (table_name, privacy_unit, units, epsilon, delta) "
                "VALUES ('main.people', 'pid', 200, 1000.0, 1e-4)")


def _edited_budget(con) -> None:
    create_budget(con, "people", epsilon=1.0, delta=1e-4, privacy_unit="pid")
    con.execute("UPDATE anon.privacy_budgets SET epsilon = 1000.0")


@pytest.mark.parametrize("make", [_hand_budget, _edited_budget], ids=["by-hand", "edited"])
def test_a_budget_anon_sql_did_not_create_is_never_dropped_or_charged(path, make):
    con = duckdb.connect(str(path))
    from anon_sql.dp.ledger import ensure_ledger

    ensure_ledger(con)
    make(con)
    before = state(con)
    with pytest.raises(PolicyError, match="not one anon_sql created") as err:
        drop_budget(con, "people")
    assert err.value.exit_code == 2 and "main.people" in str(err.value)
    with pytest.raises(StatementError, match="not one anon_sql created") as err:
        execute(con, "DROP PRIVACY BUDGET ON people")
    assert err.value.exit_code == 2
    with pytest.raises(PolicyError, match="never charges a budget"):
        dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM people")
    assert state(con) == before
    con.close()
    out = subprocess.run([sys.executable, "-m", "anon_sql.cli", "run", "-", "--db", str(path)],
                         input="DROP PRIVACY BUDGET ON people;", capture_output=True, text=True)
    assert out.returncode == 2 and "not one anon_sql created" in out.stderr and "Traceback" not in out.stderr
    con = duckdb.connect(str(path))
    assert state(con) == before
    con.close()


def test_its_own_budget_is_dropped_and_a_ledger_from_before_markers_is_adopted(path):
    con = duckdb.connect(str(path))
    create_budget(con, "people", epsilon=1.0, delta=1e-4, privacy_unit="pid")
    con.execute("DELETE FROM anon.owned_objects")
    con.execute("ALTER TABLE anon.privacy_budgets DROP COLUMN marker")     # a ledger written before markers
    dp_query(con, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) AS n FROM people")
    drop_budget(con, "people")
    create_budget(con, "people", epsilon=2.0, delta=1e-4, privacy_unit="pid")
    execute(con, "DROP PRIVACY BUDGET ON people")
    assert con.execute("SELECT count(*) FROM anon.privacy_budgets WHERE dropped_at IS NULL").fetchall()[0][0] == 0
    con.close()


def test_a_taxonomy_a_release_uses_is_dropped_only_with_force(path):
    """Hostile round 4, X03: `taxonomy drop` of a taxonomy a live release uses was exit 0 and the release's REFRESH
    then failed until it was rebuilt. Now refused (API and CLI exit 2, nothing changed) naming the release; --force
    drops it; once the release is dropped the taxonomy drops without it."""
    con = duckdb.connect(str(path))
    store.store_taxonomy(con, from_mapping("ages", {str(a): [f"{a // 10 * 10}s"] for a in range(10, 30)}))
    anon_sql.release(con, {"name": "uses_ages", "source": "people", "method": "levels", "seed": 0,
                           "attributes": {"pid": {"role": "identifier"},
                                          "age": {"role": "quasi", "taxonomy": "ages"}},
                           "privacy": {"k": 5}, "method_params": {"levels": {"age": 1}}})
    assert store.taxonomy_users(con, "ages") == ["uses_ages"]
    before = state(con)
    with pytest.raises(TaxonomyError, match=r"used by release\(s\) \['uses_ages'\].*--force"):
        store.drop_taxonomy(con, "ages")
    assert state(con) == before
    con.close()
    refused = cli("taxonomy", "drop", "ages", "--db", str(path))
    assert refused.returncode == 2 and "uses_ages" in refused.stderr and "--force" in refused.stderr
    forced = cli("taxonomy", "drop", "ages", "--db", str(path), "--force")
    assert forced.returncode == 0, forced.stderr
    con = duckdb.connect(str(path))
    assert store.load_taxonomy(con, "ages") is None
    store.store_taxonomy(con, from_mapping("ages", AGES))
    execute(con, "DROP ANONYMIZED VIEW uses_ages")
    assert store.taxonomy_users(con, "ages") == []
    store.drop_taxonomy(con, "ages")
    assert store.load_taxonomy(con, "ages") is None
