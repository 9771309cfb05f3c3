"""SQL scripts that mix ordinary DuckDB SQL with the anonymized-view statements; split, parse and run them.

Statements of a script are split with DuckDB's own tokenizer (so semicolons inside strings, quoted names, dollar
quotes and comments never split), run one at a time, and stop at the first failure with a
:class:`~anon_sql.errors.StatementError` naming the statement's number, line and column. Ordinary statements go to
DuckDB unchanged; these go to :mod:`anon_sql.statements.views` (and :mod:`anon_sql.api`)::

    CREATE [OR REPLACE] ANONYMIZED VIEW [IF NOT EXISTS] name WITH (...) AS SELECT quasi(...), ... FROM source
    REFRESH ANONYMIZED VIEW name [KEEP PLAN]
    DROP ANONYMIZED VIEW [IF EXISTS] name
    SHOW ANONYMIZED VIEWS
    EXPLAIN ANONYMIZED VIEW name
    CHECK ANONYMIZED VIEW name
    EXPORT ANONYMIZED VIEW name TO 'file'

and the differential-privacy statements go to :mod:`anon_sql.dp` (a table of rows for each)::

    CREATE PRIVACY BUDGET ON table WITH (epsilon = 1.0, delta = 1e-7, privacy_unit = 'column')
    SHOW PRIVACY BUDGETS
    DROP PRIVACY BUDGET ON table
    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ..., ...) ... FROM table [WHERE ...] [GROUP BY ...]

Every statement leaves the database as it was when it fails: DuckDB runs a plain statement atomically, the
anonymized-view statements run in their own transactions, and a transaction the script opened (BEGIN) is rolled back.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

import duckdb
import pandas as pd
import sqlglot

from ..catalog import store as catalog
from ..data.session import refuse_read_only
from ..errors import (AnonSQLError, PolicyError, PrivacyRequirementError, SourceError, StatementError,
                      is_environment)
from ..common.wording import counted

KINDS = ("create", "refresh", "drop", "show", "explain", "check", "export")
# The differential-privacy statements by their first three words (upper case) → kind.
DP_KINDS = {("CREATE", "PRIVACY", "BUDGET"): "create_budget", ("SHOW", "PRIVACY", "BUDGETS"): "show_budgets",
            ("DROP", "PRIVACY", "BUDGET"): "drop_budget", ("SELECT", "WITH", "DIFFERENTIAL_PRIVACY"): "dp_query"}


@dataclass(frozen=True)
class Token:
    """A token of the script: DuckDB's kind (keyword, identifier, string_const, numeric_const, operator, comment),
    its source text and its character offset in the script."""

    kind: str
    text: str
    offset: int

    def word(self) -> str | None:
        """The upper-cased bare word (a keyword or an unquoted name), None for anything else."""
        if self.kind in ("keyword", "identifier") and not self.text.startswith('"'):
            return self.text.upper()
        return None


@dataclass(frozen=True)
class Statement:
    """One statement of a script: its number (from 1), text (no final semicolon), offset, line and column."""

    number: int
    text: str
    offset: int
    line: int
    column: int
    tokens: tuple[Token, ...]


@dataclass
class Result:
    """What a statement produced: rows (``frame``) and/or a message; ``kind`` is ``"sql"`` or one of KINDS."""

    statement: Statement
    kind: str
    frame: pd.DataFrame | None = None
    message: str = ""
    value: object = field(default=None, repr=False)   # the Release of CREATE / REFRESH


def _line_col(script: str, offset: int) -> tuple[int, int]:
    line = script.count("\n", 0, offset) + 1
    return line, offset - (script.rfind("\n", 0, offset) + 1) + 1


def split(script: str) -> list[Statement]:
    """The statements of ``script`` in order (empty ones and comment-only ones left out)."""
    raw = script.encode("utf-8")
    chars = [0] * (len(raw) + 1)   # byte offset (DuckDB's tokenizer) → character offset
    pos = 0
    for i, ch in enumerate(script):
        for _ in range(len(ch.encode("utf-8"))):
            chars[pos] = i
            pos += 1
    chars[pos] = len(script)
    found = duckdb.tokenize(script)
    starts = [chars[p] for p, _ in found] + [len(script)]
    groups: list[list[Token]] = [[]]
    for (_, kind), start, end in zip(found, starts, starts[1:]):
        text = script[start:end].rstrip()
        kind = str(kind).rsplit(".", 1)[-1]
        if kind == "operator" and text == ";":
            groups.append([])
        elif kind != "comment" and text:    # a control character alone (\x1f) strips to nothing: no token
            groups[-1].append(Token(kind, text, start))
    out = []
    for tokens in (g for g in groups if g):
        first, last = tokens[0], tokens[-1]
        line, column = _line_col(script, first.offset)
        text = script[first.offset: last.offset + len(last.text)]
        out.append(Statement(len(out) + 1, text, first.offset, line, column, tuple(tokens)))
    return out


# -- the anonymized-view statements ------------------------------------------------------------------------------
@dataclass
class Command:
    """A parsed anonymized-view statement."""

    kind: str
    name: str | None = None
    replace: bool = False
    keep_plan: bool = False
    if_exists: bool = False
    if_not_exists: bool = False
    target: str | None = None
    quoted: bool = False      # the name was written "quoted" (matched case-insensitively all the same, as DuckDB does)
    qualifier: tuple[str, ...] = ()   # what the name was qualified with (schema, or database and schema)


class _Syntax(Exception):
    def __init__(self, message: str, token: Token | None):
        super().__init__(message)
        self.token = token


def _value(token: Token) -> str:
    """The value of a name or string token, unquoted by sqlglot's tokenizer."""
    return sqlglot.tokenize(token.text, read="duckdb")[0].text


