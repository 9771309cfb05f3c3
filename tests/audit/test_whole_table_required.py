"""`check` shows what a whole-table model requires (mends 12): l-diverse slicing's max p(t, s) <= 1/l (spec/02 §2.3,
Definition 10) and k-anonymity with wildcards' matching records >= k, where the row's ``required`` read ``-``
before (the requirement texts skipped whole-table models). Golden texts from the policies' l and k."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from anon_sql.cli.main import main
from anon_sql.models import build_models, requirement_texts
from anon_sql.policy.model import Policy
from test_check_declared import SLICING, released  # noqa: F401  (released: the slicing and local-suppression releases)


def _checks(db: str, name: str) -> dict[str, dict]:
    result = CliRunner().invoke(main, ["check", name, "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    return {r["check"]: r for r in json.loads(result.output[result.output.index("{\n"):])["checks"]}


def test_slicing_l_diversity_shows_its_requirement(released):
    row = _checks(released, "sl")["slicing_l_diversity"]
    assert row["required"] == "max p(t, s) <= 1/2, rows" and row["passed"]
    assert row["worst_value"] <= 1 / 2   # the worst value the requirement reads against
    result = CliRunner().invoke(main, ["check", "sl", "--db", released])
    line = next(x for x in result.output.splitlines() if x.startswith("slicing_l_diversity"))
    assert "max p(t, s) <= 1/2, rows" in line


def test_wildcard_k_shows_its_requirement(released):
    row = _checks(released, "ls")["k_wildcard"]
    assert row["required"] == "matching records >= 3 (* matches any value), rows" and row["passed"]
    assert row["worst_value"] >= 3


@pytest.mark.parametrize("l", [2, 2.5, 4])
def test_every_whole_table_model_has_a_requirement_text(l):
    policy = Policy.from_dict({**SLICING, "privacy": {"k": 3, "l_diversity": {"kind": "slicing", "l": l}}})
    models = build_models(policy)
    whole = [m for m in models if m.whole_table]
    assert whole, "the slicing policy builds a whole-table model"
    texts = requirement_texts(models)
    assert {m.name for m in whole} <= set(texts)
    assert texts["slicing_l_diversity"] == f"max p(t, s) <= 1/{l:g}"
    assert texts["k"] == "k >= 3"   # the per-class texts unchanged
