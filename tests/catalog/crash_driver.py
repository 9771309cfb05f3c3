"""The crash-consistency harness's driver (issue 28.2): kill an operation at many points, then check the database.

Run as ``python crash_driver.py WORKDIR OP MODE`` (``MODE``: ``fast``, ``full``, or ``sigkill:N``); prints one JSON
line. The driver imports anon_sql once and forks a child per attempt (no DuckDB connection is open in the driver
when it forks): the child opens a copy of the operation's base database through a connection wrapper that counts
every statement and calls ``os._exit`` just before statement ``k`` — a crash with no cleanup, no rollback, no
checkpoint, the WAL as the crash left it. A ``sigkill`` attempt instead kills the running child with SIGKILL after
a random delay within the operation's measured duration. Another child then opens the database and takes its
state: every table's rows (catalog included), every view's and macro's definition, every table's comment; columns
of type TIMESTAMP and the random token of anon_sql's ownership markers are left out (they differ between any two
runs). The state must equal the state before the operation or the state after a run that was not killed. For
``export`` the folder must also hold either every file of the export or none, and no other file (no partial file
under any name).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import duckdb

import anon_sql
from anon_sql.catalog import store
from anon_sql.cli.demo import load_demo_data
from anon_sql.data.taxonomy import build_taxonomy
from anon_sql.statements import views
from anon_sql.statements.script import execute

KILLED = 77
NAME = "adult_k5"
VIEW = """CREATE ANONYMIZED VIEW adult_k5
WITH (method = 'levels', method_params = {'levels': {'age': 1, 'sex': 0, 'race': 1}}, seed = 0, k = 5, max_suppression = 0.05,
      default_role = 'insensitive')
AS SELECT identifier(patient_id), quasi(age, taxonomy => 'adult_age'), quasi(sex, taxonomy => 'adult_sex'),
          quasi(race, taxonomy => 'adult_race'), sensitive(occupation)
