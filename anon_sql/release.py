"""Run a release: resolve the policy against the data, plan, compile, and materialize in one transaction.

Verification is independent of the method: the checks run as SQL over the materialized table; a failure rolls
everything back (nothing half-written, the source untouched) and raises :class:`PrivacyRequirementError`.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import duckdb
import pandas as pd
from sqlglot import exp

from . import base_counts, catalog, suppression
from .compiler import (BASE_STATEMENT, EC_ID, SIZE, CompileInput, CompiledRelease, ReleaseNames, compile_release,
                       source_statement)
from .errors import PolicyError, PrivacyRequirementError, ReleaseExistsError, SourceError, TaxonomyError
from .methods import AssignmentPlan, LevelPlan, MethodContext, get_method
from .models import build_models
from .policy import Attribute, Policy, coerce_policy
from .source import Source, relation_exists, resolve
from .sqlbuild import alias, col, ident, lit, record_count, render
from .taxonomy import Taxonomy, build as build_taxonomy, from_arx_csv


@dataclass
class Release:
    """The outcome of a release: the table's name, the SQL that made it, its classes, checks and metrics."""

    name: str
    policy: Policy
    sql: list[str]
    plan: dict[str, Any]
    classes: pd.DataFrame
    checks: pd.DataFrame
    metrics: dict[str, float]
    records_in: int
    records_out: int
    suppressed: int
    noise: int = 0
    materialized: bool = True
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def table(self) -> str:
        return self.name

    @property
    def passed(self) -> bool:
        return bool(self.checks["passed"].all()) if len(self.checks) else True

    def summary(self) -> str:
        lines = [
            f"release {self.name!r} ({self.policy.method}): {self.records_in} records in, "
            f"{self.records_out} released, {self.suppressed} suppressed, {self.noise} noise, "
            f"{len(self.classes)} classes",
            f"plan: {json.dumps(self.plan, default=str)}",
        ]
        return "\n".join(lines)

    def report(self, format: str = "text") -> str:
        """A report of plan, checks and metrics: plain text, or ``"html"`` / ``"json"`` (anon_sql.report)."""
        if format != "text":
            from .report import from_release, render

            return render(from_release(self), format)
        parts = [self.summary(), "", "checks:", self.checks.to_string(index=False), "", "metrics:"]
        parts += [f"  {k}: {v:.6g}" if isinstance(v, float) else f"  {k}: {v}" for k, v in self.metrics.items()]
        return "\n".join(parts)


# -- preparing the policy against the data ---------------------------------------------------------------------
def _effective_policy(policy: Policy, src: Source) -> Policy:
    """Check attributes against the source's columns and apply ``default_role`` to the unmentioned ones."""
    unknown = [a for a in policy.attributes if a not in src.columns]
    if unknown:
        raise PolicyError(f"the policy names column(s) {unknown} that source {src.label!r} does not have; "
                          f"its columns are {src.columns}")
    if policy.count_column and policy.count_column not in src.columns:
        raise PolicyError(f"count_column {policy.count_column!r} is not a column of {src.label!r} ({src.columns})")
    others = [c for c in src.columns if c not in policy.attributes and c != policy.count_column]
    if others and not policy.default_role:
        raise PolicyError(
            f"column(s) {others} of {src.label!r} are not in the policy: give each a role, or set "
            "default_role (e.g. default_role = \"insensitive\" releases them unchanged)"
        )
    if not policy.quasi:
        raise PolicyError("the policy has no quasi-identifier (role = \"quasi\"): nothing to anonymize")
    if not others:
        return policy
    # the policy's own attributes first, in its order (ties between plans follow it), then the defaulted ones
    attrs = dict(policy.attributes)
    attrs.update({c: Attribute(c, policy.default_role) for c in others})
    d = policy.to_dict()
    d["attributes"] = {c: a.to_dict() for c, a in attrs.items()}
    return Policy.from_dict(d)


def _count_records(con, src: Source, policy: Policy) -> int:
    w = record_count(policy.count_column)
    q = exp.select(w).from_(src.relation.copy())
    value = con.execute(render(q)).fetchall()[0][0]
    return int(value or 0)


