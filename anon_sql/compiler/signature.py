"""Multi-relational k-anonymity (docs/units.md; Nergiz, Clifton & Nergiz, TKDE 2009): when a quasi-identifier varies
inside a privacy unit, a person's class is their **signature**, the set of released QI tuples over all of their rows.

A level plan whose ``signatures`` flag is set groups its classes by the signature (an exact DuckDB LIST of the sorted
distinct tuples, never a hash) instead of by the released QI values; each QI column of a class holds the sorted
distinct values its signature releases for that QI (a description; the signature is the key).
"""
from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from ..common.columns import UNIT
from ..common.sqlbuild import alias, col, ident
from .names import cast_varchar

SIGNATURE = "__sig"   # a unit's signature: the sorted list of the distinct released QI tuples of its rows


def _distinct_sorted(e: exp.Expression) -> exp.Expression:
    """``list_sort(list_distinct(array_agg(e)))`` (DuckDB)."""
    return exp.Anonymous(this="list_sort", expressions=[
        exp.Anonymous(this="list_distinct", expressions=[exp.ArrayAgg(this=e)])])


def signatures_query(relation: exp.Expression, quasi: Sequence[str]) -> exp.Select:
    """Per unit of ``relation`` (its ``__unit`` column): the signature and, per QI, the sorted distinct released
    values (text). A QI tuple is a list of its values as text, NULL kept as an element, so the list is exact."""
    tuple_ = exp.Array(expressions=[cast_varchar(col(q)) for q in quasi])
    items = [col(UNIT), alias(_distinct_sorted(tuple_), SIGNATURE)]
    items += [alias(_distinct_sorted(cast_varchar(col(q))), q) for q in quasi]
    return exp.select(*items).from_(relation.copy()).group_by(col(UNIT))


def with_signatures(relation: exp.Expression, quasi: Sequence[str], others: Sequence[str]) -> exp.Subquery:
    """``relation``'s rows (columns ``others``, the unit among them) with their unit's signature and QI value sets
    in place of the row's own QI values: the relation whose classes are grouped by ``[__sig, *quasi]``."""
    rel = relation.copy()
    if isinstance(rel, exp.Subquery):
        rel.set("alias", exp.TableAlias(this=ident("r")))
    elif isinstance(rel, exp.Table):
        rel.set("alias", exp.TableAlias(this=ident("r")))
    else:
        rel = exp.Subquery(this=rel, alias=exp.TableAlias(this=ident("r")))
    source = relation.copy()
    if isinstance(source, exp.Select):
        source = exp.Subquery(this=source, alias=exp.TableAlias(this=ident("x")))
    sig = exp.Subquery(this=signatures_query(source, quasi), alias=exp.TableAlias(this=ident("s")))
    query = (exp.select(*[col(c, "r") for c in others], col(SIGNATURE, "s"), *[col(q, "s") for q in quasi])
             .from_(rel)
             .join(sig, on=exp.EQ(this=col(UNIT, "r"), expression=col(UNIT, "s"))))
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident("sg")))


def signature_keys(quasi: Sequence[str]) -> list[str]:
    """The class keys of a signature release: the signature, then the QI value sets (functions of it)."""
    return [SIGNATURE, *quasi]
