"""The shareable file (anon_sql.publish.share): `release --to`, `release(to=)` and `export` write the released table, its
class table and one metadata row — no raw value, no θ noise mark, no row of anything else — into a new file that
a real DuckDB 1.x client (the `duckdb-cli` package, 1.5.6) opens. Only recorded releases are written, only while
they pass their checks, never over an existing file."""
from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main
from anon_sql.publish.share import STORAGE_VERSION
from conftest import load_theta_noise
from test_check_tamper import PATIENTS, levels_policy, theta_policy

NAMES = ["Ann", "Bob", "Cy", "Di", "Ed", "Fa", "Gu", "Ho", "Ina", "Jo", "Kai", "Lu"]


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute(PATIENTS)
    load_theta_noise(c)
    yield c
    c.close()


def everything(path) -> dict[str, pd.DataFrame]:
    """Every table of a DuckDB file, read back with this process's duckdb."""
    c = duckdb.connect(str(path), read_only=True)
    names = [r[0] for r in c.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    views = c.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall()[0][0]
    out = {n: c.execute(f'SELECT * FROM "{n}"').df() for n in names}
    c.close()
    assert views == 0
    return out


def test_release_to_duckdb_holds_the_release_and_nothing_raw(con, tmp_path):
    target = tmp_path / "share.duckdb"
    rel = anon_sql.release(con, levels_policy(), to=target)
    assert rel.info["shared"] == [str(target)]
    tables = everything(target)
    assert sorted(tables) == ["rl", "rl__classes", "rl__metadata"]
    # the released rows exactly as in the working database (an independent read of both)
    mine = con.execute("SELECT * FROM rl").df()
    pd.testing.assert_frame_equal(tables["rl"].astype(str), mine.astype(str))
    assert len(tables["rl__classes"]) == len(rel.classes) == tables["rl"]["ec_id"].nunique()
    assert tables["rl__classes"]["size"].sum() == rel.records_out == 12
    meta = tables["rl__metadata"].iloc[0]
    assert (meta["records_in"], meta["records_out"], meta["suppressed"]) == (12, 12, 0)
    assert all(c["passed"] for c in json.loads(meta["checks"]))
    assert json.loads(meta["plan"]) == {"age": 1, "sex": 1}
    assert json.loads(meta["policy"])["privacy"]["k"] == 3
    assert {m["metric"] for m in json.loads(meta["metrics"])} >= {"k", "discernibility"}
    # no raw value anywhere: no name, no exact age of the source
    text = "\n".join(f.to_csv() for f in tables.values())
    assert not [n for n in NAMES if n in text]
    assert not [a for a in (34, 35, 36, 37, 44, 45, 46, 47, 52, 55, 57, 58) if f",{a}," in text]


def test_theta_noise_marks_never_leave(con, tmp_path):
    rel = anon_sql.release(con, theta_policy(), to=tmp_path / "t.duckdb")
    assert rel.noise == 1
    tables = everything(tmp_path / "t.duckdb")
    assert "is_noise" in con.execute("SELECT * FROM rt").df().columns
    assert "is_noise" not in tables["rt"].columns and len(tables["rt"]) == 9   # the noise record, unmarked
    assert "noise_flag" not in json.loads(tables["rt__metadata"].iloc[0]["plan"])
    assert "is_noise" not in "\n".join(f.to_csv() for f in tables.values())


def test_parquet_target_is_three_files(con, tmp_path):
    anon_sql.release(con, levels_policy())
    files = anon_sql.export(con, "rl", tmp_path / "rl.parquet")
    assert [f.rsplit("/", 1)[1] for f in files] == ["rl.parquet", "rl.classes.parquet", "rl.metadata.parquet"]
    assert len(pd.read_parquet(files[0])) == 12 and "name" not in pd.read_parquet(files[0]).columns
    assert len(pd.read_parquet(files[2])) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["rl.parquet", "rl.classes.parquet",
                                                                 "rl.metadata.parquet"])


def test_a_duckdb_1x_client_opens_the_file(con, tmp_path):
    pytest.importorskip("duckdb_cli", reason="the duckdb-cli package (dev extra) is the real DuckDB 1.x client")
    target = tmp_path / "share.duckdb"
    anon_sql.release(con, levels_policy(), to=target)
    sql = ("SELECT version(); SELECT count(*), count(DISTINCT ec_id), min(CAST(age AS VARCHAR)) FROM rl; "
           "SELECT sum(size) FROM rl__classes; SELECT records_out FROM rl__metadata;")
    out = subprocess.run([sys.executable, "-m", "duckdb_cli", "-readonly", "-csv", "-noheader", str(target),
                          "-c", sql], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0].startswith("v1."), lines          # a real 1.x client, not this process's duckdb
    assert lines[1:] == ["12,3,[30-39]", "12", "12"]
    assert STORAGE_VERSION == "v1.0.0"


