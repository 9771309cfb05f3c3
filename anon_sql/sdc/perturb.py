"""Perturbation per attribute (issue 26 part 1): validate each column's ``perturb = { kind = ... }`` and write the
perturbed relation — microaggregation, top / bottom coding, PRAM, noise, rank swapping — seeded from the policy seed.

Row-level work runs in DuckDB (coding, PRAM draws, individual ranking, the final join); numpy does what an algorithm
needs (MDAV, normal draws, swap pairs) on whole columns. Each column (or group of columns) gets its own numpy
Generator from (seed, column or group name), so adding a column to the policy never changes another column's draws.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
from sqlglot import exp

from ..common.columns import is_numeric
from ..errors import PolicyError
from . import microaggregation, pram
from .sqlparts import (claim_output, create_output, execute_tree, fill, ident, render, store_frame,
                       table_or_subquery)
from ..common.sqlbuild import scratch_name

KINDS: dict[str, dict[str, Any]] = {
    # kind: required keys, optional keys with defaults, whether the column must be numeric
    "microaggregation": {"required": ("k",), "optional": {"method": "mdav", "group": None}, "numeric": True},
    "top_code": {"required": ("above",), "optional": {"replacement": None}, "numeric": True},
    "bottom_code": {"required": ("below",), "optional": {"replacement": None}, "numeric": True},
    "pram": {"required": ("retain",), "optional": {"invariant": False}, "numeric": False},
    "noise": {"required": ("scale",), "optional": {"correlated": False, "group": None}, "numeric": True},
    "swap": {"required": ("window",), "optional": {}, "numeric": True},
}
METHODS = ("mdav", "individual_ranking")
ROW = "__anon_row"
EXAMPLES = {"k": "k = 3", "above": "above = 100000", "below": "below = 0", "retain": "retain = 0.8",
            "scale": "scale = 0.1", "window": "window = 5"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(float(value))


def validate_perturbation(spec: Mapping[str, Any], column: str, column_type: str) -> dict[str, Any]:
    """Check one column's perturb table and return it with its defaults filled in. Raises PolicyError naming the
    column, the key and the fix: unknown kind or key, missing key, k < 2, retain outside (0, 1], scale <= 0, window
    outside (0, 100], a kind that needs numbers on a non-numeric column."""
    where = f"attributes.{column}.perturb"
    if not isinstance(spec, Mapping):
        raise PolicyError(f"{where} must be a table such as {{ kind = \"noise\", scale = 0.1 }}, got {spec!r}")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise PolicyError(f"{where}.kind = {kind!r} is not a perturbation: use one of {', '.join(KINDS)}")
    shape = KINDS[kind]
    allowed = {"kind", *shape["required"], *shape["optional"]}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r} for kind = \"{kind}\" "
                          f"(its keys: {', '.join(sorted(allowed))}); remove it")
    missing = [key for key in shape["required"] if key not in spec]
    if missing:
        raise PolicyError(f"{where}: kind = \"{kind}\" needs {missing[0]!r}; add it, e.g. "
                          f"{EXAMPLES[missing[0]]}")
    out = {"kind": kind, **shape["optional"], **dict(spec)}
    if shape["numeric"] and not is_numeric(column_type):
        raise PolicyError(f"{where}: kind = \"{kind}\" needs a numeric column but {column!r} is {column_type}; "
                          f"cast the column to a number in the source, or use kind = \"pram\" for categories")
    if kind == "microaggregation":
        k = out["k"]
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 2:
            raise PolicyError(f"{where}.k = {k!r} must be an integer >= 2; set k = 3 or more")
        if out["method"] not in METHODS:
            raise PolicyError(f"{where}.method = {out['method']!r} is not a microaggregation method: use "
                              f"\"mdav\" or \"individual_ranking\"")
        if out["group"] is not None and (not isinstance(out["group"], str) or not out["group"]):
            raise PolicyError(f"{where}.group = {out['group']!r} must be a non-empty name shared by the columns "
                              "aggregated together, e.g. group = \"g1\"")
        if out["group"] is not None and out["method"] != "mdav":
            raise PolicyError(f"{where}.group: individual_ranking aggregates each column on its own; remove group "
                              "or use method = \"mdav\"")
    elif kind in ("top_code", "bottom_code"):
        key = "above" if kind == "top_code" else "below"
        if not _number(out[key]):
            raise PolicyError(f"{where}.{key} = {out[key]!r} must be a finite number, e.g. {key} = 100")
        if out["replacement"] is not None and not _number(out["replacement"]):
            raise PolicyError(f"{where}.replacement = {out['replacement']!r} must be a finite number or left out "
                              f"(then values beyond {key} become {key})")
    elif kind == "pram":
        r = out["retain"]
        if not _number(r) or not 0.0 < float(r) <= 1.0:
            raise PolicyError(f"{where}.retain = {r!r} must be in (0, 1] (the probability to keep a value); "
                              "set retain = 0.8, say")
        if not isinstance(out["invariant"], bool):
            raise PolicyError(f"{where}.invariant = {out['invariant']!r} must be true or false")
    elif kind == "noise":
        s = out["scale"]
        if not _number(s) or float(s) <= 0:
            raise PolicyError(f"{where}.scale = {s!r} must be a number > 0 (noise sd as a share of the column's sd); "
                              "set scale = 0.1, say")
        if not isinstance(out["correlated"], bool):
            raise PolicyError(f"{where}.correlated = {out['correlated']!r} must be true or false")
        if out["group"] is not None and not out["correlated"]:
            raise PolicyError(f"{where}.group only applies to correlated noise; add correlated = true or remove group")
    elif kind == "swap":
        w = out["window"]
        if not _number(w) or not 0.0 < float(w) <= 100.0:
            raise PolicyError(f"{where}.window = {w!r} must be a percentage of ranks in (0, 100]; set window = 5, say")
    return out


def validate_groups(specs: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Columns sharing a ``group`` must share the kind and its parameters; returns group name → columns."""
    groups: dict[str, list[str]] = {}
    for column, spec in specs.items():
        if spec.get("group") is not None:
            groups.setdefault(spec["group"], []).append(column)
    for name, columns in groups.items():
        first = specs[columns[0]]
        for other in columns[1:]:
            theirs = specs[other]
            for key in ("kind", "k", "method", "scale", "correlated"):
                if first.get(key) != theirs.get(key):
                    raise PolicyError(f"attributes.{other}.perturb.{key} = {theirs.get(key)!r} differs from "
                                      f"attributes.{columns[0]}.perturb.{key} = {first.get(key)!r} in group "
                                      f"{name!r}: the columns of a group share their perturbation; make them equal")
    return groups


