"""What a released value means: a digest of every taxonomy a release generalized through (issue 28.3).

A level plan stores level numbers; level 2 of ``age`` means whatever the taxonomy says at level 2 *today*. The
version row keeps, per quasi-identifier, the taxonomy's name and a digest of what defines its values, so that
``REFRESH ... KEEP PLAN`` can refuse when a taxonomy was rebuilt (the same level would release other bands) and
``plan_changed`` can say when two versions' values are not comparable.

* a named taxonomy (catalog, built-in, ARX CSV file, inline ``file`` or ``mapping``): the digest of its content
  (:meth:`anon_sql.data.taxonomy.Taxonomy.fingerprint`: every leaf's value at every level);
* an inline builder that derives its leaves from the data (``interval``, ``mask``, ``date``, ``top``): the digest
  of its spec. Such a taxonomy gains leaves with new data, but a value it releases (``[20-24]``, ``12***``) is
  defined by the spec alone, so new data never changes what an existing value means.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from ..catalog.store import recorded_taxonomy_digests
from ..data.base_counts import WEIGHT
from ..common.content_kinds import CONTENT_SHA256_COUNTED
from ..data.taxonomy import Taxonomy, needs_values
from ..policy.model import Policy


def taxonomy_digests(policy: Policy, taxonomies: dict[str, Taxonomy], types: dict[str, str] | None = None
                     ) -> dict[str, dict[str, str]]:
    """Quasi-identifier → ``{"taxonomy": name or "inline", "digest": hex, "type": the source column's type}`` for
    each QI with a taxonomy (``types``: the source's column types; a level's values read the column as that type,
    so a column retyped since means other values too: hostile round 3, R04)."""
    out: dict[str, dict[str, str]] = {}
    for qi, tax in sorted(taxonomies.items()):
        attr = policy.attributes.get(qi)
        spec = attr.taxonomy if attr is not None else None
        if isinstance(spec, dict) and needs_values(spec):
            text = json.dumps(spec, sort_keys=True, default=str)
            out[qi] = {"taxonomy": "inline", "digest": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        else:
            out[qi] = {"taxonomy": spec if isinstance(spec, str) else "inline", "digest": tax.fingerprint()}
        if types and types.get(qi):
            out[qi]["type"] = str(types[qi])
    return out


def changed(before: Any, after: dict[str, dict[str, str]]) -> list[str]:
    """The quasi-identifiers whose taxonomy digest differs between ``before`` (JSON text or dict, None when not
    recorded) and ``after``, each as ``"qi (taxonomy t)"``; every QI of ``after`` when nothing was recorded."""
    old = recorded_taxonomy_digests(before)
    if old is None:
        return [f"{qi} (taxonomy {d['taxonomy']!r}: no digest recorded)" for qi, d in sorted(after.items())]
    out = []
    for qi in sorted(set(old) | set(after)):
        a, b = _comparable(old.get(qi), after.get(qi))
        if a != b:
            name = (b or a)["taxonomy"]
            out.append(f"{qi} (taxonomy {name!r})")
    return out


def _comparable(a: dict | None, b: dict | None) -> tuple[dict | None, dict | None]:
    """Two entries without the column's type when one of them does not record it (a version made before types were
    recorded is compared on its taxonomy alone)."""
    if a is not None and b is not None and ("type" in a) != ("type" in b):
        return ({k: v for k, v in a.items() if k != "type"}, {k: v for k, v in b.items() if k != "type"})
    return a, b


def retyped(before: Any, after: dict[str, dict[str, str]]) -> list[str]:
    """The quasi-identifiers whose source column's type differs between ``before`` and ``after`` (both recorded),
    each as ``"qi (OLD → NEW)"``."""
    old = recorded_taxonomy_digests(before) or {}
    return [f"{qi} ({old[qi]['type']} → {after[qi]['type']})" for qi in sorted(set(old) & set(after))
            if "type" in old[qi] and "type" in after[qi] and old[qi]["type"] != after[qi]["type"]]



def hash_sum(columns: list[str]) -> Any:
    """The sum of every row's DuckDB ``hash`` over ``columns``, as text: order-independent (a HUGEINT sum cannot
    overflow) and one scan, but the hash is invertible — it catches edits, not a forger (hostile round 10, B40)."""
    from sqlglot import exp

    hashed = exp.Cast(this=exp.func("HASH", *[exp.column(c, quoted=True) for c in columns]),
                      to=exp.DataType.build("HUGEINT"))
    return exp.Cast(this=exp.func("COALESCE", exp.Sum(this=hashed), exp.Literal.number(0)),
                    to=exp.DataType.build("VARCHAR"))


def source_digest_query(relation: Any, columns: list[str], count_column: str | None, unit: str | None = None
                        ) -> Any:
    """``SELECT records, rows, content hash [, people] FROM relation``: the records as a release counts them (the
    count column's sum, else rows), the rows, and :func:`hash_sum` over ``columns``; with a privacy ``unit``, the
    distinct people too. One scan, in the engine."""
    from sqlglot import exp

    from ..common.sqlbuild import record_count

    people = [exp.Count(this=exp.Distinct(expressions=[exp.column(unit, quoted=True)]))] if unit else []
    return exp.select(record_count(count_column), exp.Count(this=exp.Star()), hash_sum(columns),
                      *people).from_(relation.copy())


# the column types DuckDB compares by identity: two values of one of these types are equal only where their text is
_IDENTITY_TYPES = frozenset({
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
    "UUID", "BLOB", "BIT"})


def _group_keys(c: str, kind: str) -> list[Any]:
    """What the content digest groups column ``c`` (of DuckDB type ``kind``) by, so that two values whose stored
    text differs never share a group: an identity type as it is; ``TIMESTAMP WITH TIME ZONE`` as the instant in UTC
    (round 11, H108); ``VARCHAR`` by its bytes (``COLLATE C``: a NOCASE column or a session's default_collation
    would merge 'A' and 'a'); ``JSON`` by its stored text (``to_json`` re-writes it: whitespace and escapes carried
    raw SSNs past check, hostile round 12, M25); any other type (FLOAT / DOUBLE: -0.0 = 0.0; INTERVAL: '1 month' =
    '30 days'; nested types, which may hold JSON) by both its JSON text and its text, ``VARIANT`` with its inner
    type too."""
    from sqlglot import exp

    x = exp.column(c, quoted=True)

    def text(e: exp.Expression) -> exp.Expression:
        return exp.Collate(this=exp.Cast(this=e, to=exp.DataType.build("VARCHAR")), expression=exp.var("C"))

    if kind == "TIMESTAMP WITH TIME ZONE":
        return [exp.func("TIMEZONE", exp.Literal.string("UTC"), x)]
    if kind in _IDENTITY_TYPES or kind.startswith(("DECIMAL(", "ENUM(")):
        return [x]
    if kind in ("VARCHAR", "JSON"):
        return [text(x)]
    keys = [text(exp.func("TO_JSON", x)), text(x.copy())]
    return [exp.func("VARIANT_TYPEOF", x.copy()), *keys] if kind == "VARIANT" else keys


def _multiplicity(weight: str | None) -> Any:
    """How many released rows a row of the digested relation stands for: ``COUNT(*)`` over the table itself, the
    sum of ``weight`` over the rows a release wrote its table from (each repeated ``weight`` times: the same
    digest without reading every released row again, issue 24.6)."""
    from sqlglot import exp

    if weight is None:
        return exp.Count(this=exp.Star())
    return exp.Cast(this=exp.Sum(this=exp.column(weight, quoted=True)), to=exp.DataType.build("BIGINT"))


def content_digest_query(table: Any, columns: list[str], types: dict[str, str] | None = None,
                         weight: str | None = None) -> Any:
    """One row, one text: the digest of ``table``'s rows over ``columns`` (``types``: column → DuckDB type) — the
    same rows in any order give the same digest, and other rows cannot be computed to give it (hostile round 10,
    B40: a sum of DuckDB's invertible row hash let 50 rows be solved for; round 11, M24: it stayed for tables of
    over a million rows). One GROUP BY of the rows (each column by :func:`_group_keys`), each distinct row with its
    count written as one JSON object (``to_json``: strings escaped, NULL as ``null``), md5, sorted, concatenated,
    sha256 (:data:`CONTENT_SHA256_COUNTED`). A released table repeats its rows, so this costs about one GROUP BY
    (bench/bench_released_values.py). ``weight``: ``table`` holds rows with their multiplicity in that column
    (:func:`_multiplicity`), and the digest is that of the rows repeated."""
    from sqlglot import exp

    keys = [k for c in columns for k in _group_keys(c, str((types or {}).get(c, "")).upper())]
    counted = exp.select(*[exp.alias_(k, f"c{i}") for i, k in enumerate(keys)],
                         exp.alias_(_multiplicity(weight), "n")).from_(table.copy()).group_by(
        *[k.copy() for k in keys])
    fields = [*(f"c{i}" for i in range(len(keys))), "n"]
    row = exp.Struct(expressions=[exp.PropertyEQ(this=exp.Literal.string(f), expression=exp.column(f))
                                  for f in fields])
    hashed = exp.select(exp.alias_(exp.func("MD5", exp.func("TO_JSON", row)), "h")).from_(
        exp.Subquery(this=counted, alias=exp.TableAlias(this=exp.to_identifier("g"))))
    # the sorted hashes concatenated, in 256 buckets by their first two hex digits (each bucket sorted and joined in
    # parallel, the buckets joined in their order): the very same text as one sorted LISTAGG, whose single ordered
    # group ran on one thread (a fifth of a 10M-row unit release's digest, issue 24.6)
    def joined_by(text: str, key: str) -> exp.Expression:   # LISTAGG(text, '' ORDER BY key COLLATE C)
        order = exp.Ordered(this=exp.Collate(this=exp.column(key), expression=exp.var("C")))
        return exp.GroupConcat(this=exp.Order(this=exp.column(text), expressions=[order]),
                               separator=exp.Literal.string(""))

    bucket = exp.Substring(this=exp.column("h"), start=exp.Literal.number(1), length=exp.Literal.number(2))
    buckets = (exp.select(exp.alias_(bucket, "b"), exp.alias_(joined_by("h", "h"), "s"))
               .from_(exp.Subquery(this=hashed, alias=exp.TableAlias(this=exp.to_identifier("r"))))
               .group_by(exp.column("b")))
    joined = joined_by("s", "b")
    return exp.select(exp.func("SHA256", exp.Coalesce(this=joined, expressions=[exp.Literal.string("")]))).from_(
        exp.Subquery(this=buckets, alias=exp.TableAlias(this=exp.to_identifier("k"))))


def released_values_query(table: Any, columns: list[str], weight: str | None = None) -> Any:
    """One row: per column of ``columns``, the sha256 of the column's released values with the rows holding each,
    then (two columns or more) the same of their combinations: what the release records and ``check`` recomputes,
    so that a value put back or changed since the release fails even where every class keeps its size (hostile
    round 9, M9: the raw age of a class whose every record had it), and values swapped between classes too. The
    text hashed: ``length:value`` (NULL: ``NULL``) then ``<US>rows``, sorted, joined by ``<RS>`` — length-prefixed,
    so no value can spell another's separators. One scan of the table (a GROUP BY of the columns, materialized);
    its few rows are spread over the digests (``i``: the column, or the combination) and each digest's counts summed
    in one GROUP BY — one aggregate per digest as a subquery each cost DuckDB's planner 50 ms on Adult (issue 29.1).
    ``weight``: as for :func:`content_digest_query`."""
    from sqlglot import exp

    from ..common.sqlbuild import lit

    cols = [exp.column(c, quoted=True) for c in columns]
    n = len(cols)
    counted = exp.select(*[exp.alias_(c.copy(), f"q{i}") for i, c in enumerate(cols)],
                         exp.alias_(_multiplicity(weight), "n")).from_(table.copy()).group_by(
        *[c.copy() for c in cols])   # the columns, not the aliases: a column of the table may be named q1

    def text(i: int) -> exp.Expression:
        v = exp.Cast(this=exp.column(f"q{i}"), to=exp.DataType.build("VARCHAR"))
        prefixed = exp.DPipe(this=exp.DPipe(this=exp.Cast(this=exp.Length(this=v.copy()),
                                                          to=exp.DataType.build("VARCHAR")), expression=lit(":")),
                             expression=v.copy())
        return exp.Coalesce(this=prefixed, expressions=[lit("NULL")])

    texts = [text(i) for i in range(n)]
    if n > 1:   # the combination: every column's text in a row
        together = texts[0].copy()
        for t in texts[1:]:
            together = exp.DPipe(this=together, expression=t.copy())
        texts.append(together)
    i = exp.column("i")
    spread = exp.select(exp.alias_(i.copy(), "i"), exp.alias_(exp.Case(this=i.copy(), ifs=[
        exp.If(this=exp.Literal.number(k), true=t) for k, t in enumerate(texts)]), "v"), exp.column("n")).from_(
        "c").join(exp.Table(this=exp.Anonymous(this="range", expressions=[exp.Literal.number(len(texts))]),
                            alias=exp.TableAlias(this=exp.to_identifier("r"), columns=[exp.to_identifier("i")])),
                  join_type="CROSS")
    summed = exp.select("i", "v", exp.alias_(exp.Sum(this=exp.column("n")), "n")).from_(
        exp.Subquery(this=spread, alias=exp.TableAlias(this=exp.to_identifier("s")))).group_by("i", "v")
    item = exp.DPipe(this=exp.DPipe(this=exp.column("v"), expression=exp.Chr(expressions=[exp.Literal.number(31)])),
                     expression=exp.Cast(this=exp.column("n"), to=exp.DataType.build("VARCHAR")))
    joined = exp.GroupConcat(this=exp.Order(this=item, expressions=[exp.Ordered(this=item.copy())]),
                             separator=exp.Chr(expressions=[exp.Literal.number(30)]))
    per = exp.select("i", exp.alias_(exp.func("SHA256", joined), "d")).from_(
        exp.Subquery(this=summed, alias=exp.TableAlias(this=exp.to_identifier("m")))).group_by("i")
    empty = exp.func("SHA256", lit(""))   # a digest of no rows (an empty table)
    picked = [exp.Coalesce(this=exp.Filter(this=exp.Max(this=exp.column("d")), expression=exp.Where(
        this=exp.EQ(this=exp.column("i"), expression=exp.Literal.number(k)))), expressions=[empty.copy()])
        for k in range(len(texts))]
    return exp.select(*picked).from_(exp.Subquery(this=per, alias=exp.TableAlias(this=exp.to_identifier("p")))).with_(
        "c", as_=counted, materialized=True)


def digested_columns(quasi: Any, present: Any) -> list[str]:
    """The columns whose released values are digested: the quasi-identifiers the table has and ``ec_id`` (hostile
    round 10, B18: the exact age written into ``ec_id`` kept every class), sorted (their order in a policy is not
    kept everywhere: a shared file's metadata holds the policy with its keys sorted)."""
    from ..common.columns import EC_ID

    return sorted({*quasi, EC_ID} & set(present)) if set(quasi) & set(present) else []


def noise_flag_of(policy: Policy) -> str | None:
    """The column that marks θ's noise records, as the policy declares it (None for every other method)."""
    flag = policy.method_params.get("noise_flag") if policy.method == "theta" else None
    return flag if isinstance(flag, str) and flag else None


def content_columns(columns: Any, noise_flag: str | None) -> list[str]:
    """The columns whose rows the released table's content hash covers: every column but θ's noise flag (a shared
    file leaves it out), in the table's order."""
    return [c for c in columns if c != noise_flag]


def released_values_digest(con: Any, table: Any, columns: list[str], noise_flag: str | None = None,
                           counted: Any = None) -> dict[str, Any] | None:
    """``{"columns": column → digest, "together": digest or None, "types": column → type, "content": …}`` of
    ``table``'s released values (:func:`released_values_query`) over the columns of ``columns`` it has, with the type
    of every column of the table as DuckDB names it (an ENUM with its dictionary: round 10, C09 / C10 put raw values
    in a type or a retyped column), and ``content``: the digest of its rows over :func:`content_columns`
    (:func:`table_content`; round 10, M15: an insensitive column set to raw values). None when it has none of
    ``columns``: nothing to record. ``counted``: the session table of rows with their counts (``__w``) that the
    release wrote ``table`` from (compiler/views.py ``release_step``); the digests are read from it — the same
    digests, over a fraction of the rows — when its counts add up to the table's rows, else from the table."""
    from ..common.sqlbuild import render
    from ..data.source import describe

    described = describe(con, table)
    columns = digested_columns(columns, [r[0] for r in described])
    if not columns:
        return None
    rows = _rows_of(con, table)
    weight = WEIGHT if counted is not None and _counted_rows(con, counted) == rows else None
    read = counted if weight else table
    found = [str(v) for v in con.execute(render(released_values_query(read, columns, weight))).fetchall()[0]]
    hashed = content_columns([r[0] for r in described], noise_flag)
    types = {str(r[0]): str(r[1]) for r in described if r[0] in hashed}   # θ's flag never leaves
    return {"columns": dict(zip(columns, found)), "together": found[len(columns)] if len(found) > len(columns) else None,
            "types": types, "content": table_content(con, table, hashed, types, counted=read if weight else None,
                                                     rows=rows)}


def _rows_of(con: Any, table: Any) -> int:
    """The rows of ``table``."""
    from sqlglot import exp

    from ..common.sqlbuild import render

    return int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(table.copy()))).fetchall()[0][0])


