"""Issue 28.8's ``records_in``: a release records its source's digest (records, rows, an order-independent content
hash computed in SQL) and `check` compares it when the source is there, naming its basis otherwise; and issue
28.7's names: a source string is read whole first (``"Sales.2024"``), then as ``schema.table``, by every caller —
the check's recount, the metrics that read the source, assess."""
from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql import metrics
from anon_sql.cli.main import main
from anon_sql.data.source import readable_relation, relation_exists
from anon_sql.policy.model import Policy
from anon_sql.runner.digests import source_digest


def people(n: int = 120, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(20, 60, n), "zip": rng.choice(["130", "131", "148"], n),
                         "sex": rng.choice(["F", "M"], n), "dx": rng.choice(["flu", "cold", "ulcer"], n)})


def policy(name: str, source: str) -> dict:
    return {"name": name, "source": source, "method": "mondrian", "seed": 1,
            "attributes": {"age": {"role": "quasi"}, "zip": {"role": "quasi"}, "sex": {"role": "quasi"},
                           "dx": {"role": "sensitive"}},
            "privacy": {"k": 4}}


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "w.duckdb")
    c = duckdb.connect(path)
    frame = people()
    c.execute("CREATE TABLE patients AS SELECT * FROM frame")
    anon_sql.release(c, policy("rel", "patients"))
    c.close()
    return path


def basis(db: str, name: str = "rel") -> str:
    c = duckdb.connect(db, read_only=True)
    got = anon_sql.check(c, name).set_index("check")["basis"].to_dict()
    c.close()
    assert got["reconciliation"] == got["max_suppression"]
    return got["reconciliation"]


def test_the_digest_is_recorded_and_verified(db):
    c = duckdb.connect(db, read_only=True)
    digest = json.loads(c.execute("SELECT source_digest FROM anon.releases WHERE release = 'rel'").fetchall()[0][0])
    c.close()
    assert digest["records"] == digest["rows"] == 120 and digest["columns"] == ["age", "zip", "sex", "dx"]
    assert basis(db) == "source"


def test_a_source_changed_without_changing_its_count_is_named(db):
    """Two rows' diagnoses swapped: the same count and the same values per column, other rows. The count alone
    said "source"; the digest says the source holds other rows now (the figures rest on the catalog's word)."""
    c = duckdb.connect(db)
    first = c.execute("SELECT rowid, dx FROM patients ORDER BY rowid").fetchall()
    a = first[0]
    b = next(r for r in first if r[1] != a[1])
    c.execute("UPDATE patients SET dx = ? WHERE rowid = ?", [b[1], a[0]])
    c.execute("UPDATE patients SET dx = ? WHERE rowid = ?", [a[1], b[0]])
    c.close()
    got = basis(db)
    assert got.startswith("catalog (unverified)") and "other rows" in got
    result = CliRunner().invoke(main, ["check", "rel", "--db", db])
    assert result.exit_code == 0 and "other rows" in result.output    # a basis, not a failed requirement


def test_the_same_rows_in_another_order_keep_the_digest(db):
    c = duckdb.connect(db)
    c.execute("CREATE TABLE shuffled AS SELECT * FROM patients ORDER BY hash(rowid * 7919)")
    c.execute("DROP TABLE patients")
    c.execute("ALTER TABLE shuffled RENAME TO patients")
    c.close()
    assert basis(db) == "source"


def test_digest_hash_is_order_independent_and_content_sensitive():
    """The hash against itself over permutations (hypothesis-free: every permutation of a small table) and a
    one-cell change; the record count against pandas with a count column."""
    c = duckdb.connect()
    frame = pd.DataFrame({"a": [1, 2, 2, 3], "b": ["x", "y", "y", None], "n": [1, 2, 3, 4]})
    p = Policy.from_dict({"name": "r", "source": "t", "method": "mondrian", "count_column": "n",
                          "attributes": {"a": {"role": "quasi"}, "b": {"role": "quasi"}}, "privacy": {"k": 2}})
    seen = set()
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]):
        shuffled = frame.iloc[order]
        c.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM shuffled")
        d = source_digest(c, p)
        assert d["records"] == int(frame["n"].sum()) and d["rows"] == 4
        seen.add(d["hash"])
    assert len(seen) == 1
    c.execute("UPDATE t SET b = 'z' WHERE a = 3")
    assert source_digest(c, p)["hash"] not in seen
    c.close()


