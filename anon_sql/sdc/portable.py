"""Row-local masks and perturbations as plain SQL expressions that give the same values on DuckDB and Spark
(docs/sdc.md, "Engines"): the ``anon.*`` macro bodies inlined for an engine that cannot hold the persisted macros,
top / bottom coding, and a seeded standard normal per row drawn from sha256 — no DuckDB-only function (``hash``,
``md5_number``, ``CAST('0x…' AS BIGINT)``), so sqlglot renders each tree for either engine unchanged."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping

import duckdb
from sqlglot import exp

from ..errors import PolicyError
from .sqlparts import fill

#: the macro masks an engine without the persisted macros runs inline (all of them)
INLINE_MASKS = ("partial", "partial_email", "redact", "hash", "noise", "dnoise")
_HEX = "0123456789abcdef"
_GRID = float(2**52)    # 13 hex digits = 52 bits: every double of the grid in [0, 1) is exact


def hex_fraction(digest: exp.Expression, start: int = 1) -> exp.Expression:
    """The 13 hex digits of ``digest`` from ``start`` (1-based) as a number in [0, 1): Σ digit · 16^(12 − i) / 2^52,
    written with substr/strpos only (the macros' ``CAST('0x' || … AS BIGINT)`` is DuckDB's; Spark reads it as NULL)."""
    terms = [fill("CAST(strpos(__hex, substr(__d, __at, 1)) - 1 AS BIGINT) * __w",
                  values={"__hex": _HEX, "__d": digest, "__at": start + i, "__w": 16 ** (12 - i)})
             for i in range(13)]
    total = terms[0]
    for term in terms[1:]:
        total = exp.Add(this=total, expression=term)
    # BIGINT terms (Spark's INT would overflow at 8 · 2^28) summed exactly, divided as DOUBLE (not Spark's DECIMAL)
    return fill("CAST(__t AS DOUBLE) / CAST(__g AS DOUBLE)", values={"__t": exp.Paren(this=total), "__g": int(_GRID)})


def keyed_digest(seed: int, key: exp.Expression, unit: str | None = None) -> exp.Expression:
    """sha256(seed ‖ chr(31) [‖ unit ‖ chr(31)] ‖ key as text): the seeded macros' digest (without ``unit``), or a
    column's own stream (with it)."""
    head = f"{int(seed)}\x1f" + (f"{unit}\x1f" if unit is not None else "")
    return fill("sha256(__head || coalesce(CAST(__k AS VARCHAR), ''))", values={"__head": head, "__k": key})


def inline_mask(x: exp.Expression, spec: Mapping[str, Any], seed: int | None = None,
                key: exp.Expression | None = None, column_type: str | None = None) -> exp.Expression:
    """The ``anon.*`` macro ``spec['function']`` applied to ``x`` as an inline expression with the macro's values
    (parameters already checked by :func:`anon_sql.sdc.masking.mask_expression`). ``noise`` and ``dnoise`` need
    the seed (the seeded overload, keyed by ``key``, default ``x``); ``dnoise`` the column's type (DATE or
    TIMESTAMP)."""
    function = spec["function"]
    if function == "partial":
        ks, ke = max(int(spec["keep_start"]), 0), max(int(spec["keep_end"]), 0)
        return fill("""CASE WHEN length(CAST(__x AS VARCHAR)) >= __s
                            THEN concat(substr(CAST(__x AS VARCHAR), 1, __ks), __pad,
                                        substr(CAST(__x AS VARCHAR), -__ke, __ke))
                            WHEN __x IS NULL THEN NULL ELSE __pad END""",
                    values={"__x": x, "__s": ks + ke, "__ks": ks, "__ke": ke, "__pad": str(spec["pad"])})
    if function == "partial_email":
        return fill("""CASE WHEN strpos(CAST(__x AS VARCHAR), '@') = 0 THEN '******'
                            WHEN __x IS NULL THEN NULL
                            ELSE concat(substr(CAST(__x AS VARCHAR), 1, least(strpos(CAST(__x AS VARCHAR), '@') - 1, 1)),
                                        '******@******', regexp_extract(CAST(__x AS VARCHAR), '[.][^.@]*$', 0)) END""",
                    values={"__x": x})
    if function == "redact":
        replacement = spec.get("replacement")
        return fill("CASE WHEN __x IS NULL THEN NULL ELSE __r END",
                    values={"__x": x, "__r": "[REDACTED]" if replacement is None else str(replacement)})
    if function == "hash":
        return fill("sha256(__salt || CAST(__x AS VARCHAR))", values={"__x": x, "__salt": str(spec["salt"])})
    if function == "noise":
        if seed is None:
            raise PolicyError("mask 'noise' inline needs the policy's seed (the seeded overload of anon.noise)")
        u = hex_fraction(keyed_digest(seed, key if key is not None else x))
        return fill("__x * (1 + __ratio * (2 * __u - 1))", values={"__x": x, "__ratio": float(spec["ratio"]),
                                                                    "__u": u})
    if function == "dnoise":
        if seed is None:
            raise PolicyError("mask 'dnoise' inline needs the policy's seed (the seeded overload of anon.dnoise)")
        return shifted_date(x, spec, seed, key if key is not None else x, column_type)
    raise PolicyError(f"mask {function!r} has no inline form: on this engine use one of {', '.join(INLINE_MASKS)}")