FROM adult"""
POLICY = {"name": "adult_rel", "source": "adult", "method": "levels", "seed": 0, "default_role": "insensitive",
          "attributes": {"age": {"role": "quasi", "taxonomy": "adult_age"},
                         "sex": {"role": "quasi", "taxonomy": "adult_sex"},
                         "race": {"role": "quasi", "taxonomy": "adult_race"},
                         "patient_id": {"role": "identifier"}, "occupation": {"role": "sensitive"}},
          "privacy": {"k": 5, "max_suppression": 0.05},
          "method_params": {"levels": {"age": 2, "sex": 0, "race": 1}}}
MONDRIAN = VIEW.replace("'levels', method_params = {'levels': {'age': 1, 'sex': 0, 'race': 1}}", "'mondrian'").replace(
    "adult_k5", "adult_m")


class Crashing:
    """A connection that dies (``os._exit``) just before its ``at``-th statement; counts and keeps the statements."""

    def __init__(self, con: duckdb.DuckDBPyConnection, at: int | None):
        self._con, self._at, self.count, self.log = con, at, 0, []

    def _tick(self, what: object) -> None:
        self.count += 1
        if self._at is not None and self.count >= self._at:
            os._exit(KILLED)
        self.log.append(str(what)[:60])

    def execute(self, *args, **kwargs):
        self._tick(args[0] if args else "")
        return self._con.execute(*args, **kwargs)

    def executemany(self, *args, **kwargs):
        self._tick(args[0] if args else "")
        return self._con.executemany(*args, **kwargs)

    def sql(self, *args, **kwargs):
        self._tick(args[0] if args else "")
        return self._con.sql(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._con, name)


# -- the operations: a setup (run once, its database copied for each attempt) and the operation itself -----------
def _installed(con):
    load_demo_data(con, "adult")
    anon_sql.install(con)


def _bare(con):
    """The data and no catalog: the first command installs it (in its own transaction, with its result)."""
    load_demo_data(con, "adult")


def _base(con):
    load_demo_data(con, "adult")
    execute(con, VIEW)


def _appended(con):
    _base(con)
    con.execute("INSERT INTO adult SELECT * REPLACE (patient_id + 100000 AS patient_id) FROM adult "
                "USING SAMPLE reservoir(200 ROWS) REPEATABLE (7)")


def _with_mondrian(con):
    _base(con)
    execute(con, MONDRIAN)


def _export(con, work: Path):
    anon_sql.export(con, NAME, str(work / "out" / "shared.parquet"))


OPS = {
    "release": (_installed, lambda con, work: anon_sql.release(con, POLICY)),
    "first_release": (_bare, lambda con, work: anon_sql.release(con, POLICY)),
    "first_view": (_bare, lambda con, work: execute(con, VIEW)),
    "first_taxonomy": (_bare, lambda con, work: store.store_taxonomy(con, build_taxonomy(
        "adult_age_bands", {"kind": "interval", "widths": [10, 20]}, range(17, 91)))),
    "refresh_keep_plan": (_appended, lambda con, work: views.refresh(con, NAME, keep_plan=True)),
    "refresh": (_appended, lambda con, work: views.refresh(con, NAME)),
    "replace": (_appended, lambda con, work: execute(con, VIEW.replace("CREATE", "CREATE OR REPLACE"))),
    "drop": (_with_mondrian, lambda con, work: views.drop_anonymized_view(con, "adult_m")),
    "taxonomy": (_base, lambda con, work: store.store_taxonomy(con, build_taxonomy(
        "adult_age_bands", {"kind": "interval", "widths": [10, 20]}, range(17, 91)))),
    "export": (_base, _export),
    "export_duckdb": (_base, lambda con, work: anon_sql.export(con, NAME, str(work / "out" / "shared.duckdb"))),
}


# -- state ------------------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"anon_sql (release|row) [0-9a-f]{32}")


def _plain(value) -> str:
    return _TOKEN.sub(r"anon_sql \1 <token>", repr(value))


def state(path: Path) -> dict:
    """Everything the database holds, as comparable text (timestamps and marker tokens left out)."""
    con = duckdb.connect(str(path))
    out = {}
    try:
        tables = con.execute("SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE NOT temporary "
                             "AND database_name = current_database() ORDER BY ALL").fetchall()
        for schema, table, comment in tables:
            cols = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? AND "
                               "table_name = ? AND database_name = current_database() ORDER BY column_index",
                               [schema, table]).fetchall()
            keep = [c for c, t in cols if not t.startswith("TIMESTAMP")]
            select = ", ".join('"' + c.replace('"', '""') + '"' for c in keep) or "1"
            rows = con.execute(f'SELECT {select} FROM "{schema}"."{table}"').fetchall()
            out[f"table {schema}.{table}"] = [_plain(comment), cols, sorted(_plain(r) for r in rows)]
        for schema, view, sql in con.execute("SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT "
                                             "internal AND NOT temporary ORDER BY ALL").fetchall():
            out[f"view {schema}.{view}"] = sql
        for schema, fn, definition in con.execute(
                "SELECT schema_name, function_name, string_agg(macro_definition, ';' ORDER BY macro_definition) "
                "FROM duckdb_functions() WHERE NOT internal AND database_name = current_database() "
                "GROUP BY ALL ORDER BY ALL").fetchall():
            out[f"macro {schema}.{fn}"] = definition
    finally:
        con.close()
    return out


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# -- forking ----------------------------------------------------------------------------------------------------
def in_child(fn, *, result: Path | None = None) -> int:
    """Run ``fn()`` in a forked child; its JSON result (if ``result``) is written there. Returns the exit code."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            value = fn()
            if result is not None:
                result.write_text(json.dumps(value))
        except BaseException as err:    # noqa: BLE001 - reported to the parent: exit code 3 and the message
            import traceback

            traceback.print_exc()
            print(f"child failed: {err!r}", file=sys.stderr)
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_op(op: str, path: Path, work: Path, at: int | None, log: Path | None = None) -> None:
    con = duckdb.connect(str(path))
    crashing = Crashing(con, at)
    link = os.link

    def counted_link(*args, **kwargs):    # publishing a file is a step too (this is a forked child: patch freely)
        crashing._tick(f"os.link {args[1]}")
        return link(*args, **kwargs)
    os.link = counted_link
    OPS[op][1](crashing, work)
    if log is not None:
        log.write_text(json.dumps(crashing.log))
    con.close()


