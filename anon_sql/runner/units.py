"""People, not rows: the privacy unit's checks at resolve time (docs/units.md).

A release whose policy names ``privacy_unit`` counts distinct units in every class; one that does not assumes one row
per person, so an identifier column whose values repeat is refused here (fail closed) unless the policy says the rows
really are different people (``rows_are_people = true`` on that identifier). Every check is one aggregate query in
the engine; nothing here reads rows into Python.
"""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ..common.columns import UNIT
from ..common.sqlbuild import alias, col, lit, render
from ..data import base_counts
from ..common.wording import counted
from ..data.source import Source
from ..errors import PolicyError, SourceError
from ..methods import method_class, method_names
from ..policy.model import Attribute, Policy


def with_unit_attribute(policy: Policy) -> dict[str, Attribute]:
    """The policy's attributes with the unit column declared: a unit the policy does not list is an identifier
    that is dropped (it names a person, so it is never released as it is)."""
    attrs = dict(policy.attributes)
    unit = policy.privacy_unit
    if unit and unit not in attrs:
        attrs[unit] = Attribute(unit, "identifier")
    return attrs


def _one_row(con: Any, query: exp.Select) -> tuple:
    return tuple(con.execute(render(query)).fetchall()[0])


def repeated_identifiers(con: Any, policy: Policy, src: Source, declared: set[str] | None = None) -> None:
    """Without a privacy unit, refuse a declared identifier column (``declared``: default all; not those
    ``default_role`` makes) whose values repeat (one person's several rows would count as several people), naming
    the column, how many values repeat and the two ways out."""
    if policy.privacy_unit:
        return
    for a in policy.attributes.values():
        if declared is not None and a.name not in declared:
            continue
        if a.role != "identifier" or a.options.get("rows_are_people"):
            continue
        repeated = (exp.select(col(a.name)).from_(src.relation.copy()).where(exp.Not(this=exp.Is(
            this=col(a.name), expression=exp.Null()))).group_by(col(a.name))
            .having(exp.GT(this=exp.Count(this=exp.Star()), expression=lit(1))))
        count = exp.select(alias(exp.Count(this=exp.Star()), "n")).from_(
            exp.Subquery(this=repeated, alias=exp.TableAlias(this=exp.to_identifier("r"))))
        (n,) = _one_row(con, count)
        if n:
            raise PolicyError(
                f"identifier {a.name!r} of {src.label!r} repeats: {counted(int(n), 'value')} "
                f"{'occurs' if n == 1 else 'occur'} on several rows, so one person may have several rows and every "
                f"count would count rows, not people. Declare the person: privacy_unit = {a.name!r} (TOML top level; "
                f"SQL WITH (privacy_unit = '{a.name}', ...)), or, if these rows really are different people, say so "
                f"with [attributes.{a.name}] rows_are_people = true (docs/units.md)")


def varying_counts(con: Any, unit_name: str, quasi: list[str], src: Source) -> list[tuple[str, int]]:
    """The quasi-identifiers whose value differs between the rows of one unit, with the units they vary in (one
    aggregate over the source)."""
    items = _differs(quasi)
    if not items:
        return []
    per_unit = exp.select(*items).from_(src.relation.copy()).group_by(col(unit_name))
    totals = exp.select(*[alias(exp.Sum(this=col(f"__d{i}")), f"__n{i}") for i in range(len(items))]).from_(
        exp.Subquery(this=per_unit, alias=exp.TableAlias(this=exp.to_identifier("u"))))
    counts = _one_row(con, totals)
    return [(q, int(n)) for q, n in zip(quasi, counts) if n]


def _differs(quasi: list[str]) -> list[exp.Expression]:
    """Per unit (a GROUP BY the unit), ``__d<i>``: 1 when QI i differs between the unit's rows (NULL and a value
    included), else 0."""
    items = []
    for i, q in enumerate(quasi):
        differs = exp.Or(this=exp.NEQ(this=exp.Min(this=col(q)), expression=exp.Max(this=col(q))),
                         expression=exp.And(this=exp.GT(this=exp.Count(this=col(q)), expression=lit(0)),
                                            expression=exp.LT(this=exp.Count(this=col(q)),
                                                              expression=exp.Count(this=exp.Star()))))
        items.append(alias(exp.Cast(this=differs, to=exp.DataType.build("INT")), f"__d{i}"))
    return items