def _parts(toks: list[Token]) -> int:
    """How many dot-separated parts the name at the start of ``toks`` has (``a``: 1, ``s.a``: 2, ``d.s.a``: 3)."""
    n = 1
    while n < 3 and len(toks) > 2 * n and toks[2 * n - 1].text == ".":
        n += 1
    return n


def statement_kind(stmt: Statement) -> str:
    """``"sql"`` for an ordinary statement, else the anonymized-view or DP statement's kind (KINDS, DP_KINDS)."""
    words = [t.word() for t in stmt.tokens[:5]]
    if tuple(words[:3]) in DP_KINDS:
        return DP_KINDS[tuple(words[:3])]
    if words[:1] == ["CREATE"]:
        at = 3 if words[1:3] == ["OR", "REPLACE"] else 1
        return "create" if words[at: at + 2] == ["ANONYMIZED", "VIEW"] else "sql"
    if words[:2] == ["SHOW", "ANONYMIZED"]:
        return "show"
    if len(words) >= 3 and words[1:3] == ["ANONYMIZED", "VIEW"] and words[0] in (
            "REFRESH", "DROP", "EXPLAIN", "CHECK", "EXPORT"):
        return words[0].lower()
    return "sql"


def parse_view_statement(stmt: Statement) -> Command:
    """Parse an anonymized-view statement other than CREATE (whose body is the policy grammar of policy_sql); a DP
    statement gives a Command of its kind only (anon_sql.dp parses its text when it runs)."""
    kind = statement_kind(stmt)
    toks = list(stmt.tokens)
    if kind in DP_KINDS.values():
        return Command(kind)
    if kind == "create":
        replace = [t.word() for t in toks[1:3]] == ["OR", "REPLACE"]
        at = 5 if replace else 3
        if_not_exists = [t.word() for t in toks[at:at + 3]] == ["IF", "NOT", "EXISTS"]
        if if_not_exists and replace:
            raise _Syntax("OR REPLACE and IF NOT EXISTS contradict each other: write one of them", toks[at])
        at += 3 if if_not_exists else 0
        qualifier = tuple(_value(t) for t in toks[at:at + 6:2][:_parts(toks[at:]) - 1]) if len(toks) > at else ()
        return Command("create", replace=replace, qualifier=qualifier, if_not_exists=if_not_exists)
    if kind == "show":
        if len(toks) != 3 or toks[2].word() != "VIEWS":
            raise _Syntax("write SHOW ANONYMIZED VIEWS", toks[2] if len(toks) > 2 else toks[-1])
        return Command("show")
    rest = toks[3:]
    cmd = Command(kind)
    usage = {"refresh": "REFRESH ANONYMIZED VIEW name [KEEP PLAN]", "drop": "DROP ANONYMIZED VIEW [IF EXISTS] name",
             "explain": "EXPLAIN ANONYMIZED VIEW name", "check": "CHECK ANONYMIZED VIEW name",
             "export": "EXPORT ANONYMIZED VIEW name TO 'file.parquet' | 'file.duckdb'"}[kind]
    if kind == "drop" and [t.word() for t in rest[:2]] == ["IF", "EXISTS"]:
        cmd.if_exists, rest = True, rest[2:]
    if not rest or rest[0].kind not in ("identifier", "keyword"):
        raise _Syntax(f"a view name is expected here; write {usage}", rest[0] if rest else toks[-1])
    n = _parts(rest)
    if any(t.kind not in ("identifier", "keyword") for t in rest[:2 * n - 1:2]):
        raise _Syntax(f"a view name is expected here; write {usage}", rest[0])
    cmd.qualifier = tuple(_value(t) for t in rest[:2 * n - 2:2])
    last = rest[2 * n - 2]
    cmd.name, cmd.quoted, rest = _value(last), last.text.startswith('"'), rest[2 * n - 1:]
    if kind == "refresh" and [t.word() for t in rest] == ["KEEP", "PLAN"]:
        cmd.keep_plan, rest = True, []
    if kind == "export":
        if len(rest) != 2 or rest[0].word() != "TO" or rest[1].kind != "string_const":
            raise _Syntax(f"write {usage}", rest[0] if rest else toks[-1])
        cmd.target, rest = _value(rest[1]), []
    if rest:
        raise _Syntax(f"unexpected {rest[0].text!r}; write {usage}", rest[0])
    return cmd