def resolve_taxonomies(con, policy: Policy, src: Source, need: bool, catalog_con=None,
                       value_counts: Callable[[str], pd.DataFrame] | None = None,
                       check: bool = True) -> dict[str, Taxonomy]:
    """Catalog, built-in, ARX file or inline taxonomy per quasi-identifier, checked to cover every value of the data.

    ``con`` answers the value-count queries (DuckDB, or the Spark wrapper); ``catalog_con`` is the DuckDB connection
    whose ``anon`` catalog holds named taxonomies (None: built-ins, files and inline specs only); ``value_counts``
    (column → frame v, n) replaces the per-column scans of the source (e.g. reads the base counts); ``check=False``
    skips the coverage check (metrics of a release that was checked), so named taxonomies read no values at all."""
    from .taxonomies import load as load_builtin

    out: dict[str, Taxonomy] = {}
    named = [policy.attributes[q].taxonomy for q in policy.quasi if isinstance(policy.attributes[q].taxonomy, str)]
    # the catalog's taxonomies among them, in two queries (not three probes per quasi-identifier)
    stored = catalog.load_taxonomies(catalog_con, named) if catalog_con is not None and named else {}
    for q in policy.quasi:
        spec = policy.attributes[q].taxonomy
        if spec is None:
            if need:
                raise PolicyError(
                    f"quasi-identifier {q!r} has no taxonomy, and method {policy.method!r} generalizes every value "
                    "through one: give it taxonomy = \"name\" (see anon-sql taxonomy load) or an inline builder, "
                    "e.g. { kind = \"interval\", widths = [5, 10, 20] } or { kind = \"top\" }"
                )
            continue
        values = None
        if check or isinstance(spec, dict):   # inline builders are built from the data's values
            values = value_counts(q) if value_counts is not None else _value_counts(con, src, q, policy.count_column)
        if isinstance(spec, str):
            tax = stored.get(spec)
            tax = tax or load_builtin(spec)
            if tax is None and spec.endswith(".csv"):
                tax = from_arx_csv(spec, q)
            if tax is None:
                where = (f"not in the catalog (known: {catalog.taxonomy_names(catalog_con)})"
                         if catalog_con is not None else "not built in, and no catalog connection was given "
                         "(on Spark pass catalog=, a DuckDB connection with the anon catalog)")
                raise TaxonomyError(
                    f"quasi-identifier {q!r}: taxonomy {spec!r} is {where}; load it with `anon-sql taxonomy load` "
                    "or anon_sql.load_taxonomy, give an ARX CSV path, or an inline spec"
                )
        elif isinstance(spec, dict):
            tax = build_taxonomy(f"{policy.name}.{q}", spec, values["v"].tolist())
        else:
            raise PolicyError(f"quasi-identifier {q!r}: taxonomy must be a name or an inline table, got {spec!r}")
        if check:
            tax.check_covers(values["v"], values["n"], column=q)
        out[q] = tax
    return out


def _value_counts(con, src: Source, column: str, count_column: str | None) -> pd.DataFrame:
    v = exp.Cast(this=col(column), to=exp.DataType.build("VARCHAR"))
    w = record_count(count_column)
    q = exp.select(alias(v, "v"), alias(w, "n")).from_(src.relation.copy()).group_by(v.copy())
    return con.execute(render(q)).df()


