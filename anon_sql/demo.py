"""``anon-sql demo``: the one-command tour — load built-in data, release it under a policy, print the evidence."""
from __future__ import annotations

from importlib import resources
from typing import Callable

import duckdb
from sqlglot import exp

from . import catalog
from .methods import REGISTRY, load_all
from .policy import Policy
from .release import release
from .source import file_relation
from .sqlbuild import ident, render


def demo_policy() -> Policy:
    """The built-in demo policy (anon_sql/examples/adult_demo.toml)."""
    text = resources.files("anon_sql.examples").joinpath("adult_demo.toml").read_text(encoding="utf-8")
    return Policy.from_toml(text)


def load_demo_data(con: duckdb.DuckDBPyConnection, table: str = "adult_sample") -> None:
    """Create ``table`` from the packaged 3,000-row Adult sample."""
    path = resources.files("anon_sql.examples").joinpath("adult_sample.csv")
    with resources.as_file(path) as real:
        query = exp.select("*").from_(file_relation(str(real)))
        con.execute(render(exp.Create(this=exp.Table(this=ident(table)), kind="TABLE", replace=True,
                                      expression=query)))


def run_demo(con: duckdb.DuckDBPyConnection, echo: Callable[[str], None] = print) -> None:
    """Run the tour on ``con`` and print each step."""
    load_demo_data(con)
    catalog.install(con)
    policy = demo_policy()
    load_all()
    if policy.method not in REGISTRY:
        policy = policy.replace(method="levels")
    n = con.execute("SELECT count(*) FROM adult_sample").fetchall()[0][0]
    echo(f"== source: adult_sample ({n} records, built-in sample of UCI Adult)")
    echo(f"== policy: {policy.name} — method {policy.method}, quasi-identifiers {policy.quasi}, "
         f"sensitive {policy.sensitive}, k = {policy.privacy.k}, l = {policy.privacy.l_diversity}, "
         f"max_suppression = {policy.privacy.max_suppression}")
    rel = release(con, policy, replace=True)
    echo(f"== plan: {rel.plan}")
    echo(f"== release {rel.name}: {rel.records_in} in, {rel.records_out} released, {rel.suppressed} suppressed, "
         f"{len(rel.classes)} equivalence classes")
    head = con.execute(render(exp.select("*").from_(exp.Table(this=ident(rel.name))).limit(8))).df()
    echo(head.to_string(index=False))
    echo("== checks (SQL over the released table):")
    echo(rel.checks.to_string(index=False))
    echo("== metrics:")
    for k, v in rel.metrics.items():
        echo(f"  {k:22s} {v:.6g}")
    verdict = "VERIFIED" if rel.passed else "NOT VERIFIED"
    echo(f"== {verdict}: query it with plain SQL, e.g. SELECT * FROM {rel.name} WHERE ec_id = 1")
