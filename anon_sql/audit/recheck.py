"""Tamper-evident re-verification of a recorded release (``anon-sql check``, :func:`anon_sql.check`).

Nothing in the database file is trusted but the released table and the policy that ``anon.releases`` recorded for
it: every privacy model is compiled afresh from that policy and run as SQL over the table (the release's own
``__checks`` / ``__classes`` views are never read, so rewriting them changes nothing), the record and class counts
are reconciled with the numbers recorded at release time, and the table's columns must be the ones the policy
releases. Reads only: it works on a read-only connection and on a reopened file without ``anon_sql.install``.

A shared file (written by ``--to`` / ``export``: no catalog, the released table beside its ``<release>__metadata``
row) is checked the same way from the policy and counts of that row; its models run on a private in-memory
connection that attaches the file read-only, so the file is never written.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from sqlglot import exp

from ..catalog import store as catalog
from . import program as check_program
from ..catalog.read import related_tables, table_columns
from ..compiler.checks_summary import summary_columns, summary_query
from ..common.columns import EC_ID, UNIT
from ..compiler.views import CompileInput, ReleaseNames, class_stats_query, released_columns
from ..errors import PolicyError, PrivacyRequirementError, SourceError, TaxonomyError
from ..methods import LevelPlan, declared_release_policy
from ..models import PrivacyModel, build_models, largest_is_worst, population_models, requirement_texts
from ..policy.model import Policy
from ..data.source import (describe, file_relation, is_path, readable_relation, refuse_temp_shadows,
                           relation_exists, table_relation)
from ..data.taxonomy import TOP
from ..common.sqlbuild import (alias, col, ident, lit, record_count, registered_frame, render, scratch_name,
                               session_table)
from .contents import file_contents_row
from .related_checks import related_rows, related_table
from ..common.content_kinds import KINDS
from ..runner.digests import (content_columns, content_digest_query, digested_columns, noise_flag_of,
                              released_values_query)
from .values import shared_policy_text, source_mask_rows, source_pseudonym_rows, value_checks, value_query

if TYPE_CHECKING:
    import pandas as pd

_SHARED = "__anon_shared"


def require_recorded(con: duckdb.DuckDBPyConnection, name: str, identity: bool = True) -> dict[str, Any]:
    """The catalog row of release ``name``; :class:`SourceError` when no such release exists in this database, and
    (``identity``) when its table or a related table is not the one anon_sql wrote, or has lost a released column
    (:func:`anon_sql.audit.program.released_table_problem`)."""
    row = catalog.recorded_release(con, name)
    if row is None:
        known = catalog.released_names(con)
        raise SourceError(f"{name!r} is not a release recorded in this database (anon.releases lists "
                          f"{known if known else 'no release'}); give the name of a release, e.g. the policy's name")
    # the session's TEMP object of that name is what check would read and export would write (round 10, M12: A01)
    refuse_temp_shadows(con, [name, *related_tables(con, name)], f"release {name!r}")
    if not relation_exists(con, exp.Table(this=ident(name))):   # one name, dots and all (issue 28.7)
        raise SourceError(f"release {name!r} is recorded in anon.releases but its table is missing from this "
                          "database; release it again")
    problem = check_program.released_table_problem(con, name, row, _bound_columns(con, name)) \
        if identity else None
    if problem:
        raise SourceError(f"release {name!r}: {problem}; nothing was read: restore the table anon_sql released, or "
                          "release it again")
    return row


def _bound_columns(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """The columns of the relation ``name`` binds to, as the check program reads it (the ``search_path`` too)."""
    return [str(r[0]) for r in describe(con, exp.Table(this=ident(name)))]


def metadata_table(name: str) -> exp.Table:
    """The one-row metadata table of a shared release file (see :mod:`anon_sql.publish.share`)."""
    return exp.Table(this=ident(name + "__metadata"))


def is_shared(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Is ``name`` a release of a shared file here (its metadata table beside it, not recorded in a catalog)?"""
    return (catalog.recorded_release(con, name) is None and relation_exists(con, exp.Table(this=ident(name)))
            and relation_exists(con, metadata_table(name)))


