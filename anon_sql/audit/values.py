"""The ``values`` checks of a release (hostile round 8, M1): the *form* of what each pseudonymized identifier and
each deterministically masked column holds, so that a released table whose pseudonyms or masked values were set back
to the raw ones fails ``check`` (and ``export``, which re-runs it).

A pseudonym is 64 lowercase hex characters (HMAC-SHA256, :mod:`anon_sql.data.pseudonym`), as is a ``hash`` mask
(sha256); ``partial`` is ``keep_start`` characters + ``pad`` + ``keep_end`` characters, or ``pad`` alone for a short
text; ``partial_email`` the first character + ``******@******`` + an optional ``.tld``, or ``******``; ``redact`` its
replacement (anon_sql/sdc/masking.sql). NULL stays NULL. One SQL aggregate per table counts the rows that break each
column's form; the random masks (noise, dnoise, shuffle, fake) have no form to verify. A form says nothing of the
content (hostile round 9, M8: the unsalted sha256 of the raw SSN has a hash's form), so in the working database,
where the source and the key or salt are at hand, ``pseudonyms <column>`` and ``masks <column>`` re-derive the values.
"""
from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from ..common.sqlbuild import lit, render
from .program import SOURCE, table_check_row

PSEUDONYM = "64 lowercase hex characters (HMAC-SHA256 pseudonyms) or NULL"
_HEX64 = "^[0-9a-f]{64}$"
# a salt a shared file does not hold (publish/share.py leaves it out): check never computes a mask, so its place in
# the policy is only there to let the policy be read
WITHHELD_SALT = "(withheld: the data owner's secret)"
# a deterministic mask's `values` row checks the form; its content is the `masks` row's, where the source is here
FORM_ONLY = "form only: "
DERIVED_MASKS = ("hash", "partial", "partial_email")   # redact is a constant: its form check is exact


def value_form(spec: dict[str, Any]) -> tuple[str, Any] | None:
    """(what the column must hold, in words; a function of the column expression giving the predicate of a row that
    breaks it) for an attribute table ``spec`` (its dict form), or None when its values have no form to verify."""
    if spec.get("role") == "identifier" and spec.get("action") == "pseudonymize":
        return PSEUDONYM, lambda x: _not_matching(x, _HEX64)
    mask = spec.get("mask") if spec.get("role") in ("identifier", "insensitive") else None
    function = mask.get("function") if isinstance(mask, dict) else None
    if function == "hash":
        return f"{FORM_ONLY}64 lowercase hex characters (a sha256) or NULL", lambda x: _not_matching(x, _HEX64)
    if function == "partial_email":
        return (f"{FORM_ONLY}the first character, '******@******' and a top-level domain, or '******', or NULL",
                lambda x: exp.and_(exp.NEQ(this=_text(x), expression=lit("******")),
                                   _not_matching(x, r"(?s)^.?[*]{6}@[*]{6}([.][^.@]*)?$")))
    if function == "redact":
        replacement = str(mask.get("replacement", "[REDACTED]"))
        return f"{replacement!r} or NULL", lambda x: exp.NEQ(this=_text(x), expression=lit(replacement))
    if function == "partial" and _partial_params(mask):
        start, pad, end = _partial_params(mask)

        def broken(x: exp.Expression) -> exp.Expression:
            long_ok = exp.and_(
                exp.EQ(this=exp.Length(this=_text(x)), expression=lit(start + len(pad) + end)),
                exp.EQ(this=exp.Substring(this=_text(x), start=lit(start + 1), length=lit(len(pad))),
                       expression=lit(pad)))
            return exp.Not(this=exp.Paren(this=exp.or_(exp.EQ(this=_text(x), expression=lit(pad)),
                                                      exp.Paren(this=long_ok))))
        return (f"{FORM_ONLY}{start} characters + {pad!r} + {end} characters, or {pad!r} alone, or NULL", broken)
    return None


def _partial_params(mask: dict[str, Any]) -> tuple[int, str, int] | None:
    start, pad, end = mask.get("keep_start"), mask.get("pad"), mask.get("keep_end")
    ok = (isinstance(start, int) and isinstance(end, int) and isinstance(pad, str) and start >= 0 and end >= 0
          and not isinstance(start, bool) and not isinstance(end, bool))
    return (start, pad, end) if ok else None


def _text(x: exp.Expression) -> exp.Expression:
    return exp.Cast(this=x.copy(), to=exp.DataType.build("VARCHAR"))


def _not_matching(x: exp.Expression, pattern: str) -> exp.Expression:
    return exp.Not(this=exp.RegexpLike(this=_text(x), expression=lit(pattern)))


def value_checks(attributes: dict[str, dict[str, Any]], columns: list[str], prefix: str = "values"
                 ) -> list[tuple[str, str, str, Any]]:
    """(check name, column, required, predicate builder) of each column of ``columns`` whose attribute table (in
    ``attributes``: column → its dict form) gives its values a form."""
    out = []
    for c in columns:
        form = value_form(attributes.get(c) or {})
        if form is not None:
            out.append((f"{prefix} {c}", c, form[0], form[1]))
    return out


