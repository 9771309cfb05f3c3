"""``method = "levels"``: full-domain generalization at a level vector given in the policy."""
from __future__ import annotations

from ..errors import PolicyError
from .base import LevelPlan, Method, MethodContext


class FixedLevels(Method):
    """Generalize every quasi-identifier to ``[method_params] levels = {attr = level}`` (missing ones: level 0)."""

    name = "levels"
    reads = "nothing"

    def plan(self, ctx: MethodContext) -> LevelPlan:
        levels = dict(self.params.get("levels") or {})
        quasi = ctx.policy.quasi
        unknown = [a for a in levels if a not in quasi]
        if unknown:
            raise PolicyError(f"method_params.levels names {unknown}, which are not quasi-identifiers ({quasi})")
        out = {}
        for q in quasi:
            lvl = levels.get(q, 0)
            if not isinstance(lvl, int) or isinstance(lvl, bool) or lvl < 0:
                raise PolicyError(f"method_params.levels.{q} must be an integer >= 0, got {lvl!r}")
            tax = ctx.taxonomies.get(q)
            height = tax.height if tax is not None else 0
            if lvl > height:
                raise PolicyError(
                    f"method_params.levels.{q} = {lvl} is above the top of its taxonomy (levels 0..{height})"
                )
            out[q] = lvl
        return LevelPlan(out)
