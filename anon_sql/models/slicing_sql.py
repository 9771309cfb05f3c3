"""The slicing l-diversity check (spec/02 §2.3, Definitions 8–10) as SQL over the materialized release.

This is the SQL twin of the numpy kernel ``anon_sql.udfs.slicing``, and it is what the release's verification runs:
the per-bucket frequency tables f_i(·, B) and D(·, B) are read from the **released** table (the permutation inside a
bucket keeps every column group's multiset of values, so they are the published statistics an adversary sees), the
tuples t range over the original tuples' signatures read from the ``__source`` view (numeric QIs of the
attribute-focused scheme mapped to their released interval means through the published interval table). One
``CREATE TABLE <release>__risk`` statement computes, per original row, max_B p(t, B) (bucket-matching probability)
and max_s p(t, s); the check is max p(t, s) <= 1/l over that table.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from sqlglot import exp

from ..common.sqlbuild import alias, and_all, col, ident, lit, null_safe_eq, render

VARCHAR = exp.DataType.build("VARCHAR")


def _text(expression: exp.Expression) -> exp.Expression:
    return exp.Cast(this=expression, to=VARCHAR.copy())


def _mapped(attr: str, intervals: Sequence[dict] | None) -> exp.Expression:
    """An original value as the release shows it: text, or (fixed-interval QIs) the released mean of its interval."""
    if not intervals:
        return _text(col(attr))
    case = exp.Case()
    for iv in sorted(intervals, key=lambda r: r["high"]):
        case = case.when(exp.LTE(this=col(attr), expression=lit(float(iv["high"]))), lit(iv["text"]))
    return case


def _freq(release: exp.Table, attrs: Sequence[str], weight: exp.Expression, extra: Sequence[str] = ()) -> exp.Select:
    """Per bucket and value combination of ``attrs`` (+ ``extra`` raw columns): the released records."""
    keys = [alias(_text(col(a)), a) for a in attrs] + [alias(col(a), "__s") for a in extra]
    return (exp.select(alias(col("ec_id"), "__b"), *keys, alias(weight.copy(), "__n")).from_(release.copy())
            .group_by(col("ec_id"), *[_text(col(a)) for a in attrs], *[col(a) for a in extra]))


def risk_query(release: exp.Table, source: exp.Table, groups: Sequence[Sequence[str]], sensitive: str,
               weight: str | None = None, intervals: dict[str, Sequence[dict]] | None = None,
               released_rows: exp.Table | None = None) -> exp.Select:
    """``SELECT __row, max_p_bucket, max_p_sensitive`` for every source row (Definitions 8–10 over the release);
    with ``released_rows`` (a table with ``__row``: the release's assignment) only the released ones — t ranges over
    the tuples of the published table, not over suppressed records."""
    intervals = intervals or {}
    w = exp.Sum(this=col(weight)) if weight else exp.Count(this=exp.Star())
    others = [list(g) for g in groups[:-1]]
    xattrs = [a for a in groups[-1] if a != sensitive]
    attrs = [a for g in others for a in g] + xattrs
    if not attrs:
        raise ValueError("slicing check: the release has no attribute besides the sensitive one")
    ctes: list[tuple[str, exp.Expression]] = []
    ctes.append(("__size", exp.select(alias(col("ec_id"), "__b"), alias(w.copy(), "__n")).from_(release.copy())
                 .group_by(col("ec_id"))))
    for i, g in enumerate(others):
        ctes.append((f"__f{i}", _freq(release, g, w)))
    ctes.append(("__x", _freq(release, xattrs, w)))
    ctes.append(("__xs", _freq(release, xattrs, w, [sensitive])))
    # original tuples (as the release shows their values) and their distinct signatures
    tr = exp.select(col("__row"), *[alias(_mapped(a, intervals.get(a)), a) for a in attrs]).from_(source.copy())
    if released_rows is not None:
        tr = tr.where(col("__row").isin(query=exp.select(col("__row")).from_(released_rows.copy())))
    ctes.append(("__tr", tr))
    # the signature's number: any one-to-one numbering works; ordered, because Spark refuses an unordered row_number
    sig = exp.Window(this=exp.RowNumber(),
                     order=exp.Order(expressions=[exp.Ordered(this=col(a), nulls_first=True) for a in attrs]))
    ctes.append(("__t", exp.select(*[col(a) for a in attrs], alias(sig, "__sig"))
                 .from_(exp.select(*[col(a) for a in attrs]).from_("__tr").distinct().subquery("__d"))))
    # f(t, B) = Π_i f_i(t, B) · f_c(t, B) over the buckets holding all of t's values
    chain = [(f"__f{i}", g) for i, g in enumerate(others)] + [("__x", xattrs)]
    first, first_attrs = chain[0]
    m = exp.select(col("__sig", "t"), alias(col("__b", first), "__b"),
                   *[alias(col(a, "t"), a) for a in xattrs]).from_(exp.Table(this=ident("__t"), alias=exp.TableAlias(this=ident("t"))))
    m = m.join(exp.Table(this=ident(first), alias=exp.TableAlias(this=ident(first))),
               on=and_all([null_safe_eq(col(a, "t"), col(a, first)) for a in first_attrs]) if first_attrs
               else exp.true())
    for name, g in chain[1:]:
        m = m.join(exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(name))),
                   on=and_all([exp.EQ(this=col("__b", name), expression=col("__b", first)),
                               *[null_safe_eq(col(a, "t"), col(a, name)) for a in g]]))
    m = m.join(exp.Table(this=ident("__size"), alias=exp.TableAlias(this=ident("z"))),
               on=exp.EQ(this=col("__b", "z"), expression=col("__b", first)))
    f: exp.Expression = lit(1.0)
    for name, _ in chain:
        f = exp.Mul(this=f, expression=exp.Div(this=col("__n", name), expression=col("__n", "z")))
    m = m.select(alias(f, "__f"), alias(col("__n", "__x"), "__nx"))
    ctes.append(("__m", m))
    total = exp.Window(this=exp.Sum(this=col("__f")), partition_by=[col("__sig")])
    ctes.append(("__p", exp.select(col("__sig"), col("__b"), *[col(a) for a in xattrs], col("__nx"),
                                   alias(exp.Div(this=col("__f"), expression=total), "__p")).from_("__m")))
    # p(t, s) = Σ_B p(t, B) · D(t, B)[s], D(t, B)[s] = count(B, x_t, s) / count(B, x_t)
    d = exp.Div(this=col("__n", "xs"), expression=col("__nx", "p"))
    ps = (exp.select(col("__sig", "p"), col("__s", "xs"), alias(exp.Sum(this=exp.Mul(this=col("__p", "p"),
                                                                                      expression=d)), "__ps"))
          .from_(exp.Table(this=ident("__p"), alias=exp.TableAlias(this=ident("p"))))
          .join(exp.Table(this=ident("__xs"), alias=exp.TableAlias(this=ident("xs"))),
                on=and_all([exp.EQ(this=col("__b", "xs"), expression=col("__b", "p")),
                            *[null_safe_eq(col(a, "p"), col(a, "xs")) for a in xattrs]]))
          .group_by(col("__sig", "p"), col("__s", "xs")))
    ctes.append(("__ps", ps))
    ctes.append(("__sigrisk", exp.select(col("__sig"), alias(exp.Max(this=col("__ps")), "max_p_sensitive"))
                 .from_("__ps").group_by(col("__sig"))))
    ctes.append(("__sigmatch", exp.select(col("__sig"), alias(exp.Max(this=col("__p")), "max_p_bucket"))
                 .from_("__p").group_by(col("__sig"))))
    final = (exp.select(col("__row", "r"), col("max_p_bucket", "mb"), col("max_p_sensitive", "ms"))
             .from_(exp.Table(this=ident("__tr"), alias=exp.TableAlias(this=ident("r"))))
             .join(exp.Table(this=ident("__t"), alias=exp.TableAlias(this=ident("t"))),
                   on=and_all([null_safe_eq(col(a, "r"), col(a, "t")) for a in attrs]))
             .join(exp.Table(this=ident("__sigrisk"), alias=exp.TableAlias(this=ident("ms"))),
                   on=exp.EQ(this=col("__sig", "ms"), expression=col("__sig", "t")))
             .join(exp.Table(this=ident("__sigmatch"), alias=exp.TableAlias(this=ident("mb"))),
                   on=exp.EQ(this=col("__sig", "mb"), expression=col("__sig", "t"))))
    for name, q in ctes:
        final = final.with_(ident(name), as_=q)
    return final


def verify_slicing(con, release: exp.Table, source: exp.Table, risk: exp.Table | None, spec: dict[str, Any],
           weight: str | None = None, released_rows: exp.Table | None = None,
           create: Callable[[exp.Create], None] | None = None) -> dict[str, Any]:
    """The check's summary row (max p(t, s) <= 1/l over every released original tuple), computed in SQL over the
    release; with ``risk`` the per-row risks are also materialized as that table (``CREATE OR REPLACE``; through
    ``create`` when given — the engine's, which keeps it as the engine keeps tables), else nothing is written
    (``anon_sql.check`` on a read-only database)."""
    query = risk_query(release, source, spec["columns"], spec["sensitive"], weight, spec.get("intervals"),
                       released_rows)
    if risk is not None:
        stmt = exp.Create(this=risk.copy(), kind="TABLE", replace=True, expression=query)
        if create is not None:
            create(stmt)
        else:
            con.execute(render(stmt))
        rel: exp.Expression = risk.copy()
    else:
        rel = query.subquery("__risk")
    l = float(spec["l"])
    bound = lit(1.0 / l + 1e-9)
    q = exp.select(exp.Max(this=col("max_p_sensitive")),
                   exp.Sum(this=exp.Cast(this=exp.GT(this=col("max_p_sensitive"), expression=bound),
                                         to=exp.DataType.build("INTEGER"))),
                   exp.Count(this=exp.Star())).from_(rel)
    worst, failing, rows = con.execute(render(q)).fetchall()[0]
    buckets = con.execute(render(exp.select(exp.Count(this=exp.Distinct(expressions=[col("ec_id")])))
                                 .from_(release.copy()))).fetchall()[0][0]
    worst = float(worst) if worst is not None else 0.0
    return {"check": "slicing_l_diversity", "classes": int(buckets), "failing_classes": 0,
            "failing_records": int(failing or 0), "worst_value": worst, "passed": bool(rows) and not failing,
            "requirement": slicing_requirement_text(l)}


def slicing_requirement_text(l: float) -> str:
    """The whole-table requirement of l-diverse slicing, in words (spec/02 §2.3, Definition 10)."""
    return f"max p(t, s) <= 1/{float(l):g}"


__all__ = ["risk_query", "verify_slicing", "slicing_requirement_text"]
