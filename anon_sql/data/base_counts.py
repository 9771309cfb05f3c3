"""The source aggregated once: distinct (quasi-identifier, sensitive) combinations with their record counts.

Level plans generalize these counts, never the rows, and taxonomy coverage reads per-column counts from them, so a
DuckDB level release scans the source once for planning and once to write the released rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from sqlglot import exp

from ..common.columns import UNIT
from ..common.sqlbuild import alias, col, dtype, ident, lit, record_count, render, session_table

if TYPE_CHECKING:
    import pandas as pd


WEIGHT = "__w"
SUFFIX = "__base"
CARRY_SUFFIX = "__carry"


def keys(policy: Any) -> list[str]:
    """Grouping columns: the quasi-identifiers, then the sensitive attributes that are not also quasi."""
    return [*policy.quasi, *[s for s in policy.sensitive if s not in policy.quasi]]


def query(policy: Any, relation: exp.Expression, unit: str | None = None) -> exp.Select:
    """``SELECT keys, SUM(weight) AS __w FROM relation GROUP BY keys``; with a privacy unit also grouped by the
    unit (its column ``unit`` of ``relation``, default the policy's, kept as ``__unit``): a row per person and
    combination, so the classes can count distinct people (docs/units.md)."""
    cols = [col(c) for c in keys(policy)]
    group = [c.copy() for c in cols]
    if getattr(policy, "privacy_unit", None):
        unit_col = col(unit or policy.privacy_unit)
        cols.append(alias(unit_col, UNIT))
        group.append(unit_col.copy())
    total = record_count(policy.count_column)
    return exp.select(*cols, alias(total, WEIGHT)).from_(relation.copy()).group_by(*group)


def temp_table(release_name: str) -> exp.Table:
    """The session-temporary table that holds a release's base counts (``temp.main."<release>__base"``)."""
    return session_table(release_name + SUFFIX)


def create_base_table(policy: Any, relation: exp.Expression, table: exp.Table, unit: str | None = None) -> exp.Create:
    """``CREATE OR REPLACE TEMP TABLE table AS <query>`` (DuckDB)."""
    return exp.Create(this=table.copy(), kind="TABLE", replace=True, expression=query(policy, relation, unit),
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def carry_table(release_name: str) -> exp.Table:
    """The session-temporary table of a release's base counts that also carry released non-key columns
    (``temp.main."<release>__carry"``, :func:`create_carried_tables`)."""
    return session_table(release_name + CARRY_SUFFIX)


def create_carried_tables(policy: Any, relation: exp.Expression, table: exp.Table, carry: exp.Table,
                          carried: Sequence[str]) -> tuple[exp.Create, exp.Create]:
    """The base counts made in the same pass as counts that also group by the released non-key columns
    ``carried`` (a level release with no count column and no unit): ``carry`` = the source grouped by (keys,
    carried) with ``__w``, then ``table`` = ``carry`` summed over the keys alone — the base counts as
    :func:`create_base_table` makes them (``__w`` a BIGINT, as ``COUNT(*)`` gives it). The released rows are then
    grouped from ``carry``, not from a second pass over the source (issue 29.2)."""
    keyed = [col(c) for c in dict.fromkeys([*keys(policy), *carried])]
    counted = (exp.select(*keyed, alias(exp.Count(this=exp.Star()), WEIGHT)).from_(relation.copy())
               .group_by(*[k.copy() for k in keyed]))
    summed = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
    base = (exp.select(*[col(c) for c in keys(policy)], alias(summed, WEIGHT)).from_(carry.copy())
            .group_by(*[col(c) for c in keys(policy)]))
    temp = exp.Properties(expressions=[exp.TemporaryProperty()])
    return (exp.Create(this=carry.copy(), kind="TABLE", replace=True, expression=counted, properties=temp),
            exp.Create(this=table.copy(), kind="TABLE", replace=True, expression=base, properties=temp.copy()))


#: the share of the source's vectors the carry probe reads, and the fewest sampled rows it decides on
CARRY_SAMPLE_PERCENT = 1
CARRY_MIN_SAMPLED = 16_384


def carry_probe(relation: exp.Expression, columns: Sequence[str], seed: int) -> exp.Select:
    """One row (sampled rows, distinct (columns) tuples among them, tuples seen once): a seeded system sample of
    :data:`CARRY_SAMPLE_PERCENT` of the source's vectors, what :func:`worth_carrying` reads."""
    tuple_key = exp.Anonymous(this="hash", expressions=[col(c) for c in columns])
    sample = exp.select(exp.Star()).from_(relation.copy())
    sample.set("sample", exp.TableSample(method=exp.Var(this="SYSTEM"), percent=lit(CARRY_SAMPLE_PERCENT),
                                         seed=lit(seed)))
    per_tuple = (exp.select(alias(tuple_key, "__k"), alias(exp.Count(this=exp.Star()), "__n"))
                 .from_(exp.Subquery(this=sample, alias=exp.TableAlias(this=ident("__s"))))
                 .group_by(col("__k")))
    once = exp.Filter(this=exp.Count(this=exp.Star()),
                      expression=exp.Where(this=exp.EQ(this=col("__n"), expression=lit(1))))
    return exp.select(alias(exp.Coalesce(this=exp.Sum(this=col("__n")), expressions=[lit(0)]), "sampled"),
                      alias(exp.Count(this=exp.Star()), "distinct_tuples"), alias(once, "singles")).from_(
        exp.Subquery(this=per_tuple, alias=exp.TableAlias(this=ident("__t"))))


def worth_carrying(sampled: int, distinct_tuples: int, singles: int, percent: float | None = None,
                   min_sampled: int | None = None) -> bool:
    """Whether grouping the source by (keys, carried) surely gives at most a quarter of its rows, from a sample of
    ``sampled`` rows of ``percent`` of the source: its distinct tuples are at most those the sample saw plus one
    per row of the tuples it never saw, whose share of the rows Good–Turing estimates as ``singles / sampled``
    (an upper estimate: near-unique rows, where carrying would cost a pass, are never carried). Below
    ``min_sampled`` sampled rows (a small source) the second pass it would save is cheap: no. ``percent`` /
    ``min_sampled``: default :data:`CARRY_SAMPLE_PERCENT` / :data:`CARRY_MIN_SAMPLED`."""
    percent = CARRY_SAMPLE_PERCENT if percent is None else percent
    if sampled < (CARRY_MIN_SAMPLED if min_sampled is None else min_sampled):
        return False
    rows = sampled * 100.0 / percent
    return distinct_tuples + rows * singles / sampled <= rows / 4


def drop_base_table(table: exp.Table) -> exp.Drop:
    """``DROP TABLE IF EXISTS table``."""
    return exp.Drop(tables=[table.copy()], kind="TABLE", exists=True)


def total(counts: Callable[[str], pd.DataFrame], policy: Any) -> int:
    """The records the base counts hold (the source's records: the count column's sum, else its rows): the sum of
    the first quasi-identifier's value counts, which partition the records — read by the one value-count query the
    taxonomy coverage check makes anyway (``counts``: a :func:`reader`), not by a query of its own."""
    return int(counts(policy.quasi[0])["n"].sum())


_VALUE_COUNTS_SQL: dict[tuple[str, tuple[str, ...]], str] = {}


def _all_value_counts_sql(table: exp.Table, columns: list[str]) -> str:
    """One aggregation with a grouping set per column (a single pass over the base table, one shuffle on Spark),
    rendered once per (table, columns): a warm release of the same policy reuses the text."""
    key = (render(table), tuple(columns))
    text = _VALUE_COUNTS_SQL.get(key)
    if text is None:
        texts = [alias(exp.Cast(this=col(c), to=dtype("VARCHAR")), f"__v{i}") for i, c in enumerate(columns)]
        inner = exp.select(*texts, col(WEIGHT)).from_(table.copy())
        n = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
        sets = exp.GroupingSets(expressions=[exp.Paren(this=col(f"__v{i}")) for i in range(len(columns))])
        items = ([col(f"__v{i}") for i in range(len(columns))]
                 + [alias(exp.Grouping(expressions=[col(f"__v{i}")]), f"__g{i}") for i in range(len(columns))]
                 + [alias(n, "n")])
        q = exp.select(*items).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("t"))))
        q.set("group", exp.Group(expressions=[sets]))
        text = render(q)
        if len(_VALUE_COUNTS_SQL) >= 256:
            _VALUE_COUNTS_SQL.clear()
        _VALUE_COUNTS_SQL[key] = text
    return text