@dataclass
class Perturbation:
    """What perturb() wrote: the output table, and per column (or group) what was done and measured."""

    output: str
    rows: int
    details: dict[str, dict[str, Any]] = field(default_factory=dict)


def _rng(seed: int, unit: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(unit.encode("utf-8"))]))


def _describe(con, source) -> tuple[list[str], list[str]]:
    rel = con.sql(render(fill("SELECT * FROM __src", tables={"__src": source})))
    return list(rel.columns), [str(t) for t in rel.types]


def columns_query(work: str | exp.Expression, columns: list[str], complete: bool = True,
                  row: str = ROW) -> exp.Select:
    """``SELECT row, CAST(c_i AS DOUBLE) AS c<i> … ORDER BY row``: what a whole-column algorithm reads, the same
    query on every engine; only rows where every column is non-NULL when ``complete``."""
    projections = [exp.column(row, quoted=True)] + [
        exp.cast(exp.column(c, quoted=True), "DOUBLE").as_(f"c{i}") for i, c in enumerate(columns)]
    q = exp.select(*projections).from_(table_or_subquery(work))
    if complete:
        q = q.where(exp.and_(*[exp.column(c, quoted=True).is_(exp.null()).not_() for c in columns]))
    return q.order_by(exp.column(row, quoted=True))


def column_arrays(data: Mapping[str, Any], columns: list[str], row: str = ROW) -> tuple[np.ndarray, np.ndarray]:
    """Row ids and an n × d float array (NaN for NULL) from :func:`columns_query`'s result (DuckDB's
    ``fetchnumpy`` or a pandas frame)."""
    def floats(values: Any) -> np.ndarray:
        if isinstance(values, pd.Series):
            return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        return np.ma.filled(np.ma.asarray(values, dtype=float), np.nan)

    rows = np.asarray(data[row], dtype=np.int64)
    X = np.column_stack([floats(data[f"c{i}"]) for i in range(len(columns))]) if columns \
        else np.zeros((rows.size, 0))
    return rows, X


