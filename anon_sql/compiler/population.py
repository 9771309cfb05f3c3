"""The population records matching each released class of an assignment plan (k-map, δ-presence), as one SQL query.

A class of a local-recoding method is described by the values it releases; a population record *matches* it when
each of its quasi-identifier values is *covered* by the class's released value of that QI:

* NULL covers NULL; ``*`` covers every value (NULL included);
* an exact value covers the equal value (compared as text);
* on a numeric QI, ``[lo-hi]`` or a number covers the values between (:mod:`methods.local_values` writes them);
* a taxonomy node covers every leaf beneath it, and a root covers NULL too (local values put NULL under the top);
* on an interval-recoded QI (fixed_interval, attribute_focused: ``AssignmentPlan.value_intervals``) the released
  text of an interval covers the values that the same cut points send to it — the first interval whose ``high`` is
  >= the value, the last one beyond (a partition of the line, like a taxonomy level).

Bucket plans (slicing) release original values per row: there a record matches a bucket when, for every column
group, its values on the group's QIs are covered by one released row of the bucket (Li et al.'s matching buckets).
Every other plan has one group of all QIs (the classes of the checks view carry a single released tuple; the
pre-suppression classes view may carry several — then a record matching any of them matches the class).

The per-QI cover relation is computed between the distinct released values and the distinct population values (a
few equi-joins and one range join), then the distinct population combinations are joined to the class descriptors
through it: no loop over rows, and classes may overlap (clustering methods): a record then matches several.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlglot import exp

from ..common.columns import is_numeric
from ..common.sqlbuild import alias, and_all, col, dtype, ident, lit, null_safe_eq, values_table
from ..data.taxonomy import TOP, Taxonomy

WEIGHT = "__pw"           # the population relation's records-per-row column (models.population.WEIGHT)
POPULATION = "__population"
_NUM = r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
RANGE_PATTERN = rf"^\[({_NUM})-({_NUM})\]$"


def _text(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=dtype("VARCHAR"))


def _double(e: exp.Expression) -> exp.Expression:
    return exp.TryCast(this=e, to=dtype("DOUBLE"), safe=True)   # safe: Spark renders TRY_CAST, not CAST


def _sub(query: exp.Expression, name: str) -> exp.Expression:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident(name)))


def _from(name: str, alias_name: str) -> exp.Table:
    return exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(alias_name)))


def interval_case(value: exp.Expression, intervals: Sequence[Mapping[str, Any]]) -> exp.Expression:
    """A numeric value as an interval-recoded QI releases it: the text of the first interval (by ``high``) whose
    ``high`` is >= the value, the last interval's beyond, NULL for NULL."""
    ordered = sorted(intervals, key=lambda r: float(r["high"]))
    case = exp.Case().when(exp.Is(this=value.copy(), expression=exp.null()), exp.null())
    for iv in ordered[:-1]:
        case = case.when(exp.LTE(this=value.copy(), expression=lit(float(iv["high"]))), lit(str(iv["text"])))
    return case.else_(lit(str(ordered[-1]["text"]))) if ordered else case.else_(exp.null())


def taxonomy_pairs(tax: Taxonomy) -> tuple[list[tuple[str, str]], list[str]]:
    """(leaf, ancestor label) for every leaf and each of its ancestors above level 0, and the roots' labels."""
    levels = tax.levels
    pairs: dict[tuple[str, str], None] = {}
    for j in range(1, levels.shape[1]):
        for leaf, label in zip(levels["level0"], levels[f"level{j}"]):
            pairs[(str(leaf), str(label))] = None
    roots = sorted(set(levels.iloc[:, -1].astype(str)))
    return list(pairs), roots


def _source(e: exp.Expression, name: str) -> exp.Expression:
    """``e`` as a source of a FROM / JOIN named ``name``: a table (a CTE's name) aliased, a query as a subquery."""
    if isinstance(e, exp.Table):
        out = e.copy()
        out.set("alias", exp.TableAlias(this=ident(name)))
        return out
    return _sub(e.copy(), name)