def test_no_digest_recorded_and_another_duckdbs_digest_fall_back_to_the_count(db):
    c = duckdb.connect(db)
    row = json.loads(c.execute("SELECT source_digest FROM anon.releases WHERE release = 'rel'").fetchall()[0][0])
    c.execute("UPDATE anon.releases SET source_digest = ? WHERE release = 'rel'",
              [json.dumps({**row, "hash": "1", "duckdb": "0.0.1"})])
    c.close()
    assert basis(db) == "source (records recounted; the content digest was taken by DuckDB 0.0.1)"
    c = duckdb.connect(db)
    c.execute("UPDATE anon.releases SET source_digest = NULL WHERE release = 'rel'")
    c.close()
    assert basis(db) == "source (records recounted; no content digest recorded)"


def test_a_large_source_records_its_count_only(tmp_path, monkeypatch):
    """Over DIGEST_MAX_RECORDS no row is hashed at release (its cost, docs/check.md): the count is recorded and
    recounted, and the basis says the content was not digested."""
    from anon_sql.runner import digests

    monkeypatch.setattr(digests, "DIGEST_MAX_RECORDS", 100)
    path = str(tmp_path / "w.duckdb")
    c = duckdb.connect(path)
    frame = people()
    c.execute("CREATE TABLE patients AS SELECT * FROM frame")
    anon_sql.release(c, policy("rel", "patients"))
    recorded = json.loads(c.execute("SELECT source_digest FROM anon.releases").fetchall()[0][0])
    c.close()
    assert recorded == {"records": 120, "skipped": "the source has more than 100 records"}
    assert basis(path) == "source (records recounted; no content digest recorded: the source has more than 100 records)"


def test_a_dotted_name_is_one_name_first_then_schema_table():
    c = duckdb.connect()
    c.execute('CREATE TABLE "Sales.2024" (x INTEGER)')
    c.execute("CREATE SCHEMA s")
    c.execute("CREATE TABLE s.t (x INTEGER)")
    c.execute('CREATE TABLE "2024" (x INTEGER)')       # a split of "Sales.2024" must not find this one either
    assert relation_exists(c, "Sales.2024") and relation_exists(c, "s.t") and relation_exists(c, "main.2024")
    assert not relation_exists(c, "Sales.2025") and not relation_exists(c, "s.u")
    c.execute('DROP TABLE "Sales.2024"')
    assert not relation_exists(c, "Sales.2024")         # no schema "Sales": not read as table "2024"
    assert readable_relation(c, "s.t").sql() == '"s"."t"' and readable_relation(c, "nope.csv") is None
    c.close()


@pytest.mark.parametrize("source", ["Sales.2024", "main.sales"])
def test_a_dotted_or_qualified_source_through_check_metrics_and_assess(tmp_path, source):
    """A release from ``"Sales.2024"`` (one name) or ``main.sales`` (schema.table): check recounts the source
    (basis "source"; ``main.sales`` was read as one name "main.sales" and left unverified before), the metrics that
    read the source find it after the release (the working ``__source`` view is gone by then), and assess reads it."""
    path = str(tmp_path / "w.duckdb")
    c = duckdb.connect(path)
    frame = people()
    table = '"Sales.2024"' if source == "Sales.2024" else "main.sales"
    c.execute(f"CREATE TABLE {table} AS SELECT * FROM frame")
    anon_sql.release(c, policy("rel", source))
    got = metrics.compute(c, "rel", ["leakage_pre"])
    direct = metrics.compute(c, "rel", ["leakage_post"])
    assert np.isfinite(got["leakage_pre"]) and np.isfinite(direct["leakage_post"])
    # the oracle: the source's normalized entropy leakage computed from pandas needs no product code
    assessed = anon_sql.assess(c, source, ["age", "zip", "sex"])
    assert assessed is not None
    c.close()
    assert basis(path) == "source"


def test_the_digest_reads_the_source_not_the_sample_a_safepub_release_plans_on():
    """The release reuses the source it resolved for the digest (issue 29.1): the source as registered, never the
    seeded sample SafePub releases from — the same digest a fresh reading of the policy's source gives."""
    from anon_sql.cli.demo import load_demo_data

    c = duckdb.connect()
    anon_sql.install(c)
    load_demo_data(c, "adult_sample")
    levels = {"age": 3, "sex": 0, "race": 0, "marital-status": 1, "education": 2}
    attrs = {q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in levels}
    attrs["patient_id"] = {"role": "identifier"}
    p = {"name": "dp", "source": "adult_sample", "method": "levels", "seed": 8675309, "default_role": "insensitive",
         "attributes": attrs, "privacy": {"differential_privacy": {"epsilon": 2.0, "delta": 1e-5}},
         "method_params": {"levels": levels}}
    rel = anon_sql.release(c, p)
    rows = c.execute("SELECT count(*) FROM adult_sample").fetchall()[0][0]
    assert rel.info["source_digest"] == source_digest(c, Policy.from_dict(p))
    assert rel.info["source_digest"]["rows"] == rows
