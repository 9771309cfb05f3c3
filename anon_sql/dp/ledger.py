"""Privacy budgets per table and the ledger of every DP answer, as tables of the catalog schema `anon`.

anon.privacy_budgets  one row per budget ever created (a dropped budget keeps its row, with dropped_at set);
                      spent_epsilon / spent_delta / queries are updated in the transaction that records each answer
anon.privacy_ledger   one row per answer: budget, query text, ε, δ, time
Sequential composition: a table's spent ε (and δ) is the sum over its answers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp

from anon_sql.catalog import owned_rows
from anon_sql.common.wording import counted
from anon_sql.data.session import refuse_read_only
from anon_sql.data.source import refuse_temp_shadows, temp_shadows, view_foreign_reads, view_input_shadows
from anon_sql.errors import PolicyError, PrivacyRequirementError, ResourceError, SourceError

__all__ = ["Budget", "ensure_ledger", "create_budget", "show_budgets", "drop_budget", "active_budget",
           "resolve_table", "record_spend", "remaining", "require_budget_owned", "require_counters_match_ledger",
           "raise_conflict"]

# Constant DDL (no user text in it); values always go through parameters or sqlglot literals.
_DDL = (
    "CREATE SCHEMA IF NOT EXISTS anon",
    "CREATE SEQUENCE IF NOT EXISTS anon.privacy_budget_ids",
    """CREATE TABLE IF NOT EXISTS anon.privacy_budgets (
        budget_id BIGINT PRIMARY KEY DEFAULT nextval('anon.privacy_budget_ids'),
        table_name VARCHAR NOT NULL, privacy_unit VARCHAR NOT NULL, units BIGINT NOT NULL,
        epsilon DOUBLE NOT NULL, delta DOUBLE NOT NULL,
        spent_epsilon DOUBLE NOT NULL DEFAULT 0, spent_delta DOUBLE NOT NULL DEFAULT 0,
        queries BIGINT NOT NULL DEFAULT 0,
        created_at TIMESTAMP NOT NULL DEFAULT current_timestamp, dropped_at TIMESTAMP,
        marker VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS anon.privacy_ledger (
        budget_id BIGINT NOT NULL, table_name VARCHAR NOT NULL, query_text VARCHAR NOT NULL,
        epsilon DOUBLE NOT NULL, delta DOUBLE NOT NULL, groups_released BIGINT,
        spent_at TIMESTAMP NOT NULL DEFAULT current_timestamp)""",
)

# Relative slack for comparing float sums of ε or δ against the total (a budget of 1.0 spent as 10 × 0.1 must not be
# refused). Relative, not absolute: an absolute 1e-9 let a budget of δ = 1e-12 spend 1e-9 (hostile round 5, D40).
_SLACK = 1e-9


@dataclass(frozen=True)
class Budget:
    budget_id: int
    table_name: str
    privacy_unit: str
    units: int
    epsilon: float
    delta: float
    spent_epsilon: float
    spent_delta: float
    queries: int

    @property
    def epsilon_left(self) -> float:
        left = self.epsilon - self.spent_epsilon
        return left if left > _SLACK * self.epsilon else 0.0

    @property
    def delta_left(self) -> float:
        left = self.delta - self.spent_delta
        return left if left > _SLACK * self.delta else 0.0


_PRESENT = ("SELECT (SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = "
            "'anon' AND table_name IN ('privacy_budgets', 'privacy_ledger')) + (SELECT count(*) FROM duckdb_sequences() "
            "WHERE database_name = current_database() AND schema_name = 'anon' AND sequence_name = 'privacy_budget_ids')")


def ensure_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """Create the schema, sequence and both tables if missing (idempotent). One catalog read when they exist: each
    DP query calls this, and three CREATE … IF NOT EXISTS statements cost more than a small query's answer."""
    if con.execute(_PRESENT).fetchall()[0][0] == 3:
        return
    for statement in _DDL:
        con.execute(statement)


def _owned_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """The ledger with its identity rows ready (inside the writing transaction): a ledger from before markers gets
    its budgets adopted (:func:`anon_sql.catalog.owned_rows.ready`)."""
    ensure_ledger(con)
    owned_rows.ready(con, owned_rows.BUDGETS)


def require_budget_owned(con: duckdb.DuckDBPyConnection, budget: Budget, action: str) -> None:
    """Refuse (:class:`PolicyError`, exit 2) to ``action`` a budget row that anon_sql did not write as it is now
    (inserted or edited by hand: issue 28.1); inside the transaction."""
    owned_rows.ready(con, owned_rows.BUDGETS)
    why = owned_rows.foreign(con, owned_rows.BUDGETS, str(budget.budget_id))
    if why is not None:
        raise PolicyError(
            f"the privacy budget of {budget.table_name} (budget_id {budget.budget_id}) is not one anon_sql created: "
            f"{why}; anon_sql never {action}s a budget it did not create, so nothing was changed: delete that row "
            "from anon.privacy_budgets yourself, then CREATE PRIVACY BUDGET again")


# what the ledger holds for one budget: one small aggregate over the product's own table (never a data table)
_LEDGER_SUMS = ("SELECT coalesce(sum(epsilon), 0), coalesce(sum(delta), 0), count(*) FROM anon.privacy_ledger "
                "WHERE budget_id = ?")


def require_counters_match_ledger(con: duckdb.DuckDBPyConnection, budget: Budget) -> None:
    """Refuse (:class:`PolicyError`, exit 2) a budget whose counters (spent ε, spent δ, queries) disagree with what
    ``anon.privacy_ledger`` holds for it (hostile round 10, M17, D35): the row's fingerprint covers its table, unit
    and totals, not the counters, so a counter reset by hand would have let the budget answer again while the ledger
    already held the whole ε. Inside the DP query's transaction, before anything is answered or charged. ε and δ
    are compared with the relative slack of the budget checks (float sums in another order); queries exactly."""
    epsilon, delta, answers = con.execute(_LEDGER_SUMS, [budget.budget_id]).fetchall()[0]
    differs = []
    if abs(budget.spent_epsilon - epsilon) > _SLACK * max(budget.epsilon, abs(epsilon)):
        differs.append(f"spent epsilon = {budget.spent_epsilon:.9g} (the ledger: {epsilon:.9g})")
    if abs(budget.spent_delta - delta) > _SLACK * max(budget.delta, abs(delta)):
        differs.append(f"spent delta = {budget.spent_delta:.9g} (the ledger: {delta:.9g})")
    if budget.queries != answers:
        differs.append(f"{counted(budget.queries, 'query', 'queries')} (the ledger: {answers})")
    if differs:
        raise PolicyError(
            f"the privacy budget of {budget.table_name} (budget_id {budget.budget_id}) was edited by hand: its row "
            f"in anon.privacy_budgets says {'; '.join(differs)}, but anon.privacy_ledger holds "
            f"{counted(answers, 'answer')} of epsilon = {epsilon:.9g}, delta = {delta:.9g} for it; anon_sql answers "
            "only from a budget whose counters match its ledger, so nothing was answered or charged: set them back "
            f"(UPDATE anon.privacy_budgets SET spent_epsilon = {float(epsilon)!r}, spent_delta = {float(delta)!r}, "
            f"queries = {answers} WHERE budget_id = {budget.budget_id}), or DROP PRIVACY BUDGET ON "
            f"{budget.table_name} and create a new one (the ledger keeps what was already released)")


def _in_transaction(con: duckdb.DuckDBPyConnection, work):
    """Run ``work()`` in its own transaction (PolicyError when the caller holds one open)."""
    try:
        con.begin()
    except duckdb.TransactionException:
        raise PolicyError("a privacy budget is changed in its own transaction: COMMIT or ROLLBACK the open one "
                          "first") from None
    try:
        out = work()
        con.commit()
    except BaseException as err:
        con.rollback()
        raise_conflict(err)
        raise
    return out


def raise_conflict(err: BaseException) -> None:
    """:class:`ResourceError` (exit 4) when ``err`` is DuckDB's write-write conflict: another connection changed the
    same budget row in the same moment, and DuckDB let only one of them commit (hostile round 4, D23). Called after
    the rollback; other errors are left to the caller."""
    if isinstance(err, duckdb.TransactionException) and "conflict" in str(err).lower():
        raise ResourceError("another connection changed this privacy budget at the same moment (DuckDB: "
                            f"{str(err).splitlines()[0]}); nothing was charged and no answer was given: run it "
                            "again") from None


def resolve_table(con: duckdb.DuckDBPyConnection, table: str | exp.Table) -> tuple[exp.Table, str]:
    """The table as a sqlglot node and its canonical name ("schema.table" as DuckDB spells it); SourceError if absent."""
    node = table if isinstance(table, exp.Table) else _parse_table(table)
    schema = node.db or None
    rows = con.execute(
        "SELECT table_schema, table_name FROM information_schema.tables WHERE lower(table_name) = lower(?) "
        "AND (? IS NULL OR lower(table_schema) = lower(?)) AND table_catalog = current_database() "
        "ORDER BY table_schema = current_schema() DESC, table_schema",
        [node.name, schema, schema]).fetchall()
    if not rows:
        if temp_shadows(con, [node.name]):   # a TEMP object of the session (hostile round 22, Y46: "not found")
            raise SourceError(f"{node.sql(dialect='duckdb')} is a TEMP table or view of this session: a privacy "
                              "budget belongs to a table or view stored in the database; store it, or budget the "
                              "table it reads")
        raise SourceError(f"table {node.sql(dialect='duckdb')} not found: create it first or check the name")
    schema_name, table_name = rows[0]
    # a TEMP table or view of that name is what the query's SQL would read (round 10, M12: a TEMP view renumbering
    # the unit was answered and charged to the budgeted table)
    refuse_temp_shadows(con, [table_name], f"table {schema_name}.{table_name}")
    shadows = view_input_shadows(con, schema_name, table_name)   # a view reads its inputs by name (round 11, M21)
    if shadows:
        raise SourceError(f"view {schema_name}.{table_name}: {', '.join(shadows)[:400]} of this session shadows "
                          "what the view reads (DuckDB binds its names when it is read), so anon_sql would answer "
                          "over other data than the budget's; nothing was done: drop the TEMP object, or run it in "
                          "another session")
    foreign = view_foreign_reads(con, schema_name, table_name)
    if foreign:   # bound when the query runs, beyond what a name can tell (hostile round 12, M27)
        raise SourceError(f"{schema_name}.{table_name} reads {', '.join(foreign)[:600]}: a budgeted view (or a "
                          "table's generated column) may read only this database's tables and views by name, with "
                          "functions that give the same result in every session, under TimeZone = 'UTC', Calendar = "
                          "'gregorian' and DuckDB's defaults for the other settings that change results, since a "
                          "macro, a table function, another database's alias, a session variable, a setting or the "
                          "moment can change its rows when a query runs; nothing was done: SET or RESET the "
                          "settings named, compute the unit from stored columns, or put the budget on a table of "
                          "stored columns")
    return exp.table_(table_name, db=schema_name, quoted=True), f"{schema_name}.{table_name}"


def _parse_table(text: str) -> exp.Table:
    if not isinstance(text, str) or not text.strip():
        raise PolicyError(f"table {text!r}: expected a table name such as visits or main.visits")
    try:
        node = sqlglot.parse_one(text, into=exp.Table, read="duckdb")
    except sqlglot.errors.ParseError:
        raise PolicyError(f"table {text!r}: expected a table name such as visits or main.visits") from None
    if not isinstance(node, exp.Table) or not node.name:
        raise PolicyError(f"table {text!r}: expected a table name such as visits or main.visits")
    return node


def _column_names(con: duckdb.DuckDBPyConnection, table: exp.Table) -> dict[str, str]:
    query = exp.select("*").from_(table).limit(0)
    names = [d[0] for d in con.execute(query.sql(dialect="duckdb")).description]
    return {name.lower(): name for name in names}


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(f"{name} = {value!r}: expected a finite number")
    return float(value)


def _row_to_budget(row) -> Budget:
    return Budget(*row)


_BUDGET_COLUMNS = ("budget_id, table_name, privacy_unit, units, epsilon, delta, spent_epsilon, spent_delta, queries")


def active_budget(con: duckdb.DuckDBPyConnection, table_name: str, *, ensure: bool = True) -> Budget | None:
    """The table's budget that is not dropped (None when there is none); table_name is canonical. ensure=False
    when the caller has just run ensure_ledger."""
    if ensure:
        ensure_ledger(con)
    row = con.execute(f"SELECT {_BUDGET_COLUMNS} FROM anon.privacy_budgets "  # constant column list only
                      "WHERE table_name = ? AND dropped_at IS NULL", [table_name]).fetchall()
    return _row_to_budget(row[0]) if row else None


def create_budget(con: duckdb.DuckDBPyConnection, table: str, *, epsilon: float, delta: float,
                  privacy_unit: str) -> Budget:
    """Give a table a total (ε, δ) for DP queries about its units. δ must be in (0, 1/number of units)."""
    refuse_read_only(con, "CREATE PRIVACY BUDGET")   # hostile rounds 19 and 20, G20, R05a
    epsilon = _number("epsilon", epsilon)
    delta = _number("delta", delta)
    if epsilon <= 0:
        raise PolicyError(f"epsilon = {epsilon!r}: a privacy budget needs epsilon > 0 (e.g. epsilon = 1.0)")
    node, name = resolve_table(con, table)
    if not isinstance(privacy_unit, str) or not privacy_unit:
        raise PolicyError("privacy_unit: name the column that identifies a person, e.g. privacy_unit = 'patient_id'")
    columns = _column_names(con, node)
    if privacy_unit.lower() not in columns:
        raise PolicyError(f"privacy_unit = {privacy_unit!r}: no such column in {name} "
                          f"(columns: {', '.join(columns.values())})")
    unit = columns[privacy_unit.lower()]
    count = exp.select(exp.Count(this=exp.Distinct(expressions=[exp.column(unit, quoted=True)]))).from_(node)
    units = con.execute(count.sql(dialect="duckdb")).fetchall()[0][0]
    if units == 0:
        raise PolicyError(f"{name} has no rows with a {unit}: a budget needs at least one unit")
    if not (0 < delta < 1 / units):
        raise PolicyError(f"delta = {delta!r}: must be in (0, 1/units) = (0, {1 / units:.3g}) for the {units} units "
                          f"of {name}; e.g. delta = {_suggest_delta(units):g}")

    def create() -> Budget:
        _owned_ledger(con)
        if active_budget(con, name) is not None:
            raise PolicyError(f"{name} already has a privacy budget: DROP PRIVACY BUDGET ON {name} first "
                              "(its history stays in anon.privacy_ledger)")
        con.execute("INSERT INTO anon.privacy_budgets (table_name, privacy_unit, units, epsilon, delta) "
                    "VALUES (?, ?, ?, ?, ?)", [name, unit, units, epsilon, delta])
        budget = active_budget(con, name)
        owned_rows.mark_row(con, owned_rows.BUDGETS, str(budget.budget_id))
        return budget

    return _in_transaction(con, create)


def _suggest_delta(units: int) -> float:
    return 10.0 ** math.floor(math.log10(1 / units) - 1)


def show_budgets(con: duckdb.DuckDBPyConnection, include_dropped: bool = False) -> pd.DataFrame:
    """table, unit, ε and δ total, spent and left, number of queries (dropped budgets too when asked). A read:
    without a ledger it is an empty frame, nothing is created (works on a read-only connection)."""
    query = ("SELECT table_name, privacy_unit, units, epsilon, spent_epsilon, "
             "greatest(epsilon - spent_epsilon, 0) AS epsilon_left, delta, spent_delta, "
             "greatest(delta - spent_delta, 0) AS delta_left, queries, created_at, dropped_at "
             "FROM anon.privacy_budgets WHERE ? OR dropped_at IS NULL ORDER BY budget_id")
    has_ledger = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                             "AND schema_name = 'anon' AND table_name = 'privacy_budgets'").fetchall()[0][0]
    if not has_ledger:
        return pd.DataFrame(columns=["table_name", "privacy_unit", "units", "epsilon", "spent_epsilon", "epsilon_left",
                                     "delta", "spent_delta", "delta_left", "queries", "created_at", "dropped_at"])
    return con.execute(query, [include_dropped]).df()