def recheck(con: duckdb.DuckDBPyConnection, name: str) -> pd.DataFrame:
    """:func:`recheck_rows` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(recheck_rows(con, name))


# recheck_rows' ``cached`` when the caller has not asked the cache yet
NOT_ASKED: Any = object()


def recheck_rows(con: duckdb.DuckDBPyConnection, name: str, cached: Any = NOT_ASKED) -> list[dict[str, Any]]:
    """One row per check (``check``, ``classes``, ``failing_classes``, ``failing_records``, ``worst_value``,
    ``passed``): every model of the stored policy over the released table, then reconciliation, suppression,
    class count and released columns against the catalog (a shared file: against its metadata row). Needs no
    pandas (``anon-sql check`` starts at once); a program compiled before comes from the local cache
    (:mod:`anon_sql.audit.program`), one compiled here is cached when it read nothing but the policy. ``cached``:
    what :func:`anon_sql.audit.program.cached_rows` gave a caller that asked it already (``anon-sql check``), so
    that the cached program does not run twice, nor its probes."""
    if cached is NOT_ASKED:
        cached = check_program.cached_rows(con, name)
    if cached is not None:
        return [*cached, *_recorded_related_rows(con, name)]
    if is_shared(con, name):
        return _recheck_shared(con, name)
    row = require_recorded(con, name, identity=False)   # an unknown release is named before the macros are compared
    problem = check_program.released_table_problem(con, name, row, _bound_columns(con, name))
    if problem:   # nothing of the program can be read over another table: one failing row (exit 3)
        return check_program.problem_rows(problem)
    check_program.guard_macros(con)
    program, columns, table_rows = _recorded_program(con, name, row, table_checks=True)
    return [*check_program.run_program(con, program, row, columns, table_rows), *_recorded_related_rows(con, name)]


def _recorded_related_rows(con: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    """The rows of recorded release ``name`` that read more than its table, run every time: its pseudonyms
    re-derived from the source when the key is here (:func:`source_pseudonym_rows`), its deterministic masks
    re-derived from the source when it is here (:func:`source_mask_rows`), and :func:`related_rows`."""
    row = catalog.recorded_release(con, name) or {}
    policy = json.loads(row.get("policy_json") or "{}")
    if not policy:
        return []
    read = Policy.from_dict(policy)
    return [*source_pseudonym_rows(con, exp.Table(this=ident(name)), read),
            *source_mask_rows(con, exp.Table(this=ident(name)), read),
            *(related_rows(con, name, read, recorded=row.get("related_tables")) if policy.get("related") else [])]


def prepare_check(con: duckdb.DuckDBPyConnection, name: str, recorded: dict[str, Any] | None = None) -> None:
    """Compile the check program of recorded release ``name`` and cache it, when it can be cached (after
    ``anon-sql release`` and ``anon_sql.runner.run``: the first check of the release starts at once too). Nothing at
    all with ``ANON_SQL_CACHE=off``: there is nowhere to keep it. ``recorded``: what the release just wrote to the
    catalog (``Release.recorded``: the row's policy, plan and digests, the table's columns), so that nothing is read
    back (issue 29.1); None: read from the catalog."""
    if check_program.cache_dir() is None:
        return
    if recorded is not None and recorded.get("columns"):
        row, described = recorded, [tuple(c) for c in recorded["columns"]]
    else:
        row = require_recorded(con, name)
        described = table_columns(con, name)
    if described and check_program.load_program(check_program.program_digest(name, row, described)) is not None:
        return   # compiled before from the same policy, plan, columns, files and code: the very same program
    _recorded_program(con, name, row, table_checks=False, only_cacheable=True)


def _recorded_program(con: duckdb.DuckDBPyConnection, name: str, row: dict[str, Any], table_checks: bool,
                      only_cacheable: bool = False
                      ) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]] | None:
    """The check program of recorded release ``name`` (``row``: its catalog row, :func:`recorded`) compiled from
    its stored policy (cached when it read nothing but the policy), the table's columns, and
    (``table_checks``) the whole-table checks' rows. None when ``only_cacheable`` and the program could not be
    cached."""
    policy, declared, mismatch = recorded_policies(name, row["policy_json"], row.get("declared_policy"))
    plan = json.loads(row["plan"] or "{}")
    names = ReleaseNames(name)
    reads = _Reads(con)
    models = build_models(declared or policy, reads)
    # a release without its declared policy: whether that is a release from before it was kept reads other rows
    cacheable = not (reads.used or population_models(models) or any(m.whole_table for m in models)
                     or not row.get("declared_policy"))
    if only_cacheable and not cacheable:
        return None
    level_plan, taxonomies = LevelPlan({}), {}
    if population_models(models):   # k-map / δ-presence: the population as it is now, matched to the release
        level_plan, taxonomies = _population_plan(con, policy, plan, names.table, models)
    described = table_columns(con, name) or [tuple(r[:2]) for r in describe(con, names.table)]
    columns = [c for c, _ in described]
    program = _program(con, names.table, policy, plan, models, level_plan, taxonomies, columns,
                       list((declared or policy).quasi))
    program["source_records"] = _source_records(con, policy, row.get("source_digest"))
    program["policy_mismatch"] = mismatch or _declared_missing(con, name, row, forged=_records_declared(con, row))
    program["policy_unverified"] = not mismatch and not row.get("declared_policy")
    layout = plan.get("slicing_check")
    table_rows = [_table_check(con, policy, names, m, layout, columns, declared)
                  for m in models if m.whole_table and table_checks]
    if cacheable and not reads.used:     # (a model might read through the connection only when compiled)
        check_program.store(check_program.program_digest(name, row, described), program)
    return program, columns, table_rows


def recorded_policies(name: str, recorded: str, declared: str | None) -> tuple[Policy, Policy | None, str | None]:
    """(released, declared, why not) policies of release ``name``. The released policy the catalog records is what
    the release claims; when the declared policy is recorded too and the released one is its derivation by the
    method (:func:`anon_sql.methods.declared_release_policy`), the declared one gives the QIs, column groups and
    models the check verifies (issue 28.8: a QI the method turned insensitive is still checked as one). When the two
    disagree (an edited catalog), the released policy is checked as recorded, no declared one is used, and ``why
    not`` says what differs (a failing ``policy`` check row). A release recorded before the declared policy was
    kept: (released, None, None)."""
    released = Policy.from_dict(json.loads(recorded))
    if not declared:
        return released, None, None
    try:
        user = Policy.from_dict(json.loads(declared))
        derived = declared_release_policy(user)
    except (ValueError, TypeError, PolicyError) as err:
        return released, None, f"the declared policy recorded for release {name!r} cannot be read ({err})"
    if derived.to_dict() != released.to_dict():
        a, b = derived.to_dict(), released.to_dict()
        differ = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
        return released, None, (f"the policy recorded for release {name!r} is not the one its declared policy "
                                f"releases with method {user.method!r} (they differ in {', '.join(differ)}): the "
                                "catalog was edited")
    return derived, user, None


def _records_declared(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> bool:
    """Was release ``row`` made by code that records the declared policy, so that its NULL ``declared_policy`` is an
    edit (hostile round 5, C12)? Yes when the row's ``source_digest`` is recorded (written by the same code), or an
    earlier (or simultaneous) release of this catalog recorded a declared policy. A catalog from before the column
    (the key absent: never upgraded) or whose releases all predate it: no."""
    if "declared_policy" not in row or row.get("declared_policy"):
        return False
    if row.get("source_digest"):
        return True
    found = con.execute("SELECT count(*) FROM anon.releases WHERE declared_policy IS NOT NULL AND created_at <= ?",
                        [row.get("created_at")]).fetchall()[0][0]
    return bool(found)


def _declared_missing(con: duckdb.DuckDBPyConnection, name: str, row: dict[str, Any], forged: bool) -> str | None:
    """The failing ``policy`` row's message of a release whose declared policy was removed (``forged``), else None
    (a release made before declared policies were kept: :func:`anon_sql.audit.program.run_program` marks its
    ``policy`` row unverified)."""
    if not forged:
        return None
    return (f"no declared policy recorded for release {name!r}: the released policy could not be derived, and this "
            "catalog records declared policies (the release's source digest, or an earlier release's declared "
            "policy, is there): anon.releases.declared_policy was removed; release it again")


class _Reads:
    """A connection that notes whether anything was read through it (a model built from a table of the database:
    its check program depends on more than the policy, so it is not cached)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.used = con, False

    def __getattr__(self, attr: str) -> Any:
        self.used = True
        return getattr(self.con, attr)