def value_query(table: exp.Table, checks: list[tuple[str, str, str, Any]]) -> str:
    """One aggregate over ``table`` counting, per check, the non-NULL rows that break its column's form."""
    counts = []
    for _, column, _, broken in checks:
        x = exp.column(column, quoted=True)
        bad = exp.and_(exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())), exp.Paren(this=broken(x)))
        counts.append(exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=bad)))
    return render(exp.select(*counts).from_(table.copy()))


def source_pseudonym_rows(con: Any, table: exp.Table, policy: Any) -> list[dict[str, Any]]:
    """Working database only: ``pseudonyms <column>`` rows, one per pseudonymized identifier, failing on each
    released pseudonym that is not the keyed pseudonym of a value of the source's column (a value of the form that
    is no pseudonym, e.g. the unkeyed sha256 of the raw Id). Needs the key (``$ANON_SQL_KEY`` or the identifier's
    ``key_file``) and the source: without either, no row (the ``values`` rows still check the form)."""
    from ..data.pseudonym import FUNCTION, load_key, register_duckdb_pseudonym
    from ..errors import PolicyError, SourceError

    ids = [c for c, a in policy.attributes.items() if a.role == "identifier" and a.action == "pseudonymize"]
    relation, present, instead = _source_and_columns(con, table, policy, ids, "pseudonyms")
    if relation is None:
        return instead
    try:
        key = load_key(policy.attributes[ids[0]].options.get("key_file"))
    except (PolicyError, SourceError):
        return []
    columns = [c for c in ids if c in present]
    if not columns:
        return []
    register_duckdb_pseudonym(con, key)
    rows = []
    for c in columns:
        x = exp.column(c, quoted=True)
        derived = (exp.select(exp.Anonymous(this=FUNCTION, expressions=[_text(x)])).from_(relation.copy())
                   .where(exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))))
        query = exp.select(exp.Count(this=exp.Star())).from_(table.copy()).where(exp.and_(
            exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
            exp.Not(this=exp.In(this=_text(x), query=exp.Subquery(this=derived)))))
        n = int(con.execute(render(query)).fetchall()[0][0])
        rows.append(table_check_row(
            f"pseudonyms {c}", n, f"the keyed pseudonym of a value of the source's {c}", basis=SOURCE,
            message=(f"{n} value(s) of {c!r} are no keyed pseudonym of a value of the source {policy.source!r} "
                     "(replaced since the release, the key changed, or the source lost those values)") if n else None))
    return rows


def source_mask_rows(con: Any, table: exp.Table, policy: Any) -> list[dict[str, Any]]:
    """Working database only (hostile round 9, M8): ``masks <column>`` rows, one per column of the release's main
    table masked by ``hash`` (with the recorded salt), ``partial`` or ``partial_email``, failing when the released
    non-NULL values of the mask's form are not a sub-multiset of the source's masked non-NULL values (suppression,
    units and filters only remove rows): the same ``anon.*`` macro call the release compiled
    (:func:`anon_sql.sdc.masking.mask_expression`; :func:`anon_sql.audit.program.guard_macros` has compared the
    macros with the package's before). Values of another form are the ``values`` row's. Without the source (gone,
    unreadable) or the salt, no row: the ``values`` rows say they check the form only."""
    import duckdb

    from ..errors import PolicyError
    from ..sdc.masking import mask_expression

    masked = {c: a for c, a in policy.attributes.items()
              if isinstance(a.options.get("mask"), dict) and a.options["mask"].get("function") in DERIVED_MASKS
              and a.options["mask"].get("salt") != WITHHELD_SALT and value_form(a.to_dict()) is not None}
    relation, present, instead = _source_and_columns(con, table, policy, list(masked), "masks")
    if relation is None:
        return instead
    rows = []
    for c in (c for c in masked if c in present):
        spec = masked[c].options["mask"]
        required, broken = value_form(masked[c].to_dict())
        try:
            query = _mask_excess_query(table, relation, c, mask_expression(exp.column(c, quoted=True), spec), broken)
            n = int(con.execute(render(query)).fetchall()[0][0] or 0)
        except (PolicyError, duckdb.Error):   # a mask the policy cannot give again, a source unreadable now
            continue
        rows.append(table_check_row(
            f"masks {c}", n, f"the {spec['function']} mask of a value of the source's {c} (each value at most as "
            "often as the source gives it)", basis=SOURCE,
            message=(f"{n} value(s) of {c!r} have the mask's form but are not the {spec['function']} mask of a "
                     f"value of the source {policy.source!r} (replaced since the release, or the source lost those "
                     "values)") if n else None))
    return rows


