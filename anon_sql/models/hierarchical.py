"""t-closeness with the hierarchical ground distance (Li, Li & Venkatasubramanian 2007; ARX's default for categorical
values) over the taxonomy given to the sensitive attribute (``[attributes.X] role = "sensitive", taxonomy = ...``).

EMD = Σ over internal nodes N of (level(N) / H) · min(pos(N), neg(N)), pos / neg the summed positive / negative
"extra" (Σ_{leaves below} p − q) of N's children. numpy: udfs/risk_kernels.t_hierarchical_segments over the
classes' sparse counts; SQL: :meth:`HierarchicalTCloseness.distance_ctes`, the same sum over (class, level, node) rows, beside the other
t-closeness distances in the classes and checks views.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlglot import exp

from ..errors import PolicyError, TaxonomyError
from ..common.sqlbuild import alias, and_all, col, ident, lit, null_safe_eq
from ..data.taxonomy import Taxonomy
from ..policy.keys import REQUIRED, T_DISTANCES, any_of, choice, key, number, section, section_table
from ..udfs import risk_kernels as rk
from .base import ClassColumns, ClassStats, PrivacyModel, SQLCheck
from .registry import ModelKey, register_model_key
from .t_closeness import TCloseness

if TYPE_CHECKING:
    import pandas as pd


def resolve_taxonomy(spec: Any, attribute: str, con=None) -> Taxonomy:
    """A sensitive attribute's taxonomy: a Taxonomy, an ARX hierarchy file, a catalog or built-in name, or an inline
    ``{ kind = "mapping", mapping = {...} }``."""
    from ..catalog import store as catalog
    from ..data import builtin_taxonomies as taxonomies
    from ..data.source import is_path
    from ..data.taxonomy import build_taxonomy, from_arx_csv

    if isinstance(spec, Taxonomy):
        return spec
    if isinstance(spec, dict):
        try:
            return build_taxonomy(f"{attribute}.sensitive", spec, None)
        except (TypeError, ValueError, KeyError) as err:
            raise PolicyError(f"sensitive attribute {attribute!r}: inline taxonomy {spec!r}: {err}") from None
    if isinstance(spec, str):
        if is_path(spec):
            return from_arx_csv(spec)
        tax = catalog.load_taxonomy(con, spec) if con is not None else None
        tax = tax or taxonomies.load_builtin_taxonomy(spec)
        if tax is not None:
            return tax
    raise PolicyError(f"sensitive attribute {attribute!r}: taxonomy {spec!r} is not an ARX hierarchy file, a "
                      "catalog or built-in taxonomy, or an inline mapping")


def taxonomy_nodes(taxonomy: Taxonomy, labels, attribute: str) -> list[np.ndarray]:
    """Per level, the node code of each value (its ancestor at that level); every value must be a leaf."""
    import pandas as pd
    index = pd.Index(taxonomy.levels["level0"])
    text = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in labels]
    pos = index.get_indexer(text)
    if (pos < 0).any():
        missing = [t for t, p in zip(text, pos) if p < 0][:10]
        raise TaxonomyError(f"taxonomy {taxonomy.name!r} does not cover value(s) {missing} of {attribute!r}")
    nodes = []
    for j in range(taxonomy.height + 1):
        codes, _ = pd.factorize(taxonomy.levels[f"level{j}"])
        nodes.append(np.asarray(codes, dtype=np.int64)[pos])
    return nodes


class HierarchicalTCloseness(TCloseness):
    """EMD with the hierarchical distance to the table's distribution is at most t."""

    portable = False

    def __init__(self, attribute: str, t: float, taxonomy: Taxonomy):
        super().__init__(attribute, t, "hierarchical")
        if taxonomy.height < 1:
            raise PolicyError(f"hierarchical t-closeness on {attribute!r} needs a taxonomy with levels above the "
                              f"values ({taxonomy.name!r} has none)")
        self.taxonomy = taxonomy

    def measure(self, stats: ClassStats) -> np.ndarray:
        sc = stats.sensitive[self.attribute]
        if sc.labels is None:
            raise PolicyError(f"{self.describe()} needs the sensitive values of each code (SensitiveCounts.labels)")
        q = sc.global_freq / sc.global_freq.sum()
        nodes = taxonomy_nodes(self.taxonomy, sc.labels, self.attribute)
        return rk.t_hierarchical_segments(sc.cnt, sc.cls, stats.n_classes, sc.val, q, nodes)

    def min_ground_distance(self, n_values: int) -> float:
        """Two different leaves are at least 1 / H apart (siblings: their common parent is at level 1)."""
        return 1.0 / self.taxonomy.height

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        """As TCloseness's, with a NULL distance (a value outside the taxonomy) failing instead of passing."""
        out = super().sql_checks(cols)
        for chk in out:
            chk.ok = exp.Coalesce(this=chk.ok, expressions=[exp.false()])
        return out

    def describe(self) -> str:
        return f"t-closeness (t = {self.t}, hierarchical distance over {self.taxonomy.name!r}) on {self.attribute}"

    # -- SQL ----------------------------------------------------------------------------------------------------
    def _map_rows(self) -> exp.Expression:
        """VALUES (leaf, lvl, node, parent): every leaf's ancestor at each level and that node's parent."""
        import pandas as pd
        lv = self.taxonomy.levels
        h = self.taxonomy.height
        rows = []
        for j in range(h + 1):
            parent = lv[f"level{j + 1}"] if j < h else pd.Series([None] * len(lv))
            for leaf, node, par in zip(lv["level0"], lv[f"level{j}"], parent):
                rows.append(exp.Tuple(expressions=[lit(leaf), lit(j), lit(f"{j}:{node}"),
                                                   lit(None if par is None else f"{j + 1}:{par}")]))
        return exp.Values(expressions=rows, alias=exp.TableAlias(
            this=ident("m"), columns=[ident("leaf"), ident("lvl"), ident("node"), ident("parent")]))

    def distance_ctes(self, i: int, keys: list[str], sv: str, gq: str) -> list[tuple[str, exp.Expression]]:
        """CTEs ending in ``__tco{i}`` (keys, ``__tclose__<attribute>``) from ``sv`` (keys, __v, __c, __m) and
        ``gq`` (__v, __q). A class whose values are not all leaves gets NULL (its check fails)."""
        sa, h = self.attribute, self.taxonomy.height
        mp, qn, pn, ex, ps, out = (f"__hm{i}", f"__hq{i}", f"__hp{i}", f"__hx{i}", f"__hs{i}", f"__tco{i}")
        k = [col(c) for c in keys]
        leaf_eq = exp.EQ(this=exp.Cast(this=col("__v", "x"), to=exp.DataType.build("VARCHAR")),
                         expression=col("leaf", "m"))
        ctes: list[tuple[str, exp.Expression]] = [
            (mp, exp.select(exp.Star()).from_(self._map_rows())),
            (qn, exp.select(col("lvl", "m"), col("node", "m"), alias(exp.Sum(this=col("__q", "x")), "__qn"))
             .from_(exp.Table(this=ident(gq), alias=exp.TableAlias(this=ident("x"))))
             .join(exp.Table(this=ident(mp), alias=exp.TableAlias(this=ident("m"))), on=leaf_eq)
             .group_by(col("lvl", "m"), col("node", "m"))),
            (pn, exp.select(*[col(c, "x") for c in keys], col("lvl", "m"), col("node", "m"), col("parent", "m"),
                            alias(exp.Sum(this=exp.Div(this=col("__c", "x"), expression=col("__m", "x"))), "__pn"))
             .from_(exp.Table(this=ident(sv), alias=exp.TableAlias(this=ident("x"))))
             .join(exp.Table(this=ident(mp), alias=exp.TableAlias(this=ident("m"))), on=leaf_eq)
             .group_by(*[col(c, "x") for c in keys], col("lvl", "m"), col("node", "m"), col("parent", "m"))),
        ]
        extra = exp.Sub(this=col("__pn", "p"), expression=col("__qn", "q"))
        ctes.append((ex, exp.select(*[col(c, "p") for c in keys], col("lvl", "p"), col("node", "p"),
                                    col("parent", "p"), alias(col("__pn", "p"), "__pn"), alias(extra, "__ex"))
                     .from_(exp.Table(this=ident(pn), alias=exp.TableAlias(this=ident("p"))))
                     .join(exp.Table(this=ident(qn), alias=exp.TableAlias(this=ident("q"))),
                           on=and_all([exp.EQ(this=col("lvl", "p"), expression=col("lvl", "q")),
                                       exp.EQ(this=col("node", "p"), expression=col("node", "q"))]))))
        pos = exp.Sum(this=exp.Greatest(this=col("__ex"), expressions=[lit(0.0)]))
        ctes.append((ps, exp.select(*k, alias(exp.Add(this=col("lvl"), expression=lit(1)), "lvl"),
                                    alias(col("parent"), "node"), alias(pos, "__pos"))
                     .from_(ex).where(exp.Not(this=exp.Is(this=col("parent"), expression=exp.null())))
                     .group_by(*[c.copy() for c in k], col("lvl"), col("parent"))))
        on = and_all([*[null_safe_eq(col(c, "s"), col(c, "e")) for c in keys],
                      exp.EQ(this=col("lvl", "s"), expression=col("lvl", "e")),
                      exp.EQ(this=col("node", "s"), expression=col("node", "e"))])
        cost = exp.Mul(this=exp.Div(this=exp.Cast(this=col("lvl", "s"), to=exp.DataType.build("DOUBLE")),
                                    expression=lit(float(h))),
                       expression=exp.Least(this=col("__pos", "s"),
                                            expressions=[exp.Sub(this=col("__pos", "s"),
                                                                 expression=col("__ex", "e"))]))
        per_class = (exp.select(*[col(c, "s") for c in keys], alias(exp.Sum(this=cost), "__emd"))
                     .from_(exp.Table(this=ident(ps), alias=exp.TableAlias(this=ident("s"))))
                     .join(exp.Table(this=ident(ex), alias=exp.TableAlias(this=ident("e"))), on=on)
                     .group_by(*[col(c, "s") for c in keys]))
        mass = (exp.select(*k, alias(exp.Sum(this=col("__pn")), "__mass")).from_(ex)
                .where(exp.EQ(this=col("lvl"), expression=lit(0))).group_by(*[c.copy() for c in k]))
        covered = exp.LT(this=exp.Abs(this=exp.Sub(this=col("__mass", "a"), expression=lit(1.0))),
                         expression=lit(1e-9))
        value = exp.If(this=covered, true=exp.Coalesce(this=col("__emd", "b"), expressions=[lit(0.0)]),
                       false=exp.null())
        ctes.append((out, exp.select(*[col(c, "a") for c in keys], alias(value, f"__tclose__{sa}"))
                     .from_(exp.Subquery(this=mass, alias=exp.TableAlias(this=ident("a"))))
                     .join(exp.Subquery(this=per_class, alias=exp.TableAlias(this=ident("b"))),
                           on=and_all([null_safe_eq(col(c, "a"), col(c, "b")) for c in keys]), join_type="left")))
        return ctes