def _recheck_shared(con: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    """:func:`recheck_rows` of a shared file: the policy and counts of its metadata row; the models compiled afresh
    and run on an in-memory connection (macros and UDFs installed there) over the file attached read-only."""
    cursor = con.execute(render(exp.select("*").from_(metadata_table(name))))
    fields, records = [d[0] for d in cursor.description], cursor.fetchall()
    if len(records) != 1 or not {"policy", "plan", "records_in", "suppressed", "noise", "classes"} <= set(fields):
        raise SourceError(f"{render(metadata_table(name))} is not the one-row metadata table anon_sql writes "
                          "with a shared release; check the file that `--to` / `export` wrote")
    row = dict(zip(fields, records[0]))
    row["release"] = name
    for field in ("policy", "declared_policy"):   # a hash mask's salt is left out of a shared file (E10b)
        if field in row:
            row[field] = shared_policy_text(row[field])
    try:
        Policy.from_dict(json.loads(row["policy"]))
    except (ValueError, TypeError) as err:
        raise SourceError(f"the metadata of shared release {name!r} holds no readable policy ({err})") from None
    policy, declared, mismatch = recorded_policies(name, row["policy"], row.get("declared_policy"))
    plan = json.loads(row["plan"] or "{}")
    private = duckdb.connect()
    try:
        catalog.install(private)
        table = _shared_table(con, private, name, tuple(policy.related))
        models = build_models(declared or policy, private)
        columns = [r[0] for r in describe(private, table)]
        level_plan, taxonomies = LevelPlan({}), {}
        population = population_models(models)
        # a shared plan keeps scalars only: without the bucket groups (slicing) or the interval bounds (fixed
        # intervals) the population cannot be matched to the released values
        matchable = not (plan.get("row_values") or plan.get("interval_recoded"))
        if population and matchable and _copy_population(con, private, policy, plan, population[0].population.name):
            try:
                level_plan, taxonomies = _population_plan(private, policy, plan, table, models, catalog_con=con)
            except (PolicyError, TaxonomyError):   # taxonomies the shared file cannot name: not recomputable
                models = [m for m in models if not m.needs_population]
        else:
            models = [m for m in models if not m.needs_population]
        program = _program(private, table, policy, plan, models, level_plan, taxonomies, columns,
                           list((declared or policy).quasi))
        # a shared file written since declared policies were kept has the column; NULL there is an old release
        # exported since (or an edit the file cannot tell apart): the basis says the policy is not verified
        program["policy_mismatch"] = mismatch
        program["policy_unverified"] = not mismatch and not row.get("declared_policy")
        # whole-table checks need data a shared file never holds, and population checks a population that this
        # database does not hold: not recomputable counts as failed
        unverifiable = [m.name for m in models if m.whole_table]
        if population and not any(m.needs_population for m in models):
            unverifiable += [m.name for m in population]
        return [*check_program.run_program(private, program, row, columns, [
            check_program.table_check_row(check, 0, basis=None, passed=False) for check in unverifiable]),
            *related_rows(private, name, policy, table, recorded=row.get("related_tables"), shared=True),
            file_contents_row(con, name, policy, [m.population.name for m in population])]
    finally:
        private.close()


def _shared_table(con: duckdb.DuckDBPyConnection, private: duckdb.DuckDBPyConnection, name: str,
                  related: tuple[str, ...] = ()) -> exp.Table:
    """The released table of ``con``'s file as seen from ``private``: the file attached read-only (else, e.g. an
    in-memory ``con`` or a file this process holds open, a copy of the table's rows and of its ``related`` tables'
    beside it, each column of its own type: an ENUM read through Arrow would come back as VARCHAR and fail the
    ``types`` check of a table nobody edited)."""
    path = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()[0][0]
    if path:
        try:
            private.execute(render(exp.Attach(this=exp.Alias(this=lit(path), alias=ident(_SHARED)),
                                              expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))])))
            return exp.Table(this=ident(name), db=ident("main"), catalog=ident(_SHARED))
        except duckdb.Error:
            pass
    for source, copy in ((name, _SHARED), *((f"{name}_{n}", f"{_SHARED}_{n}") for n in related)):
        if relation_exists(con, source):
            typed = [alias(exp.Cast(this=col(c), to=exp.DataType.build(t, dialect="duckdb")), c)
                     for c, t, *_ in describe(con, exp.Table(this=ident(source)))]
            rows = con.sql(render(exp.select("*").from_(exp.Table(this=ident(source))))).to_arrow_table()
            with registered_frame(private, rows, "__anon_shared_rows") as frame:
                private.execute(render(exp.Create(this=exp.Table(this=ident(copy)), kind="TABLE",
                                                  expression=exp.select(*typed).from_(exp.Table(this=ident(frame))))))
    return exp.Table(this=ident(_SHARED))