def _fetch(con, work, columns: list[str], complete: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Row ids and an n × d float array of the given columns, ordered by row id (DuckDB)."""
    return column_arrays(con.execute(render(columns_query(work, columns, complete))).fetchnumpy(), columns)


def _store_sql(con, name: str, query: exp.Expression) -> None:
    execute_tree(con, exp.Create(this=table_or_subquery(name), kind="TABLE", replace=True, expression=query,
                        properties=exp.Properties(expressions=[exp.TemporaryProperty()])))


def _drop(con, name: str) -> None:
    execute_tree(con, fill("DROP TABLE IF EXISTS __t", tables={"__t": name}))


def perturb(con, table_name: str | exp.Table, column_specs: Mapping[str, Mapping[str, Any]], seed: int, *,
            output: str | None = None, row_id: str | None = None, temporary: bool = False,
            row_key: str | None = None) -> Perturbation:
    """Write ``output`` (default ``<table>__perturbed``): the source with each column of ``column_specs`` perturbed
    as its spec says, other columns unchanged, the same rows (NULLs stay NULL). ``row_id`` names an extra column
    holding the source row number (for IL1s and tests; leave it out of a release); ``temporary``: a TEMP table (what a
    release's resolve stage writes before its transaction); ``row_key``: a column numbering the rows 1 … n that the
seeded draws follow (a release numbers rows by their values, so every engine draws alike; default: rowid). Same
seed ⇒ same output."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise PolicyError(f"seed = {seed!r} must be an integer >= 0")
    source_name = table_name.name if isinstance(table_name, exp.Table) else str(table_name)
    output = output or f"{source_name}__perturbed"
    claim_output(con, output, "perturb", temporary)
    columns, types = _describe(con, table_name)
    if ROW in columns or (row_id is not None and row_id in columns):
        raise PolicyError(f"the source already has a column named {row_id or ROW!r}; rename it or pick another row_id")
    type_of = dict(zip(columns, types))
    specs: dict[str, dict[str, Any]] = {}
    for column, spec in column_specs.items():
        if column not in type_of:
            raise PolicyError(f"attributes.{column}.perturb: no column {column!r} in the source (columns: {columns})")
        specs[column] = validate_perturbation(spec, column, type_of[column])
    groups = validate_groups(specs)

    work = scratch_name(f"{output}__sdc_work")     # fresh names: never a table of the user's (round 19, M51)
    _store_sql(con, work, fill("SELECT * FROM __src", tables={"__src": table_name}))
    number = fill("SELECT __k AS __r, * FROM __w", names={"__r": ROW, "__k": row_key}, tables={"__w": work}) \
        if row_key is not None else fill("SELECT rowid AS __r, * FROM __w", names={"__r": ROW}, tables={"__w": work})
    _store_sql(con, f"{work}_n", number)
    _drop(con, work)
    work = f"{work}_n"
    n = con.execute(render(fill("SELECT COUNT(*) FROM __w", tables={"__w": work}))).fetchall()[0][0]

    replaced: dict[str, str] = {}  # column → temp table (ROW, column) holding its new values
    result = Perturbation(output=output, rows=int(n))
    done: set[str] = set()
    created: list[str] = []
    try:
        for column, spec in specs.items():
            if column in done:
                continue
            unit_columns = groups.get(spec["group"], [column]) if spec.get("group") else [column]
            unit = spec["group"] if spec.get("group") else column
            target = scratch_name(f"{output}__sdc_{len(created)}")
            created.append(target)
            result.details[unit] = _perturb_unit(con, work, target, unit, unit_columns, spec, int(seed), created)
            for c in unit_columns:
                replaced[c] = target
                done.add(c)

        projections: list[exp.Expression] = []
        joins = sorted(set(replaced.values()))
        alias = {t: f"r{i}" for i, t in enumerate(joins)}
        for c in columns:
            if c in replaced:
                projections.append(exp.column(c, table=alias[replaced[c]], quoted=True).as_(ident(c)))
            else:
                projections.append(exp.column(c, table="w", quoted=True).as_(ident(c)))
        if row_id is not None:
            projections.append(exp.column(ROW, table="w", quoted=True).as_(ident(row_id)))
        q = exp.select(*projections).from_(exp.alias_(table_or_subquery(work), "w", table=True))
        for t in joins:
            q = q.join(exp.alias_(table_or_subquery(t), alias[t], table=True), using=[ident(ROW)], join_type="left")
        q = q.order_by(exp.column(ROW, table="w", quoted=True))
        create_output(con, output, q, temporary)
    finally:
        for t in [*created, work]:
            _drop(con, t)
    return result


def _perturb_unit(con, work: str, target: str, unit: str, columns: list[str], spec: dict[str, Any], seed: int,
                  created: list[str]) -> dict[str, Any]:
    """Write ``target`` (ROW, columns…) with the new values of one column or group; return what was done."""
    kind = spec["kind"]
    info: dict[str, Any] = {"kind": kind, "columns": list(columns)}
    if kind == "microaggregation" and spec["method"] == "individual_ranking":
        _store_sql(con, target, microaggregation.individual_ranking_sql(work, columns[0], spec["k"], ROW))
        info.update(k=spec["k"], method="individual_ranking")
        return info
    if kind in ("top_code", "bottom_code"):
        column = columns[0]
        threshold = spec["above"] if kind == "top_code" else spec["below"]
        replacement = threshold if spec["replacement"] is None else spec["replacement"]
        op = ">" if kind == "top_code" else "<"
        template = ("SELECT __row, CASE WHEN __x > __t THEN __rep ELSE __x END AS __x FROM __w" if op == ">" else
                    "SELECT __row, CASE WHEN __x < __t THEN __rep ELSE __x END AS __x FROM __w")
        _store_sql(con, target, fill(template, names={"__row": ROW, "__x": column}, tables={"__w": work},
                                     values={"__t": threshold, "__rep": replacement}))
        coded = con.execute(render(fill(
            "SELECT COUNT(*) FROM __w WHERE __x > __t" if op == ">" else "SELECT COUNT(*) FROM __w WHERE __x < __t",
            names={"__x": column}, tables={"__w": work}, values={"__t": threshold}))).fetchall()[0][0]
        info.update(threshold=threshold, replacement=replacement, coded=int(coded))
        return info
    if kind == "pram":
        column = columns[0]
        cats, matrix = f"{target}_cats", f"{target}_matrix"
        created += [cats, matrix]
        _store_sql(con, cats, pram.categories_sql(work, column))
        counts = con.execute(render(fill("SELECT __code, __n FROM __c ORDER BY __code", tables={"__c": cats}))
                             ).fetchnumpy()
        counts = np.asarray(counts["__n"], dtype=float)
        P = pram.transition_matrix(counts.size, float(spec["retain"]))
        M = pram.invariant_matrix(P, counts) if spec["invariant"] and counts.size else P
        store_frame(con, matrix, pd.DataFrame(pram.matrix_rows(M)))
        _store_sql(con, target, pram.pram_sql(work, column, cats, matrix, seed, ROW))
        values = con.execute(render(fill("SELECT __value FROM __c ORDER BY __code", tables={"__c": cats}))
                             ).fetchall()
        info.update(retain=spec["retain"], invariant=spec["invariant"], categories=[v[0] for v in values],
                    matrix=M.tolist())
        return info

    rows, X = _fetch(con, work, columns, complete=reads_complete(spec, columns))
    frame, measured = whole_column_values(spec, unit, columns, rows, X, seed)
    info.update(measured)
    if kind == "swap":
        pairs = f"{target}_pairs"
        created.append(pairs)
        store_frame(con, pairs, frame)
        _store_sql(con, target, swap_sql(work, pairs, columns[0]))
    else:
        store_frame(con, target, frame)
    return info


#: the kinds whose values numpy computes from whole columns (the engine only reads the columns and joins the result)
WHOLE_COLUMN = ("mdav", "noise", "swap")


def whole_column_kind(spec: Mapping[str, Any]) -> str | None:
    """``mdav`` / ``noise`` / ``swap`` when numpy computes the kind's values from whole columns, else None
    (coding, individual ranking and PRAM are SQL)."""
    if spec["kind"] == "microaggregation":
        return "mdav" if spec.get("method", "mdav") == "mdav" else None
    return spec["kind"] if spec["kind"] in ("noise", "swap") else None


def reads_complete(spec: Mapping[str, Any], columns: list[str]) -> bool:
    """Whether a whole-column kind reads only the rows where every column is non-NULL (:func:`columns_query`)."""
    if spec["kind"] == "microaggregation":
        return len(columns) == 1
    return spec["kind"] == "swap"


def whole_column_values(spec: Mapping[str, Any], unit: str, columns: list[str], rows: np.ndarray, X: np.ndarray,
                        seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The new values of a whole-column kind from its rows (ids ordered) and values (:func:`column_arrays`), seeded
    by (seed, unit): a frame (ROW, columns…) — for ``swap`` the pairs (receiver, giver) — and what was measured.
    The same ids and values give the same frame on every engine."""
    kind = spec["kind"]
    rng = _rng(seed, unit)
    if kind == "microaggregation":
        if len(columns) > 1:
            some = np.isnan(X).any(axis=1)
            every = np.isnan(X).all(axis=1)
            if (some & ~every).any():
                raise PolicyError(f"microaggregation group {unit!r}: {int((some & ~every).sum())} rows have NULL in "
                                  f"some but not all of {columns}; fill the NULLs, or aggregate each column alone")
            rows, X = rows[~some], X[~some]
        values, grouping = microaggregation.mdav(X, spec["k"])
        values = values.reshape(X.shape[0], -1)
        frame = pd.DataFrame({ROW: rows, **{c: values[:, i] for i, c in enumerate(columns)}})
        return frame, {"k": spec["k"], "method": "mdav", "groups": grouping.groups, "sse": grouping.sse,
                       "sst": grouping.sst, "information_loss": grouping.information_loss}
    if kind == "noise":
        complete = ~np.isnan(X).any(axis=1)
        scale = float(spec["scale"])
        with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused below, by count
            if spec["correlated"]:
                sigma = np.atleast_2d(np.cov(X[complete], rowvar=False)) if complete.sum() > 1 else \
                    np.zeros((len(columns), len(columns)))
                cov = np.float64(scale) ** 2 * sigma
                noise = (rng.multivariate_normal(np.zeros(len(columns)), cov, size=X.shape[0], method="eigh")
                         if np.isfinite(cov).all() else np.full(X.shape, np.inf))
            else:
                sd = np.array([np.nanstd(X[:, j], ddof=1) if (~np.isnan(X[:, j])).sum() > 1 else 0.0
                               for j in range(X.shape[1])])
                noise = rng.standard_normal(X.shape) * (scale * sd)
            values = X + noise  # NULL (NaN) stays NULL
        overflow = np.isfinite(X) & ~np.isfinite(values)
        if overflow.any():   # hostile round 6, P02: scale = 1e308 made every value ±inf, and it was released
            where = (f"attributes.{columns[0]}.perturb" if len(columns) == 1
                     else f"the perturbation group {unit!r} of {columns}")
            raise PolicyError(f"{where}.scale = {scale!r}: the noise overflows a double in {int(overflow.sum())} of "
                              f"{int(np.isfinite(X).sum())} values (±inf); give a scale that keeps them finite "
                              "(a share of the column's sd, such as scale = 0.1)")
        frame = pd.DataFrame({ROW: rows, **{c: values[:, i] for i, c in enumerate(columns)}})
        return frame, {"scale": scale, "correlated": spec["correlated"]}
    if kind == "swap":
        partner = swap_partners(X[:, 0], float(spec["window"]), rng)
        frame = pd.DataFrame({"receiver": rows, "giver": rows[partner]})
        return frame, {"window": spec["window"], "swapped": int((partner != np.arange(partner.size)).sum())}
    raise PolicyError(f"kind {kind!r} is not computed from whole columns")  # unreachable: see whole_column_kind


def swap_sql(work: str | exp.Expression, pairs: str | exp.Expression, column: str, row: str = ROW) -> exp.Expression:
    """``SELECT row, column``: each receiver takes its giver's value (the pairs of :func:`whole_column_values`)."""
    return fill("SELECT p.receiver AS __row, w.__x FROM __p AS p JOIN __w AS w ON w.__row = p.giver",
                names={"__row": row, "__x": column}, tables={"__p": pairs, "__w": work})


def swap_partners(x: np.ndarray, window: float, rng: np.random.Generator) -> np.ndarray:
    """Rank swapping, vectorised: partner[i] is the index whose value record i receives. Ranks (ties broken by
    position) are cut into consecutive blocks of w + 1 ranks (rounded down to even), w = ⌊window % · n⌋, starting at a
    random offset; inside a block records are paired at random and each pair swaps. So every swap is between ranks at most w apart and each
    record is swapped at most once (sdcMicro picks partners one record at a time; this draws them block-wise)."""
    n = x.size
    partner = np.arange(n)
    w = int(math.floor(window / 100.0 * n))
    if n < 2 or w < 1:
        return partner
    order = np.argsort(x, kind="stable")
    size = max(2, (w + 1) // 2 * 2)  # an even block pairs everyone (ranks in a block differ by at most w)
    offset = int(rng.integers(0, size))
    block = (np.arange(n) + offset) // size
    shuffled = np.lexsort((rng.random(n), block))  # positions, grouped by block, random within a block
    b = block[shuffled]
    start = np.r_[0, np.flatnonzero(np.diff(b)) + 1]
    within = np.arange(n) - np.repeat(start, np.diff(np.r_[start, n]))
    sizes = np.diff(np.r_[start, n])
    last_odd = (within == np.repeat(sizes, sizes) - 1) & (np.repeat(sizes, sizes) % 2 == 1)
    first = (within % 2 == 0) & ~last_odd
    a_pos = shuffled[first]
    b_pos = shuffled[np.flatnonzero(first) + 1]
    partner[order[a_pos]] = order[b_pos]
    partner[order[b_pos]] = order[a_pos]
    return partner