def all_value_counts(con: Any, table: exp.Table, columns: list[str]) -> dict[str, pd.DataFrame]:
    """:func:`value_counts` of several key columns in one aggregation (``GROUPING SETS``, one per column)."""
    if not columns:
        return {}
    import numpy as np
    import pandas as pd

    # numpy arrays, not a DataFrame to slice eight times: pandas' overhead on these few hundred rows cost as much
    # as the aggregation (issue 17.1)
    result = con.execute(_all_value_counts_sql(table, columns))
    if hasattr(result, "fetchnumpy"):
        arrays = result.fetchnumpy()
    else:                                   # Spark's result: a frame
        frame = result.df()
        arrays = {c: frame[c].to_numpy(dtype=object) if c.startswith("__v") else frame[c].to_numpy()
                  for c in frame.columns}
    n = np.asarray(arrays["n"])
    out = {}
    for i, column in enumerate(columns):   # each grouping set's rows: those grouped by that column alone
        rows = np.asarray(arrays[f"__g{i}"]).astype(int) == 0
        values = np.ma.getdata(arrays[f"__v{i}"]).astype(object)
        values[np.ma.getmaskarray(arrays[f"__v{i}"])] = np.nan      # NULL, as a fetched frame has it
        out[column] = pd.DataFrame({"v": values[rows], "n": n[rows]})
    return out