def unit_profile(con: Any, unit: str, quasi: list[str], src: Source, base: exp.Table | None = None,
                 distinct_tuples: bool = False) -> tuple[int, list[tuple[str, int]]]:
    """:func:`count_units` and :func:`varying_counts` in one pass (one GROUP BY the unit): the distinct units and
    the QIs varying inside a unit; refuses a missing unit column and NULL units first. ``base``: read the release's
    base-count table instead of the source (its rows are the distinct (QIs, sensitive values, unit) of the source
    with their rows in ``__w``, so a unit's QI values, NULL included, and its rows are the same there: one pass over
    the rows fewer, issue 24.6); ``distinct_tuples``: its keys are the QIs alone (one row per (QI tuple, unit))."""
    require_unit_column(unit, src)
    if base is not None and distinct_tuples:
        # the base rows are the distinct (QI tuple, unit): as many rows as people means one tuple per person, read
        # by a distinct count of the unit instead of a GROUP BY with each QI's min and max (issue 24.6)
        flagged = exp.select(col(UNIT), col(base_counts.WEIGHT),
                             alias(_missing(col(UNIT), src.types.get(unit)), "__null")).from_(base.copy())
        known = exp.Where(this=exp.Not(this=col("__null")))
        n_units, n_tuples, n_nulls = _one_row(con, exp.select(
            alias(exp.Count(this=exp.Distinct(expressions=[col(UNIT)])), "units"),
            alias(exp.Filter(this=exp.Count(this=exp.Star()), expression=known), "tuples"),
            alias(exp.Filter(this=exp.Sum(this=col(base_counts.WEIGHT)), expression=exp.Where(this=col("__null"))),
                  "nulls")).from_(exp.Subquery(this=flagged, alias=exp.TableAlias(this=exp.to_identifier("b")))))
        if not n_nulls and n_units == n_tuples:
            return int(n_units or 0), []
    key, rows, relation = ((col(UNIT), exp.Sum(this=col(base_counts.WEIGHT)), base) if base is not None
                           else (col(unit), exp.Count(this=exp.Star()), src.relation))
    is_null = _missing(key, src.types.get(unit))
    per_unit = exp.select(alias(is_null, "__null"), alias(rows, "__rows"),
                          *_differs(quasi)).from_(relation.copy()).group_by(key.copy())
    known = exp.Where(this=exp.Not(this=col("__null")))
    totals = exp.select(
        alias(exp.Filter(this=exp.Count(this=exp.Star()), expression=known.copy()), "units"),
        alias(exp.Filter(this=exp.Sum(this=col("__rows")), expression=exp.Where(this=col("__null"))), "nulls"),
        *[alias(exp.Filter(this=exp.Sum(this=col(f"__d{i}")), expression=known.copy()), f"__n{i}")
          for i in range(len(quasi))]).from_(
        exp.Subquery(this=per_unit, alias=exp.TableAlias(this=exp.to_identifier("u"))))
    units, nulls, *counts = _one_row(con, totals)
    if nulls:
        raise SourceError(f"privacy_unit {unit!r} of {src.label!r} is {_missing_word(src.types.get(unit))} on {counted(int(nulls), 'row')}: "
                          "a row must belong to a person; fill or remove those rows (e.g. a view WHERE "
                          f"{unit} IS NOT NULL)")
    return int(units or 0), [(q, int(n)) for q, n in zip(quasi, counts) if n]


def _missing(key: exp.Expression, type_name: str | None) -> exp.Expression:
    """``key`` names no person: NULL, or NaN in a FLOAT / DOUBLE unit column (hostile round 12, U01: 60 NaN rows were
    counted as one person, where NULL is refused)."""
    is_null = exp.Is(this=key.copy(), expression=exp.Null())
    if _missing_word(type_name) == "NULL":
        return is_null
    return exp.Or(this=is_null, expression=exp.Anonymous(this="isnan", expressions=[key.copy()]))


def _missing_word(type_name: str | None) -> str:
    """How the error names a unit value that names no person: "NULL", or "NULL or NaN" for a floating-point unit."""
    return "NULL or NaN" if str(type_name or "").upper() in ("FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8") else "NULL"


def require_unit_column(unit: str, src: Source) -> None:
    """Refuse a privacy unit that is not a column of the source."""
    if unit not in src.columns:
        raise PolicyError(f"privacy_unit {unit!r} is not a column of {src.label!r} ({src.columns})")


def varying_quasi(con: Any, unit_name: str, quasi: list[str], src: Source, what: str = "assess") -> None:
    """Refuse a quasi-identifier whose value differs between the rows of one unit, where the classes are one QI
    tuple per person (``assess``; a method without ``varying_units``)."""
    varying = varying_counts(con, unit_name, quasi, src)
    if varying:
        q, n = varying[0]
        raise PolicyError(
            f"quasi-identifier {q!r} varies within {counted(n, 'unit')} of privacy_unit {unit_name!r} "
            f"(its rows of one person hold different values) and {what} counts one QI tuple per person: "
            f"{_varying_fix(q)}")


def _varying_fix(q: str) -> str:
    works = [n for n in method_names() if getattr(method_class(n), "varying_units", False)]
    return (f"release with one of the methods {', '.join(works)} (they generalize until every person's set of "
            f"released QI tuples is shared by k people: multi-relational k-anonymity), give each person one value "
            f"of {q!r} (e.g. the value at the first visit, in a view over the source), or declare {q!r} "
            "insensitive if it does not identify (docs/units.md: QIs that vary inside a unit)")