def cover_pairs(released: exp.Expression, population: exp.Expression, numeric: bool, taxonomy: Taxonomy | None,
                intervals: Sequence[Mapping[str, Any]] | None) -> exp.Expression:
    """The (r, v) pairs of one QI where released text ``r`` (distinct values of ``released``, column ``r``) covers
    population value ``v`` (distinct values of ``population``, column ``v``; ``numeric``: the QI's type is a number);
    see the module docstring. ``released`` and ``population`` are queries or tables (the names of CTEs: each branch
    reads them, so :func:`match_counts` passes CTEs computed once)."""
    def rv() -> exp.Expression:
        return _source(released, "rv")

    def pv() -> exp.Expression:
        return _source(population, "pv")

    r, v = col("r", "rv"), col("v", "pv")
    out = exp.select(col("r", "rv"), col("v", "pv"))
    branches = [out.copy().from_(rv()).join(pv(), on=exp.and_(exp.Is(this=r.copy(), expression=exp.null()),
                                                               exp.Is(this=v.copy(), expression=exp.null())))]
    if intervals:
        branches.append(out.copy().from_(rv()).join(pv(), on=exp.EQ(this=r.copy(),
                                                                    expression=interval_case(v, intervals))))
    else:
        branches.append(out.copy().from_(rv()).join(pv(), on=exp.EQ(this=r.copy(), expression=_text(v.copy()))))
        branches.append(out.copy().from_(rv()).join(pv(), on=exp.EQ(this=r.copy(), expression=lit(TOP))))
        if numeric:   # [lo-hi] or a number: a range join over the parsed bounds
            def bound(i: int) -> exp.Expression:
                return exp.Coalesce(this=_double(col("r")), expressions=[_double(exp.RegexpExtract(
                    this=col("r"), expression=lit(RANGE_PATTERN), group=lit(i)))])
            ranges = (exp.select(col("r"), alias(bound(1), "lo"), alias(bound(2), "hi"))
                      .from_(_source(released, "rr")))
            ranges = exp.select("*").from_(_sub(ranges, "rb")).where(
                exp.Not(this=exp.Is(this=col("lo"), expression=exp.null())))
            x = _double(v.copy())
            branches.append(exp.select(col("r", "rv"), col("v", "pv")).from_(_sub(ranges, "rv")).join(
                pv(), on=exp.and_(exp.GTE(this=x, expression=col("lo", "rv")),
                                  exp.LTE(this=x.copy(), expression=col("hi", "rv")))))
        if taxonomy is not None:
            pairs, roots = taxonomy_pairs(taxonomy)
            if pairs:
                anc = values_table(pairs, ["leaf", "label"], "anc")
                branches.append(out.copy().from_(rv())
                                .join(anc, on=exp.EQ(this=r.copy(), expression=col("label", "anc")))
                                .join(pv(), on=exp.EQ(this=_text(v.copy()), expression=col("leaf", "anc"))))
            branches.append(out.copy().from_(rv()).join(pv(), on=exp.and_(
                exp.Is(this=v.copy(), expression=exp.null()),
                exp.In(this=r.copy(), expressions=[lit(x) for x in roots]))))
    union: exp.Expression = branches[0]
    for b in branches[1:]:
        union = exp.union(union, b, distinct=True)
    return union


