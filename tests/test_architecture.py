"""The architecture of docs/architecture.md holds: the import-linter contracts of pyproject.toml (layers cli → api →
runner → stages → engines → compile → methods → models, no import cycle between the modules of a package) are kept,
and no module imports another module's private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
