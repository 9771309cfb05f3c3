"""Issue 28.8: the level plan `check` matches a population through (k-map, δ-presence) is verified against the
released values, never trusted. A release at level 1 of a zip taxonomy (1000*, 1001*) with k-map 10 over a
population of 20: the plan is forged in a copy of the working database and of the shared file, and `check` exits 3
naming the quasi-identifier and the level, where the unforged copies pass. A taxonomy whose generalized values
repeat its leaves cannot tell the levels apart from the table: there the check fails closed.

Golden numbers by hand: population 10001 ×4, 10002 ×6, 10011 ×5, 10012 ×5 (1000*: 10, 1001*: 10); sample 10001 ×2,
10002 ×1, 10011 ×3, 10012 ×1.
"""
from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from click.testing import CliRunner

import anon_sql
from anon_sql.cli.main import main

ZIPS = {"10001": (2, 4), "10002": (1, 6), "10011": (3, 5), "10012": (1, 5)}     # zip: (sample, population)


def _tables(c, zips: dict[str, tuple[int, int]]) -> None:
    sample = [z for z, (n, _) in zips.items() for _ in range(n)]
    pop = [z for z, (_, n) in zips.items() for _ in range(n)]
    c.execute("CREATE TABLE sample AS SELECT unnest(?::VARCHAR[]) AS zip, 'x' AS s", [sample])
    c.execute("CREATE TABLE pop AS SELECT unnest(?::VARCHAR[]) AS zip", [pop])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A working database with release `rel` (level 1, k-map 10) and its shared file with the population beside."""
    root = tmp_path_factory.mktemp("plan")
    taxonomy = root / "zip.csv"
    taxonomy.write_text("10001;1000*;*\n10002;1000*;*\n10011;1001*;*\n10012;1001*;*\n")
    work, shared = str(root / "w.duckdb"), str(root / "rel.duckdb")
    c = duckdb.connect(work)
    _tables(c, ZIPS)
    anon_sql.release(c, {"name": "rel", "source": "sample", "method": "levels",
                         "method_params": {"levels": {"zip": 1}},
                         "attributes": {"zip": {"role": "quasi", "taxonomy": str(taxonomy)},
                                        "s": {"role": "insensitive"}},
                         "privacy": {"k": 1, "k_map": {"k": 10, "population": "pop"},
                                     "delta_presence": {"delta_max": 0.4, "population": "pop"}}})
    anon_sql.export(c, "rel", shared)
    c.close()
    s = duckdb.connect(shared)
    s.execute("ATTACH ? AS w (READ_ONLY)", [work])
    s.execute("CREATE TABLE pop AS SELECT * FROM w.pop")
    s.execute("DETACH w")
    s.close()
    return {"work": work, "shared": shared}


@pytest.fixture
def copies(files, tmp_path):
    out = {}
    for kind, path in files.items():
        out[kind] = str(tmp_path / f"{kind}.duckdb")
        shutil.copy(path, out[kind])
    return out


def check(path: str):
    return CliRunner().invoke(main, ["check", "rel", "--db", path])


def forge(copies: dict[str, str], level) -> None:
    """The plan's level of zip set to ``level`` in the catalog row and in the shared file's metadata row."""
    for path, table, column, where in ((copies["work"], "anon.releases", "plan", "release = 'rel'"),
                                       (copies["shared"], "rel__metadata", "plan", "true")):
        c = duckdb.connect(path)
        plan = json.loads(c.execute(f"SELECT {column} FROM {table} WHERE {where}").fetchall()[0][0])
        plan["zip"] = level
        c.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", [json.dumps(plan)])
        c.close()


def test_unforged_copies_pass(copies):
    for path in copies.values():
        result = check(path)
        assert result.exit_code == 0, result.output
        c = duckdb.connect(path, read_only=True)
        frame = anon_sql.check(c, "rel").set_index("check")
        c.close()
        assert frame.loc["k_map", "worst_value"] == 10 and frame.loc["delta_presence", "worst_value"] == 0.4


@pytest.mark.parametrize("level", [0, 2])
def test_a_plan_forged_to_another_level_fails_naming_it(copies, level):
    forge(copies, level)
    for path in copies.values():
        result = check(path)
        assert result.exit_code == 3, result.output
        assert "'zip'" in result.output and f"level {level} of taxonomy" in result.output
        assert "'1000*'" in result.output        # the released values that are not values of that level


@pytest.mark.parametrize("level", [9, -1, "1", 1.5, None])
def test_a_plan_level_that_does_not_exist_fails(copies, level):
    forge(copies, level)
    for path in copies.values():
        result = check(path)
        assert result.exit_code == 3, result.output
        assert "'zip'" in result.output and "does not have" in result.output


def test_a_released_value_edited_out_of_the_level_fails(copies):
    """The plan left alone, the table edited to a leaf value (finer than its level): named as well."""
    c = duckdb.connect(copies["work"])
    c.execute("ALTER TABLE rel ALTER zip TYPE VARCHAR")
    c.execute("UPDATE rel SET zip = '10001' WHERE zip = '1000*'")
    c.close()
    result = check(copies["work"])
    assert result.exit_code == 3 and "'10001'" in result.output and "level 1 of taxonomy" in result.output


def test_levels_the_table_cannot_tell_apart_fail_closed(tmp_path):
    """A taxonomy whose level 1 reuses leaf labels (a, b → a; c → c): a table of a and c reads as level 0 or 1,
    where `a` stands for {a} or {a, b}. Released at level 0 with k-map 2 (a: 2 in the population), then the plan
    forged to level 1 and the policy to k-map 5 (a would stand for 7 people): on the code before, the check
    passed. Now the check refuses to guess, on the forged file and on the honest one alike."""
    taxonomy = tmp_path / "t.csv"
    taxonomy.write_text("a;a;*\nb;a;*\nc;c;*\n")
    path = str(tmp_path / "w.duckdb")
    c = duckdb.connect(path)
    _tables(c, {"a": (1, 2), "b": (0, 5), "c": (1, 5)})
    anon_sql.release(c, {"name": "rel", "source": "sample", "method": "levels",
                         "method_params": {"levels": {"zip": 0}},
                         "attributes": {"zip": {"role": "quasi", "taxonomy": str(taxonomy)},
                                        "s": {"role": "insensitive"}},
                         "privacy": {"k": 1, "k_map": {"k": 2, "population": "pop"}}})
    c.close()
    honest = check(path)
    assert honest.exit_code == 3 and "level(s) [1]" in honest.output and "cannot be confirmed" in honest.output
    c = duckdb.connect(path)
    row = c.execute("SELECT plan, policy_json FROM anon.releases WHERE release = 'rel'").fetchall()[0]
    plan, policy = json.loads(row[0]), json.loads(row[1])
    plan["zip"], policy["privacy"]["k_map"]["k"] = 1, 5
    c.execute("UPDATE anon.releases SET plan = ?, policy_json = ? WHERE release = 'rel'",
              [json.dumps(plan), json.dumps(policy)])
    c.close()
    forged = check(path)
    assert forged.exit_code == 3 and "level(s) [0]" in forged.output
