"""What every CLI command shares for its output: ``--json`` (a machine-readable result on stdout, one mechanism for
all commands) and the progress line on stderr that the methods' real progress drives.

A command adopts ``--json`` with the :func:`json_option` decorator and hands over its result by returning it or
with :func:`set_result` (before a ``sys.exit``, e.g. a failed check: the JSON is still written). In JSON mode the
human-readable text goes to stderr, so stdout holds exactly one JSON document."""
from __future__ import annotations

import contextlib
import functools
import json
import math
import numbers
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import click

from .errors import cli_errors
from .named_files import files_named, policy_files, script_files, view_files
from ..errors import TargetError

_RESULT = "anon_sql.runner.result"
_INPUTS_SEEN = "anon_sql.cli.inputs"   # ctx.meta: the command's inputs, found once (command_inputs)
_SCRIPTS_RUN = "anon_sql.cli.scripts"  # ctx.meta: SQL run from stdin or the shell (note_script)
# the inputs of a command that an output option must never replace: click parameter name -> how the user spelled it
_INPUTS = {"db": "--db", "to": "--to", "policy": "POLICY"}
# inputs that may be a file or a name (a table): guarded when they name an existing file
_FILE_INPUTS = {"path": "PATH", "source": "SOURCE", "table": "TABLE", "script": "SCRIPT"}


def output_target(option: str, target: str, db: str | None = None, inputs: dict[str, str] | None = None) -> Path:
    """The path an output option (``--json``, ``--html``, ``--csv``, ``--history``) writes to, refused with
    :class:`TargetError` (exit 2) when it is the ``--db`` database or its ``.wal``, another input of the command, or
    an existing DuckDB or Parquet file: a slip of one argument must not replace a database (hostile round 10, M13).
    An existing file is replaced only when anon_sql wrote it and it is unchanged since (:func:`remember_output`), or
    it is empty (hostile rounds 12 and 13, M26 / M31) — the shell's history too (round 14, M34: readline wrote a
    user's 3,001-line CSV back as its last 1,000 lines)."""
    path = Path(os.path.expanduser(target))
    real = _resolved(option, target)
    guarded = dict(inputs or {})
    if db:
        guarded.setdefault("--db", db)
    for spelled, given in guarded.items():
        if not given:
            continue
        given_path = Path(given).expanduser()
        names = {_resolved_or_absolute(given_path)}
        if spelled == "--db":     # DuckDB's write-ahead log: the path as given (or as resolved) plus ".wal"
            names |= {_resolved_or_absolute(Path(f"{given_path}.wal")),
                      Path(f"{_resolved_or_absolute(given_path)}.wal")}
        if real in names or any(_same_file(path, n) for n in names):
            what = "the database" if spelled == "--db" else "the input"
            wal = " (its write-ahead log)" if real.name.endswith(".wal") and spelled == "--db" else ""
            named = spelled if spelled.endswith(repr(given)) else f"{spelled} {given!r}"
            raise TargetError(f"{option} {target!r} is {what} this command reads ({named}){wal}: writing "
                              f"there would replace it; give {option} another file")
    if real.is_dir():
        raise TargetError(f"{option} {target!r} is a folder; give {option} a file path")
    if path.is_symlink() and not path.exists():   # a dangling link: writing creates the file it points to, elsewhere
        raise TargetError(f"{option} {target!r} is a symbolic link to a file that does not exist "
                          f"({os.readlink(path)!r}): anon_sql does not write through it; give {option} another file "
                          "(hostile round 21, W47b)")
    kind = _data_file_kind(real)
    if kind:
        raise TargetError(f"{option} {target!r} is an existing {kind} file: anon_sql writes its output over a file of "
                          f"the output's kind only, never over data; give {option} another file (or remove that one)")
    if not _replaceable(real):
        raise TargetError(f"{option} {target!r} is an existing file anon_sql did not write, or one changed since it "
                          "wrote it: anon_sql replaces only its own earlier output, never another file (a key, a data "
                          f"file such as a JSON or CSV source, a text); give {option} another file (or remove that "
                          "one first)")
    return path


def _resolved(option: str, target: str) -> Path:
    """An output path with every link followed; a loop of links is refused (hostile round 22, Y36: a traceback)."""
    try:
        return Path(os.path.expanduser(target)).resolve()
    except (RuntimeError, OSError) as err:
        raise TargetError(f"{option} {target!r} cannot be followed to a file ({err}); give {option} another file"
                          ) from None


