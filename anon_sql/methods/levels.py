"""``method = "levels"``: full-domain generalization at a level vector given in the policy."""
from __future__ import annotations

from ..errors import PolicyError
from ..policy.keys import MapOf, integer, key
from .base import LevelPlan, Method, MethodContext


class FixedLevels(Method):
    """Generalize every quasi-identifier to ``[method_params] levels = {attr = level}`` (missing ones: level 0)."""

    name = "levels"
    reads = "nothing"
    counts_units = True   # the compiler's classes count people (docs/units.md)
    varying_units = True  # with QIs varying inside units, by signatures (compiler/signature.py)
    parameters = (key("levels", MapOf(integer(ge=0), "qi"), "generalization level per quasi-identifier "
                      "(0 = original; missing ones: 0), e.g. { age = 2, zip = 1 }"),)

    def plan(self, ctx: MethodContext) -> LevelPlan:
        levels = dict(self.params.get("levels") or {})
        quasi = ctx.policy.quasi
        unknown = [a for a in levels if a not in quasi]
        if unknown:
            raise PolicyError(f"method_params.levels names {unknown}, which are not quasi-identifiers ({quasi})")
        out = {}
        for q in quasi:
            lvl = levels.get(q, 0)
            tax = ctx.taxonomies.get(q)
            height = tax.height if tax is not None else 0
            if lvl > height:
                raise PolicyError(
                    f"method_params.levels.{q} = {lvl} is above the top of its taxonomy (levels 0..{height})"
                )
            out[q] = lvl
        return LevelPlan(out)
