"""``anon-sql demo``: the one-command tour — load built-in data, release it under a policy, print the evidence."""
from __future__ import annotations

import json
from importlib import resources
from typing import Callable

import duckdb
from sqlglot import exp

from ..catalog import store as catalog
from ..catalog.read import recorded_release
from ..methods import REGISTRY, load_all
from ..policy.model import Policy
from ..runner.run import release_with_duckdb
from ..data.source import file_relation
from ..errors import ReleaseExistsError
from ..catalog.ownership import claim_release_name, existing
from ..common.sqlbuild import ident, lit, render
from ..common.wording import counted


def demo_policy() -> Policy:
    """The built-in demo policy (anon_sql/examples/adult_demo.toml)."""
    text = resources.files("anon_sql.examples").joinpath("adult_demo.toml").read_text(encoding="utf-8")
    return Policy.from_toml(text)


DEMO_MARK = "anon_sql demo data: `anon-sql demo` may replace this table"


def load_demo_data(con: duckdb.DuckDBPyConnection, table: str = "adult_sample") -> None:
    """Create ``table`` from the packaged 3,000-row Adult sample, marked by a table comment as the demo's own; a table
    of that name the demo did not create is never replaced (:class:`ReleaseExistsError`)."""
    path = resources.files("anon_sql.examples").joinpath("adult_sample.csv")
    name = exp.Table(this=ident(table))
    with resources.as_file(path) as real:
        query = exp.select("*").from_(file_relation(str(real)))
        _refuse_foreign(con, table, query)
        con.execute(render(exp.Create(this=name, kind="TABLE", replace=True, expression=query)))
    con.execute(render(exp.Comment(this=name.copy(), kind="TABLE", expression=lit(DEMO_MARK))))


def _refuse_foreign(con: duckdb.DuckDBPyConnection, table: str, sample: exp.Select) -> None:
    """Refuse to replace ``table`` unless it is the demo's, as the demo loaded it: marked by the demo's comment, with
    the sample's columns and exactly its rows (hostile round 16: a user added a column and rows to the demo's table,
    and the next demo replaced it, exit 0)."""
    found = existing(con, [table]).get(table.lower())
    if found is None:
        return
    comment = con.execute("SELECT comment FROM duckdb_tables() WHERE database_name = current_database() AND "
                          "schema_name = current_schema() AND table_name = ?", [found[0]]).fetchall()
    if found[0] != table or not comment or comment[0][0] != DEMO_MARK:
        raise ReleaseExistsError(
            f"this database already has a {found[1]} named {found[0]!r} that the demo did not create; the demo never "
            "overwrites your tables: run it on another --db file, or without --db (in memory)")
    mine = exp.select("*").from_(exp.Table(this=ident(table)))
    same_columns = (con.execute(render(mine.limit(0))).description == con.execute(render(sample.limit(0))).description)
    differ = same_columns and any(
        con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(exp.Subquery(
            this=exp.except_(a.copy(), b.copy(), distinct=False), alias=exp.TableAlias(this=ident("d")))))
                    ).fetchall()[0][0] for a, b in ((mine, sample), (sample, mine)))
    if not same_columns or differ:
        raise ReleaseExistsError(
            f"table {table!r} is the demo's but has changed since the demo loaded it (columns or rows added, edited or "
            "removed); the demo never overwrites your changes: run it on another --db file, or without --db (in "
            f"memory), or DROP TABLE {table} first")


def _refuse_foreign_release(con: duckdb.DuckDBPyConnection, policy: Policy) -> None:
    """Refuse a recorded release named like the demo's that is not the demo's own: the demo's policy over the demo's
    marked ``adult_sample`` table (hostile round 10, M18: the demo replaced a user's release named ``adult_demo``)."""
    recorded = recorded_release(con, policy.name)
    if recorded is None:
        return
    table = existing(con, [policy.source]).get(policy.source.lower())
    marked = table is not None and table[0] == policy.source and con.execute(
        "SELECT comment FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = "
        "current_schema() AND table_name = ?", [policy.source]).fetchall() == [(DEMO_MARK,)]
    if recorded.get("source") != policy.source or not _is_demo_policy(recorded.get("policy_json"), policy) or not marked:
        raise ReleaseExistsError(
            f"this database already has a release named {policy.name!r} that the demo did not make (its source is "
            f"{recorded.get('source')!r}, its policy is not the demo's); the demo never replaces your releases: run "
            f"it on another --db file or without --db (in memory), or drop that release first (DROP ANONYMIZED VIEW "
            f"{policy.name}) if you no longer want it")


def _is_demo_policy(recorded_json: str | None, policy: Policy) -> bool:
    """The recorded policy is the demo's: the same settings and attributes, plus only the columns the release gave
    the default role (the recorded policy lists every column of the source)."""
    try:
        recorded = json.loads(recorded_json or "")
    except ValueError:
        return False
    demo = json.loads(policy.to_json())
    if not isinstance(recorded, dict) or not isinstance(recorded.get("attributes"), dict):
        return False
    attributes = recorded.pop("attributes")
    declared = demo.pop("attributes")
    default = {"role": demo.get("default_role")}
    return recorded == demo and all(attributes.get(name) == spec for name, spec in declared.items()) and all(
        spec == default for name, spec in attributes.items() if name not in declared)


def run_demo(con: duckdb.DuckDBPyConnection, echo: Callable[[str], None] = print) -> None:
    """Run the tour on ``con`` and print each step."""
    policy = demo_policy()
    load_all()
    if policy.method not in REGISTRY:
        policy = policy.replace(method="levels")
    _refuse_foreign_release(con, policy)
    try:   # before anything is written: the demo replaces only its own release
        claim_release_name(con, policy.name, replace=True)
    except ReleaseExistsError as err:
        raise ReleaseExistsError(f"{err} (the demo's release is named {policy.name!r}: run the demo on another --db "
                                 "file, or without --db)") from None
    load_demo_data(con, policy.source)
    catalog.install(con)
    n = con.execute("SELECT count(*) FROM adult_sample").fetchall()[0][0]
    echo(f"== source: adult_sample ({counted(n, 'record')}, built-in sample of UCI Adult)")
    echo(f"== policy: {policy.name} — method {policy.method}, quasi-identifiers {policy.quasi}, "
         f"sensitive {policy.sensitive}, k = {policy.privacy.k}, l = {policy.privacy.l_diversity}, "
         f"max_suppression = {policy.privacy.max_suppression}")
    rel = release_with_duckdb(con, policy, replace=True)
    echo(f"== plan: {rel.plan}")
    echo(f"== release {rel.name}: {rel.records_in} in, {rel.records_out} released, {rel.suppressed} suppressed, "
         f"{counted(len(rel.classes), 'equivalence class')}")
    head = con.execute(render(exp.select("*").from_(exp.Table(this=ident(rel.name))).limit(8))).df()
    echo(head.to_string(index=False))
    echo("== checks (SQL over the released table):")
    echo(rel.checks.to_string(index=False))
    echo("== metrics:")
    for k, v in rel.metrics.items():
        echo(f"  {k:22s} {v:.6g}")
    verdict = "VERIFIED" if rel.passed else "NOT VERIFIED"
    echo(f"== {verdict}: query it with plain SQL, e.g. SELECT * FROM {rel.name} WHERE ec_id = 1")