def _program(con, table: exp.Table, policy: Policy, plan: dict[str, Any], models: list, level_plan: LevelPlan,
             taxonomies: dict[str, Any], columns: list[str], quasi: list[str] | None = None) -> dict[str, Any]:
    """The check program of ``table`` (see :mod:`anon_sql.audit.program`): the models per class summarized per
    check in one SQL aggregate (:mod:`anon_sql.compiler.checks_summary`), the released records, and what the catalog checks compare
    with — the columns the policy releases and the suppression budget. ``quasi``: the declared quasi-identifiers,
    whose released values the release recorded a digest of (default: the policy's)."""
    people = bool(policy.privacy_unit)     # before _people: a table without its unit is checked by rows
    counted = ("people" if policy.privacy_unit and policy.privacy_unit in columns
               else "records (count column)" if policy.count_column else "rows")
    relation, policy = _people(table, policy, columns)
    joined = [c for c in policy.related_sensitive if c not in columns]   # read from <release>_<name>
    ci = CompileInput(policy, relation.copy(), [*columns, *joined], level_plan, taxonomies, models)
    view = class_stats_query(ci, relation.copy(), [EC_ID, *policy.quasi], null_safe=True).subquery("__checks")
    described = con.execute(render(exp.select("*").from_(view.copy()).limit(0))).description
    wanted = summary_columns(d[0] for d in described)
    # the noise flag and the noise count come from the policy and the table, never from the recorded plan or counts
    # (issue 28.8: a plan naming an identifier as its "noise flag" let that column back into the release)
    flag = noise_flag_of(policy)
    expected = [c for c in released_columns(policy, list(policy.attributes))
                if c != policy.count_column and c not in policy.related_sensitive]
    expected += [c for c in (flag, EC_ID, policy.count_column) if c]
    noise = (render(exp.select(record_count(policy.count_column)).from_(table.copy()).where(
        exp.column(flag, quoted=True).is_(exp.true()))) if flag and flag in columns else None)
    # the form of each pseudonymized and masked column (hostile round 8, M1: raw values put back passed)
    forms = value_checks({c: a.to_dict() for c, a in policy.attributes.items()}, columns)
    values = ({"query": value_query(table, forms), "checks": [{"check": f[0], "required": f[2]} for f in forms]}
              if forms else None)
    # the digest of each QI's released values, compared with the release's (hostile round 9, M9)
    digested = digested_columns(quasi if quasi is not None else policy.quasi, columns)
    types = {str(r[0]): str(r[1]) for r in describe(con, table)} if digested else {}
    return {"format": check_program.FORMAT, "summary": render(summary_query(view, wanted, largest_is_worst(models))),
            "values": values,
            "released_values": ({"query": render(released_values_query(table, digested)), "columns": digested,
                                 "describe": render(exp.Describe(this=table.copy())),
                                 "content": {kind: render(content_digest_query(table, content_columns(columns, flag),
                                                                               types)) for kind in KINDS}}
                                if digested else None),
            "summary_columns": wanted,
            "records": render(exp.select(record_count(policy.count_column)).from_(table.copy())),
            "noise": noise, "noise_recorded": policy.method == "theta" and noise is None,
            "expected_columns": expected, "max_suppression": policy.privacy.max_suppression,
            "people": people,
            # what each check requires, and what its classes count (C02 / C06: a reader sees k = 2, or rows)
            "required": {name: f"{text}, {counted}" for name, text in requirement_texts(models).items()}}


