"""``anon-sql run SCRIPT.sql`` and ``anon-sql shell``: SQL scripts and an interactive prompt that accept DuckDB SQL,
the anonymized-view and the DP statements (:mod:`anon_sql.statements.script`); results of queries print as tables."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

import click

from .errors import cli_errors, database
from .output import json_option, note_script, output_target, remember_output, rows_text, set_result, state_folder
from ..common.wording import counted
from ..errors import AnonSQLError, SourceError, TargetError

if TYPE_CHECKING:                # imported where used: `anon-sql run --help` loads no pandas or duckdb
    import duckdb
    import pandas as pd

MAX_ROWS = 40
# the shell's history lives in anon_sql's state folder (cli/output.py's state_folder), a file no user names; the
# default of earlier versions, ~/.anon_sql_history, is only read, to start the new file (round 16, H06: a user's CSV
# at that path was adopted and cut to 1,000 lines)
HISTORY = "history"
LEGACY_HISTORY = "~/.anon_sql_history"
HELP = """Statements end with ';' and may span lines. Besides DuckDB SQL:
  CREATE [OR REPLACE] ANONYMIZED VIEW name WITH (k = 5, ...) AS SELECT quasi(col, taxonomy => 't'), ... FROM source;
  REFRESH ANONYMIZED VIEW name [KEEP PLAN];    DROP ANONYMIZED VIEW [IF EXISTS] name;
  SHOW ANONYMIZED VIEWS;    EXPLAIN ANONYMIZED VIEW name;    CHECK ANONYMIZED VIEW name;
  EXPORT ANONYMIZED VIEW name TO 'file.parquet';
Differential privacy (docs/dp.md):
  CREATE PRIVACY BUDGET ON t WITH (epsilon = 1.0, delta = 1e-7, privacy_unit = 'person_id');
  SHOW PRIVACY BUDGETS;    DROP PRIVACY BUDGET ON t;
  SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.25, delta = 1e-8) sex, COUNT(*) AS n FROM t GROUP BY sex;
.help  this text        .quit / .exit (or Ctrl-D)  leave"""


def format_frame(frame: pd.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """A result as a plain table (:func:`anon_sql.cli.output.rows_text`) with a row count; the first and last
    ``max_rows // 2`` rows of a longer one."""
    n = len(frame)
    if frame.columns.empty:
        return f"({counted(n, 'row')})"
    half = max_rows // 2
    shown = frame if n <= max_rows else frame.iloc[list(range(half)) + list(range(n - half, n))]
    rows = list(shown.itertuples(index=False, name=None))
    text = rows_text(rows, list(frame.columns), elided_at=half if n > max_rows else None)
    return f"{text}\n({counted(n, 'row')})"


def decoded(data: bytes, name: str) -> str:
    """A script's bytes as text: UTF-8 (a BOM allowed), else :class:`SourceError` naming where (exit 2)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SourceError(f"script {name!r} is not UTF-8 text: byte 0x{data[err.start]:02x} at line {line} (byte "
                          f"offset {err.start}) cannot be decoded; save the script as UTF-8") from None


def echo_result(result) -> None:
    """Print one statement's result: its message, then its rows."""
    if result.message:
        click.echo(result.message)
    if result.frame is not None:
        click.echo(format_frame(result.frame))


def shown_and_recorded(con: duckdb.DuckDBPyConnection | None = None) -> Callable[[Any], None]:
    """A statement-result callback that prints each result and keeps them all as the command's ``--json`` result
    (one entry per statement that ran: kind, message, rows). With ``con``, the check program of each view created
    or refreshed is compiled and cached, so that its first ``anon-sql check`` starts at once."""
    results: list[dict] = []

    def show(result) -> None:
        echo_result(result)
        if con is not None and result.kind in ("create", "refresh") and result.value is not None:
            from ..audit.recheck import prepare_check

            prepare_check(con, result.value.name, getattr(result.value, "recorded", None))
        results.append({"kind": result.kind, "message": result.message, "rows": result.frame})
        set_result(results)
    return show


