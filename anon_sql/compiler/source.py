"""The first statements of a release: the working schema and the ``__source`` view (identifiers dropped or
pseudonymized, a row key for assignment plans)."""
from __future__ import annotations

from sqlglot import exp

from ..errors import PolicyError
from ..methods.base import ROW_ID, AssignmentPlan
from ..common.sqlbuild import alias, col, ident
from ..common.columns import UNIT
from .masks import column_mask
from .names import CompileInput, ReleaseNames, create_view, released_columns, cast_varchar


# -- the views ----------------------------------------------------------------------------------------------------
def source_view(ci: CompileInput, names: ReleaseNames) -> exp.Select:
    """Identifiers dropped or pseudonymized; for assignment plans a deterministic row key ``__row``."""
    policy = ci.policy
    items: list[exp.Expression] = []
    for c in released_columns(policy, ci.columns):
        attr = policy.attributes.get(c)
        masked = column_mask(policy, c, on_duckdb=ci.on_duckdb, prepared=ci.sdc_prepared,
                             column_type=ci.types.get(c), inline=ci.inline_masks)
        if masked is not None:
            items.append(alias(masked, c))
        elif attr is not None and attr.role == "identifier" and attr.options.get("mask"):
            items.append(col(c))     # shuffled or faked in the prepared relation
        elif attr is not None and attr.role == "identifier":  # pseudonymize
            if not ci.pseudonym_function:
                raise PolicyError(f"identifier {c!r}: pseudonymization needs a key (set ANON_SQL_KEY or key_file)")
            items.append(alias(exp.Anonymous(this=ci.pseudonym_function, expressions=[cast_varchar(col(c))]), c))
        else:
            items.append(col(c))
    if policy.privacy_unit:   # the unit's own value, for counting people (dropped before the release commits)
        items.append(alias(col(policy.privacy_unit), UNIT))
    if isinstance(ci.plan, AssignmentPlan):
        order = [exp.Ordered(this=col(c), nulls_first=True) for c in row_order(ci)]
        items.append(alias(exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order)), ROW_ID))
    return exp.select(*items).from_(ci.relation.copy())


def row_order(ci: CompileInput) -> list[str]:
    """The columns the ``__row`` key numbers the rows by: every column in source order; with a privacy unit the unit
    and the QIs first, so a person's rows (one QI tuple) are one run and ``__assignment`` is built per person."""
    unit = ci.policy.privacy_unit
    if not unit:
        return list(ci.columns)
    first = [unit, *[q for q in ci.policy.quasi if q in ci.columns]]
    return [*first, *[c for c in ci.columns if c not in first]]


def source_statement(ci: CompileInput, names: ReleaseNames) -> exp.Create:
    """``CREATE VIEW <release>__source``: the first statement, which methods read their data through."""
    return create_view(names.source, source_view(ci, names), ci.dialect)


def work_schema_statement(names: ReleaseNames) -> exp.Create:
    """``CREATE SCHEMA IF NOT EXISTS anon_work``: where the working objects live."""
    return exp.Create(this=exp.Table(this=ident(names.work)), kind="SCHEMA", exists=True)