def _source_records(con, policy: Policy, digest: str | None = None) -> str | None:
    """The query recounting the records of the release's source, as the release counted them (the count column's
    sum, else rows), with the rows and content hash of the ``digest`` recorded at release over the columns it
    hashed (:func:`anon_sql.runner.digests.source_digest_query`); None with related tables (``records_in`` spans
    them); a release with a privacy unit counts rows, as its digest does (hostile round 5, C07). Run when the check runs
    (:func:`anon_sql.audit.program.run_program`): a source that is gone leaves ``records_in`` unverified."""
    from ..runner.digests import source_digest_query

    if policy.related or not isinstance(policy.source, str):   # a unit's release counts rows too (C07)
        return None
    src = policy.source
    relation = readable_relation(con, src)
    if relation is None:   # gone now: a query over the name fails when run, and records_in stays unverified
        relation = file_relation(src) if is_path(src) else exp.Table(this=ident(src))
    columns = recorded_digest_columns(digest)
    if columns:
        return render(source_digest_query(relation, columns, policy.count_column))
    return render(exp.select(record_count(policy.count_column)).from_(relation))


def recorded_digest_columns(digest: str | None) -> list[str]:
    """The columns a recorded source digest hashed (none: no digest, or an unreadable one)."""
    try:
        columns = json.loads(digest).get("columns") if digest else None
    except (ValueError, AttributeError):
        return []
    return [c for c in columns if isinstance(c, str)] if isinstance(columns, list) else []


def _people(table: exp.Table, policy: Policy, columns: list[str]) -> tuple[exp.Expression, Policy]:
    """What the checks count in a release with a privacy unit (docs/units.md): people through the unit's pseudonym
    when the release holds it; rows when the unit was dropped (the people are not in the table; k over rows is at
    least k over people). Without a unit: the table and the policy as they are."""
    unit = policy.privacy_unit
    if not unit:
        return table, policy
    if unit in columns:
        people = exp.select(exp.Star(), exp.alias_(exp.column(unit, quoted=True), UNIT, quoted=True)).from_(
            table.copy())
        if policy.related_sensitive:   # a person holds the values of their rows in the related table
            people = _with_related_values(table, policy)
        return exp.Subquery(this=people, alias=exp.TableAlias(this=ident("__people"))), policy
    d = policy.to_dict()
    d.pop("privacy_unit")
    d.pop("related", None)   # the related tables are not part of this table's checks
    return table, Policy.from_dict(d)


def _with_related_values(table: exp.Table, policy: Policy) -> exp.Select:
    """The released unit table joined, through the unit's pseudonym, with the sensitive values its related table
    released: what the sensitive-attribute models read per person (docs/units.md)."""
    sensitive = policy.related_sensitive
    name = next(iter(sensitive.values()))
    key = policy.related[name]["key"]
    values = exp.select(*[exp.column(c, quoted=True) for c in (key, *sensitive)]).from_(
        related_table(table, name))
    t, r = ident("t"), ident("r")
    unit = exp.Column(this=ident(policy.privacy_unit), table=t)
    return (exp.select(exp.Column(this=exp.Star(), table=t), exp.alias_(unit.copy(), UNIT, quoted=True),
                       *[exp.Column(this=ident(c), table=r) for c in sensitive])
            .from_(exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"),
                             alias=exp.TableAlias(this=t)))
            .join(exp.Subquery(this=values, alias=exp.TableAlias(this=r)), join_type="left",
                  on=exp.EQ(this=unit, expression=exp.Column(this=ident(key), table=r))))


def _population_quasi(policy: Policy, plan: dict[str, Any]) -> list[str]:
    """The QIs a population is matched on: the policy's, or for a bucket plan (slicing, whose released policy lists
    none) the attributes of its column groups but the sensitive one."""
    layout = plan.get("slicing_check") or {}
    if plan.get("row_values") and layout.get("columns"):
        return [a for g in layout["columns"] for a in g if a != layout.get("sensitive")]
    return list(policy.quasi)


