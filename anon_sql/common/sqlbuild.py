"""Small builders over sqlglot so that every name and literal in generated SQL is a quoted node, never pasted text."""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from functools import cache
from typing import Any, Callable, Hashable, Iterable, Iterator, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

MACRO_SCHEMA = "anon"   # the schema of the product's SQL macros (sql/macros.sql) on DuckDB


class KernelCall(exp.Expression):
    """A call of one of the product's per-class kernels by name (``entropy_counts``, ...). The compiled tree is the
    same for every engine; each dialect spells the call as :data:`KERNEL_SPELLING` says when it is rendered."""

    arg_types = {"this": True, "expressions": False}


# how a dialect's SQL reaches the kernels: (schema, name prefix). DuckDB (and the default) calls the persisted macros
# ``anon.<kernel>(…)``; Spark the session's pandas UDFs ``anon_<kernel>(…)`` (anon_sql.engines.spark.udfs)
KERNEL_SPELLING: dict[str, tuple[str | None, str]] = {"spark": (None, "anon_")}
# dialects whose ordered list aggregate is spelled ``sort_array(collect_list(x), asc)``: their ``array_agg`` keeps
# no ORDER BY (sqlglot renders Spark's as a bare ``collect_list``); the kernels read count lists largest first
SORTED_COLLECT = frozenset({"spark"})