def match_counts(relation: exp.Expression, keys: Sequence[str], quasi: Sequence[str],
                 groups: Sequence[Sequence[str]], population: exp.Expression, types: Mapping[str, str],
                 taxonomies: Mapping[str, Taxonomy], intervals: Mapping[str, Sequence[Mapping[str, Any]]]
                 ) -> exp.Select:
    """``SELECT <keys>, SUM(records) AS __population`` over the classes of ``relation`` (released rows grouped by
    ``keys``): the population records (``population``: its ``quasi`` columns and ``__pw``) matching each class, by
    the column ``groups`` of ``quasi`` (one group of all: a record matches a released tuple). Classes no population
    record matches are absent (the caller takes 0)."""
    groups = [list(g) for g in groups if g] or [list(quasi)]
    index = {q: i for i, q in enumerate(quasi)}
    ctes: list[tuple[str, exp.Expression]] = []
    pop = _sub(population.copy(), "p")
    pcols = [alias(col(q), f"__p{index[q]}") for q in quasi]
    combos = (exp.select(*pcols, alias(exp.Sum(this=col(WEIGHT)), WEIGHT)).from_(pop)
              .group_by(*[col(q) for q in quasi]))
    # an id per combination (ordered: Spark numbers rows only over an ordered window)
    order = exp.Order(expressions=[exp.Ordered(this=col(f"__p{index[q]}"), nulls_first=True) for q in quasi])
    ctes.append(("__pc", exp.select("*", alias(exp.Window(this=exp.RowNumber(), order=order), "__pid"))
                 .from_(_sub(combos, "pc0"))))
    # the classes' released tuples, read from ``relation`` once: each QI's distinct released values and each column
    # group's tuples come from it (one read per cover branch and QI grew Spark's analyzed plan past the driver's heap)
    key_items = [alias(col(k), f"__k{j}") for j, k in enumerate(keys)]
    key_cols = [col(f"__k{j}") for j in range(len(keys))]
    ctes.append(("__rt", exp.select(*key_items, *[alias(_text(col(q)), f"__r{index[q]}") for q in quasi])
                 .distinct().from_(relation.copy())))
    for q in quasi:
        i = index[q]
        ctes.append((f"__rv{i}", exp.select(alias(col(f"__r{i}"), "r")).distinct().from_("__rt")))
        ctes.append((f"__pv{i}", exp.select(alias(col(f"__p{i}"), "v")).distinct().from_("__pc")))
        ctes.append((f"__m{i}", cover_pairs(exp.Table(this=ident(f"__rv{i}")), exp.Table(this=ident(f"__pv{i}")),
                                            is_numeric(types.get(q, "")), taxonomies.get(q), intervals.get(q))))
    for g, members in enumerate(groups):
        tuples = "__rt"
        if len(groups) > 1:
            tuples = f"__t{g}"
            ctes.append((tuples, exp.select(*[c.copy() for c in key_cols], *[col(f"__r{index[q]}") for q in members])
                         .distinct().from_("__rt")))
        first, rest = members[0], members[1:]
        f = index[first]
        query = (exp.select(col("__pid", "pc"), *[col(f"__k{j}", "t") for j in range(len(keys))]).distinct()
                 .from_(_from("__pc", "pc"))
                 .join(_from(f"__m{f}", "m"), on=null_safe_eq(col("v", "m"), col(f"__p{f}", "pc")))
                 .join(_from(tuples, "t"), on=null_safe_eq(col(f"__r{f}", "t"), col("r", "m"))))
        for q in rest:
            i = index[q]
            query = query.join(_from(f"__m{i}", f"m{i}"), on=exp.and_(
                null_safe_eq(col("v", f"m{i}"), col(f"__p{i}", "pc")),
                null_safe_eq(col("r", f"m{i}"), col(f"__r{i}", "t"))))
        ctes.append((f"__x{g}", query))
    final = exp.select(*[alias(col(f"__k{j}", "x0"), k) for j, k in enumerate(keys)],
                       alias(exp.Sum(this=col(WEIGHT, "pc")), POPULATION)).from_(_from("__x0", "x0"))
    for g in range(1, len(groups)):
        final = final.join(_from(f"__x{g}", f"x{g}"), on=and_all(
            [exp.EQ(this=col("__pid", f"x{g}"), expression=col("__pid", "x0")),
             *[null_safe_eq(col(f"__k{j}", f"x{g}"), col(f"__k{j}", "x0")) for j in range(len(keys))]]))
    final = final.join(_from("__pc", "pc"), on=exp.EQ(this=col("__pid", "pc"), expression=col("__pid", "x0")))
    final = final.group_by(*[col(f"__k{j}", "x0") for j in range(len(keys))])
    # the small relations every branch reads, computed once (DuckDB: MATERIALIZED; the Spark engine checkpoints
    # them, so its analyzed plan holds each as one leaf — :mod:`anon_sql.engines.spark.ctes`)
    shared = {"__pc", "__rt", *[f"__rv{i}" for i in index.values()], *[f"__pv{i}" for i in index.values()]}
    for name, cte in ctes:
        final = final.with_(name, as_=cte, materialized=True if name in shared else None, copy=False)
    return final


__all__ = ["POPULATION", "RANGE_PATTERN", "cover_pairs", "interval_case", "match_counts", "taxonomy_pairs"]