def _counted_rows(con: Any, counted: Any) -> int:
    """The rows a table of rows with their counts stands for (the sum of ``__w``)."""
    from sqlglot import exp

    from ..common.sqlbuild import render

    total = exp.Coalesce(this=exp.Sum(this=exp.column(WEIGHT, quoted=True)), expressions=[exp.Literal.number(0)])
    return int(con.execute(render(exp.select(total).from_(counted.copy()))).fetchall()[0][0])


def table_content(con: Any, table: Any, columns: list[str], types: dict[str, str], counted: Any = None,
                  rows: int | None = None) -> dict[str, Any]:
    """``{"hash", "kind", "rows", "columns", "duckdb"}``: the digest of ``table``'s rows over ``columns``
    (:func:`content_digest_query` of :data:`CONTENT_SHA256_COUNTED`; ``types``: column → DuckDB type, as the caller
    described the table) with DuckDB's version (a value's text, and ``hash``, may differ across versions) — what
    ``check`` recomputes for a released table and each related table. ``counted``: the table of rows with their
    counts ``__w`` that ``table`` repeats (:func:`released_values_digest` checked that they add up to its ``rows``):
    the digest is read from it."""
    import duckdb

    from ..common.sqlbuild import render
    from sqlglot import exp

    variant = [c for c in columns if "VARIANT" in str(types.get(c, "")).upper()]
    if variant:   # no SQL text keeps a VARIANT's inner types (hostile round 13, M30: INT64 → INT8 passed check)
        from ..errors import PolicyError

        raise PolicyError(f"column {variant[0]!r} is of type {types[variant[0]]}: a VARIANT's values change type "
                          "without changing their text, so anon_sql cannot record what it releases (nor export it); "
                          "cast the column to JSON or VARCHAR in a view of the source, or leave it out")
    rows = _rows_of(con, table) if rows is None else rows
    query = (content_digest_query(counted, columns, types, weight=WEIGHT) if counted is not None
             else content_digest_query(table, columns, types))
    found = str(con.execute(render(query)).fetchall()[0][0])
    return {"hash": found, "kind": CONTENT_SHA256_COUNTED, "rows": rows, "columns": list(columns),
            "duckdb": duckdb.__version__}


