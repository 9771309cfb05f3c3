"""Masking functions: the persisted ``anon.*`` macros (masking.sql) and the sqlglot builders a policy's
``mask = { function = ... }`` compiles to — macro calls, a seeded shuffle, and Faker values joined in SQL."""
from __future__ import annotations

import difflib
import hashlib
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Mapping

import duckdb
from sqlglot import exp

from anon_sql.errors import PolicyError

from .portable import hex_fraction, keyed_digest
from .sqlparts import call, claim_output, col, create_output, ident, lit, render, table_or_subquery
from ..common.sqlbuild import registered_frame, scratch_name

if TYPE_CHECKING:                # pandas is loaded by the fake mask only: `anon-sql check` reads masking_sql()
    import pandas as pd

SCHEMA = "anon"
MACROS = ("partial", "partial_email", "redact", "hash", "noise", "dnoise")
TABLE_MASKS = ("shuffle", "fake")          # need the whole column, not one value: shuffle_select / fake_select
_POS = "__anon_pos"


def masking_sql() -> str:
    """The text of masking.sql (shipped inside the package)."""
    return resources.files(__package__).joinpath("masking.sql").read_text(encoding="utf-8")


def install_masking(con: duckdb.DuckDBPyConnection, inside: bool = False) -> list[str]:
    """Create schema ``anon`` if missing and (re)create the masking macros in it, in one transaction (the caller's
    when ``inside``: a failed BEGIN would abort it); idempotent. Returns the macro names. The macros live in the
    database file and work in any DuckDB client without Python."""
    if inside:
        con.execute(masking_sql())
        return [f"{SCHEMA}.{m}" for m in MACROS]
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.TransactionException:     # an open transaction of the caller's, not declared: run inside it
        con.execute(masking_sql())
        return [f"{SCHEMA}.{m}" for m in MACROS]
    try:
        con.execute(masking_sql())
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return [f"{SCHEMA}.{m}" for m in MACROS]


def _int_param(spec: Mapping[str, Any], key: str, function: str, default: int | None = None) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"mask {function!r}: {key} must be a whole number >= 0, got {value!r} "
                          f"(e.g. mask = {{ function = \"partial\", keep_start = 2, pad = \"XXXX\", keep_end = 2 }})")
    return value


def _ratio(spec: Mapping[str, Any]) -> float:
    value = spec.get("ratio")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise PolicyError(f"mask 'noise': ratio must be a number in [0, 1] (the largest relative change), got "
                          f"{value!r} (e.g. mask = {{ function = \"noise\", ratio = 0.1 }})")
    return float(value)


@lru_cache(maxsize=256)
def _interval_ok(text: str) -> bool:
    try:
        duckdb.connect().execute("SELECT CAST(? AS INTERVAL)", [text]).fetchall()
    except duckdb.Error:
        return False
    return True


def _interval(spec: Mapping[str, Any]) -> exp.Expression:
    value = spec.get("interval")
    if not isinstance(value, str) or not _interval_ok(value):
        raise PolicyError(f"mask 'dnoise': interval must be a DuckDB interval text such as \"10 days\" or "
                          f"\"6 hours\", got {value!r}")
    return exp.Cast(this=lit(value), to=exp.DataType.build("INTERVAL"))


