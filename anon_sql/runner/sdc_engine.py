"""Statistical disclosure control on an engine without DuckDB's temp tables (Spark; docs/sdc.md, "Engines"): the
policy's ``perturb`` and whole-column masks as the engine's own views and tables, equal to the DuckDB release.

Rows are numbered by their values (as :func:`anon_sql.runner.sdc.prepare` numbers them on DuckDB), so every seeded
step reads the same row ids on both engines: coding, individual ranking, PRAM (a sha256 uniform per row id) and the
shuffle / fake joins run as SQL on the engine; MDAV, correlated noise and rank swapping read their columns once
(``anon_sql.sdc.perturb.columns_query``), run the same numpy code with the same seeded generator, and the engine
joins the result back. Independent noise stays row-local: a sha256 normal per row id (the same distribution as
DuckDB's numpy draws, not the same values).
"""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ..common.columns import is_numeric
from ..common.sqlbuild import ident
from ..data.source import Source
from ..policy.model import Policy
from ..sdc import microaggregation, pram
from ..sdc.masking import TABLE_MASKS, fake_frame, fake_join, fake_sources_query, shuffle_select
from ..sdc.perturb import (ROW, column_arrays, columns_query, reads_complete, swap_sql, validate_groups,
                           validate_perturbation, whole_column_kind, whole_column_values)
from ..sdc.portable import coded, hash_normal, keyed_digest
from ..sdc.utility import fetched_row, shaped_utility, utility_sql
from .sdc import ROW_ID, Prepared, mask_seed, mask_specs, number_rows, perturb_specs, rowwise


class _Names:
    """Fresh names of the release's SDC objects (``<release>__anon_sdc_<part>``)."""

    def __init__(self, release: str):
        self.base = f"{release}__anon_sdc"

    def __call__(self, part: str) -> exp.Table:
        return exp.Table(this=ident(f"{self.base}_{part}"))


def _create(engine: Any, name: exp.Table, query: exp.Expression, table: bool = False) -> exp.Table:
    engine.create(exp.Create(this=name.copy(), kind="TABLE" if table else "VIEW", expression=query))
    return name


def _rowwise_value(engine: Any, src: Source, column: str, spec: dict[str, Any], digest: str,
                   info: dict[str, Any]) -> exp.Expression:
    """Coding, or independent noise e = scale · σ · z with z a sha256 normal from the row's ``digest`` column
    (sha256 of seed, column, row id, computed once per row below)."""
    x = exp.column(column, quoted=True)
    if spec["kind"] == "noise":
        frame = engine.fetch(exp.select(exp.alias_(exp.func("stddev_samp", x.copy()), "s")).from_(src.relation.copy()))
        sd = float(frame.iloc[0, 0]) if frame.iloc[0, 0] == frame.iloc[0, 0] else 0.0
        z = hash_normal(exp.column(digest, quoted=True))
        info.update(scale=spec["scale"], correlated=False, sd=sd, draws="sha256 normal per row")
        return exp.Cast(this=exp.Add(this=exp.Cast(this=x, to=exp.DataType.build("DOUBLE")),
                                     expression=exp.Mul(this=exp.Literal.number(repr(float(spec["scale"]) * sd)),
                                                        expression=exp.Paren(this=z))),
                        to=exp.DataType.build("DOUBLE"))
    threshold = spec["above"] if spec["kind"] == "top_code" else spec["below"]
    beyond = exp.GT if spec["kind"] == "top_code" else exp.LT
    count = engine.fetch(exp.select(exp.func("count", exp.Star())).from_(src.relation.copy())
                         .where(beyond(this=x.copy(), expression=exp.convert(threshold))))
    info.update(threshold=threshold, replacement=threshold if spec["replacement"] is None else spec["replacement"],
                coded=int(count.iloc[0, 0]))
    return coded(x, spec)


def _replacement(engine: Any, names: _Names, numbered: exp.Table, unit: str, columns: list[str],
                 spec: dict[str, Any], seed: int, info: dict[str, Any]) -> exp.Table:
    """A table (ROW_ID, columns…) of one column's or group's new values, computed as on DuckDB."""
    kind = spec["kind"]
    target = names(f"p_{len(engine.created)}")
    if kind == "microaggregation" and spec["method"] == "individual_ranking":
        info.update(k=spec["k"], method="individual_ranking")
        return _create(engine, target, microaggregation.individual_ranking_sql(numbered, columns[0], spec["k"],
                                                                               ROW_ID), table=True)
    if kind == "pram":
        column = columns[0]
        cats = _create(engine, names(f"cats_{len(engine.created)}"), pram.categories_sql(numbered, column),
                       table=True)
        found = engine.fetch(exp.select("__value", "__code", "__n").from_(cats.copy()).order_by("__code"))
        counts = found["__n"].to_numpy(dtype=float)
        P = pram.transition_matrix(counts.size, float(spec["retain"]))
        M = pram.invariant_matrix(P, counts) if spec["invariant"] and counts.size else P
        import pandas as pd

        matrix = engine.put_frame(pd.DataFrame(pram.matrix_rows(M)), names(f"matrix_{len(engine.created)}").name)
        info.update(retain=spec["retain"], invariant=spec["invariant"],
                    categories=[_plain(v) for v in found["__value"]], matrix=M.tolist())
        return _create(engine, target, pram.pram_sql(numbered, column, cats, matrix, seed, ROW_ID), table=True)
    data = engine.fetch(columns_query(numbered, columns, reads_complete(spec, columns), row=ROW_ID))
    rows, X = column_arrays(data, columns, row=ROW_ID)
    frame, measured = whole_column_values(spec, unit, columns, rows, X, seed)
    info.update(measured)
    if kind == "swap":
        pairs = engine.put_frame(frame, names(f"pairs_{len(engine.created)}").name)
        return _create(engine, target, swap_sql(numbered, pairs, columns[0], row=ROW_ID), table=True)
    return engine.put_frame(frame.rename(columns={ROW: ROW_ID}), target.name)


