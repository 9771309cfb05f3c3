"""A column's ``mask`` in the ``__source`` view (docs/sdc.md): a call of a persisted ``anon.*`` macro, seeded by the
policy's seed; shuffle and fake (whole-column masks) and ``perturb`` are already in the relation the runner prepared."""
from __future__ import annotations

from typing import Any

from sqlglot import exp

from ..common.columns import is_numeric
from ..common.sqlbuild import col
from ..errors import PolicyError
from ..sdc.masking import MACROS, mask_expression
from ..sdc.portable import INLINE_MASKS, inline_mask


def column_mask(policy: Any, column: str, *, on_duckdb: bool, prepared: bool, column_type: str | None = None,
                inline: bool = False) -> exp.Expression | None:
    """The masked expression of ``column`` (None when it has no macro mask). Refuses what this compile cannot do:
    a macro outside DuckDB (the macros live in a DuckDB file) unless ``inline`` (an engine that runs the macro's
    body inline, Spark), a perturbation or whole-column mask the runner did not prepare (``anon_sql.compile`` for
    another engine has no data to perturb)."""
    attr = policy.attributes.get(column)
    if attr is None:
        return None
    if attr.options.get("perturb") and not prepared:
        raise PolicyError(f"attributes.{column}.perturb: a perturbation is computed from the data by a release on "
                          "DuckDB (anon_sql.release / anon-sql release); a compiled script cannot perturb")
    spec = attr.options.get("mask")
    if not spec:
        return None
    if spec["function"] not in MACROS:
        if not prepared:
            raise PolicyError(f"attributes.{column}.mask: function = {spec['function']!r} works on the whole column "
                              "and runs in a release on DuckDB; a compiled script cannot apply it")
        return None
    function = spec["function"]
    if not on_duckdb and not (inline and function in INLINE_MASKS):
        raise PolicyError(f"attributes.{column}.mask: the anon.{spec['function']} macro exists in DuckDB only "
                          "(anon_sql.install); compile for dialect = \"duckdb\", or drop the mask")
    if column_type and ((function == "noise" and not is_numeric(column_type)) or (function == "dnoise" and not str(
            column_type).upper().startswith(("DATE", "TIMESTAMP")))):   # else a raw binder error (hostile round 3)
        raise PolicyError(f"attributes.{column}.mask: function = {function!r} needs a "
                          f"{'numeric' if function == 'noise' else 'DATE or TIMESTAMP'} column, but {column!r} is "
                          f"{column_type}; cast it in a view over the source, or choose another mask function")
    if not on_duckdb:      # an engine that runs the macro's body inline (Spark): the same checks, the same values
        mask_expression(col(column), spec, seed=policy.seed)
        return inline_mask(col(column), spec, seed=policy.seed, column_type=column_type)
    return mask_expression(col(column), spec, seed=policy.seed, column_type=column_type)
