"""Taxonomy level maps as temporary views of the release, read by name.

The compiler writes each generalized quasi-identifier's level map as an inline ``VALUES (leaf, value)`` table. Spark
keeps a SQL temporary view as its text and analyses it again in every statement that reads it, so those tables were
parsed and resolved again in every view over ``__general`` (about a quarter of a 1M release was this planning, with
no job). On Spark each distinct map becomes one view per release, registered from the DataFrame of its ``VALUES`` query
(the view keeps the analysed plan, a ``LocalRelation``: nothing to parse again, no job to make it, small enough for
Spark to broadcast in a join — a DataFrame made from a Python list would be an RDD scan, neither), and the compiler
joins it by name (``CompileInput.level_map``: the engine hands it the view, so no rendered tree is rewritten). The view is the release's: it is dropped with it when the release is refused.
"""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ...common.sqlbuild import ident, render
from .session import temporary_view

COLUMNS = ("leaf", "value")
SUFFIX = "__map"


def register_map_view(spark: Any, rows: tuple[tuple[str, str], ...], name: str) -> None:
    """Register ``rows`` as the temporary view ``name`` (the engine's ``<release>__map<n>``, a name no table or view
    of the session has: nothing is replaced)."""
    spark.sql(render(_query(rows), "spark")).createOrReplaceTempView(name)


def _query(rows: tuple[tuple[str, str], ...]) -> exp.Select:
    values = exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.string(a), exp.Literal.string(b)])
                                     for a, b in rows],
                        alias=exp.TableAlias(this=ident("m"), columns=[ident(c) for c in COLUMNS]))
    return exp.select(exp.Star()).from_(values)


def statement(name: str, rows: tuple[tuple[str, str], ...]) -> str:
    """The view as Spark SQL, for the release's script (what it stores of the SQL run)."""
    return render(temporary_view(name, _query(rows)), "spark", pretty=True)


__all__ = ["register_map_view", "statement"]