def _copy_population(con, private, policy: Policy, plan: dict[str, Any], name: str) -> bool:
    """A shared file's check: the population's QI columns, when ``con`` can read the population (a table or view
    of this database, or a file), copied to ``private`` under the same name; False when it cannot."""
    from ..data.source import resolve_source

    try:
        src = resolve_source(con, name, label=name)
    except SourceError:
        return False
    wanted = [c for c in [*_population_quasi(policy, plan), policy.count_column] if c and c in src.columns]
    query = exp.select(*[exp.column(c, quoted=True) for c in wanted]).from_(src.relation.copy())
    private.register(name, con.sql(render(query)).to_arrow_table())
    return True


def _population_plan(con, policy: Policy, plan: dict[str, Any], table: exp.Table, models: list,
                     catalog_con=None) -> tuple[Any, dict[str, Any]]:
    """The plan the population is matched through, the policy's taxonomies, and the population models' relation.
    A level plan: the recorded levels; QIs at level 0 read as the released table's types, generalized ones as text
    (the level maps join on text). An assignment plan: its recorded layout (bucket groups, fixed intervals); QIs read
    as the population's own types (the released values are text)."""
    from ..methods import AssignmentPlan
    from ..runner.population import check_values, population_relation
    from ..catalog.taxonomy_lookup import resolve_taxonomies

    quasi = _population_quasi(policy, plan)
    inline = [q for q in policy.quasi if isinstance(policy.attributes[q].taxonomy, dict)]
    if inline:
        raise PolicyError(f"re-verifying k_map / delta_presence needs the release's taxonomies; {inline} had inline "
                          "taxonomies built from the source's values, which the catalog does not keep")
    taxonomies = resolve_taxonomies(con, policy, None, False, catalog_con=catalog_con or con, check=False)
    pop = population_models(models)[0].population
    keys = "privacy model(s) " + ", ".join(m.name for m in population_models(models))
    if plan.get("kind") == "assignment":
        match_plan: Any = AssignmentPlan(None, None, row_values=bool(plan.get("row_values")),   # type: ignore[arg-type]
                                         table_check=plan.get("slicing_check"),
                                         value_intervals=plan.get("value_intervals"))
        pop.relation = population_relation(con, pop.name, policy, {}, keys, quasi)
        pop.quasi = quasi
        pop.types = {r[0]: r[1] for r in describe(con, pop.relation.subquery("__p")) if r[0] in quasi}
    else:
        levels = recorded_levels(con, table, policy, plan, taxonomies)
        described = describe(con, table)
        types = {r[0]: (r[1] if levels.get(r[0], 0) == 0 else "VARCHAR") for r in described}
        pop.relation = population_relation(con, pop.name, policy, types, keys)
        match_plan = LevelPlan(levels)
    check_values(con, pop.name, pop.relation, policy, taxonomies, quasi)
    return match_plan, taxonomies


def recorded_levels(con, table: exp.Table, policy: Policy, plan: dict[str, Any], taxonomies: dict[str, Any]
                    ) -> dict[str, int]:
    """The recorded level of each QI, verified against the released table (issue 28.8: a forged plan must not
    match the population at another level than the one released): every released value must be a value of the
    QI's taxonomy at that level (level 0: a leaf or NULL; above: a value of the level, or the NULL parent / top
    the compiler releases for NULL). :class:`PrivacyRequirementError` (exit 3) names the QI and the level."""
    import numpy as np

    levels: dict[str, int] = {}
    for q in policy.quasi:
        level, tax = plan.get(q, 0), taxonomies.get(q)
        wrong = (not isinstance(level, int) or isinstance(level, bool) or level < 0
                 or (tax is None and level != 0) or (tax is not None and level > tax.height))
        if wrong:
            raise PrivacyRequirementError(
                f"the plan recorded for release {policy.name!r} puts quasi-identifier {q!r} at level {level!r}, "
                f"which its taxonomy {getattr(tax, 'name', None)!r} does not have: the plan was edited, and the "
                "population models cannot be matched to the released values; release it again")
        levels[q] = level
        if tax is None:
            continue
        allowed = set(tax.levels[f"level{level}"])
        if level > 0:
            allowed.add(tax.null_parent or TOP)
        text = exp.Cast(this=exp.column(q, quoted=True), to=exp.DataType.build("VARCHAR"))
        found = [r[0] for r in con.execute(render(exp.select(text).distinct().from_(table.copy()))).fetchall()]
        # the distinct released values (an aggregate), not rows: NULL is released at level 0 only
        values = np.array([v for v in found if v is not None], dtype=str)
        bad = sorted(values[~np.isin(values, np.array(sorted(allowed), dtype=str))].tolist()) if len(values) else []
        nulls = level > 0 and None in found
        if bad or nulls:
            shown = ", ".join(repr(v) for v in bad[:5]) + (" and more" if len(bad) > 5 else "")
            shown = shown + (", NULL" if nulls else "") if shown else "NULL"
            raise PrivacyRequirementError(
                f"the plan recorded for release {policy.name!r} puts quasi-identifier {q!r} at level {level} of "
                f"taxonomy {tax.name!r}, but the released column holds {shown}, not values of that level: the plan "
                "or the table was edited, and the population models (k_map / delta_presence) cannot be matched to "
                "the released values; release it again")
        others = [o for o in range(tax.height + 1) if o != level and _same_values(tax, o, values, found)]
        differ = [o for o in others if _meanings(tax, o, values) != _meanings(tax, level, values)]
        if differ:   # the table cannot tell which level it was released at: the plan cannot be confirmed
            raise PrivacyRequirementError(
                f"the released values of quasi-identifier {q!r} in release {policy.name!r} are values of taxonomy "
                f"{tax.name!r} at level {level} (the recorded plan) and at level(s) {differ} too, where they stand "
                "for other leaves: the plan cannot be confirmed from the table, so the population models (k_map / "
                "delta_presence) cannot be verified; use a taxonomy whose generalized values differ from its leaves")
    return levels