# the anonymized-view statements that write the database (a read-only one refuses them in one line)
_WRITES = {"create": "CREATE ANONYMIZED VIEW", "refresh": "REFRESH ANONYMIZED VIEW", "drop": "DROP ANONYMIZED VIEW"}


def _run_command(con: duckdb.DuckDBPyConnection, stmt: Statement, cmd: Command) -> Result:
    from .. import api
    from . import views
    from ..policy.model import Policy

    _current_schema(con, cmd)
    if cmd.kind in _WRITES:   # round 17, X08: DuckDB's raw error, exit 4
        refuse_read_only(con, _WRITES[cmd.kind])
    if cmd.name is not None:   # quoted or not: DuckDB matches a quoted name case-insensitively too (round 5, R19)
        cmd.name = views.canonical_name(con, cmd.name)
    if cmd.kind == "create":
        policy = Policy.from_sql(stmt.text)
        if cmd.if_not_exists and views.is_release(con, policy.name):    # round 14, E16: IF NOT EXISTS honoured
            return Result(stmt, "create", message=f"anonymized view {policy.name} exists: nothing done (IF NOT "
                                                  "EXISTS; REFRESH ANONYMIZED VIEW re-runs its policy)")
        rel = views.create_anonymized_view(con, policy, replace=cmd.replace)
        return Result(stmt, "create", message=_release_line(rel), value=rel)
    if cmd.kind == "refresh":
        rel = views.refresh(con, cmd.name, keep_plan=cmd.keep_plan)
        return Result(stmt, "refresh", message=_release_line(rel), value=rel)
    if cmd.kind == "drop":
        dropped = views.drop_anonymized_view(con, cmd.name, if_exists=cmd.if_exists)
        return Result(stmt, "drop", message=f"dropped anonymized view {cmd.name}" if dropped
                      else f"no anonymized view {cmd.name}: nothing dropped")
    if cmd.kind == "show":
        return Result(stmt, "show", frame=views.show(con))
    if cmd.kind == "explain":
        text, checks = views.explain(con, cmd.name)
        return Result(stmt, "explain", frame=None, message=text, value=checks)
    if cmd.kind in ("check", "export"):
        views.require(con, cmd.name)
    if cmd.kind == "check":
        frame = api.check(con, cmd.name)
        if not frame["passed"].all():
            failed = frame.loc[~frame["passed"], "check"].tolist()
            raise PrivacyRequirementError(f"anonymized view {cmd.name!r} fails its checks {failed}:\n"
                                          + frame.to_string(index=False))
        return Result(stmt, "check", frame=frame, message="all checks passed")
    paths = api.export(con, cmd.name, cmd.target)
    return Result(stmt, "export", message="\n".join(f"wrote {p}" for p in paths))


def _current_schema(con: duckdb.DuckDBPyConnection, cmd: Command) -> None:
    """A qualified view name must name the current schema (and database): a release's table lives there, and every
    later statement finds it by its name alone (issue 28.7). Anything else is refused before any work."""
    if not cmd.qualifier:
        return
    database, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    here = (schema,) if len(cmd.qualifier) == 1 else (database, schema)
    if tuple(q.lower() for q in cmd.qualifier) != tuple(h.lower() for h in here):
        written = ".".join(cmd.qualifier)
        raise PolicyError(f"anonymized view names are not qualified with another schema: {written!r} is not the "
                          f"current schema {'.'.join(here)!r}, where the release's table would be; write the name "
                          f"alone (or qualified with {schema}), or USE {written} first")


