"""Policy + plan → sqlglot statements for the release views (``__source``, ``__general``, ``__classes``, the
release table, ``__checks``), in execution order, cached per plan shape: :data:`STEPS` is an ordered tuple of one-job
builders (as sqlglot's optimizer runs its rules), each ``(ci, names) → statements``. Trees are rendered to text only
at the end, in the requested dialect. The views themselves are built in names / source / general / classes /
release; this module assembles them and re-exports their public names."""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ..catalog.names import COUNTED_ROWS, KEPT_WORKING, WORK_SCHEMA, WORKING, working
from ..common.columns import EC_ID, SIZE, UNIT
from ..common.sqlbuild import render, session_table
from ..data import base_counts
from ..methods.base import LevelPlan
from .classes import checks_view, class_stats_query, classes_view
from .general import (SPAN_START, assignment_from_spans, assignment_query, assignment_reads_base,
                      assignment_spans_query, base_table, general_view, kept_tuples_query, tuple_map_table,
                      uses_base_table, uses_tuple_map)
from .names import (BASE_STATEMENT, CARRY_STATEMENT, DROP_UNIT_STATEMENT, DROPPED_VIEWS, KEEP, SCHEMA_STATEMENT,
                    SOURCE_STATEMENT, WEIGHT, CompiledRelease, CompileInput, ReleaseNames, class_level_quasi,
                    create_view, drop_unit_statement, noise_flag, released_columns, unit_columns)
from .release import (ROW_KEY, counted_rows_table, counts_people_from_base, data_columns, grouped_release,
                      people_query, people_table, pieces_or_rows, pieces_query, pieces_table, release_reads_base,
                      release_table_query, repeated_rows, row_map_query, row_map_table, uses_row_map,
                      written_rows)
from .source import source_statement, source_view, work_schema_statement

__all__ = ["BASE_STATEMENT", "CARRY_STATEMENT", "COUNTED_ROWS", "DROPPED_VIEWS", "EC_ID", "KEEP", "KEPT_WORKING",
           "ROW_KEY", "SCHEMA_STATEMENT", "SIZE", "SOURCE_STATEMENT", "WEIGHT", "WORKING", "WORK_SCHEMA",
           "CompileInput", "CompiledRelease", "ReleaseNames", "assignment_query", "base_table", "checks_view",
           "class_level_quasi", "class_stats_query", "classes_view", "compile_release", "counted_rows_table",
           "general_view", "grouped_release", "noise_flag", "release_table_query", "released_columns",
           "repeated_rows", "row_map_table", "source_statement", "source_view", "tuple_map_table", "uses_base_table",
           "uses_row_map", "uses_tuple_map", "work_schema_statement", "working", "DROP_UNIT_STATEMENT",
           "drop_unit_statement", "unit_columns"]


_COMPILED: dict[tuple, CompiledRelease] = {}


_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    """Built of strings, numbers, booleans and None only (tuples, lists, dicts of them): its repr is its content."""
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _compile_key(ci: CompileInput, names: ReleaseNames) -> tuple | None:
    """Everything a level plan's statements on DuckDB are built from, as plain values (the policy as JSON, the
    taxonomies by content, each model's parameters); None — not cached — for an assignment plan (data frames),
    another engine or dialect, or a model holding anything but plain parameters (a taxonomy, a table)."""
    if not isinstance(ci.plan, LevelPlan) or not ci.target.cached:
        return None
    models = []
    for m in ci.models:
        params = vars(m)
        if not _plain(params):
            return None
        models.append((type(m).__module__, type(m).__qualname__, repr(sorted(params.items()))))
    taxonomies = tuple((q, t.name, t.kind, repr(t.spec), t.fingerprint()) for q, t in ci.taxonomies.items())
    return (names.release, names.schema, names.work, ci.policy.to_json(), render(ci.relation), tuple(ci.columns),
            tuple(ci.plan.levels.items()), ci.plan.signatures, taxonomies, tuple(models), ci.dialect, ci.schema,
            ci.pseudonym_function, tuple(sorted(ci.numeric_sensitive)), ci.engine,
            render(ci.base) if ci.base is not None else None, ci.counted_rows, ci.carried)