def _mask_excess_query(table: exp.Table, relation: exp.Expression, column: str, masked: exp.Expression,
                       broken: Any) -> exp.Select:
    """The released non-NULL values of ``column`` of the mask's form beyond what the source's ``masked`` values
    give (per value: released count − source count, where positive), summed: 0 for a sub-multiset."""
    x = exp.column(column, quoted=True)
    v, n = exp.to_identifier("__v"), exp.to_identifier("__n")
    not_null = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
    released = (exp.select(exp.alias_(_text(x), v), exp.alias_(exp.Count(this=exp.Star()), n))
                .from_(table.copy()).where(exp.and_(not_null.copy(), exp.Not(this=exp.Paren(this=broken(x)))))
                .group_by(lit(1)))
    source = (exp.select(exp.alias_(_text(masked), v), exp.alias_(exp.Count(this=exp.Star()), n))
              .from_(relation.copy()).where(not_null.copy()).group_by(lit(1)))
    have = exp.Coalesce(this=exp.column(n, "s"), expressions=[lit(0)])
    excess = exp.Sub(this=exp.column(n, "r"), expression=have.copy())
    return (exp.select(exp.Coalesce(this=exp.Sum(this=excess), expressions=[lit(0)]))
            .from_(exp.Subquery(this=released, alias=exp.TableAlias(this=exp.to_identifier("r"))))
            .join(exp.Subquery(this=source, alias=exp.TableAlias(this=exp.to_identifier("s"))),
                  on=exp.EQ(this=exp.column(v, "r"), expression=exp.column(v, "s")), join_type="left")
            .where(exp.GT(this=exp.column(n, "r"), expression=have.copy())))


def _source_and_columns(con: Any, table: exp.Table, policy: Any, columns: list[str], check: str
                        ) -> tuple[Any, set[str], list[dict[str, Any]]]:
    """The release's source that ``<check> <column>`` rows re-derive from, with the columns it shares with
    ``table``; or no source (None) and the rows to give instead: none when nothing is to be checked or the source is
    gone or unreadable (the ``values`` rows check the form), a failing row per column when another object may
    answer to the source's name (:func:`_shadowed_source`)."""
    import duckdb

    from ..data.source import describe, readable_relation
    from ..errors import SourceError

    relation = readable_relation(con, policy.source) if columns and isinstance(policy.source, str) else None
    if relation is None:
        return None, set(), []
    shadows = _shadowed_source(con, policy.source)
    if shadows:
        return None, set(), [_shadowed_row(f"{check} {c}", shadows, policy.source) for c in columns]
    try:
        present = {r[0] for r in describe(con, table)} & {r[0] for r in describe(con, relation)}
    except (SourceError, duckdb.Error):
        return None, set(), []
    return relation, present, []


def _shadowed_source(con: Any, source: str) -> list[str]:
    """What a release's ``source`` name could read instead of the object the release read: the session's TEMP
    tables and views of that name (:func:`anon_sql.data.source.temp_shadows`, round 10's M12), or every object of
    that name when several schemas or attached databases have one (:func:`anon_sql.data.source.ambiguous_name`,
    round 10's B42); none for a file path."""
    from ..data.source import ambiguous_name, is_path, temp_shadows

    if is_path(source):
        return []
    return temp_shadows(con, [source]) or ambiguous_name(con, source)


def _shadowed_row(check: str, shadows: list[str], source: str) -> dict[str, Any]:
    """A row that re-derives from the source failing because another object may answer to the source's name
    (``shadows``; round 10, M12: B10, a TEMP table crafted so that its masks cover the edited values; B42, the same
    from a schema on the ``search_path``): the row never vouches for another table."""
    return table_check_row(check, 0, "re-derived from the release's source", basis=SOURCE, passed=False, message=(
        f"{', '.join(shadows)[:400]} answer to the source name {source!r}, so DuckDB may read another object than "
        "the release did: nothing is re-derived from it; drop or rename the others (a TEMP one: or check in another "
        "session; an attached database's: DETACH it)"))


def shared_policy_text(text: str | None) -> str | None:
    """A shared file's policy (JSON) readable by policy validation: each ``hash`` mask's salt, which export leaves
    out (a secret of the data owner), stood in by :data:`WITHHELD_SALT` (E10b: the file then failed its own check).
    Only ``check`` of a shared file reads it so; it never computes a mask."""
    if not text:
        return text
    try:
        policy = json.loads(text)
    except ValueError:
        return text
    tables = [policy.get("attributes") or {}]
    tables += [(spec or {}).get("attributes") or {} for spec in (policy.get("related") or {}).values()
               if isinstance(spec, dict)]
    for attributes in tables:
        for spec in attributes.values() if isinstance(attributes, dict) else ():
            mask = spec.get("mask") if isinstance(spec, dict) else None
            if isinstance(mask, dict) and mask.get("function") == "hash" and "salt" not in mask:
                mask["salt"] = WITHHELD_SALT
    return json.dumps(policy, sort_keys=True)


__all__ = ["DERIVED_MASKS", "FORM_ONLY", "PSEUDONYM", "WITHHELD_SALT", "shared_policy_text", "source_mask_rows",
           "source_pseudonym_rows", "value_checks", "value_form", "value_query"]