def mask_expression(column: str | exp.Expression, spec: Mapping[str, Any], seed: int | None = None,
                    key: exp.Expression | None = None, column_type: str | None = None) -> exp.Expression:
    """The sqlglot expression that masks one column with an ``anon.*`` macro, per ``spec`` (a policy's ``mask`` table).

    ``noise`` / ``dnoise`` with a ``seed`` use the seeded overload keyed by ``key`` (an expression identifying the
    row, e.g. a primary key; default: the column's own value, so equal values get equal noise). Without a seed they
    draw from DuckDB's random(). ``column_type="DATE"`` casts dnoise's TIMESTAMP back to DATE. ``shuffle`` and
    ``fake`` permute or replace the whole column: build them with :func:`shuffle_select` / :func:`fake_select`."""
    function = spec.get("function")
    x = col(column) if isinstance(column, str) else column.copy()
    if function in TABLE_MASKS:
        raise PolicyError(f"mask {function!r} works on the whole table, not one value: build it with "
                          f"anon_sql.sdc.{function}_select(...)")
    if function == "partial":
        pad = spec.get("pad")
        if not isinstance(pad, str):
            raise PolicyError(f"mask 'partial': pad must be a string such as \"XXXX\", got {pad!r}")
        return call("partial", x, lit(_int_param(spec, "keep_start", function)), lit(pad),
                    lit(_int_param(spec, "keep_end", function)), schema=SCHEMA)
    if function == "partial_email":
        return call("partial_email", x, schema=SCHEMA)
    if function == "redact":
        replacement = spec.get("replacement")
        if replacement is None:
            return call("redact", x, schema=SCHEMA)
        return call("redact", x, lit(str(replacement)), schema=SCHEMA)
    if function == "hash":
        salt = spec.get("salt")
        if not isinstance(salt, str) or not salt:
            raise PolicyError("mask 'hash': give a secret salt (mask = { function = \"hash\", salt = \"...\" }); "
                              "an unsalted hash of a small domain is reversed by hashing every candidate")
        return call("hash", x, lit(salt), schema=SCHEMA)
    if function in ("noise", "dnoise"):
        amount = lit(_ratio(spec)) if function == "noise" else _interval(spec)
        args = [x, amount]
        if seed is not None:
            args += [lit(int(seed)), key.copy() if key is not None else x.copy()]
        out = call(function, *args, schema=SCHEMA)
        if function == "dnoise" and column_type and column_type.upper() == "DATE":
            out = exp.Cast(this=out, to=exp.DataType.build("DATE"))
        return out
    raise PolicyError(f"unknown mask function {function!r}: use one of {', '.join(MACROS + TABLE_MASKS)}")


def _draw(seed: int, key: exp.Expression) -> exp.Expression:
    """sha256(seed || chr(31) || key) as hex text: a stable 256-bit draw per row, ordered as text, computed alike by
    DuckDB and Spark (:func:`anon_sql.sdc.portable.keyed_digest`)."""
    return keyed_digest(seed, key)


def _row_key(key_columns: list[str] | None) -> exp.Expression:
    if not key_columns:
        return exp.column("rowid")         # base tables only; pass key_columns for a view
    parts = [exp.Cast(this=col(c), to=exp.DataType.build("VARCHAR")) for c in key_columns]
    return call("concat_ws", lit("\x1f"), *parts) if len(parts) > 1 else parts[0]


def _project(alias: str, columns: list[str] | None, replaced: str, value: exp.Expression,
             drop: tuple[str, ...] = ()) -> list[exp.Expression]:
    """``alias``'s columns with ``replaced`` taken from ``value``: the listed ``columns`` one by one (any engine),
    else DuckDB's ``alias.* EXCLUDE (drop) REPLACE (value AS replaced)``."""
    if columns is not None:
        return [exp.alias_(value.copy(), ident(c)) if c == replaced else col(c, alias) for c in columns]
    star = exp.Star(except_=[col(c) for c in drop] or None, replace=[exp.alias_(value.copy(), ident(replaced))])
    return [exp.Column(this=star, table=ident(alias))]


def shuffle_select(source: str | exp.Table, column: str, seed: int,
                   key_columns: list[str] | None = None, columns: list[str] | None = None) -> exp.Select:
    """``SELECT`` every column of ``source`` with ``column`` permuted among the rows (a uniform permutation seeded by
    ``seed``): rows in key order are paired with the column's values ranked by sha256(seed, key). ``key_columns``
    identify a row (default: rowid, which only base tables have); the same seed and keys give the same release.
    ``columns``: the source's columns, listed in the output (what Spark needs; else DuckDB's ``* REPLACE``)."""
    k = _row_key(key_columns)
    pos = lambda order: exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order))  # noqa: E731
    rows = exp.select(exp.Star(), exp.alias_(pos([exp.Ordered(this=k.copy())]), ident(_POS))).from_(table_or_subquery(source))
    values = exp.select(col(column), exp.alias_(pos([exp.Ordered(this=_draw(seed, k.copy())),
                                                     exp.Ordered(this=k.copy())]), ident(_POS))) \
        .from_(table_or_subquery(source))
    return exp.select(*_project("s", columns, column, col(column, "p"), drop=(_POS,))) \
        .from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("s")))) \
        .join(exp.Subquery(this=values, alias=exp.TableAlias(this=ident("p"))),
              on=exp.EQ(this=col(_POS, "s"), expression=col(_POS, "p")))