def check_varying(policy: Policy, method: Any, varying: list[tuple[str, int]]) -> None:
    """QIs that vary inside units are released by their signatures (multi-relational k-anonymity) by the methods
    with ``varying_units``, for per-class models only; everything else is refused, naming the alternative."""
    if not varying:
        return
    q, n = varying[0]
    head = (f"quasi-identifier {q!r} varies within {counted(n, 'unit')} of privacy_unit {policy.privacy_unit!r} "
            "(its rows of one person hold different values)")
    if not getattr(method, "varying_units", False):
        raise PolicyError(f"{head}, and method {policy.method!r} releases one QI tuple per person: {_varying_fix(q)}")
    privacy = policy.privacy
    grouped = [name for name in ("k_map", "delta_presence") if getattr(privacy, name, None) is not None]
    if privacy.requirements:
        grouped.append("requirements")
    if grouped:
        raise PolicyError(f"{head}: a person's class is then their set of released QI tuples, which "
                          f"{', '.join(grouped)} cannot be matched against (they read one QI tuple per class); drop "
                          f"{', '.join(grouped)} or give each person one value of {q!r} (docs/units.md)")
    both = [s for s in policy.sensitive if s in policy.quasi]
    if both:
        raise PolicyError(f"{head}: {both} are both quasi-identifier and sensitive, which a class of signatures "
                          "cannot release; declare them one role (docs/units.md)")


def signatures_elsewhere(policy: Policy, varying: tuple[str, ...] | list[str], engine: str) -> str:
    """Why a policy whose QIs vary inside a unit is refused on an engine without classes of signatures, and what
    works there."""
    q = varying[0]
    return (f"quasi-identifier(s) {list(varying)} vary within units of privacy_unit {policy.privacy_unit!r} (a "
            f"person's rows hold different values): their classes are the people's sets of released QI tuples "
            f"(multi-relational k-anonymity), which only the DuckDB engine releases; engine {engine!r} releases "
            f"people whose QIs are constant, with methods {', '.join(unit_methods())}. Give each person one value of "
            f"{q!r} (e.g. the value at the first visit, in a view over the source), or release with "
            "anon_sql.release(duckdb_connection, policy) (docs/units.md)")


def count_units(con: Any, unit: str, src: Source) -> int:
    """The distinct units of the source; refuses a unit column that is missing or holds NULLs (with their count)."""
    require_unit_column(unit, src)
    q = exp.select(alias(exp.Count(this=exp.Distinct(expressions=[col(unit)])), "units"),
                   alias(exp.Sum(this=exp.Cast(this=_missing(col(unit), src.types.get(unit)),
                                               to=exp.DataType.build("INT"))), "nulls")).from_(src.relation.copy())
    units, nulls = _one_row(con, q)
    if nulls:
        raise SourceError(f"privacy_unit {unit!r} of {src.label!r} is {_missing_word(src.types.get(unit))} on {counted(int(nulls), 'row')}: "
                          "a row must belong to a person; fill or remove those rows (e.g. a view WHERE "
                          f"{unit} IS NOT NULL)")
    return int(units or 0)


def unit_methods() -> list[str]:
    """The methods that count units (``Method.counts_units``)."""
    return [n for n in method_names() if getattr(method_class(n), "counts_units", False)]


def check_method(policy: Policy, method: Any) -> None:
    """Refuse a method that cannot count units, naming those that can."""
    if policy.privacy_unit and not getattr(method, "counts_units", False):
        works = unit_methods()
        raise PolicyError(f"method {policy.method!r} does not release with privacy_unit yet (its classes count "
                          f"rows); methods that count people: {', '.join(works)}")


def resolve_units(con: Any, policy: Policy, src: Source, method: Any, declared: set[str] | None = None,
                  defer: bool = False) -> tuple[int | None, tuple[str, ...]]:
    """The resolve-time checks of the unit: the identifier repeats (without a unit), else the method, NULL units,
    QIs varying inside a unit and k against the number of units. Returns the units (None without a unit) and the
    QIs that vary inside a unit. ``defer``: stop after the method and the unit column; the caller runs
    :func:`profile_units` over the base counts it makes next (None, () meanwhile)."""
    repeated_identifiers(con, policy, src, declared)
    if not policy.privacy_unit:
        return None, ()
    check_method(policy, method)
    if defer:
        require_unit_column(policy.privacy_unit, src)
        return None, ()
    return profile_units(con, policy, src, method)


def profile_units(con: Any, policy: Policy, src: Source, method: Any, base: exp.Table | None = None
                  ) -> tuple[int, tuple[str, ...]]:
    """NULL units, QIs varying inside a unit and k against the number of units, from the source or from its
    ``base`` counts (:func:`unit_profile`); returns the units and the varying QIs."""
    units, varying = unit_profile(con, policy.privacy_unit, list(policy.quasi), src, base,
                                  distinct_tuples=base_counts.keys(policy) == list(policy.quasi))
    check_varying(policy, method, varying)
    k = policy.privacy.k
    if k is not None and units and k > units:
        raise PolicyError(f"privacy.k = {k} is larger than the {counted(units, 'person', 'people')} "
                          f"(distinct {policy.privacy_unit!r}) of {src.label!r}; no release can have classes "
                          "that large")
    return units, tuple(q for q, _ in varying)
