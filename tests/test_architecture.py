"""The architecture of docs/architecture.md holds: the import-linter contracts of pyproject.toml (layers cli → api →
runner → stages → engines → compile → methods → models, no import cycle between the modules of a package) are kept,
and no module imports another module's private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
    for path in sorted((ROOT / "anon_sql").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        offenders.append(f"{path.relative_to(ROOT)}: {node.module}.{a.name}")
    assert not offenders, offenders


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