# ---------------------------------------------------------------------------------------------------------------- fake

@lru_cache(maxsize=32)
def _faker(locale: str):
    try:
        from faker import Faker
    except ImportError:  # pragma: no cover - faker is a declared dependency of the fake mask
        raise PolicyError("mask 'fake' needs the faker package: pip install faker") from None
    try:
        return Faker(locale)
    except AttributeError:
        from faker.config import AVAILABLE_LOCALES
        close = difflib.get_close_matches(locale, AVAILABLE_LOCALES, n=5, cutoff=0.5)
        raise PolicyError(f"mask 'fake': unknown Faker locale {locale!r}"
                          + (f"; close: {', '.join(close)}" if close else "; e.g. en_US, fr_FR, de_DE")) from None


def faker_providers(locale: str = "en_US") -> list[str]:
    """The provider (method) names a Faker of that locale offers."""
    gen = _faker(locale).factories[0]
    return sorted({m for p in gen.providers for m in dir(p)
                   if not m.startswith("_") and callable(getattr(p, m, None))})


def _provider(locale: str, provider: str):
    names = faker_providers(locale)
    if not isinstance(provider, str) or provider not in names:
        close = difflib.get_close_matches(str(provider), names, n=6, cutoff=0.5)
        raise PolicyError(f"mask 'fake': unknown Faker provider {provider!r} for locale {locale!r}; "
                          + (f"close providers: {', '.join(close)}" if close
                             else "e.g. first_name, last_name, name, email, phone_number, address, city"))
    return _faker(locale), provider