READ_ONLY_HELP = ("Open the database read-only: SHOW, CHECK, EXPLAIN and SELECT answer, anything that writes fails. "
                  "The default when the file or its folder cannot be written (a read-only filesystem).")


def read_only_wanted(db: str | None, asked: bool) -> bool:
    """``--read-only`` given, or an existing file that this process cannot write (or whose folder, where DuckDB
    writes its WAL, it cannot): then statements that only read still answer (hostile round 3, F01 / D03)."""
    if asked or not db or not Path(db).is_file():
        return asked and bool(db)
    folder = os.path.dirname(os.path.abspath(db))
    return not (os.access(db, os.W_OK) and os.access(folder, os.W_OK))


@click.command("run")
@click.argument("script", type=click.File("rb"))
@click.option("--db", default=None, help="DuckDB database file (default: in-memory).")
@click.option("--read-only", "read_only", is_flag=True, help=READ_ONLY_HELP)
@json_option
def run_cmd(script: BinaryIO, db: str | None, read_only: bool) -> None:
    """Run a SQL script (or - for stdin): DuckDB SQL, anonymized-view and DP statements; stop at the first failure."""
    from ..statements.script import execute

    with cli_errors():
        text = decoded(script.read(), getattr(script, "name", "-"))
    if not Path(str(getattr(script, "name", "-"))).is_file():   # stdin: its files guarded when --json is written
        note_script(text)
    read_only = read_only_wanted(db, read_only)
    with cli_errors(), database(db, must_exist=read_only, read_only=read_only) as con:
        execute(con, text, on_result=shown_and_recorded(con))


@click.command("shell")
@click.option("--db", default=None, help="DuckDB database file (default: in-memory).")
@click.option("--history", default=None,
              help="History file (default: $ANON_SQL_HISTORY, else `history` in anon_sql's state folder, "
                   "$ANON_SQL_STATE_DIR or ~/.local/state/anon_sql).")
@click.option("--read-only", "read_only", is_flag=True, help=READ_ONLY_HELP)
@json_option
def shell_cmd(db: str | None, history: str | None, read_only: bool) -> None:
    """Interactive SQL prompt with history; accepts DuckDB SQL, the anonymized-view and the DP statements.

    With input piped in (not a terminal) it runs like `anon-sql run -`: no prompt, stop at the first failure.
    With --json, the results of the session's statements (kind, message, rows) are written as JSON at the end."""
    import duckdb

    read_only = read_only_wanted(db, read_only)
    interactive = sys.stdin.isatty()
    with cli_errors():
        if read_only and not Path(str(db)).is_file():
            raise SourceError(f"--read-only: database file {db!r} does not exist; check the path")
        file = shell_history_file(history, db) if interactive else None   # refused before the database is opened
        con = duckdb.connect(db or ":memory:", read_only=read_only)
    if file is not None:
        _with_history(file, db)
        click.echo(f"anon-sql shell on {db or 'an in-memory database'}; .help for help, .quit to leave")
    sys.exit(_loop(con, interactive))


def shell_history_file(history: str | None, db: str | None) -> Path:
    """The shell's history file (``--history``, else ``$ANON_SQL_HISTORY``, else ``history`` in anon_sql's state
    folder), refused with
    :class:`anon_sql.errors.TargetError` when it is the ``--db`` database or another DuckDB / Parquet file
    (hostile round 10, M13: the history was written over the database at ``.quit``)."""
    env = os.environ.get("ANON_SQL_HISTORY")
    option = "$ANON_SQL_HISTORY" if env and not history else "--history"
    given = history or env
    if not given:
        option = "the default history"     # (round 18, H10: the message named --history, which was not given)
        state = state_folder()
        state.mkdir(parents=True, exist_ok=True)     # anon_sql's own folder
        given = str(state / HISTORY)
    path = output_target(option, given, db)
    if path.exists() and not path.is_file():     # readline blocks reading a FIFO or a terminal (round 15, H06/H07)
        raise TargetError(f"{option} {given!r} is not a regular file (a FIFO, a device): the history is read and "
                          f"written whole; give {option} a file")
    return path