def _run_dp(con: duckdb.DuckDBPyConnection, stmt: Statement, kind: str) -> Result:
    """A DP statement through anon_sql.dp: its rows, and for a DP query what the table's budget has left."""
    from ..dp import ledger, run_dp_statement
    from ..dp.query import parse_statement

    frame = run_dp_statement(con, stmt.text)
    if kind == "create_budget":
        row = frame.iloc[0]
        return Result(stmt, kind, frame=frame, message=f"privacy budget on {row['table_name']}: epsilon = "
                      f"{row['epsilon']:g}, delta = {row['delta']:g} for the {counted(int(row['units']), 'unit')} "
                      f"of {row['privacy_unit']}")
    if kind == "drop_budget":
        return Result(stmt, kind, frame=frame, message=f"dropped the privacy budget on {frame.iloc[0]['table_name']} "
                      "(its history stays in anon.privacy_ledger)")
    if kind == "show_budgets":
        return Result(stmt, kind, frame=frame)
    _, name = ledger.resolve_table(con, parse_statement(stmt.text).table)
    budget = ledger.active_budget(con, name)
    return Result(stmt, kind, frame=frame, message="" if budget is None else f"{name}: {ledger.remaining(budget)}")


def _release_line(rel) -> str:
    v = rel.info.get("version", {})
    line = (f"anonymized view {rel.name} version {v.get('version')} ({v.get('action')}): {counted(rel.records_in, 'record')} in, "
            f"{rel.records_out} released, {rel.suppressed} suppressed, {counted(len(rel.classes), 'class')}; "
            f"plan {rel.plan}")
    if v.get("rows_removed") is not None and v.get("action") != "create":
        line += (f"\nchanged since the previous version: {counted(v['rows_added'], 'row')} added, {v['rows_removed']} removed; "
                 f"classes {v['classes_added']} added, {v['classes_removed']} removed, {v['classes_resized']} resized"
                 + ("; the plan changed" if v.get("plan_changed") else ""))
    return line


# -- ordinary statements -----------------------------------------------------------------------------------------
_CHANGES = ("INSERT", "UPDATE", "DELETE", "COPY", "CREATE")


def _run_sql(con: duckdb.DuckDBPyConnection, stmt: Statement) -> Result:
    [parsed] = con.extract_statements(stmt.text)
    con.execute(parsed)
    columns = [d[0] for d in con.description or []]
    frame = con.df() if columns else None
    kind = str(parsed.type).rsplit(".", 1)[-1]
    if frame is not None and columns == ["Count"] and kind in _CHANGES:
        return Result(stmt, "sql", message=counted(int(frame['Count'].sum()) if len(frame) else 0, "row"))
    if frame is not None and columns == ["Success"] and frame.empty:
        return Result(stmt, "sql")
    return Result(stmt, "sql", frame=frame)


_DUCKDB_POSITION = re.compile(r"\nLINE (\d+): (.*)\n( *)\^")


def _where(stmt: Statement, message: str, script: str, shift: int = 0) -> str:
    """Add the script's line and column to a DuckDB error that marks a position in the statement (``shift``: the
    input lines before ``script``, in a shell session)."""
    m = _DUCKDB_POSITION.search(message)
    if not m or m.group(2).startswith("..."):
        return message
    line_in, caret = int(m.group(1)), len(m.group(3)) - len(f"LINE {m.group(1)}: ")
    lines = stmt.text.split("\n")
    if line_in > len(lines) or lines[line_in - 1] != m.group(2):
        return message
    offset = stmt.offset + sum(len(x) + 1 for x in lines[: line_in - 1]) + caret
    line, column = _line_col(script, offset)
    return f"{message}\n(at line {line + shift}, column {column} of the script)"


