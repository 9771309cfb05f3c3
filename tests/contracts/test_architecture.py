"""The architecture of docs/architecture.md holds: the import-linter contracts of pyproject.toml (layers cli → api →
runner → stages → engines → compile → methods → models, no import cycle between the modules of a package) are kept,
and no module imports another module's private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "anon_sql"


def test_import_linter_contracts_are_kept(monkeypatch, capsys):
    pytest.importorskip("importlinter")
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    monkeypatch.chdir(ROOT)
    kept = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    assert kept, capsys.readouterr().out


def test_no_module_imports_a_private_name():
    offenders = []
    for path in sorted([*(ROOT / "anon_sql").rglob("*.py"), *(ROOT / "udfs").rglob("*.py"), *(ROOT / "sql").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        offenders.append(f"{path.relative_to(ROOT)}: {node.module}.{a.name}")
    assert not offenders, offenders


def test_the_kernels_import_nothing_of_the_package():
    """udfs/ (installed as anon_sql.udfs) is the bottom layer: numpy kernels and their registration import nothing
    of anon_sql but the packaged SQL (anon_sql.sql, data). import-linter cannot see across the setuptools mapping."""
    offenders = []
    for path in sorted((ROOT / "udfs").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = ("anon_sql.udfs." + (node.module or "")) if node.level == 1 else \
                    ("anon_sql." + (node.module or "")) if node.level == 2 else (node.module or "")
                names = [a.name for a in node.names]
                if target.startswith("anon_sql") and not (target.startswith("anon_sql.udfs")
                                                          or target == "anon_sql.sql" or names == ["sql"]):
                    offenders.append(f"udfs/{path.name}:{node.lineno} {target} {names}")
            elif isinstance(node, ast.Import):
                offenders += [f"udfs/{path.name}:{node.lineno} {a.name}" for a in node.names
                              if a.name.startswith("anon_sql") and not a.name.startswith("anon_sql.udfs")]
    assert not offenders, offenders


def test_the_top_level_is_the_public_face():
    """The folders are the layers: a flat module of anon_sql/ is the public face, and there are at most a dozen."""
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 12, flat
    assert set(flat) <= {"__init__.py", "api.py", "errors.py", "spark.py"}, flat


def test_lazily_imported_pandas_is_imported_where_used():
    """Modules on the `anon-sql check` path import pandas inside the functions that need it (tests/test_cli_startup):
    every function of such a module that uses ``pd`` must import it in its own scope or an enclosing one."""
    import ast

    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Import) and any(a.asname == "pd" for a in n.names) for n in tree.body):
            continue

        def visit(node: ast.AST, imported: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    here = imported or any(isinstance(n, ast.Import) and any(a.asname == "pd" for a in n.names)
                                           for n in ast.walk(child))
                    annotations = {id(x) for a in ast.walk(child.args) if isinstance(a, ast.arg) and a.annotation
                                   for x in ast.walk(a.annotation)}
                    annotations |= {id(x) for x in ast.walk(child.returns)} if child.returns else set()
                    body_uses = [n.lineno for s in child.body for n in ast.walk(s)
                                 if isinstance(n, ast.Name) and n.id == "pd"
                                 and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
                    if body_uses and not here:
                        missing.append(f"{path.relative_to(PACKAGE.parent)}:{body_uses[0]} {child.name}")
                    visit(child, here)
                elif isinstance(child, ast.ClassDef):
                    visit(child, imported)
        visit(tree, False)
    assert not missing, missing


# the [privacy] keys that are a model's settings (max_suppression is the release's budget, not a model)
MODEL_KEYS = {"k", "requirements", "l_diversity", "t_closeness", "simpson", "theta", "p_sensitive", "alpha",
              "beta_likeness", "delta_disclosure", "k_map", "delta_presence"}


def test_models_are_reached_through_their_contract():
    """Issue 14.6: the compiler and the verify stage never name a concrete model (no type tests), and no method
    reads a model's settings from the policy's [privacy] table — they read the resolved models."""
    import anon_sql.models as models

    concrete = {n for n in models.__all__ if isinstance(getattr(models, n), type)
                and issubclass(getattr(models, n), models.PrivacyModel) and n != "PrivacyModel"}
    offenders = []
    for rel in (*(f"compiler/{p.name}" for p in sorted((PACKAGE / "compiler").glob("*.py"))), "runner/verify.py"):
        tree = ast.parse((ROOT / "anon_sql" / rel).read_text(encoding="utf-8"))
        offenders += [f"{rel}: {node.id}" for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in concrete]
    for path in sorted((ROOT / "anon_sql" / "methods").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in MODEL_KEYS and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "privacy"):
                offenders.append(f"methods/{path.name}: privacy.{node.attr}")
    assert not offenders, offenders


def test_no_decision_is_read_from_a_plans_info():
    """Issue 14.5: plans are typed (``LevelPlan`` / ``AssignmentPlan`` fields); ``plan.info`` is the method's report.
    The compiler, the runner, the stages, the engines and the catalog read no key of a plan's ``info`` except to word
    a message (inside an f-string)."""
    files = [*sorted((PACKAGE / "compiler").glob("*.py")), *sorted((PACKAGE / "runner").glob("*.py")),
             *sorted((PACKAGE / "catalog").glob("*.py")), *sorted((PACKAGE / "engines").rglob("*.py"))]
    offenders = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_message = {id(n) for s in ast.walk(tree) if isinstance(s, ast.JoinedStr) for n in ast.walk(s)}
        for node in ast.walk(tree):
            if id(node) in in_message or not isinstance(node, ast.Attribute) or node.attr != "info":
                continue
            if isinstance(node.value, ast.Name) and node.value.id == "plan":
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders


def test_no_method_imports_a_concrete_model_class():
    """Issue 27.3: methods reach models through the contract (``find`` by name, ``make_model`` for the guides they
    partition with, the model's flags and checks), never by importing a model class."""
    import importlib

    from anon_sql.models import PrivacyModel

    offenders = []
    for path in sorted((PACKAGE / "methods").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("models"):
                continue
            module = importlib.import_module("anon_sql." + node.module) if node.level == 2 else None
            for a in node.names:
                value = getattr(module, a.name, None)
                if isinstance(value, type) and issubclass(value, PrivacyModel) and value is not PrivacyModel:
                    offenders.append(f"methods/{path.name}:{node.lineno} {a.name}")
    assert not offenders, offenders



# public functions still defined under one name in several modules (issue 27.5 renamed the two `resolve`s, the report
# `render`s and the policy layer's catalog readers); this list may only shrink: a new shared name fails the test
def test_no_two_public_functions_share_a_name():
    """A name says what the function does: no two public functions of anon_sql/ or udfs/ share a name."""
    where: dict[str, list[str]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "udfs").rglob("*.py")]):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    shared = {name for name, paths in where.items() if len(paths) > 1}
    assert not shared, {n: where[n] for n in shared}


def test_no_module_passes_800_lines():
    """A module does one job: none of anon_sql/ or udfs/ passes 800 lines."""
    long = [f"{p.relative_to(ROOT)}: {n}" for p in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "udfs").rglob("*.py")])
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800]
    assert not long, long


def test_the_compiler_has_no_dialect_branch():
    """Issue 27.4: the view builders read capabilities (compiler/dialect.py's Target), never compare the dialect or
    the engine with a name."""
    offenders = []
    for path in sorted((PACKAGE / "compiler").glob("*.py")):
        if path.name == "dialect.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", None)
                         for c in [node.left, *node.comparators]]
                if {"dialect", "engine"} & set(names):
                    offenders.append(f"compiler/{path.name}:{node.lineno}")
    assert not offenders, offenders


def test_no_result_is_left_open_by_fetchone():
    """DuckDB 2 keeps a result open after ``fetchone()`` until a fetch returns nothing, and the connection then
    refuses ``register`` and other work ("connection has an unfinished result"): a check that had read one row
    (data/source.py's attached-database probe) broke the caller's next ``register``. Fetch whole results instead."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "fetchone":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
