"""People, not rows, for the methods that plan from aggregates (docs/units.md).

With a privacy unit and quasi-identifiers constant within a unit, a method's input is the distinct combinations of
the QIs and the sensitive value with two weights: the people holding the combination (what a sensitive value's count
reads) and the people who count there for the class size (each person once, at their first value), so that summing
the second over any union of QI tuples gives the distinct people, and the first the people holding each value.
"""
from __future__ import annotations

from sqlglot import exp

from ..common.columns import UNIT
from ..common.sqlbuild import alias, col, dtype


SIZE_WEIGHT = "__anon_people"   # a group's share of its class size in people


def people_counts(relation: exp.Expression, keys: list[exp.Expression | str], sens: list[str], w_name: str
                  ) -> exp.Select:
    """Per distinct combination of ``keys`` (column names, or expressions with an alias: the QIs and the sensitive
    values, the QIs constant per unit): the people holding it (``w_name``) and, with sensitive attributes (``sens``:
    their output names), the people who count there for the class size (each person once, at their first value:
    :data:`SIZE_WEIGHT`), from ``relation``'s ``__unit`` column."""
    items = [col(k) if isinstance(k, str) else k.copy() for k in keys]
    names = [e.alias_or_name for e in items]
    if not sens:   # one pass: the people of each combination (no per-value weight to derive)
        people = exp.Count(this=exp.Distinct(expressions=[col(UNIT)]))
        return (exp.select(*items, alias(exp.Cast(this=people, to=dtype("DOUBLE")), w_name))
                .from_(relation.copy()).group_by(*[e.unalias() if isinstance(e, exp.Alias) else e.copy()
                                                    for e in items]))
    distinct = exp.select(*items, col(UNIT)).distinct().from_(relation.copy())
    weights = [alias(exp.Cast(this=exp.Count(this=exp.Star()), to=dtype("DOUBLE")), w_name)]
    if sens:
        order = exp.Order(expressions=[exp.Ordered(this=col(s), nulls_first=True) for s in sens])
        first = exp.EQ(this=exp.Window(this=exp.RowNumber(), partition_by=[col(UNIT)], order=order),
                       expression=exp.Literal.number(1))
        distinct = exp.select(exp.Star(), alias(first, "__first")).from_(
            exp.Subquery(this=distinct, alias=exp.TableAlias(this=exp.to_identifier("d"))))
        weights.append(alias(exp.Cast(this=exp.Sum(this=exp.Cast(this=col("__first"), to=dtype("INT"))),
                                      to=dtype("DOUBLE")), SIZE_WEIGHT))
    return (exp.select(*[col(n) for n in names], *weights)
            .from_(exp.Subquery(this=distinct, alias=exp.TableAlias(this=exp.to_identifier("u"))))
            .group_by(*[col(n) for n in names]))
