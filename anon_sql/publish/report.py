"""The report parts that read a database or run releases: :func:`build_report` (the full report of a stored release) and
:func:`sweep` (dry-run releases over one parameter). Rendering lives in :mod:`anon_sql.report.build`, below the runner."""
from __future__ import annotations

from typing import Any, Sequence

import duckdb
import pandas as pd

from sqlglot import exp

from ..audit.recheck import recheck
from ..common.sqlbuild import ident, render
from ..data.source import relation_exists
from ..errors import AnonSQLError, PrivacyRequirementError
from ..policy.model import Policy, coerce_policy
from ..runner.run import release_with_duckdb
from ..report.build import distributions, frame_records, metric_rows, set_param, size_histogram, verdict


AUDIENCE = ("the data owner: the 'original' distributions and the records in are aggregates of the source, which the "
            "release does not publish; share the files `anon-sql export` writes, not this report")


def build_report(con, release_name: str, names: Sequence[str] | str | None = None, params: dict[str, Any] | None = None,
          classify: str | None = None, classify_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full report of a materialized release: catalog row, checks, metrics (all by default), details tables and,
    with ``classify = "<target column>"``, classification accuracy (see metrics.classification.classify)."""
    from ..metrics import ReleaseData, evaluate
    from ..metrics.query import query_error_table
    from ..metrics.risk import leakage_table

    data = ReleaseData.from_catalog(con, release_name, params)
    values = evaluate(data, names)
    try:
        checks = recheck(con, release_name)
    except (AnonSQLError, duckdb.Error) as err:   # e.g. an exported copy without its views: metrics still shown
        checks = pd.DataFrame([{"check": "checks view", "passed": None, "error": str(err)}])
    checks_rows = frame_records(checks)
    report: dict[str, Any] = {
        "release": release_name, "method": data.policy.method, "source": data.source_label,
        "records_in": data.records_in, "records_out": int(data.class_sizes.sum()), "suppressed": data.suppressed,
        "noise": data.noise, "classes": int(len(data.class_sizes)), "plan": data.plan, "quasi": data.quasi,
        "sensitive": data.policy.sensitive, "materialized": True,
        "verdict": verdict(checks_rows), "checks": checks_rows, "metrics": metric_rows(values),
        "class_sizes": size_histogram(data.class_sizes),
        "ncp_by_qi": {q: values[f"ncp__{q}"] for q in data.quasi if f"ncp__{q}" in values},
        "distributions": distributions(data),
        # the source's aggregates beside the release's: the data owner's evaluation, never a file to share
        # (hostile round 15, E55; the shareable files are export's)
        "audience": AUDIENCE,
    }
    if data.policy.related:   # the related tables released with it (docs/units.md); `check` verified them above
        report["related"] = [{"name": n, "table": f"{release_name}_{n}",
                              "rows": int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(
                                  exp.Table(this=ident(f"{release_name}_{n}"))))).fetchall()[0][0])}
                             for n in data.policy.related if relation_exists(con, f"{release_name}_{n}")]
    if "query_error" in values:
        report["query_error_table"] = frame_records(query_error_table(data))
    if "leakage_post" in values or "leakage_pre" in values:
        report["leakage"] = frame_records(leakage_table(data))
    if classify:
        from ..metrics.classification import classify as run_classify

        report["classification"] = frame_records(run_classify(con, data, classify, **(classify_options or {})))
        report["classification_target"] = classify
    return report


def sweep(con, policy: Policy | dict | str, param: str, values: Sequence[Any],
          names: Sequence[str] | str | None = None, progress=None, fixed: dict[str, Any] | None = None,
          start: int = 0, total: int | None = None) -> pd.DataFrame:
    """Dry-run the release once per value of ``param`` and tabulate its metrics (the policy's ``[metrics]
    compute``, else ``names``, else the default set); a value whose requirements fail gets status ``failed``.

    ``fixed``: parameters already set in ``policy`` (the outer grid of a multi-parameter sweep), shown as columns
    first; a metric of the same name (e.g. ``k``) becomes ``<name>_achieved``. ``progress`` receives a
    :class:`~anon_sql.common.progress.Progress` per value (``start`` + i of ``total``)."""
    from ..metrics import DEFAULT
    from ..common.progress import Progress

    base = coerce_policy(policy)
    chosen = names or base.metrics.get("compute") or list(DEFAULT)
    rows = []
    total = total or len(values)
    for i, v in enumerate(values):
        pol = set_param(base, param, v)
        pol = pol.replace(metrics={**pol.metrics, "compute": chosen})
        if progress:
            where = ", ".join(f"{k} = {x}" for k, x in [*(fixed or {}).items(), (param, v)])
            progress(Progress(f"sweep {start + i + 1}/{total}: {where}", done=start + i, total=total,
                              unit="runs"))
        row: dict[str, Any] = {**(fixed or {}), param: v}
        try:
            rel = release_with_duckdb(con, pol, dry_run=True)
            row.update(status="ok", records_out=rel.records_out, suppressed=rel.suppressed,
                       classes=len(rel.classes), seconds=round(rel.info.get("seconds", float("nan")), 3))
            row.update({(f"{k}_achieved" if k in row else k): v for k, v in rel.metrics.items()})
        except PrivacyRequirementError as err:
            row.update(status="failed", message=str(err))
        rows.append(row)
    return pd.DataFrame(rows)