def layout_misfit(declared: Policy, model: PrivacyModel, layout: dict[str, Any], released: set[str]) -> str | None:
    """Why slicing's recorded column groups cannot be the ones a release of ``declared`` made, or None (issue
    28.8: the groups decide what the l-diversity check links, and the table cannot tell them). The method groups
    exactly the declared QIs and the sensitive attribute, each once, into at most ``columns`` groups (PAM gives
    that many clusters, ties fewer), the sensitive group holding at least α attributes where the method enforces it
    (an explicit ``sensitive_column_size`` in "alpha" mode, always in "pam" mode). A finer grouping (more groups),
    a group left out or an attribute added fails; a different grouping of the same size cannot be told without
    recomputing the method's correlations: :func:`derived_groups` does that when the source is readable."""
    from ..methods import method_class

    groups = layout.get("columns")
    if not (isinstance(groups, list) and groups and all(isinstance(g, list) and g for g in groups)):
        return "are not a list of column groups"
    placed = [a for g in groups for a in g]
    attrs = [*declared.quasi, getattr(model, "attribute", None)]
    if len(placed) != len(set(placed)) or set(placed) != set(attrs):
        return f"do not place each of {attrs!r} (the declared QIs and the sensitive attribute) exactly once"
    if not set(placed) <= released:
        return "group columns the table does not release"
    try:
        method = method_class(declared.method)(**declared.method_params)
    except Exception:    # noqa: BLE001 - parameters the release accepted; refused now: nothing to compare with
        return f"cannot be compared with method {declared.method!r}'s parameters"
    c = min(int(getattr(method, "columns", 0) or 0), len(attrs))
    if len(groups) > max(c, 1):
        return f"are {len(groups)} groups, finer than the {c} columns the declared policy asks for"
    alpha, mode = int(getattr(method, "sensitive_column_size", 1)), getattr(method, "mode", "alpha")
    need = (min(alpha, len(attrs)) if mode == "pam"
            else min(alpha, len(attrs) - c + 1) if c > 1 and getattr(method, "strict_alpha", False) else 1)
    sensitive = next((g for g in groups if model.attribute in g), [])
    if len(sensitive) < need:
        return (f"put {len(sensitive)} attribute(s) in the sensitive column where sensitive_column_size asks for "
                f"{need}")
    return None


def _same_values(tax: Any, level: int, values: Any, found: list) -> bool:
    """Could the released ``values`` (and NULL, when ``found`` holds it) be values of ``level`` as well? Its own
    values only: the NULL parent / ``*`` that stands for NULL at any level below the top does not make another level
    a reading of the table (at the top level of most taxonomies it is the one value)."""
    import numpy as np

    return (level == 0 or None not in found) and bool(np.isin(values, list(set(tax.levels[f"level{level}"]))).all())


def _meanings(tax: Any, level: int, values: Any) -> dict[str, frozenset]:
    """The leaves each released value stands for at ``level`` (a few per value: the taxonomy's size, not rows)."""
    frame = tax.levels[tax.levels[f"level{level}"].isin(list(values))]
    return {v: frozenset(g) for v, g in frame.groupby(f"level{level}")["level0"]}