@lru_cache(maxsize=256)
def _epoch(text: str) -> float | None:
    try:
        return float(duckdb.connect().execute("SELECT epoch(CAST(? AS INTERVAL))", [text]).fetchall()[0][0])
    except duckdb.Error:
        return None


def interval_seconds(value: Any) -> float:
    """The seconds of a dnoise interval text as DuckDB's macro counts them (``epoch``: a month is 30 days)."""
    seconds = _epoch(value) if isinstance(value, str) else None
    if seconds is None:
        raise PolicyError(f"mask 'dnoise': interval must be a DuckDB interval text such as \"10 days\" or "
                          f"\"6 hours\", got {value!r}")
    return seconds


def shifted_date(x: exp.Expression, spec: Mapping[str, Any], seed: int, key: exp.Expression,
                 column_type: str | None) -> exp.Expression:
    """``anon.dnoise(x, interval, seed, key)`` without DuckDB's interval arithmetic: the offset in microseconds is
    the macro's round-half-even((2u − 1) · seconds(interval) · 10^6) with u its sha256 uniform; a TIMESTAMP moves by
    it (``timestamp_micros(unix_micros(x) + offset)``), a DATE by ⌊offset / 1 day⌋ days (what DuckDB's
    CAST(date + offset AS DATE) gives)."""
    u = hex_fraction(keyed_digest(seed, key))
    offset = fill("CAST(rint((2 * __u - 1) * __s * 1000000) AS BIGINT)",
                  values={"__u": u, "__s": interval_seconds(spec.get("interval"))})
    kind = str(column_type or "").upper()
    if kind == "DATE":
        return fill("date_add(__x, CAST(floor(__o / 86400000000) AS INT))", values={"__x": x, "__o": offset})
    if kind.startswith("TIMESTAMP"):
        return fill("timestamp_micros(unix_micros(__x) + __o)", values={"__x": x, "__o": offset})
    raise PolicyError(f"mask 'dnoise' needs a DATE or TIMESTAMP column, got {column_type or 'an unknown type'}; "
                      "cast the column in a view over the source, or choose another mask function")


def coded(x: exp.Expression, spec: Mapping[str, Any]) -> exp.Expression:
    """Top or bottom coding of ``x`` (a checked ``perturb`` table): values beyond the threshold become the
    replacement (default: the threshold); NULL stays NULL."""
    top = spec["kind"] == "top_code"
    threshold = spec["above"] if top else spec["below"]
    replacement = threshold if spec.get("replacement") is None else spec["replacement"]
    template = ("CASE WHEN __x > __t THEN __r ELSE __x END" if top else "CASE WHEN __x < __t THEN __r ELSE __x END")
    return fill(template, values={"__x": x, "__t": threshold, "__r": replacement})


def hash_normal(digest: exp.Expression) -> exp.Expression:
    """A standard normal per row by Box–Muller from its :func:`keyed_digest` (seed, unit, key): u1, u2 are the
    digest's first two runs of 13 hex digits, z = sqrt(−2 ln(1 − u1)) · cos(2π u2). Pass the digest as a column
    computed once (the expression reads it 26 times)."""
    return fill("sqrt(-2 * ln(1 - __u1)) * cos(__tau * __u2)",
                values={"__u1": hex_fraction(digest, 1), "__u2": hex_fraction(digest, 14), "__tau": 2 * math.pi})


def row_content_key(columns: list[str]) -> exp.Expression:
    """A text that identifies a row by its values (NULL distinct from every value) and its rank among equal rows:
    a per-row key without a row id, the same on any engine (equal rows are interchangeable)."""
    parts = [fill("coalesce('=' || CAST(__c AS VARCHAR), chr(30))", values={"__c": exp.column(c, quoted=True)})
             for c in columns]
    text = parts[0]
    for part in parts[1:]:
        text = exp.DPipe(this=exp.DPipe(this=text, expression=fill("chr(31)")), expression=part)
    cols = [exp.column(c, quoted=True) for c in columns]
    rank = exp.Window(this=exp.RowNumber(), partition_by=cols,
                      order=exp.Order(expressions=[exp.Ordered(this=c.copy()) for c in cols]))
    return exp.DPipe(this=exp.DPipe(this=text, expression=fill("chr(31)")),
                     expression=exp.Cast(this=rank, to=exp.DataType.build("VARCHAR")))


__all__ = ["INLINE_MASKS", "coded", "hash_normal", "hex_fraction", "inline_mask", "keyed_digest", "row_content_key",
           "interval_seconds", "shifted_date"]