def base_value_counts(con: Any, table: exp.Table, column: str) -> pd.DataFrame:
    """Per-value record counts of one key column (as text, like the taxonomy leaves), read from the base table."""
    v = exp.Cast(this=col(column), to=dtype("VARCHAR"))
    n = exp.Cast(this=exp.Sum(this=col(WEIGHT)), to=dtype("BIGINT"))
    q = (exp.select(alias(v, "v"), alias(n, "n"))
         .from_(table.copy()).group_by(v.copy()))
    return con.execute(render(q)).df()


_ROWS_SQL: dict[tuple[str, tuple[str, ...]], str] = {}


def text_rows_sql(table: exp.Table, columns: list[str]) -> str:
    """``SELECT CAST(c AS VARCHAR) AS __v<i>, …, __w FROM table``: the base counts with their key columns as text
    (the taxonomy leaves' type), rendered once per (table, columns)."""
    key = (render(table), tuple(columns))
    text = _ROWS_SQL.get(key)
    if text is None:
        items = [alias(exp.Cast(this=col(c), to=dtype("VARCHAR")), f"__v{i}") for i, c in enumerate(columns)]
        text = render(exp.select(*items, col(WEIGHT)).from_(table.copy()))
        if len(_ROWS_SQL) >= 256:
            _ROWS_SQL.clear()
        _ROWS_SQL[key] = text
    return text


def counts_from_rows(rows: Any, columns: list[str]) -> dict[str, pd.DataFrame]:
    """:func:`all_value_counts` computed from the fetched text rows (an Arrow table of :func:`text_rows_sql`):
    each column's values with the summed weight, NULL as NaN (as a fetched frame has it)."""
    import numpy as np
    import pandas as pd

    out = {}
    for i, column in enumerate(columns):
        grouped = rows.group_by(f"__v{i}", use_threads=False).aggregate([(WEIGHT, "sum")])
        values = np.asarray(grouped.column(f"__v{i}").to_pylist(), dtype=object)
        values[[v is None for v in values]] = np.nan
        n = grouped.column(f"{WEIGHT}_sum").to_numpy(zero_copy_only=False).astype(np.int64)
        out[column] = pd.DataFrame({"v": values, "n": n})
    return out


class Reader:
    """Per-column value counts read from the base table, every quasi-identifier's at once on first use. For a
    lattice search on DuckDB (``share``) the base counts are fetched once as text rows (one statement, no aggregation
    in SQL): the value counts are grouped from them in Arrow, and :attr:`rows` hands the same rows to the search,
    which then reads the base table no more (issue 29.1: one read of the base counts serves the coverage check, the
    record count and the search)."""

    def __init__(self, con: Any, policy: Any, table: exp.Table):
        self.con, self.policy, self.table = con, policy, table
        self.columns = keys(policy)
        self.rows: Any = None          # the Arrow table of text_rows_sql(table, keys(policy)), once fetched
        # fetch the rows only for a reader of them (a lattice search: resolve says so), and only when they are what
        # it codes (the quasi-identifiers alone, no person column): else one aggregation, a few hundred rows back
        self.share = False
        self._known: dict[str, Any] = {}

    def __call__(self, column: str) -> pd.DataFrame:
        if not self._known and column in self.policy.quasi:
            # DuckDB's connection (or a wrapper of it) hands results over as Arrow; Spark's runner has no ``sql``
            if (self.share and callable(getattr(self.con, "sql", None)) and self.columns == list(self.policy.quasi)
                    and not getattr(self.policy, "privacy_unit", None)):
                self.rows = self.con.sql(text_rows_sql(self.table, self.columns)).to_arrow_table()
                self._known.update(counts_from_rows(self.rows, self.columns))
            else:   # Spark (one shuffle instead of a collect of every combination), or rows per person
                self._known.update(all_value_counts(self.con, self.table, list(self.policy.quasi)))
        if column in self._known:
            return self._known[column]
        return base_value_counts(self.con, self.table, column)


def reader(con: Any, policy: Any, table: exp.Table) -> Reader:
    """Per-column value counts read from the base table (:class:`Reader`)."""
    return Reader(con, policy, table)
