"""A user's indexes on a released table, kept across its replacement: a refresh or a replace writes the table again,
and DuckDB drops its indexes with it (hostile round 13, R6: a user's index vanished without a word)."""
from __future__ import annotations

import duckdb
import sqlglot
from sqlglot import exp

from ..errors import SourceError

_INDEXES = ("SELECT index_name, sql FROM duckdb_indexes() WHERE database_name = current_database() "
            "AND schema_name = current_schema() AND lower(table_name) = lower(?) ORDER BY index_name")


def user_indexes(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """The indexes on ``table`` (in the current schema): (name, the CREATE INDEX statement DuckDB keeps for it).
    anon_sql creates no index on a released table, so each is the user's."""
    return [(str(name), str(sql)) for name, sql in con.execute(_INDEXES, [table]).fetchall() if sql]


def recreate_indexes(con: duckdb.DuckDBPyConnection, table: str, indexes: list[tuple[str, str]]) -> None:
    """Create ``indexes`` again on the new ``table``, in the replacement's transaction. One that DuckDB's own
    statement for it cannot create (a UNIQUE index the new rows break, a column gone) refuses the replacement
    (:class:`SourceError`, exit 2, everything rolled back), naming it."""
    for name, sql in indexes:
        try:
            statement = sqlglot.parse_one(sql, read="duckdb")
        except sqlglot.errors.ParseError:
            statement = None
        if not (isinstance(statement, exp.Create) and str(statement.args.get("kind", "")).upper() == "INDEX"):
            raise SourceError(f"index {name!r} on {table!r}: its statement is no CREATE INDEX anon_sql can read "
                              f"({sql[:120]!r}); nothing was changed: drop the index, then run it again")
        try:
            if statement.args.get("unique"):   # checked now: DuckDB checks a UNIQUE index of a transaction at COMMIT
                _require_unique(con, statement)
            con.execute(sql)
        except duckdb.Error as err:
            raise SourceError(f"index {name!r} on {table!r} cannot be created on the new rows "
                              f"({str(err).splitlines()[0]}); nothing was changed: drop the index "
                              f"(DROP INDEX {name}), run it again, and create the index anew if it still fits") from None


def _require_unique(con: duckdb.DuckDBPyConnection, statement: exp.Create) -> None:
    """Raise :class:`duckdb.ConstraintException` when two rows of the index's table share its key (rows with a NULL
    in the key aside, as DuckDB's UNIQUE allows)."""
    index = statement.this
    keys = [o.this if isinstance(o, exp.Ordered) else o for o in index.args["params"].args.get("columns") or []]
    known = exp.and_(*[exp.Not(this=exp.Is(this=k.copy(), expression=exp.Null())) for k in keys])
    repeated = (exp.select(exp.Literal.number(1)).from_(index.args["table"].copy()).where(known)
                .group_by(*[k.copy() for k in keys]).having(exp.GT(this=exp.Count(this=exp.Star()),
                                                                   expression=exp.Literal.number(1))).limit(1))
    if con.execute(repeated.sql(dialect="duckdb")).fetchall():
        raise duckdb.ConstraintException("the new rows repeat its key")