def ident(name: str) -> exp.Identifier:
    """A quoted identifier: any name (spaces, quotes, semicolons, non-ASCII) round-trips as a name."""
    return exp.to_identifier(str(name), quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference, optionally qualified by a table alias."""
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table(name: str | exp.Table, schema: str | None = None, alias: str | None = None) -> exp.Table:
    """A quoted table reference ``schema.name AS alias`` (``name`` may already be a table reference: copied)."""
    t = name.copy() if isinstance(name, exp.Table) else exp.Table(this=ident(name), db=ident(schema) if schema else None)
    if alias:
        t.set("alias", exp.TableAlias(this=ident(alias)))
    return t


def session_table(name: str) -> exp.Table:
    """``temp.main."<name>"``: a table or view of this session only (DuckDB's TEMP catalog), named exactly so that
    it never resolves to a database object of the same name."""
    return exp.Table(this=ident(name), db=ident("main"), catalog=ident("temp"))


def lit(value: Any) -> exp.Expression:
    """A SQL literal for a Python scalar (None → NULL, bool → TRUE/FALSE, numbers, strings)."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.true() if value else exp.false()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return exp.Literal.number(value)
    if hasattr(value, "item"):  # numpy scalar
        return lit(value.item())
    return exp.Literal.string(str(value))


_TYPES: dict[str, exp.DataType] = {}


def dtype(name: str) -> exp.DataType:
    """A data type by name (``VARCHAR``, ``BIGINT``...), parsed once: ``DataType.build`` parses its text each call."""
    if name not in _TYPES:
        _TYPES[name] = exp.DataType.build(name)
    return _TYPES[name].copy()


def alias(expression: exp.Expression, name: str) -> exp.Alias:
    """``expression AS "name"``."""
    return exp.Alias(this=expression, alias=ident(name))


def func(name: str, *args: exp.Expression, schema: str | None = None) -> exp.Expression:
    """A call of a (possibly schema-qualified) function or macro by name."""
    call = exp.Anonymous(this=name, expressions=list(args))
    if schema:
        return exp.Dot(this=exp.to_identifier(schema), expression=call)
    return call


def values_table(rows: Sequence[Sequence[Any]], columns: Sequence[str], alias_name: str) -> exp.Expression:
    """An inline ``(VALUES ...) AS alias(columns)`` derived table built from Python rows."""
    tuples = [exp.Tuple(expressions=[lit(v) for v in row]) for row in rows]
    return exp.Values(
        expressions=tuples,
        alias=exp.TableAlias(this=ident(alias_name), columns=[ident(c) for c in columns]),
    )


def record_count(count_column: str | None, table: str | None = None) -> exp.Expression:
    """Records of a group: ``SUM(count_column)`` when each row stands for several records, else ``COUNT(*)``."""
    return exp.Sum(this=col(count_column, table)) if count_column else exp.Count(this=exp.Star())


def null_safe_eq(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    """``left IS NOT DISTINCT FROM right``: NULL quasi-identifier values form a class of their own."""
    return exp.NullSafeEQ(this=left, expression=right)


def and_all(conditions: Iterable[exp.Expression]) -> exp.Expression:
    """Conjunction of conditions (TRUE when empty)."""
    conds = list(conditions)
    return exp.and_(*conds) if conds else exp.true()


def render(expression: exp.Expression, dialect: str = "duckdb", pretty: bool = False, copy: bool = True) -> str:
    """Render an expression tree as SQL text for a dialect (the only place trees become text). ``copy=False``: the
    generator may rewrite the tree in place (its dialect's normalizations) instead of copying it first — for trees
    owned by the caller and rendered only in that dialect."""
    return expression.sql(dialect=_dialect(dialect), pretty=pretty, copy=copy)


def kernel_call(name: str, *args: exp.Expression) -> KernelCall:
    """A call of the kernel ``name`` (see :class:`KernelCall`)."""
    return KernelCall(this=exp.to_identifier(name), expressions=list(args))


@cache
def _dialect(name: str) -> Dialect:
    """``name``'s sqlglot dialect with this product's spellings added to its generator (the kernels, ordered lists):
    the operation map is data on the dialect class, as sqlglot's own dialects keep theirs, so no engine rewrites a
    finished tree."""
    base = type(Dialect.get_or_raise(name))
    schema, prefix = KERNEL_SPELLING.get(name, (MACRO_SCHEMA, ""))

    def kernel_sql(generator: Any, e: KernelCall) -> str:
        call = exp.Anonymous(this=prefix + e.name, expressions=e.expressions)
        return generator.sql(exp.Dot(this=exp.to_identifier(schema), expression=call) if schema else call)

    transforms = {**base.generator_class.TRANSFORMS, KernelCall: kernel_sql}
    if name in SORTED_COLLECT:
        plain = transforms.get(exp.ArrayAgg) or base.generator_class.arrayagg_sql   # type: ignore[attr-defined]

        def array_agg_sql(generator: Any, e: exp.ArrayAgg) -> str:
            if not isinstance(e.this, exp.Order):
                return plain(generator, e)
            keys = e.this.expressions
            descending = bool(keys and keys[0].args.get("desc"))
            return generator.sql(exp.ArraySort(this=exp.ArrayAgg(this=e.this.this), asc=exp.false() if descending
                                               else exp.true()))

        transforms[exp.ArrayAgg] = array_agg_sql
    generator = type("Generator", (base.generator_class,), {"TRANSFORMS": transforms})
    return type(f"AnonSQL{base.__name__}", (base,), {"Generator": generator})()


_FRAGMENTS: "OrderedDict[tuple, str]" = OrderedDict()
_FRAGMENTS_SIZE = 4096


def prerendered(key: Hashable, build: Callable[[], exp.Expression], dialect: str = "duckdb") -> exp.Expression:
    """A fragment of a statement rendered by sqlglot once per content and reused as that text (a ``Var`` node).

    For large constant parts that every release rebuilds (a taxonomy level's VALUES list and ENUM domain): ``key``
    must identify everything ``build`` reads (e.g. the taxonomy's content digest, the level, the aliases), so equal
    keys build equal trees. The text comes only from :func:`render` of ``build()``: names and literals in it are
    quoted by sqlglot like any other; only the rendering is skipped."""
    k = (dialect, key)
    text = _FRAGMENTS.get(k)
    if text is None:
        text = _FRAGMENTS[k] = render(build(), dialect)
        if len(_FRAGMENTS) > _FRAGMENTS_SIZE:
            _FRAGMENTS.popitem(last=False)
    else:
        _FRAGMENTS.move_to_end(k)
    return exp.Var(this=text)


def parse(sql: str, dialect: str = "duckdb") -> exp.Expression:
    """Parse one SQL statement (used for shipped .sql files and round-trip tests)."""
    return sqlglot.parse_one(sql, read=dialect)


def scratch_name(base: str) -> str:
    """``base`` with a random suffix: a name anon_sql registers or creates for one statement, which no object of the
    user's holds (hostile round 18, M50: a DataFrame the user registered as ``__anon_share_metadata`` was replaced by
    an export's and then unregistered)."""
    import secrets

    return f"{base}_{secrets.token_hex(8)}"


@contextlib.contextmanager
def registered_frame(con: Any, frame: Any, base: str) -> Iterator[str]:
    """``frame`` registered on ``con`` under a fresh :func:`scratch_name` for the ``with`` block, then unregistered."""
    name = scratch_name(base)
    con.register(name, frame)
    try:
        yield name
    finally:
        con.unregister(name)


def create_from_frame(con: Any, frame: Any, scratch: str, create: Callable[[exp.Table], Any]) -> Any:
    """Register a pandas ``frame`` on ``con`` under a fresh scratch view name (``scratch`` and a random suffix) for
    one statement, run ``create(view)`` (a CREATE … AS SELECT * FROM the view, the caller's way), unregister it, and
    return what ``create`` returned: the one way numpy results reach a table, on the engines and in the SDC modules
    alike."""
    with registered_frame(con, frame, scratch) as name:
        return create(exp.Table(this=ident(name)))