# -- the [privacy] key of t-closeness (both distances: this module extends TCloseness) ---------------------------
T_CLOSENESS = section("privacy.t_closeness",
                      key("t", number(gt=0, le=1), "the largest distance allowed", REQUIRED),
                      key("distance", choice(*T_DISTANCES), "ground distance: equal ½Σ|p−q|, ordered (for "
                          "ordinal values), or hierarchical over the sensitive attribute's taxonomy (Li et al. 2007: "
                          "Σ_N (level(N)/H)·min(pos, neg); a value outside the taxonomy fails)", "equal"))


def build_t_closeness(spec, attribute, context) -> list[PrivacyModel]:
    """t-closeness on ``attribute`` (a number is the ``t`` of the equal distance); the hierarchical distance reads
    the sensitive attribute's taxonomy."""
    spec = spec if isinstance(spec, dict) else {"t": spec}
    distance = spec.get("distance", "equal")
    if distance != "hierarchical":
        return [TCloseness(attribute, spec["t"], distance)]
    spec_tax = context.policy.attributes[attribute].taxonomy
    if spec_tax is None:
        raise PolicyError(f"t_closeness distance 'hierarchical' needs a taxonomy for sensitive attribute "
                          f"{attribute!r}: [attributes.{attribute}] role = \"sensitive\", taxonomy = \"file.csv\"")
    return [HierarchicalTCloseness(attribute, spec["t"], resolve_taxonomy(spec_tax, attribute, context.con))]


register_model_key(ModelKey(
    key("t_closeness", any_of(number(gt=0, le=1), section_table(T_CLOSENESS)),
        "t-closeness: EMD between a class's and the table's sensitive distribution <= t"), build=build_t_closeness,
    sections=(("`t_closeness = { … }` (or a number: the `t`)", T_CLOSENESS),),
    classes=(TCloseness, HierarchicalTCloseness),
    examples=(0.4, {"t": 0.3, "distance": "ordered"}, {"t": 0.4, "distance": "hierarchical"})))