def main(workdir: str, op: str, mode: str) -> dict:
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base.duckdb"

    def setup():
        con = duckdb.connect(str(base))
        OPS[op][0](con)
        con.execute("CHECKPOINT")
        con.close()
    assert in_child(setup) == 0, "setup failed"
    old = work / "old.json"
    assert in_child(lambda: state(base), result=old) == 0
    old_state = json.loads(old.read_text())

    def attempt(tag: str) -> tuple[Path, Path]:
        folder = work / tag
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "out").mkdir(parents=True)
        shutil.copy(base, folder / "db.duckdb")
        return folder, folder / "db.duckdb"

    # the reference run: not killed; its statements and its end state
    folder, ref = attempt("ref")
    t0 = time.perf_counter()
    code = in_child(lambda: run_op(op, ref, folder, None, folder / "log.json"))
    took = time.perf_counter() - t0
    assert code == 0, f"the reference run of {op} failed ({code})"
    log = json.loads((folder / "log.json").read_text())
    new_files = files(folder / "out")
    new = folder / "new.json"
    assert in_child(lambda: state(ref), result=new) == 0
    new_state = json.loads(new.read_text())

    n = len(log)
    if mode == "full":
        points = list(range(1, n + 2))
    elif mode == "ci":     # inside each transaction, just before and just after each COMMIT, between file links
        begins = [i + 1 for i, s in enumerate(log) if re.match(r"\s*BEGIN", s, re.I)]
        commits = [i + 1 for i, s in enumerate(log) if re.match(r"\s*COMMIT", s, re.I)]
        links = [i + 1 for i, s in enumerate(log) if s.startswith("os.link")]
        points = sorted({*(b + 1 for b in begins), *commits, *(c + 1 for c in commits), *links[1:2],
                         *([n // 2] if not begins else [])})
        points = [p for p in points if 1 <= p <= n + 1]
    else:
        points = []
    outcomes = []
    for k in points:
        folder, path = attempt(f"k{k}")
        code = in_child(lambda: run_op(op, path, folder, k))
        outcomes.append(_judge(f"before statement {k}/{n}: {log[k - 1] if k <= n else '(end)'}", code, path,
                               folder, old_state, new_state, new_files))
    if mode.startswith("sigkill:"):
        rng = random.Random(int(mode.split(":")[1]))
        for i in range(int(mode.split(":")[1])):
            folder, path = attempt(f"s{i}")
            delay = rng.uniform(0.0, took)
            pid = os.fork()
            if pid == 0:
                try:
                    run_op(op, path, folder, None)
                finally:
                    os._exit(0)
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            outcomes.append(_judge(f"SIGKILL after {delay:.2f} s", os.waitstatus_to_exitcode(status), path, folder,
                                   old_state, new_state, new_files))
    return {"op": op, "statements": n, "seconds": round(took, 2), "outcomes": outcomes}


def _judge(what: str, code: int, path: Path, folder: Path, old: dict, new: dict, new_files: list[str]) -> dict:
    deadline = time.time() + 10    # an export's clean-up runs in a process of its own: give it time to finish
    while files(folder / "out") not in ([], new_files) and time.time() < deadline:
        time.sleep(0.05)
    out = folder / "state.json"
    assert in_child(lambda: state(path), result=out) == 0, f"{what}: the database does not open after the crash"
    now = json.loads(out.read_text())
    verdict = "old" if now == old else "new" if now == new else "neither"
    left = files(folder / "out")
    if left not in ([], new_files):
        verdict = "neither"
    diff = sorted(k for k in set(now) | set(old) | set(new) if now.get(k) != old.get(k) and now.get(k) != new.get(k))
    return {"point": what, "exit": code, "verdict": verdict, "differs": diff[:8], "files": left}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