def _seed_of(seed: int, value: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{int(seed)}\x1f{value}".encode()).digest()[:8], "big")


def fake_values(values: list[str], provider: str, locale: str = "en_US", seed: int = 0) -> list[str]:
    """One fake value per source value, seeded by sha256(seed, value): the same value always gets the same fake."""
    fake, name = _provider(locale, provider)
    out = []
    for v in values:                 # Faker has no batch API: one call per distinct value
        fake.seed_instance(_seed_of(seed, v))
        try:
            out.append(str(getattr(fake, name)()))
        except TypeError as e:
            raise PolicyError(f"mask 'fake': provider {provider!r} needs arguments ({e}); pick a provider that "
                              "takes none, e.g. first_name") from None
    return out


def fake_pool(n: int, provider: str, locale: str = "en_US", seed: int = 0) -> list[str]:
    """``n`` fake values from one Faker stream seeded by ``seed``."""
    return fake_values([f"#pool{i}" for i in range(n)], provider, locale, seed)


def fake_sources_query(source: str | exp.Table, column: str) -> exp.Select:
    """The distinct non-NULL values of ``column`` as text (``source``), in order: what the fake mapping maps."""
    distinct = exp.select(exp.alias_(exp.Cast(this=col(column), to=exp.DataType.build("VARCHAR")), ident("source"))) \
        .distinct().from_(table_or_subquery(source)).where(exp.Not(this=exp.Is(this=col(column), expression=exp.null())))
    return distinct.order_by(exp.column("source"))


def fake_frame(values: list[str], spec: Mapping[str, Any], seed: int) -> pd.DataFrame:
    """The fake mapping of the distinct ``values`` (:func:`fake_mapping`): (source, fake) when consistent, else a
    pool (slot, fake) as large as the values."""
    import pandas as pd

    provider, locale = spec.get("provider"), spec.get("locale", "en_US")
    if spec.get("consistent", True):
        return pd.DataFrame({"source": values, "fake": fake_values(values, provider, locale, seed)})
    return pd.DataFrame({"slot": range(len(values)), "fake": fake_pool(len(values), provider, locale, seed)})


def fake_mapping(con: duckdb.DuckDBPyConnection, source: str | exp.Table, column: str, spec: Mapping[str, Any],
                 seed: int, mapping_table: str) -> pd.DataFrame:
    """Generate the fake values for ``column`` and store them in TEMP table ``mapping_table``; returns the mapping.

    ``consistent = true`` (the default): one row (source, fake) per DISTINCT non-NULL source value, the fake seeded by
    (seed, value) — the same person keeps the same fake name everywhere, in every release with that seed.
    ``consistent = false``: a pool (slot, fake) of as many fakes as there are distinct values; rows draw a slot."""
    _provider(spec.get("locale", "en_US"), spec.get("provider"))   # refuse a bad provider before reading anything
    claim_output(con, mapping_table, "fake_select", temporary=True)   # never a user's table (round 20, M55)
    values = [r[0] for r in con.execute(render(fake_sources_query(source, column))).fetchall()]
    frame = fake_frame(values, spec, seed)
    with registered_frame(con, frame, "__anon_fake_frame") as view:
        create_output(con, mapping_table, exp.select("*").from_(table_or_subquery(view)), temporary=True)
    return frame


def fake_join(source: str | exp.Table, column: str, spec: Mapping[str, Any], seed: int, mapping_table: str,
              size: int, key_columns: list[str] | None = None, columns: list[str] | None = None) -> exp.Select:
    """``SELECT`` every column of ``source`` with ``column`` replaced by its fake from ``mapping_table`` (``size``
    rows, :func:`fake_frame`), NULL staying NULL: by value when consistent, else each row's slot
    ⌊u · size⌋ with u the first 52 bits of sha256(seed, key). ``columns``: listed in the output (any engine)."""
    m = table_or_subquery(mapping_table, alias="m")
    relation: exp.Expression = table_or_subquery(source, alias="s")
    if spec.get("consistent", True):
        on = exp.EQ(this=exp.Cast(this=col(column, "s"), to=exp.DataType.build("VARCHAR")),
                    expression=col("source", "m"))
        drop: tuple[str, ...] = ()
    else:
        k = _row_key(list(key_columns) if key_columns else None)
        digest = exp.select(exp.Star(), exp.alias_(_draw(seed, k), ident("__anon_fake_d"))) \
            .from_(table_or_subquery(source))
        u = hex_fraction(col("__anon_fake_d"))
        slot = exp.Cast(this=exp.Floor(this=exp.Mul(this=u, expression=lit(float(max(size, 1))))),
                        to=exp.DataType.build("BIGINT"))
        slotted = exp.select(exp.Star(), exp.alias_(slot, ident("__anon_fake_slot"))).from_(digest.subquery("d"))
        relation = slotted.subquery("s")
        on = exp.and_(exp.EQ(this=col("__anon_fake_slot", "s"), expression=col("slot", "m")),
                      exp.Not(this=exp.Is(this=col(column, "s"), expression=exp.null())))
        drop = ("__anon_fake_d", "__anon_fake_slot")
    return exp.select(*_project("s", columns, column, col("fake", "m"), drop=drop)).from_(relation) \
        .join(m, on=on, join_type="left")


def fake_select(con: duckdb.DuckDBPyConnection, source: str | exp.Table, column: str, spec: Mapping[str, Any],
                seed: int, key_columns: list[str] | None = None, mapping_table: str | None = None,
                columns: list[str] | None = None) -> exp.Select:
    """``SELECT`` every column of ``source`` with ``column`` replaced by Faker values (``spec``: provider, locale,
    consistent), joined in SQL from the mapping :func:`fake_mapping` builds in DuckDB (NULL stays NULL)."""
    mapping_table = mapping_table or scratch_name(f"__anon_fake_{column}")   # round 19, M51
    frame = fake_mapping(con, source, column, spec, seed, mapping_table)
    return fake_join(source, column, spec, seed, mapping_table, len(frame), key_columns, columns)


__all__ = ["MACROS", "SCHEMA", "TABLE_MASKS", "fake_frame", "fake_join", "fake_mapping", "fake_pool", "fake_select",
           "fake_sources_query", "fake_values",
           "faker_providers", "install_masking", "mask_expression", "masking_sql",
           "shuffle_select"]