def _is_numeric(type_name: str) -> bool:
    t = type_name.upper()
    return any(x in t for x in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC")) and "[]" not in t


def check_records(policy: Policy, src: Source, records: int) -> None:
    """Refuse an empty source, a missing k, or a k larger than the number of records."""
    if records == 0:
        raise SourceError(f"source {src.label!r} is empty: there is nothing to release")
    k = policy.privacy.k
    if k is None:
        raise PolicyError("privacy.k is required (the minimum class size, e.g. k = 5)")
    if k > records:
        raise PolicyError(f"privacy.k = {k} is larger than the {records} records of {src.label!r}; "
                          "no release can have classes that large")


# -- running ----------------------------------------------------------------------------------------------------
def prepare(con, policy, source: Any = None, base: bool = False):
    """Resolve a policy against a connection: effective policy, source, taxonomies, models, records, method.

    ``base``: for a level method, aggregate the source once into the release's temp base-count table
    (:mod:`anon_sql.base_counts`) and check taxonomy coverage from it; the caller drops it."""
    policy = coerce_policy(policy)
    catalog.ensure_installed(con)
    # an in-memory source (DataFrame, Arrow, relation) is registered per release: its views read it by that name
    src = resolve(con, source if source is not None else policy.source, label=policy.name + "__input")
    policy = _effective_policy(policy, src)
    records = _count_records(con, src, policy)
    check_records(policy, src, records)
    method = get_method(policy.method, policy.method_params)
    counts = None
    table = base_counts.temp_table(policy.name)
    if base and method.plan_kind == "levels":
        con.execute(render(base_counts.create(policy, src.relation, table)))
        counts = lambda column: base_counts.value_counts(con, table, column)  # noqa: E731
    try:
        taxonomies = resolve_taxonomies(con, policy, src, method.needs_taxonomies, catalog_con=con,
                                        value_counts=counts)
        models = build_models(policy, con)
    except BaseException:
        if counts is not None:
            con.execute(render(base_counts.drop(table)))
        raise
    return policy, src, taxonomies, models, records, method


def release(con: duckdb.DuckDBPyConnection, policy: Policy | dict | str, *, replace: bool = False,
            dry_run: bool = False, source: Any = None,
            progress: Callable[[str], None] | None = None) -> Release:
    """Plan, compile, materialize and verify a release in one transaction; see the module docstring."""
    say = progress or (lambda message: None)
    t0 = time.perf_counter()
    policy, src, taxonomies, models, records, method = prepare(con, policy, source, base=True)
    try:
        return _run(con, policy, src, taxonomies, models, records, method, replace, dry_run, say, t0)
    finally:   # the temp base counts (level methods) outlive a rollback: drop them whatever happened
        con.execute(render(base_counts.drop(base_counts.temp_table(policy.name))))


def _run(con, policy: Policy, src: Source, taxonomies, models, records: int, method, replace: bool, dry_run: bool,
         say: Callable[[str], None], t0: float) -> Release:
    """The body of :func:`release` once the policy is prepared."""
    names = ReleaseNames(policy.name)
    if policy.name in (src.label,) or policy.name.startswith("anon."):
        raise PolicyError(f"release name {policy.name!r} would overwrite the source or the catalog; choose another")
    exists = relation_exists(con, policy.name)
    if exists and not replace and not dry_run:
        raise ReleaseExistsError(
            f"a table named {policy.name!r} already exists; pass replace=True (CLI: --replace) to replace it "
            "atomically, or choose another name"
        )
    pseudonym_fn = None
    ids = [a for a in policy.attributes.values() if a.role == "identifier" and a.action == "pseudonymize"]
    if ids:
        from . import pseudonym

        key = pseudonym.load_key(ids[0].options.get("key_file"))
        pseudonym_fn = pseudonym.register(con, key)
    numeric_sa = {s for s in policy.sensitive if _is_numeric(src.types.get(s, ""))}

    con.execute("BEGIN TRANSACTION")
    try:
        # the source view first: methods read their data through it (identifiers already removed)
        probe = CompileInput(policy, src.relation, src.columns, LevelPlan({}), taxonomies, models,
                             pseudonym_function=pseudonym_fn, numeric_sensitive=numeric_sa)
        if method.plan_kind == "assignment":
            probe.plan = AssignmentPlan(pd.DataFrame(), pd.DataFrame())
        con.execute(render(source_statement(probe, names)))
        say("planning")
        ctx = MethodContext(con, policy, policy.name + "__source", taxonomies, models, records, say)
        plan = method.plan(ctx)
        policy = _released_policy(policy, plan)
        ci = CompileInput(policy, src.relation, src.columns, plan, taxonomies, models,
                          pseudonym_function=pseudonym_fn, numeric_sensitive=numeric_sa)
        compiled = compile_release(ci, names)
        if isinstance(plan, AssignmentPlan):
            _write_assignment(con, names, plan)
        if exists:
            con.execute(render(exp.Drop(tables=[names.table.copy()], kind="TABLE", exists=True)))
        say("materializing")
        for what, stmt in compiled.statements:
            if what != BASE_STATEMENT:   # prepare() already made the base counts (level plans)
                con.execute(render(stmt))
        say("verifying")
        if policy.privacy.max_suppression > 0:   # suppression to a fixed point (whole-table checks move with it)
            suppression.settle(con, names)
        result = _verify(con, policy, compiled, models, records, plan)
        sql_text = compiled.sql(pretty=True)
        if result["failures"]:
            need = _needed_suppression(con, ci, names, models, records, plan, result)
            raise PrivacyRequirementError(_failure_message(policy, plan, result, records, need))
        rel = Release(policy.name, policy, sql_text, _plan_dict(plan), result["classes"], result["checks"],
                      result["metrics"], records, result["records_out"], result["suppressed"], result["noise"],
                      materialized=not dry_run, info={"seconds": time.perf_counter() - t0, **getattr(plan, "info", {})})
        if policy.metrics.get("compute"):   # [metrics] compute = [...]: measured inside the transaction
            from .metrics import attach

            attach(con, rel, taxonomies, src)
        if dry_run:
            con.execute("ROLLBACK")
            return rel
        _write_catalog(con, rel, compiled, src)
        con.execute("COMMIT")
        return rel
    except BaseException as err:
        con.execute("ROLLBACK")
        if isinstance(err, PrivacyRequirementError) and not dry_run:
            _log_failure(con, policy, src, records, str(err))
        raise


def _write_assignment(con, names: ReleaseNames, plan: AssignmentPlan) -> None:
    """Materialize the plan's assignment / class-value / noise frames as tables of the release."""
    for table, frame in ((names.assignment, plan.assignment), (names.ec_values, plan.class_values),
                         (names.noise, plan.noise)):
        if frame is None:
            continue
        con.register("__anon_plan_frame", frame)
        con.execute(render(exp.Create(this=table.copy(), kind="TABLE", replace=True,
                                      expression=exp.select("*").from_("__anon_plan_frame"))))
        con.unregister("__anon_plan_frame")


def _released_policy(policy: Policy, plan) -> Policy:
    """Every check groups by every declared quasi-identifier as released — except for bucket plans (slicing's
    ``row_values``: original values permuted inside buckets), whose classes are the buckets: they list no QI in
    ``plan.info["released_quasi"]``, and the QIs are insensitive in the release (docs/slicing.md says what slicing
    guarantees). A method that merely leaves a QI unchanged (UPA with quasi = "ktfs") is still checked over it."""
    info = getattr(plan, "info", {})
    chosen = info.get("released_quasi")
    if not info.get("row_values") or chosen is None or set(chosen) == set(policy.quasi):
        return policy
    d = policy.to_dict()
    for q in policy.quasi:
        if q not in chosen:
            d["attributes"][q] = {"role": "insensitive"}
    return Policy.from_dict(d)


def _plan_dict(plan) -> dict[str, Any]:
    """The plan for Release.plan: a level vector (every QI) or the assignment summary (no trace)."""
    out = plan.as_dict()
    out.pop("trace", None)
    return out


def _verify(con, policy: Policy, compiled: CompiledRelease, models, records: int, plan) -> dict[str, Any]:
    """Run the checks view over the materialized release and reconcile the record counts."""
    names = compiled.names
    checks = con.execute(render(exp.select("*").from_(names.checks.copy()).order_by(col(EC_ID)))).df()
    weight = record_count(policy.count_column)
    released = int(con.execute(render(exp.select(weight).from_(names.table.copy()))).fetchall()[0][0] or 0)
    noise = 0
    if isinstance(plan, AssignmentPlan) and plan.noise is not None and len(plan.noise):
        released_noise = plan.noise[plan.noise[EC_ID].isin(checks[EC_ID])]   # noise of suppressed classes is gone
        noise = (int(len(released_noise)) if policy.count_column not in released_noise
                 else int(released_noise[policy.count_column].sum()))
    suppressed = records - (released - noise)
    summary = check_summary(checks)
    spec = getattr(plan, "info", {}).get("slicing_check")
    if spec:   # slicing's l-diversity is a whole-table quantity: SQL over the release, not a per-class column
        from .methods.slicing_sql import verify as slicing_verify

        row = slicing_verify(con, names.table, names.source, names.risk, spec, policy.count_column,
                             names.assignment)
        row.pop("requirement", None)
        summary.append(row)
    failures = [row for row in summary if not row["passed"]]
    budget = policy.privacy.max_suppression * records
    if suppressed > budget + 1e-9:
        failures.append({"check": "max_suppression", "failing_records": suppressed})
    summary.append({"check": "reconciliation", "classes": len(checks), "failing_classes": 0,
                    "failing_records": 0, "worst_value": float(records - released + noise - suppressed),
                    "passed": records == released - noise + suppressed})
    summary.append({"check": "max_suppression", "classes": len(checks), "failing_classes": 0,
                    "failing_records": max(0, int(suppressed - budget)), "worst_value": float(suppressed),
                    "passed": suppressed <= budget + 1e-9})
    sizes = checks[SIZE] if len(checks) else pd.Series([0])
    metrics = {
        "k": float(sizes.min()),
        "classes": float(len(checks)),
        "avg_class_size": float(sizes.mean()),
        "records_at_risk": float(sizes[sizes < (policy.privacy.k or 1)].sum()),
        "prosecutor_risk_max": float(1.0 / sizes.min()) if sizes.min() > 0 else 1.0,
        "prosecutor_risk_avg": float(len(checks) / released) if released else 0.0,
        "suppressed_fraction": float(suppressed / records) if records else 0.0,
        # (N / #EC) / k over the released rows, noise included — the class sizes DCP squares (anon_sql.metrics: same)
        "cavg": float((released / max(len(checks), 1)) / (policy.privacy.k or 1)),
        "discernibility": float((sizes.astype(float) ** 2).sum() + records * suppressed),
    }
    classes = checks.drop(columns=[c for c in checks.columns if c.startswith(("__counts__", "__values__"))])
    return {"checks": pd.DataFrame(summary), "classes": classes, "failures": failures, "records_out": released,
            "suppressed": suppressed, "noise": noise, "metrics": metrics}


def check_summary(checks: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per check column of a checks frame: classes, failing classes / records, worst value, passed."""
    rows = []
    for c in [c for c in checks.columns if c.endswith("_ok") and c != "__all_ok"]:
        name = c[: -len("_ok")]
        failing = checks[~checks[c].astype(bool)]
        vals = checks[f"{name}_value"] if f"{name}_value" in checks else None
        worst = None
        if vals is not None and len(vals):
            worst = float(vals.max()) if name.startswith("t_closeness") else float(vals.min())
        rows.append({"check": name, "classes": len(checks), "failing_classes": len(failing),
                     "failing_records": int(failing[SIZE].sum()) if len(failing) else 0, "worst_value": worst,
                     "passed": len(failing) == 0})
    return rows


def _needed_suppression(con, ci: CompileInput, names: ReleaseNames, models, records: int, plan,
                        result: dict) -> float | None:
    """Records this plan must suppress to meet every requirement: the fixed point of :func:`suppression.settle`.
    With suppression allowed it has just run; otherwise it is run on a trial release (suppression on) inside the
    transaction the refusal rolls back. None when suppression cannot help (a whole-table check still fails)."""
    policy = ci.policy
    if getattr(plan, "info", {}).get("slicing_check"):
        return None   # slicing advises its own budget (its suppression is the method's)
    if policy.privacy.max_suppression <= 0:
        trial = dataclasses.replace(ci, policy=policy.replace(privacy={"max_suppression": 1.0}))
        compiled = compile_release(trial, names)
        con.execute(render(exp.Drop(tables=[names.table.copy()], kind="TABLE", exists=True)))
        for _, stmt in compiled.statements:
            con.execute(render(stmt))
        suppression.settle(con, names)
        result = _verify(con, trial.policy, compiled, models, records, plan)
    if any(f["check"] != "max_suppression" for f in result["failures"]):
        return None
    return float(result["suppressed"])


def failing_classes_records(con, names: ReleaseNames) -> int:
    """Records in the classes that fail before any suppression (``__classes``): a lower bound of what suppression
    needs (for an engine that cannot settle suppression to a fixed point, e.g. Spark)."""
    pre = con.execute(render(exp.select(col(SIZE), col("__all_ok")).from_(names.classes.copy()))).df()
    return int(pre.loc[~pre["__all_ok"].astype(bool), SIZE].sum())


def _failure_message(policy: Policy, plan, result: dict, records: int, need: float | None,
                     at_least: bool = False) -> str:
    """Say which requirement failed, for how many classes/records, and the budget that would satisfy it (the
    suppression the same plan needs to meet every requirement, rounded up), or that no budget would.
    ``at_least``: ``need`` is only a lower bound (no fixed point was computed): say so, advise nothing."""
    parts = []
    for f in result["failures"]:
        if f["check"] == "max_suppression":
            parts.append(f"suppression of {f['failing_records']} records exceeds max_suppression = "
                         f"{policy.privacy.max_suppression}")
        elif f["check"] == "slicing_l_diversity":
            parts.append(f"slicing l-diversity fails: max p(t, s) = {f['worst_value']:.4g} for "
                         f"{f['failing_records']} records")
        else:
            parts.append(f"{f['check']} fails for {f['failing_classes']} classes ({f['failing_records']} records)")
    unchanged = _unchanged_quasi(policy, plan)
    if unchanged:
        parts.append(f"method {policy.method!r} released quasi-identifier(s) {unchanged} unchanged "
                     f"({plan.info.get('selection', 'not generalized')} selection), and every check groups by "
                     "every declared quasi-identifier: generalize them (e.g. method_params.quasi = \"policy\") or "
                     "declare them insensitive if they are not quasi-identifiers")
    budget = suppression.advised_budget(need, records) if need is not None else None
    if at_least and need:
        hint = (f"; at this plan at least {need:g} of {records} records fail before suppression "
                f"(max_suppression >= {need / records:.4g}; group rules and t-closeness may need more)")
    elif budget is not None:
        hint = (f"; meeting every requirement at this plan needs suppression of {need:g} of {records} records: "
                f"allow it with max_suppression = {budget:g} (or more), or generalize further / choose a search method")
    elif need is not None and need >= records:
        hint = ("; at this plan every record would have to be suppressed, so no max_suppression helps: generalize "
                "further or relax the requirements")
    elif need is None:
        hint = "; suppressing records cannot meet it at this plan: generalize further or relax the requirements"
    else:
        hint = ""
    return f"release {policy.name!r} not created: " + "; ".join(parts) + hint


def _unchanged_quasi(policy: Policy, plan) -> list[str]:
    """Declared QIs an assignment plan released as they are (not in its class values; bucket plans excepted)."""
    if not isinstance(plan, AssignmentPlan) or plan.info.get("row_values"):
        return []
    return [q for q in policy.quasi if q not in plan.class_values.columns]


def _json_struct(columns: list[str], table_alias: str | None = None) -> exp.Expression:
    fields = [exp.PropertyEQ(this=exp.Literal.string(c), expression=col(c, table_alias)) for c in columns]
    if not fields:   # an empty struct literal `{}` parses only from DuckDB 2.0 on
        return exp.Cast(this=lit("{}"), to=exp.DataType.build("JSON"))
    return exp.Anonymous(this="to_json", expressions=[exp.Struct(expressions=fields)])


def _merge_ec_stats(con, release: str, frame: pd.DataFrame) -> None:
    """Merge a method's own per-class statistics (``plan.info["ec_stats"]``: ec_id + flat columns, e.g. adaptive's
    Simpson D/E and levels) into the JSON ``stats`` of ``anon.equivalence_classes``."""
    con.register("__anon_ec_stats", frame)
    merged = exp.Anonymous(this="json_merge_patch", expressions=[
        col("stats", "e"), _json_struct([c for c in frame.columns if c != EC_ID], "x")])
    on = exp.and_(exp.EQ(this=col(EC_ID, "e"), expression=col(EC_ID, "x")),
                  exp.EQ(this=col("release", "e"), expression=lit(release)))
    upd = exp.Update(this=exp.Table(this=ident("equivalence_classes"), db=ident("anon"),
                                    alias=exp.TableAlias(this=ident("e"))),
                     expressions=[exp.EQ(this=col("stats"),
                                         expression=exp.Cast(this=merged, to=exp.DataType.build("VARCHAR")))],
                     from_=exp.From(this=exp.Table(this=ident("__anon_ec_stats"),
                                                   alias=exp.TableAlias(this=ident("x")))),
                     where=exp.Where(this=on))
    con.execute(render(upd))
    con.unregister("__anon_ec_stats")


def _write_catalog(con, rel: Release, compiled: CompiledRelease, src: Source) -> None:
    """Rows in anon.releases / anon.equivalence_classes / anon.metrics / anon.policies (inside the transaction)."""
    policy = rel.policy
    con.execute("DELETE FROM anon.equivalence_classes WHERE release = ?", [rel.name])
    con.execute("DELETE FROM anon.metrics WHERE release = ?", [rel.name])
    con.execute("DELETE FROM anon.releases WHERE release = ?", [rel.name])
    con.execute(
        "INSERT INTO anon.releases (release, policy, method, source, records_in, records_out, suppressed, noise, "
        "k_achieved, classes, status, message, plan, policy_json, generated_sql) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'released', NULL, ?, ?, ?)",
        [rel.name, policy.name, policy.method, src.label, rel.records_in, rel.records_out, rel.suppressed,
         rel.noise, int(rel.metrics["k"]), len(rel.classes), json.dumps(rel.plan, default=str), policy.to_json(),
         ";\n".join(rel.sql) + ";"],
    )
    con.execute("DELETE FROM anon.policies WHERE name = ?", [policy.name])
    con.execute("INSERT INTO anon.policies (name, policy_toml, policy_json) VALUES (?, ?, ?)",
                [policy.name, policy.to_toml(), policy.to_json()])
    stats_cols = [c for c in rel.classes.columns if c.endswith("_value") or c.startswith("__distinct__")]
    # the verified per-class frame is already in hand: insert from it rather than re-aggregating the release
    con.register("__anon_classes_frame", rel.classes)
    ins = exp.insert(
        exp.select(lit(rel.name), col(EC_ID), col(SIZE), _json_struct(policy.quasi), _json_struct(stats_cols))
        .from_(exp.Table(this=ident("__anon_classes_frame"))),
        exp.Table(this=ident("equivalence_classes"), db=ident("anon")),
        columns=["release", "ec_id", "size", "qi_values", "stats"],
    )
    con.execute(render(ins))
    con.unregister("__anon_classes_frame")
    if isinstance(rel.info.get("ec_stats"), pd.DataFrame) and len(rel.info["ec_stats"]):
        _merge_ec_stats(con, rel.name, rel.info["ec_stats"])
    directions = {**rel.info.get("metric_directions", {}), **_DIRECTION}
    rows = [[rel.name, k, float(v), directions.get(k, "info")] for k, v in rel.metrics.items()]
    con.executemany("INSERT INTO anon.metrics VALUES (?, ?, ?, ?)", rows)
    trace = rel.info.get("trace")
    con.execute("DELETE FROM anon.search_trace WHERE release = ?", [rel.name])
    if trace:
        frame = pd.DataFrame([{
            "release": rel.name, "step": int(t.get("step", i)), "node": json.dumps(t.get("node"), default=str),
            "event": t.get("event"), "violations": t.get("violations"), "distinct_rows": t.get("distinct_rows"),
            "feasible": t.get("feasible"), "score": t.get("score")} for i, t in enumerate(trace)])
        con.register("__anon_trace_frame", frame)
        con.execute("INSERT INTO anon.search_trace SELECT release, step, node, event, violations, distinct_rows, "
                    "feasible, score FROM __anon_trace_frame")
        con.unregister("__anon_trace_frame")


_DIRECTION = {"k": "higher", "records_at_risk": "lower", "prosecutor_risk_max": "lower",
              "prosecutor_risk_avg": "lower", "suppressed_fraction": "lower", "cavg": "lower",
              "discernibility": "lower", "avg_class_size": "lower", "classes": "higher"}


def _log_failure(con, policy: Policy, src: Source, records: int, message: str) -> None:
    try:
        con.execute(
            "INSERT INTO anon.releases (release, policy, method, source, records_in, status, message, policy_json) "
            "VALUES (?, ?, ?, ?, ?, 'failed', ?, ?)",
            [policy.name, policy.name, policy.method, src.label, records, message, policy.to_json()])
    except duckdb.Error:
        pass
