"""`anon-sql` starts at once: `--help` and `check` import neither scikit-learn, scipy, pyspark nor pandas; `--help`
not even duckdb. Checked on sys.modules in a fresh interpreter (speed itself: bench/bench_startup.py)."""
from __future__ import annotations

import importlib
import json
import subprocess
import types
import sys

import pytest

import anon_sql
from anon_sql import api
from anon_sql.cli.main import DIALECTS, LAZY_COMMANDS, main

HEAVY = ("sklearn", "scipy", "pyspark", "matplotlib")


def loaded_after(code: str) -> set[str]:
    """Top-level modules a fresh interpreter has loaded after running ``code``."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_import_and_help_load_no_heavy_library():
    mods = loaded_after("import anon_sql.cli")
    assert not mods & {*HEAVY, "pandas", "numpy", "duckdb", "sqlglot", "pyarrow"}, mods
    mods = loaded_after("from anon_sql.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert not mods & {*HEAVY, "pandas", "duckdb"}, mods


def test_no_help_loads_a_heavy_library():
    """Every command's --help (lazy commands and subcommands included), in one fresh interpreter: no pandas, numpy,
    scipy, scikit-learn, sqlglot, pyarrow or duckdb is loaded to print it."""
    code = """
import click
from click.testing import CliRunner
from anon_sql.cli.main import main

def paths(group, path=()):
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        yield (*path, name)
        if isinstance(cmd, click.Group):
            yield from paths(cmd, (*path, name))

helped = [p for p in paths(main) if CliRunner().invoke(main, [*p, "--help"]).output.startswith("Usage:")]
assert len(helped) >= 15, helped
"""
    heavy = loaded_after(code) & {*HEAVY, "pandas", "numpy", "sqlglot", "pyarrow", "duckdb"}
    assert not heavy, heavy


def test_check_loads_no_scikit_learn_scipy_or_pandas(seed_db, monkeypatch):
    """The first check of a release compiles its program (sqlglot, numpy, the compiler; no pandas); a later one runs
    the cached program and loads none of them (anon_sql.audit.program)."""
    db = seed_db[0]
    monkeypatch.setenv("ANON_SQL_CACHE", str(seed_db[2] / "cache"))      # empty: the first check compiles
    code = (f"from anon_sql.cli.main import main\ntry:\n    main(['check', 'r000', '--db', {db!r}])\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code")
    mods = loaded_after(code)
    assert "duckdb" in mods and "sqlglot" in mods and not mods & {*HEAVY, "pandas"}, mods
    mods = loaded_after(code)
    assert "duckdb" in mods and not mods & {*HEAVY, "pandas", "numpy", "sqlglot", "pyarrow"}, mods


@pytest.mark.parametrize("command", ["release", "run"])
def test_the_first_check_after_a_release_runs_the_program_the_release_compiled(seed_db, monkeypatch, command):
    """`anon-sql release` and a CREATE / REFRESH ANONYMIZED VIEW of `anon-sql run` (or `shell`) cache the check
    program of what they released."""
    from click.testing import CliRunner

    from anon_sql.policy.model import Policy

    db, policy, tmp = seed_db
    monkeypatch.setenv("ANON_SQL_CACHE", str(tmp / "cache"))
    if command == "release":
        args = ["release", policy, "--db", db, "--replace"]
    else:
        script = tmp / "s.sql"
        script.write_text(Policy.from_toml(policy).to_sql().replace("CREATE ANONYMIZED VIEW",
                                                                    "CREATE OR REPLACE ANONYMIZED VIEW") + ";")
        args = ["run", str(script), "--db", db]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert len(list((tmp / "cache" / "checks").glob("*.json"))) == 1
    mods = loaded_after(f"from anon_sql.cli.main import main\ntry:\n    main(['check', 'r000', '--db', {db!r}])\n"
                        "except SystemExit as e:\n    assert e.code in (0, None), e.code")
    assert "duckdb" in mods and not mods & {*HEAVY, "pandas", "numpy", "sqlglot"}, mods


@pytest.mark.parametrize("cache", ["folder", "off"])
def test_the_python_api_release_caches_the_check_program_too(tmp_path, monkeypatch, cache):
    """``anon_sql.runner.run`` caches the check program of what it released, as `anon-sql release` does: the first
    `anon-sql check` after it runs that program (no sqlglot). ``ANON_SQL_CACHE=off``: nothing compiled ahead,
    nothing written."""
    import duckdb

    from anon_sql.audit import recheck as audit
    from conftest import load_seed000, seed000_policy

    folder = tmp_path / "cache"
    monkeypatch.setenv("ANON_SQL_CACHE", str(folder) if cache == "folder" else "off")
    compiled = []
    real = audit.build_models
    monkeypatch.setattr(audit, "build_models", lambda *a: compiled.append(a) or real(*a))
    db = str(tmp_path / "a.duckdb")
    c = duckdb.connect(db)
    anon_sql.install(c)
    load_seed000(c)
    anon_sql.release(c, seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}))
    anon_sql.release(c, {**seed000_policy(method_params={"levels": {"zip": 1, "age": 1}}), "name": "r001"},
                     dry_run=True)                                               # a dry run: no program
    c.close()
    if cache == "off":
        assert not folder.exists() and not compiled
        return
    assert len(compiled) == 1 and len(list((folder / "checks").glob("*.json"))) == 1
    mods = loaded_after(f"from anon_sql.cli.main import main\ntry:\n    main(['check', 'r000', '--db', {db!r}])\n"
                        "except SystemExit as e:\n    assert e.code in (0, None), e.code")
    assert "duckdb" in mods and not mods & {*HEAVY, "pandas", "numpy", "sqlglot"}, mods


def test_lazy_command_table_matches_the_commands():
    """--help lists lazy commands from a table: it must say what the command's own docstring says."""
    for name, (module, attr, help_text) in LAZY_COMMANDS.items():
        cmd = getattr(importlib.import_module(module), attr)
        assert cmd.name == name and cmd.get_short_help_str(10_000) == help_text, name
        assert main.get_command(None, name) is cmd
    assert DIALECTS == api.DIALECTS


def test_package_names_resolve_lazily_and_release_stays_the_function():
    import anon_sql.runner.run  # noqa: F401  (the runner module is not anon_sql.release: no name is both)

    assert callable(anon_sql.release) and anon_sql.release.__name__ == "release"
    assert not any(isinstance(getattr(anon_sql, n), types.ModuleType) for n in anon_sql.__all__)
    for name in anon_sql.__all__:
        assert getattr(anon_sql, name) is not None, name
    with pytest.raises(AttributeError):
        anon_sql.no_such_name