def compile_release(ci: CompileInput, names: ReleaseNames | None = None) -> CompiledRelease:
    """All statements of a release, in execution order (the assignment/noise tables of local-recoding plans are
    created by the release runner before these). A level plan's release on DuckDB is compiled once per plan
    shape (:func:`_compile_key`) and its text rendered once: a warm release of the same policy reuses both
    (issue 17.1: building and rendering the trees cost a tenth of a small release)."""
    names = names or ReleaseNames(ci.policy.name, ci.schema, work=WORK_SCHEMA if ci.target.work_schema else None)
    key = _compile_key(ci, names)
    if key is not None and key in _COMPILED:
        return _COMPILED[key]
    compiled = _compile(ci, names)
    if key is not None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled


Statements = list[tuple[str, exp.Expression]]   # (description, statement)


def _temporary(table: exp.Table, query: exp.Expression) -> exp.Create:
    return exp.Create(this=table, kind="TABLE", replace=True, expression=query,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def _row_map(ci: CompileInput, names: ReleaseNames) -> exp.Table | None:
    return row_map_table(names.release) if isinstance(ci.plan, LevelPlan) and uses_row_map(ci) else None


# -- the steps of a release, each one job with one signature: (ci, names) → its statements ---------------------
def work_schema_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The working schema, when the working objects have one."""
    return [(SCHEMA_STATEMENT, work_schema_statement(names))] if names.work else []


def source_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    return [(SOURCE_STATEMENT, source_statement(ci, names))]


def general_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    return [(DROPPED_VIEWS[0], create_view(names.general, general_view(ci, names), ci.dialect))]


def classes_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    return [(DROPPED_VIEWS[1], create_view(names.classes, classes_view(ci, names), ci.dialect))]


def _reads_base(ci: CompileInput) -> bool:
    """Some statement of the release reads the base counts' session table."""
    return uses_base_table(ci) or release_reads_base(ci) or assignment_reads_base(ci)


def base_counts_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The base counts as a session table, where the target keeps one: a level plan's, or a tuple plan's (Mondrian)."""
    if not _reads_base(ci):
        return []
    if ci.carried:   # resolve made them with the carried counts: the same two statements
        carry, base = base_counts.create_carried_tables(ci.policy, names.source, base_counts.temp_table(names.release),
                                                        base_counts.carry_table(names.release), ci.carried)
        return [(CARRY_STATEMENT, carry), (BASE_STATEMENT, base)]
    return [(BASE_STATEMENT, base_counts.create_base_table(ci.policy, names.source, base_counts.temp_table(names.release),
                                                   UNIT))]


def row_map_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The map original QI tuple → released values of a level plan that re-reads the source."""
    row_map = _row_map(ci, names)
    return [("row map", _temporary(row_map.copy(), row_map_query(ci, names)))] if row_map is not None else []


def kept_tuples_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The QI tuples of the kept classes of an assignment plan that has them."""
    if not uses_tuple_map(ci):
        return []
    return [("kept tuples", _temporary(tuple_map_table(names.release, kept=True), kept_tuples_query(ci, names)))]


def release_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The released table and the checks view over it (kept as rows with their counts, the table a view repeating
    them, when the engine keeps releases so)."""
    released = release_table_query(ci, names)
    grouped = grouped_release(released) if ci.counted_rows or ci.target.session_tables else None
    if grouped is not None and ci.counted_rows:
        return [("release rows", exp.Create(this=names.rows, kind="TABLE", expression=grouped[0])),
                ("release table", create_view(names.table, repeated_rows(names.rows, grouped[1]), ci.dialect)),
                ("checks view", create_view(names.checks, checks_view(ci, names, counted_rows=True), ci.dialect))]
    if grouped is not None:
        # DuckDB: the rows with their counts in a session table, the released table written once from them; the
        # checks read the counts (one row per group, not a second pass over every released row: issue 29) and so
        # do the digests the release records (runner/digests.py: the same digests over the groups, issue 24.6).
        # With a privacy unit the checks count people in the base counts of the kept classes instead (a session
        # table through the same map: the groups hold no unit), and verify reconciles each class's rows in the
        # table with that table's; suppression deletes from the table, the rows and the people (issue 24.6)
        rows = counted_rows_table(names.release)
        people = people_table(names.release) if counts_people_from_base(ci) else None
        checked = checks_view(ci, names, counted_rows=True, rows=people.copy() if people is not None else rows)
        # the table is written from the rows cut into pieces where that pays (compiler/release.py pieces_query:
        # repeated on every thread, not one), dropped once it is written
        pieces = pieces_table(names.release)
        return [*([("release people", _temporary(people.copy(), people_query(ci, names)))] if people is not None
                  else []),
                ("release rows", _temporary(rows.copy(), grouped[0])),
                ("release pieces", _temporary(pieces.copy(), pieces_query(rows, grouped[1]))),
                ("release table", exp.Create(this=names.table, kind="TABLE",
                                             expression=written_rows(pieces, rows, grouped[1]))),
                ("drop release pieces", exp.Drop(tables=[pieces.copy()], kind="TABLE", exists=True)),
                ("checks view", create_view(names.checks, checked, ci.dialect))]
    return [("release table", exp.Create(this=names.table, kind="TABLE", expression=released)),
            ("checks view", create_view(names.checks, checks_view(ci, names), ci.dialect))]


def drop_row_map_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    row_map = _row_map(ci, names)
    return [] if row_map is None else [("drop row map", exp.Drop(tables=[row_map.copy()], kind="TABLE", exists=True))]


def assignment_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """The ``__assignment`` table of a plan with QI tuples that did not bring one. Where the target keeps session
    tables, its spans (a few thousand rows: one row group, which DuckDB expands on one thread) are kept in one and
    cut into pieces that fill every thread, as the released table's rows are (:func:`pieces_query`), both dropped
    once the table is written: the same pairs in the same order (issue 29.2: at 100M rows its one-thread write was
    5 s)."""
    if not (uses_tuple_map(ci) and ci.plan.assignment is None):
        return []
    if not ci.target.session_tables:
        return [("assignment", exp.Create(this=names.assignment.copy(), kind="TABLE", replace=True,
                                          expression=assignment_query(ci, names)))]
    spans = assignment_spans_table(names.release)
    pieces = assignment_pieces_table(names.release)
    written = assignment_from_spans(pieces_or_rows(pieces, spans, [SPAN_START]))
    return [("assignment spans", _temporary(spans.copy(), assignment_spans_query(ci, names))),
            ("assignment pieces", _temporary(pieces.copy(), pieces_query(spans, [SPAN_START], offset=SPAN_START))),
            ("assignment", exp.Create(this=names.assignment.copy(), kind="TABLE", replace=True, expression=written)),
            *[(f"drop {what}", exp.Drop(tables=[table.copy()], kind="TABLE", exists=True))
              for what, table in (("assignment pieces", pieces), ("assignment spans", spans))]]


def assignment_spans_table(release_name: str) -> exp.Table:
    """The session-temporary table of a release's assignment spans (:func:`assignment_spans_query`)."""
    return session_table(release_name + "__spans")


def assignment_pieces_table(release_name: str) -> exp.Table:
    """The session-temporary table of those spans cut into pieces (:func:`pieces_query`)."""
    return session_table(release_name + "__spanpieces")


def drop_tuple_maps_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    if not uses_tuple_map(ci):
        return []
    return [(f"drop tuple map{' (kept)' if kept else ''}",
             exp.Drop(tables=[tuple_map_table(names.release, kept)], kind="TABLE", exists=True))
            for kept in (True, False)]


def drop_base_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    if not _reads_base(ci):
        return []
    carried = ([("drop carried counts", base_counts.drop_base_table(base_counts.carry_table(names.release)))]
               if ci.carried else [])
    return [("drop base counts", base_counts.drop_base_table(base_counts.temp_table(names.release))), *carried]


def drop_unit_step(ci: CompileInput, names: ReleaseNames) -> Statements:
    """Last: the runner runs it once the checks (which count people) have passed."""
    if not unit_columns(ci.policy) or counts_people_from_base(ci):   # the table never held the unit
        return []
    return [(DROP_UNIT_STATEMENT, drop_unit_statement(names))]


#: a release's statements, in execution order: each step adds what its job needs (none when it does not apply)
STEPS = (work_schema_step, source_step, general_step, classes_step, base_counts_step, row_map_step, kept_tuples_step,
         release_step, drop_row_map_step, assignment_step, drop_tuple_maps_step, drop_base_step, drop_unit_step)


def _compile(ci: CompileInput, names: ReleaseNames) -> CompiledRelease:
    stmts: Statements = [stmt for step in STEPS for stmt in step(ci, names)]
    cols = [c for c in data_columns(ci) if c != UNIT]   # the unit column leaves once the release is verified
    cols.append(EC_ID)
    if ci.policy.count_column:
        cols.append(ci.policy.count_column)
    counted = any(what == "release rows" for what, _ in stmts)
    rows = (names.rows if ci.counted_rows else counted_rows_table(names.release)) if counted else None
    people = people_table(names.release) if any(what == "release people" for what, _ in stmts) else None
    return CompiledRelease(names, stmts, cols, ci.dialect, rows, written=counted and not ci.counted_rows,
                           people=people)