@pytest.mark.parametrize("name", ["patients", "rl__source", "anon_work.rl__source", "rl__checks", "nope"])
def test_export_writes_only_recorded_releases(con, tmp_path, name):
    anon_sql.release(con, levels_policy())
    with pytest.raises(anon_sql.SourceError, match=f"{name!r} is not a release recorded .*\\['rl'\\]"):
        anon_sql.export(con, name, tmp_path / "x.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_no_file_is_ever_overwritten_and_a_bad_target_is_refused_before_the_release(con, tmp_path):
    target = tmp_path / "mine.duckdb"
    target.write_bytes(b"precious")
    with pytest.raises(anon_sql.AnonSQLError, match="already exists.*never overwrites") as err:
        anon_sql.release(con, levels_policy(), to=target)
    assert err.value.exit_code == 2 and target.read_bytes() == b"precious"
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'rl'").fetchall() == [(0,)]
    for bad in (tmp_path / "x.csv", tmp_path / "missing_dir" / "x.duckdb"):
        with pytest.raises(anon_sql.AnonSQLError, match="share target") as err:
            anon_sql.release(con, levels_policy(), to=bad)
        assert err.value.exit_code == 2
    with pytest.raises(anon_sql.PolicyError, match="dry_run"):
        anon_sql.release(con, levels_policy(), to=tmp_path / "x.duckdb", dry_run=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.duckdb"]


def test_an_edited_release_is_not_written(con, tmp_path):
    anon_sql.release(con, levels_policy())
    con.execute("DELETE FROM rl WHERE ec_id = 1")
    with pytest.raises(anon_sql.PrivacyRequirementError, match="fails its checks"):
        anon_sql.export(con, "rl", tmp_path / "x.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_cli_release_to_and_export(tmp_path):
    db = str(tmp_path / "w.duckdb")
    c = duckdb.connect(db)
    c.execute(PATIENTS)
    c.close()
    pol = tmp_path / "p.toml"
    pol.write_text(anon_sql.Policy.from_dict(levels_policy()).to_toml())
    r = CliRunner().invoke(main, ["release", str(pol), "--db", db, "--to", str(tmp_path / "a.duckdb")])
    assert r.exit_code == 0, r.output
    assert f"wrote {tmp_path / 'a.duckdb'}" in r.output
    r = CliRunner().invoke(main, ["export", "rl", "--db", db, "--to", str(tmp_path / "b.duckdb")])
    assert r.exit_code == 0, r.output
    a, b = everything(tmp_path / "a.duckdb"), everything(tmp_path / "b.duckdb")
    assert sorted(a) == sorted(b) == ["rl", "rl__classes", "rl__metadata"]
    pd.testing.assert_frame_equal(a["rl"], b["rl"])
    r = CliRunner().invoke(main, ["release", str(pol), "--db", db, "--dry-run", "--to", str(tmp_path / "c.duckdb")])
    assert r.exit_code == 2 and not (tmp_path / "c.duckdb").exists()


def test_export_from_a_read_only_connection(tmp_path):
    """A data owner may open the working database read-only to share from it: the target is attached read-write."""
    db = tmp_path / "work.duckdb"
    c = duckdb.connect(str(db))
    anon_sql.install(c)
    c.execute(PATIENTS)
    anon_sql.release(c, levels_policy())
    written = c.execute("SELECT * FROM rl ORDER BY ALL").fetchall()
    c.close()
    ro = duckdb.connect(str(db), read_only=True)
    try:
        assert anon_sql.export(ro, "rl", tmp_path / "ro.duckdb") == [str(tmp_path / "ro.duckdb")]
    finally:
        ro.close()
    shared = duckdb.connect(str(tmp_path / "ro.duckdb"), read_only=True)
    assert shared.execute("SELECT * FROM rl ORDER BY ALL").fetchall() == written
    shared.close()


def test_a_stray_write_ahead_log_is_named_as_such(tmp_path):
    """Hostile round 15, E42: a stray `share.duckdb.wal` (no `share.duckdb`) was reported as "share.duckdb already
    exists"; the message names the log now (and the write is still refused: DuckDB would replay it)."""
    from anon_sql.errors import TargetError
    from anon_sql.publish.share import targets

    (tmp_path / "share.duckdb.wal").write_bytes(b"\x00" * 16)
    with pytest.raises(TargetError, match=r"share\.duckdb\.wal \(a write-ahead log\) already exists"):
        targets(tmp_path / "share.duckdb")
    assert targets(tmp_path / "other.duckdb") == [tmp_path / "other.duckdb"]