def _resolved_or_absolute(path: Path) -> Path:
    """An input path with every link followed, or as it stands where it cannot be (a loop: it names no file)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return path.absolute()


def state_folder() -> Path:
    """anon_sql's own folder for what it keeps between commands (the outputs record, the shell's history):
    ``$ANON_SQL_STATE_DIR``, else ``$XDG_STATE_HOME/anon_sql``, else ``~/.local/state/anon_sql``."""
    return Path(os.environ.get("ANON_SQL_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"), "anon_sql"))


def _outputs_record() -> Path:
    """Where anon_sql records the output files it wrote (path → sha256): ``outputs.json`` in :func:`state_folder`."""
    return state_folder() / "outputs.json"


def _file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes (None when it cannot be read)."""
    import hashlib

    try:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def _recorded_outputs() -> dict[str, str]:
    try:
        found = json.loads(_outputs_record().read_text(encoding="utf-8"))
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def _replaceable(path: Path) -> bool:
    """An output may go to ``path``: it does not exist, is empty, or is a file anon_sql wrote, unchanged since (its
    digest as recorded by :func:`remember_output`). Any other existing file is refused whatever its content: a data
    file the command reads through a path the guard cannot see (``file://``, a macro's default, a setting, a
    concatenation) is never replaced (hostile round 13, M31: the own-kind rule let --json replace a JSON source)."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return True
    except OSError:
        return True     # the write itself says why
    digest = _file_digest(path)
    return digest is not None and _recorded_outputs().get(str(path)) == digest


def remember_output(path: str | Path) -> None:
    """Record that anon_sql wrote ``path`` (its digest now), so that a later output may replace it. Best effort: a
    record that cannot be written only means the next output there is refused until the file is removed."""
    real = Path(os.path.expanduser(str(path))).resolve()
    digest = _file_digest(real) if real.is_file() else None     # a FIFO or a device is not read (round 14, O11)
    if digest is None:
        return
    record = _outputs_record()
    try:
        found = _recorded_outputs()
        found.pop(str(real), None)
        found[str(real)] = digest
        kept = dict(list(found.items())[-2000:])    # the latest 2,000 outputs
        record.parent.mkdir(parents=True, exist_ok=True)
        spare = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        spare.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(spare, record)
    except OSError:
        pass


def _same_file(a: Path, b: Path) -> bool:
    """Both exist and are the same file (a hard link, a case-insensitive spelling)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _data_file_kind(path: Path) -> str | None:
    """"DuckDB database" or "Parquet" when ``path`` is an existing file with that format's magic bytes (DuckDB: "DUCK"
    at offset 8; Parquet: "PAR1" at the start), else None. A FIFO, socket or device is not opened: reading it would
    block (hostile round 14, O11)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as f:
            head = f.read(12)
    except OSError:              # no such file, or unreadable: the write itself says why
        return None
    if head[8:12] == b"DUCK":
        return "DuckDB database"
    if head[:4] == b"PAR1":
        return "Parquet"
    return None


def command_inputs() -> dict[str, str]:
    """The current command's input paths that its outputs must not replace: ``--db``, ``--to``, POLICY, a PATH /
    SOURCE / TABLE / SCRIPT that is an existing file, ``--population`` and each ``--taxonomy ATTR=FILE`` file, and
    every file the policy names — the POLICY file's (TOML, JSON or .sql), or the recorded one of the release TABLE
    names in ``--db``: its source, taxonomy files, pseudonym ``key_file``s, population files (hostile round 11, M20:
    ``check --json`` over the key file destroyed the pseudonym key, ``sweep --csv`` over the source CSV the raw
    data) — every file the SCRIPT names, and every file a view of ``--db`` reads (round 12, M26;
    :mod:`anon_sql.cli.named_files`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and _INPUTS_SEEN in ctx.meta:   # asked before the command runs and again when it writes
        return dict(ctx.meta[_INPUTS_SEEN])
    params = ctx.params if ctx is not None else {}
    found = {spelled: params[name] for name, spelled in _INPUTS.items() if isinstance(params.get(name), str)}
    for name, spelled in _FILE_INPUTS.items():
        value = getattr(params.get(name), "name", params.get(name))     # a click.File: its path
        if isinstance(value, str) and os.path.isfile(value):
            found[spelled] = value
    if isinstance(params.get("population"), str) and os.path.isfile(params["population"]):
        found["--population"] = params["population"]
    for item in params.get("taxonomy") or ():
        if isinstance(item, str) and "=" in item and os.path.isfile(item.split("=", 1)[1]):
            found[f"--taxonomy {item}"] = item.split("=", 1)[1]
    for path in policy_files(params):
        found.setdefault(f"a file the policy names, {path!r}", path)
    for path in script_files(params):
        found.setdefault(f"a file the script names, {path!r}", path)
    for path in view_files(params.get("db")):
        found.setdefault(f"a file a view of --db reads, {path!r}", path)
    if ctx is not None:   # the policy file, the script and the catalog are read once per command
        ctx.meta[_INPUTS_SEEN] = dict(found)
    return found


def note_script(text: str) -> None:
    """SQL the command ran that :func:`command_inputs` could not read first (``run -``'s stdin, the ``shell``'s
    statements): the files it names are guarded when the output is written at the end (hostile round 12, M20c)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(_SCRIPTS_RUN, []).append(text)


def _inputs_now(inputs: dict[str, str]) -> dict[str, str]:
    """``inputs`` and the existing files named by the SQL noted with :func:`note_script`."""
    ctx = click.get_current_context(silent=True)
    texts = ctx.meta.get(_SCRIPTS_RUN, []) if ctx is not None else []
    found = dict(inputs)
    for path in files_named("\n".join(texts)) if texts else ():
        found.setdefault(f"a file the SQL run names, {path!r}", path)
    return found


def jsonable(value: Any) -> Any:
    """Plain JSON data from results: DataFrames as records, Releases as their report, numpy scalars, NaN → null."""
    if hasattr(value, "to_dict") and hasattr(value, "columns"):               # a pandas DataFrame
        return jsonable(json.loads(value.to_json(orient="records", default_handler=str)))
    if type(value).__name__ == "Release" and hasattr(value, "checks"):
        from ..report.build import from_release

        return jsonable(from_release(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):                       # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    return str(value)


def rows_text(rows: Sequence[dict[str, Any]] | Sequence[Sequence[Any]], columns: Sequence[str] | None = None,
              elided_at: int | None = None) -> str:
    """Rows as an aligned text table — numbers right-aligned, as pandas prints them, but without importing pandas
    (``anon-sql check`` must start at once). The one table printer of the CLI: ``check`` passes dicts with the same
    keys; ``run`` / ``shell`` pass a query's ``columns`` and rows as tuples in that order, with ``elided_at``: the
    row index where a long result's middle was left out (a ``...`` line there)."""
    keys = [str(c) for c in columns] if columns is not None else list(rows[0]) if rows else []
    if not keys:
        return "(no rows)"
    values = [list(r.values()) if isinstance(r, dict) else list(r) for r in rows]
    cells = [[_cell(v) for v in r] for r in values]
    numeric = [all(_number(r[i]) or r[i] is None for r in values) for i in range(len(keys))]
    if elided_at is not None:
        cells.insert(elided_at, ["..."] * len(keys))
    widths = [max([len(k), *(len(c[i]) for c in cells)]) for i, k in enumerate(keys)]
    line = lambda values: " ".join(v.rjust(w) if n else v.ljust(w)  # noqa: E731
                                   for v, w, n in zip(values, widths, numeric)).rstrip()
    return "\n".join([line(keys), *(line(c) for c in cells)])


def _number(value: Any) -> bool:
    """A number (numpy scalars included), not a bool."""
    return isinstance(value, numbers.Number) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def _cell(value: Any) -> str:
    """One table cell: floats with up to 6 significant digits, NULL as None, arrays as lists."""
    if type(value).__name__ == "ndarray":            # a LIST value of a query result
        value = value.tolist()
    if isinstance(value, float):
        return "NaN" if value != value else f"{value:.6g}"
    return str(value)


def set_result(value: Any) -> None:
    """The command's machine-readable result (written by ``--json``; ignored otherwise)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_RESULT] = value


def write_json(value: Any, target: str = "-", inputs: dict[str, str] | None = None) -> None:
    """One JSON document to stdout (``-``) or a file (checked by :func:`output_target` first)."""
    text = json.dumps(jsonable(value), indent=2, allow_nan=False)
    if target == "-":
        sys.stdout.write(text + "\n")
    else:
        output_target("--json", target, inputs=inputs).write_text(text + "\n", encoding="utf-8")
        remember_output(target)


def json_option(fn: Callable) -> Callable:
    """Add ``--json [FILE]`` to a click command: the result as JSON on stdout (or FILE; ``-`` is stdout)."""
    @click.option("--json", "json_target", default=None, is_flag=False, flag_value="-", metavar="[FILE|-]",
                  help="Write the result as JSON to stdout (or FILE); messages go to stderr.")
    @functools.wraps(fn)
    def wrapper(*args: Any, json_target: str | None = None, **kwargs: Any) -> Any:
        if json_target is None:
            return fn(*args, **kwargs)
        ctx = click.get_current_context()
        real_stdout = sys.stdout
        inputs = command_inputs()
        if json_target != "-":       # before the command runs: a refused target leaves everything as it was
            with cli_errors():
                output_target("--json", json_target, inputs=inputs)
                _one_file_per_output(ctx.params, json_target)
        try:
            quiet = contextlib.redirect_stdout(sys.stderr) if json_target == "-" else contextlib.nullcontext()
            with quiet:                     # stdout carries the JSON alone; a FILE target leaves stdout as it is
                returned = fn(*args, **kwargs)
            if returned is not None:
                ctx.meta.setdefault(_RESULT, returned)
        finally:
            if _RESULT in ctx.meta:      # checked again: the command may have made it a database (export --to)
                with contextlib.redirect_stdout(real_stdout), cli_errors():
                    write_json(ctx.meta[_RESULT], json_target, _inputs_now(inputs))
        return None
    return wrapper


# the other output options of a command that takes --json: click parameter name -> how the user spells it
_OTHER_OUTPUTS = {"html_path": "--html", "csv_path": "--csv", "history": "--history"}


def _one_file_per_output(params: dict[str, Any], json_target: str) -> None:
    """Refuse ``--json F`` beside another output option naming the same file: the second write would replace the
    first without a word (hostile round 14, O07: ``report --json same.out --html same.out``)."""
    json_path = _resolved("--json", json_target)
    for name, spelled in _OTHER_OUTPUTS.items():
        other = params.get(name)
        if isinstance(other, str) and other != "-" and _resolved(spelled, other) == json_path:
            raise TargetError(f"--json {json_target!r} and {spelled} {other!r} are the same file: one output would "
                              f"replace the other; give --json or {spelled} another file")


class ProgressLine:
    """The progress callback of a long command: ``label [stage i/n] message  done/total unit  ETA``, on stderr.

    Stages are the runner's ("planning", ...); messages with counts (:class:`anon_sql.common.progress.Progress`) add
    ``done/total`` and, when the total is known, an ETA from the rate so far. On a terminal the line is redrawn in
    place; otherwise a line is printed per stage, per step of a short count (total <= 100, e.g. sweep runs)
    and at most one per second for the rest — held back during the first ``HOLD`` seconds, so that a command that
    fails early (bad input) prints its error alone: :meth:`fail` erases the line / drops what was held."""

    HOLD = 2.0

    def __init__(self, label: str, stages: Sequence[str] = (), stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.stages, self.clock = label, tuple(stages), clock
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.stage, self.t0, self.last = 0, clock(), -math.inf
        self.series: tuple[str, float, int] | None = None      # (unit, time, done) where the counting started
        self.width = 0
        self.held: list[str] = []

    def line(self, message: str) -> str:
        now = self.clock()
        head = self.label
        if self.stages:
            head += f" [{self.stage}/{len(self.stages)} {self.stages[max(self.stage - 1, 0)]}]"
        text = f"{head} {message}" if message not in self.stages else head
        done, total, unit = (getattr(message, "done", None), getattr(message, "total", None),
                             getattr(message, "unit", ""))
        if done is not None:
            if self.series is None or self.series[0] != unit or done < self.series[2]:
                self.series = (unit, now, done)
            if total:
                text += f"  {done}/{total} {unit} ({100 * done / total:.0f}%)"
                _, t_start, d_start = self.series
                if done > d_start and now > t_start:
                    eta = (now - t_start) / (done - d_start) * (total - done)
                    text += f"  ETA {eta:.0f}s"
            else:
                text += f"  {done} {unit}"
        return text + f"  {now - self.t0:.1f}s"

    def __call__(self, message: str) -> None:
        if message in self.stages:
            self.stage = self.stages.index(message) + 1
        text = self.line(message)
        now = self.clock()
        if now - self.t0 < self.HOLD:
            if message in self.stages or now - self.last >= 1.0 or 0 < (getattr(message, "total", 0) or 0) <= 100:
                self.held.append(text)        # the newest state is what a terminal shows
                self.last = now
            return
        self._release()
        if self.tty:
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
        elif message in self.stages or now - self.last >= 1.0 or 0 < (getattr(message, "total", 0) or 0) <= 100:
            self.stream.write(text + "\n")
            self.last = now
        self.stream.flush()

    def _release(self) -> None:
        """Write what was held back (a terminal: its newest line only)."""
        if not self.held:
            return
        if self.tty:
            self.stream.write("\r" + self.held[-1])
            self.width = len(self.held[-1])
        else:
            self.stream.write("".join(line + "\n" for line in self.held))
        self.held.clear()

    def close(self) -> None:
        """The command succeeded: write what was held back, end the terminal line."""
        self._release()
        if self.tty and self.width:
            self.stream.write("\n")
        self.stream.flush()

    def fail(self) -> None:
        """The command failed: drop what was held back and erase the terminal line, so the error stands alone
        (lines already written after ``HOLD`` seconds of work stay: they tell how far it got)."""
        self.held.clear()
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.flush()