def _plain(value: Any) -> Any:
    """A category as a plain Python value (numpy scalars → int / float / str), as DuckDB's fetch gives it."""
    return value.item() if hasattr(value, "item") else value


def prepare_on_engine(engine: Any, policy: Policy, src: Source) -> tuple[Prepared, Source] | None:
    """Perturb and table-mask the source on ``engine`` as :func:`anon_sql.runner.sdc.prepare` does on DuckDB, into
    a cached table of the engine; None when the policy perturbs and table-masks nothing."""
    specs = perturb_specs(policy)
    table_masks = {c: m for c, m in mask_specs(policy).items() if m["function"] in TABLE_MASKS}
    if not specs and not table_masks:
        return None
    checked = {c: validate_perturbation(s, c, src.types.get(c, "")) for c, s in specs.items()}
    groups = validate_groups(checked)
    names = _Names(policy.name)
    seed = int(policy.seed)
    prepared = Prepared(names("out"), src.relation.copy(), engine_owned=True)
    numbered = _create(engine, names("in"), number_rows(src))

    replaced: dict[str, exp.Table] = {}
    inline: dict[str, exp.Expression] = {}
    digests = {c: f"__anon_sdc_d{i}" for i, c in enumerate(c for c, s in checked.items()
                                                           if rowwise(s) and s["kind"] == "noise")}
    for column, spec in checked.items():
        if column in replaced or column in inline:
            continue
        columns = groups.get(spec["group"], [column]) if spec.get("group") else [column]
        unit = spec["group"] if spec.get("group") else column
        info: dict[str, Any] = {"kind": spec["kind"], "columns": list(columns)}
        if rowwise(spec):
            inline[column] = _rowwise_value(engine, src, column, spec, digests.get(column, ""), info)
        else:
            target = _replacement(engine, names, numbered, unit, columns, spec, seed, info)
            replaced.update({c: target for c in columns})
        prepared.perturbation[unit] = info

    alias = {t.name: f"r{i}" for i, t in enumerate(dict.fromkeys(replaced.values()))}
    items: list[exp.Expression] = [exp.column(ROW_ID, table="w", quoted=True)]
    for c in src.columns:
        if c in replaced:
            items.append(exp.alias_(exp.column(c, table=alias[replaced[c].name], quoted=True), ident(c)))
        elif c in inline:
            items.append(exp.alias_(_qualified(inline[c], "w"), ident(c)))
        else:
            items.append(exp.column(c, table="w", quoted=True))
    drawn = exp.select(exp.Star(), *[exp.alias_(keyed_digest(seed, exp.column(ROW_ID, quoted=True), c), ident(d))
                                     for c, d in digests.items()]).from_(numbered.copy())
    query = exp.select(*items).from_(drawn.subquery("w") if digests else exp.alias_(numbered.copy(), "w", table=True))
    for t in dict.fromkeys(replaced.values()):
        on = exp.EQ(this=exp.column(ROW_ID, table="w", quoted=True),
                    expression=exp.column(ROW_ID, table=alias[t.name], quoted=True))
        query = query.join(exp.alias_(t.copy(), alias[t.name], table=True), on=on, join_type="left")
    current = _create(engine, names("pert"), query)
    numeric = [c for c, s in checked.items() if s["kind"] != "pram" and is_numeric(src.types.get(c, ""))]
    if numeric:   # the same one-row query as on DuckDB, aggregated by the engine: only the row comes back
        row = fetched_row(engine.fetch(utility_sql(numbered, current, numeric, row_id=ROW_ID)))
        prepared.utility = shaped_utility(row, numeric, with_il1s=True)

    keyed = [ROW_ID, *src.columns]
    for i, (column, spec) in enumerate(table_masks.items()):
        mseed = mask_seed(policy.seed, column)
        if spec["function"] == "shuffle":
            step = shuffle_select(current, column, mseed, key_columns=[ROW_ID], columns=keyed)
        else:
            values = [str(v) for v in engine.fetch(fake_sources_query(current, column))["source"]]
            frame = fake_frame(values, spec, mseed)
            mapping = engine.put_frame(frame, names(f"fake{i}").name)
            step = fake_join(current, column, spec, mseed, mapping.name, len(frame), key_columns=[ROW_ID],
                             columns=keyed)
        current = _create(engine, names(f"mask{i}"), step)
        prepared.masks[column] = spec["function"]
    out = exp.select(*[exp.column(c, quoted=True) for c in src.columns]).from_(current.copy()) \
        .order_by(exp.column(ROW_ID, quoted=True))
    _create(engine, prepared.temp, out, table=True)
    types = dict(src.types)
    for unit, info in prepared.perturbation.items():
        if info["kind"] == "noise" or (info["kind"] == "microaggregation"):
            types.update({c: "DOUBLE" for c in info["columns"]})
    return prepared, Source(src.label, prepared.temp.copy(), list(src.columns), types)


def _qualified(expression: exp.Expression, table: str) -> exp.Expression:
    """``expression`` with its bare columns read from ``table`` (the numbered source in a query with joins)."""
    out = expression.copy()
    for column in out.find_all(exp.Column):
        if not column.table:
            column.set("table", ident(table))
    return out


__all__ = ["prepare_on_engine"]