def _table_check(con, policy: Policy, names: ReleaseNames, model: PrivacyModel, layout: dict[str, Any],
                 columns: list[str], declared: Policy | None = None) -> dict[str, Any]:
    """A model's whole-table check (slicing's l-diversity), with the source rows read afresh through the stored
    policy (not the release's ``__source`` view); not recomputable (the source is gone), or a layout that does not
    fit the ``declared`` policy, counts as failed."""
    from ..compiler.views import source_view
    from ..methods import AssignmentPlan
    import pandas as pd

    src = policy.source
    unverifiable = check_program.table_check_row(model.name, 0, basis=None, passed=False)
    if not isinstance(layout, dict) or not layout:
        return unverifiable   # the plan's layout is missing (an edited catalog): the model cannot be checked
    if layout.get("kind") is None:     # slicing: its column groups as the declared policy allows them
        if declared is None:
            return {**unverifiable, "message": "the release's declared policy is not recorded (a release made before "
                                               "anon_sql kept it), or is not the one its recorded policy derives "
                                               "from: its column groups cannot be verified; release it again"}
        wrong = layout_misfit(declared, model, layout, set(columns) - {EC_ID, policy.count_column})
        if wrong:
            return {**unverifiable, "message": f"the recorded column groups {layout.get('columns')!r} {wrong}"}
    relation = readable_relation(con, src) if isinstance(src, str) else None
    if relation is None:
        if layout.get("kind") is None:
            return {**unverifiable, "basis": f"{check_program.TABLE} (column groups not re-derived: the source "
                                             f"{src!r} is not readable here)"}
        return unverifiable
    cols = [r[0] for r in describe(con, relation)]
    basis = None
    if layout.get("kind") is None and declared is not None:   # slicing: the grouping the method forms from the source
        derived, why = derived_groups(con, declared, relation, cols)
        if derived is not None and _grouping(derived) != _grouping(layout.get("columns")):
            return {**unverifiable, "message": (
                f"the recorded column groups {layout.get('columns')!r} are not the groups {derived!r} that method "
                f"{declared.method!r} forms from the source {src!r} as it is now (the plan was edited, or the source "
                "changed since the release: the reconciliation row's source digest says which)")}
        basis = (f"{check_program.TABLE} (column groups re-derived from the source)" if derived is not None else
                 f"{check_program.TABLE} (column groups not re-derived: {why})")
    ci = CompileInput(_without_identifiers(policy), relation, cols, AssignmentPlan(pd.DataFrame(), pd.DataFrame()),
                      {}, [])
    source = exp.Subquery(this=source_view(ci, names), alias=exp.TableAlias(this=ident("__s")))
    assignment = names.assignment if relation_exists(con, names.assignment) else None
    row = model.table_check(con, names.table, source, None, layout, policy.count_column, assignment)
    return {**row, "basis": basis} if basis and row is not None else row


def _without_identifiers(policy: Policy) -> Policy:
    """``policy`` with every identifier dropped: the check reads the source's rows without them (no pseudonym key
    needed); the row key still orders by every source column, as at release time."""
    d = policy.to_dict()
    for spec_ in d["attributes"].values():
        if spec_["role"] == "identifier":
            spec_["action"] = "drop"
    return Policy.from_dict(d)


def _grouping(groups: Any) -> set[frozenset]:
    """A column grouping as a set of sets (the order of groups and of the attributes inside one says nothing)."""
    return {frozenset(g) for g in groups} if isinstance(groups, list) else set()


_DERIVE_VIEW = "__anon_check_slicing_source"


def derived_groups(con: duckdb.DuckDBPyConnection, declared: Policy, relation: exp.Expression, columns: list[str]
                   ) -> tuple[list[list[str]] | None, str]:
    """The column groups slicing forms from ``relation`` (the release's source, read now) under the ``declared``
    policy: the planner's own first steps (``column_groups`` of the method), over the ``__source`` view the release
    read, built as a temporary view of this connection and dropped after (the database file is not written; a
    read-only connection works). (None, why) when they cannot be formed (an SDC-perturbed source, or a source the
    method now refuses)."""
    from ..compiler.views import source_view
    from ..methods import AssignmentPlan, MethodContext, method_class
    from ..runner.sdc import mask_specs, perturb_specs
    import pandas as pd

    if perturb_specs(declared) or mask_specs(declared):
        return None, "the release sliced a perturbed copy of the source, which is not kept"
    try:
        method = method_class(declared.method)(**declared.method_params)
    except Exception as err:   # noqa: BLE001 - parameters the release accepted; refused now: nothing to compare with
        return None, f"method {declared.method!r} refuses its recorded parameters now ({err})"
    if not hasattr(method, "column_groups"):
        return None, f"method {declared.method!r} forms no column groups"
    policy = _without_identifiers(declared)
    ci = CompileInput(policy, relation.copy(), columns, AssignmentPlan(pd.DataFrame(), pd.DataFrame()), {}, [])
    # a fresh name: a view of the user's named like it is never replaced or dropped (hostile round 19, M53)
    view = session_table(scratch_name(_DERIVE_VIEW))
    create = exp.Create(this=view.copy(), kind="VIEW", replace=True,
                        expression=source_view(ci, ReleaseNames(policy.name)),
                        properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
    try:
        con.execute(render(create))
        ctx = MethodContext(con, policy, view, {}, build_models(policy), 0)
        return method.column_groups(ctx), ""
    except (duckdb.Error, PolicyError, PrivacyRequirementError, SourceError) as err:
        return None, f"the source cannot be sliced as at the release now ({err})"
    finally:
        try:
            con.execute(render(exp.Drop(tables=[view], kind="VIEW", exists=True)))
        except duckdb.Error:   # a transaction the caller holds, aborted by the error above: its rollback drops it
            pass


__all__ = ["NOT_ASKED", "require_recorded", "recheck", "recheck_rows", "prepare_check", "is_shared", "metadata_table",
           "recorded_levels", "recorded_policies", "layout_misfit", "recorded_digest_columns",
           "derived_groups"]