class Session:
    """Runs statements on one connection, tracking a transaction the script itself opened."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.in_transaction, self.opened = False, None
        # a shell session runs its input piece by piece: statements and lines are numbered over the whole input
        # (hostile round 4, SH2), not from 1 in every piece
        self.statements, self.shift = 0, 0

    def run(self, stmt: Statement, script: str) -> Result:
        """Run one statement; on failure raise :class:`StatementError` (the database as before the statement)."""
        try:
            kind = statement_kind(stmt)
            if kind == "sql":
                result = _run_sql(self.con, stmt)
                self._track(stmt)
                return result
            if self.in_transaction:
                what = (" ".join(t.word() or "" for t in stmt.tokens[:3]) if kind in DP_KINDS.values()
                        else f"{kind.upper()} ANONYMIZED VIEW")
                raise PolicyError(f"{what} runs in its own transaction: COMMIT or ROLLBACK the transaction this "
                                  "script opened first")
            cmd = parse_view_statement(stmt)
            if kind in DP_KINDS.values():
                with catalog.undone_on_failure(self.con):   # a refused first budget leaves no empty ledger behind
                    return _run_dp(self.con, stmt, kind)
            with catalog.undone_on_failure(self.con):    # a failing statement leaves no catalog behind either
                # reads never install (issue 28.5); CREATE installs a missing catalog inside its release's
                # transaction (a crash leaves no catalog, or the catalog with the view)
                if catalog.is_installed(self.con):
                    catalog.ensure_installed(self.con)
                return _run_command(self.con, stmt, cmd)
        except _Syntax as err:
            token = err.token or stmt.tokens[0]
            line, column = _line_col(script, token.offset)
            raise StatementError(f"{err} (at {token.text!r}, line {line + self.shift}, column {column})",
                                 number=stmt.number,
                                 line=stmt.line, column=stmt.column, exit_code=2) from None
        except AnonSQLError as err:
            self._abort()
            # every library error a statement raises is about its input (3: a privacy requirement is not met)
            raise StatementError(str(err), number=stmt.number, line=stmt.line, column=stmt.column,
                                 exit_code=err.exit_code if err.exit_code in (3, 4) else 2) from err
        except duckdb.Error as err:
            rolled = self._abort()
            code = (1 if isinstance(err, (duckdb.InternalException, duckdb.FatalException))
                    else 4 if is_environment(err) else 2)
            message = _where(stmt, str(err), script, self.shift) + (
                "\n(the transaction the script opened was rolled back)" if rolled else "")
            raise StatementError(message, number=stmt.number, line=stmt.line, column=stmt.column,
                                 exit_code=code) from err

    def run_script(self, sql: str, on_result: Callable[[Result], None] | None = None, first_line: int = 1
                   ) -> list[Result]:
        """Run every statement of ``sql`` in order (see :func:`execute`); ``first_line``: the input line ``sql``
        starts on (the shell's pieces), its statements numbered after those this session ran before."""
        readable(sql, first_line)
        self.shift = first_line - 1
        results = []
        for stmt in split(sql):
            self.statements += 1
            stmt = replace(stmt, number=self.statements, line=stmt.line + self.shift)
            result = self.run(stmt, sql)
            if on_result is not None:
                on_result(result)
            results.append(result)
        return results

    def finish(self) -> None:
        """The script's end: a transaction it opened and never closed is rolled back and reported
        (:class:`StatementError`, exit 2), never left to vanish with the connection while the run reports success."""
        if self.in_transaction:
            opened = self.opened
            self._abort()
            raise StatementError(
                "the script ended inside the transaction it opened (BEGIN without COMMIT), so nothing of that "
                "transaction was kept: it was rolled back; end the script with COMMIT (or ROLLBACK)",
                number=opened.number, line=opened.line, column=opened.column, exit_code=2)

    def _track(self, stmt: Statement) -> None:
        word = stmt.tokens[0].word()
        if word in ("BEGIN", "START"):
            self.in_transaction, self.opened = True, stmt
        elif word in ("COMMIT", "END", "ROLLBACK", "ABORT"):
            self.in_transaction = False

    def _abort(self) -> bool:
        if not self.in_transaction:
            return False
        self.in_transaction = False
        try:
            self.con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        return True


def execute(con: duckdb.DuckDBPyConnection, sql: str,
            on_result: Callable[[Result], None] | None = None) -> list[Result]:
    """Run a script of DuckDB SQL, anonymized-view and DP statements on ``con``, in order; stop at the first failure
    (:class:`StatementError`: number, line, column, and the cause's exit code). ``on_result`` sees each result as
    it comes (the CLI prints with it). A script that ends inside a transaction it opened fails (see
    :meth:`Session.finish`)."""
    session = Session(con)
    results = session.run_script(sql, on_result)
    session.finish()
    return results


def readable(sql: str, first_line: int = 1) -> None:
    """Refuse text that is not valid Unicode (a lone surrogate, as undecodable bytes become through
    ``surrogateescape``): :class:`SourceError` naming where (``first_line``: the input line ``sql`` starts on),
    exit 2."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as err:
        line, column = _line_col(sql, err.start)
        line += first_line - 1
        raise SourceError(f"the script is not valid text: character {ascii(sql[err.start])} at line {line}, column "
                          f"{column} is not Unicode (undecodable bytes?); give UTF-8 text") from None


def is_complete(text: str) -> bool:
    """Does ``text`` end with a finished statement (a semicolon outside strings and comments)? For the shell."""
    tokens = [(p, k) for p, k in duckdb.tokenize(text) if str(k).rsplit(".", 1)[-1] != "comment"]
    if not tokens:
        return False
    pos, kind = tokens[-1]
    return str(kind).rsplit(".", 1)[-1] == "operator" and text.encode("utf-8")[pos:pos + 1] == b";"