def _with_history(file: Path, db: str | None) -> None:
    """Line editing and a persistent history through the standard library's readline (where it exists)."""
    try:
        import atexit
        import readline
    except ImportError:    # pragma: no cover - Windows without pyreadline
        return
    legacy = Path(os.path.expanduser(LEGACY_HISTORY))
    # an earlier version's lines, read only: the new file does not exist yet, so at exit it is written whole
    default = file == state_folder() / HISTORY
    start = legacy if default and not file.exists() and legacy.is_file() else file
    try:
        readline.read_history_file(start)
    except OSError:
        pass
    readline.set_history_length(1000)    # the file keeps the newest 1,000 lines (the session's memory keeps all)
    atexit.register(save_shell_history, readline, file, db, readline.get_current_history_length())


def save_shell_history(readline, file: Path, db: str | None = None, read: int | None = None) -> None:
    """At exit, add the lines typed in this session (after the ``read`` lines read from the file) to the history,
    checked again: a file that became a database during the session is kept. Appended, not rewritten: two shells on
    one history keep both sessions' lines (hostile round 15, H09)."""
    try:
        output_target("history", str(file), db)
        if read is not None and file.is_file() and file.stat().st_size > 0:
            readline.append_history_file(max(readline.get_current_history_length() - read, 0), file)
        else:
            readline.write_history_file(file)
        remember_output(file)
    except (OSError, AnonSQLError) as err:
        click.echo(f"warning: the shell history was not written to {file}: {err}", err=True)


def _finished(session) -> int:
    """The session's end: 0, or the error of a transaction it left open (rolled back, reported, exit 2)."""
    try:
        session.finish()
    except AnonSQLError as err:
        click.echo(f"error: {err}", err=True)
        return err.exit_code
    return 0


def _loop(con: duckdb.DuckDBPyConnection, interactive: bool) -> int:
    """Read statements until EOF or .quit; returns the exit code."""
    from ..statements.script import Session, is_complete, readable

    session = Session(con)
    show = shown_and_recorded(con)

    lines: list[str] = []
    seen, start = 0, 1     # input lines read; the line the statement being gathered starts on (SH2)
    while True:
        try:
            line = input(("anon> " if not lines else "  ...> ") if interactive else "")
            seen += 1
        except EOFError:
            line = None
        except UnicodeDecodeError as err:    # the terminal or the pipe gave bytes that are not UTF-8
            seen += 1
            click.echo(f"error: the input is not UTF-8 text ({err.reason} at byte 0x{err.object[err.start]:02x}); "
                       "give UTF-8 text", err=True)
            if not interactive:
                return SourceError.exit_code
            lines = []
            continue
        except KeyboardInterrupt:
            click.echo("^C")
            lines = []
            continue
        if line is None and not any(x.strip() for x in lines):
            if interactive:
                click.echo("")
            return _finished(session)
        if line is not None and not lines and line.strip().startswith("."):
            command = line.strip().split()[0]
            if command in (".quit", ".exit"):
                return _finished(session)
            click.echo(HELP if command == ".help" else f"unknown command {command}; .help lists what there is",
                       err=command != ".help")
            if command != ".help" and not interactive:   # piped input stops at the first failure, as SQL does
                return SourceError.exit_code   # 2: bad input
            continue
        if line is not None:
            try:
                readable(line, seen)  # undecodable bytes arrive as lone surrogates (surrogateescape)
            except SourceError as err:
                click.echo(f"error: {err}", err=True)
                if not interactive:
                    return err.exit_code
                lines = []
                continue
            if not lines:
                start = seen
            lines.append(line)
            if not is_complete("\n".join(lines)):
                continue
        text, lines = "\n".join(lines), []
        note_script(text)     # the files it names are never the --json output (hostile round 12, M20c)
        try:
            session.run_script(text, on_result=show, first_line=start)
            if line is None:
                return _finished(session)
        except AnonSQLError as err:
            click.echo(f"error: {err}", err=True)
            if not interactive:
                return err.exit_code
        except KeyboardInterrupt:    # the statement rolled back (each runs in a transaction); the session goes on
            click.echo("interrupted", err=True)
            if not interactive:
                return 1
        if line is None:
            return _finished(session)