# above this many records the release records no content hash (a hash of every row costs about a quarter of one
# GROUP BY over the source: bench in docs/check.md), only the count; `check` then says so in the basis
DIGEST_MAX_RECORDS = 1_000_000


def source_digest(con: Any, policy: Policy, records: int | None = None, resolved: Any = None
                  ) -> dict[str, Any] | None:
    """The digest of a release's source that ``check`` compares with (issue 28.8's ``records_in``): records, rows,
    content hash, the columns hashed and DuckDB's version (its ``hash`` may differ across versions), read from the
    source the policy names as ``check`` reads it. A release with a ``privacy_unit`` counts ``records_in`` in rows
    (people are reported beside): its digest's records are rows (``"records": "rows"``) and it records the distinct
    people too (hostile round 5, C07 / C09). None with related tables (``records_in`` spans them) or where the
    policy names no table or file that is there (nothing to recount later);
    over :data:`DIGEST_MAX_RECORDS` (``records``: the count the release made) the count alone. ``resolved``: the
    release's :class:`~anon_sql.data.source.Source` as registered (before any sample or perturbation); when it was
    resolved from the policy's own ``source`` string (its label is that string) its relation and columns are what
    this reading gives (the same function resolved them), and are not read again (issue 29.1)."""
    import duckdb

    from ..common.sqlbuild import render
    from ..data.source import describe, readable_relation

    if policy.related or not isinstance(policy.source, str):
        return None
    if records is not None and records > DIGEST_MAX_RECORDS:
        return {"records": int(records), "skipped": f"the source has more than {DIGEST_MAX_RECORDS:,} records"}
    try:   # a basis for check, never a reason to refuse a release: a source it cannot digest records none
        if resolved is not None and resolved.label == policy.source:
            relation, columns = resolved.relation, list(resolved.columns)
        else:
            relation = readable_relation(con, policy.source)
            if relation is None:
                return None
            columns = [r[0] for r in describe(con, relation)]
        unit = policy.privacy_unit if policy.privacy_unit in columns else None
        found = con.execute(render(source_digest_query(relation, columns, policy.count_column, unit))).fetchall()[0]
    except duckdb.Error:
        return None
    records, rows, total = found[:3]
    digest = {"records": int(records or 0), "rows": int(rows), "hash": str(total), "columns": columns,
              "duckdb": duckdb.__version__}
    if unit:   # records_in counts rows; the people are recorded beside (the hash covers the unit's column)
        digest.update(counted="rows", people=int(found[3]))
    return digest


__all__ = ["DIGEST_MAX_RECORDS", "content_columns", "content_digest_query",
           "hash_sum", "noise_flag_of", "table_content", "digested_columns", "released_values_digest", "released_values_query", "taxonomy_digests", "changed", "retyped", "source_digest",
           "source_digest_query"]