def drop_budget(con: duckdb.DuckDBPyConnection, table: str) -> Budget:
    """Mark the table's budget dropped (its rows and ledger stay); PrivacyRequirementError when it has none."""
    refuse_read_only(con, "DROP PRIVACY BUDGET")
    _, name = resolve_table(con, table)

    def drop() -> Budget:
        _owned_ledger(con)
        budget = active_budget(con, name)
        if budget is None:
            raise PrivacyRequirementError(f"{name} has no privacy budget to drop (SHOW PRIVACY BUDGETS lists them)")
        require_budget_owned(con, budget, "drop")
        con.execute("UPDATE anon.privacy_budgets SET dropped_at = current_timestamp WHERE budget_id = ?",
                    [budget.budget_id])
        return budget

    return _in_transaction(con, drop)


def remaining(budget: Budget) -> str:
    return (f"{budget.epsilon_left:.6g} of epsilon = {budget.epsilon:g} and {budget.delta_left:.3g} of "
            f"delta = {budget.delta:g} left after {counted(budget.queries, 'query', 'queries')}")


def check_affordable(budget: Budget, epsilon: float, delta: float) -> None:
    """PrivacyRequirementError (exit 3) when (ε, δ) would overspend the budget; says what is left."""
    if (budget.spent_epsilon + epsilon > budget.epsilon * (1 + _SLACK)
            or budget.spent_delta + delta > budget.delta * (1 + _SLACK)):
        raise PrivacyRequirementError(
            f"this query needs epsilon = {epsilon:g}, delta = {delta:g} but {budget.table_name} has "
            f"{remaining(budget)}: ask for less, or DROP and CREATE a new PRIVACY BUDGET (a new budget does not "
            "undo what was already released)")


def record_spend(con: duckdb.DuckDBPyConnection, budget: Budget, query_text: str, epsilon: float, delta: float,
                 groups_released: int) -> None:
    """Charge the budget and log the answer; call inside the transaction that computed the answer."""
    con.execute("UPDATE anon.privacy_budgets SET spent_epsilon = spent_epsilon + ?, spent_delta = spent_delta + ?, "
                "queries = queries + 1 WHERE budget_id = ?", [epsilon, delta, budget.budget_id])
    con.execute("INSERT INTO anon.privacy_ledger (budget_id, table_name, query_text, epsilon, delta, "
                "groups_released) VALUES (?, ?, ?, ?, ?, ?)",
                [budget.budget_id, budget.table_name, query_text, epsilon, delta, groups_released])
