"""p-sensitive, p+-sensitive and (p, α)-sensitive k-anonymity (Truta & Vinay; Sun et al.; spec/05 §4).

``[privacy] p_sensitive = { p = 2, categories = "cats.csv", plus = true, alpha = 0.5, weights = { "1" = 0, ... } }``

* p-sensitive: every class has >= p distinct sensitive values;
* p+-sensitive (``plus``): and >= p distinct categories of the category table;
* (p, α)-sensitive (``alpha``): and the weights of the distinct categories of the class sum to >= α.

``categories`` is a CSV path (columns ``category`` and the value column), a table of the database with the same
shape, or an inline table ``{ category = [values, ...] }``. A value missing from the category table belongs to no
category (strict). Default weights (Sun et al.): categories in sorted order, the i-th of n weighs (i − 1) / (n − 1),
so the first (most sensitive) category weighs 0.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..common.sqlbuild import alias, col, func, ident, lit, render, values_table
from ..policy.keys import (REQUIRED, Boolean, ListOf, MapOf, Scalar, Text, any_of, integer, key, number, section,
                           section_table)
from .base import EPS, ClassColumns, ClassStats, PrivacyModel, SQLCheck
from .registry import ModelKey, register_model_key

def _sort_key(c: str) -> tuple:
    return (0, int(c), c) if c.lstrip("-").isdigit() else (1, 0, c)


def _read_csv(path: Path, attribute: str) -> tuple[list[tuple[str, str]], str]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise PolicyError(f"privacy.p_sensitive.categories: {str(path)!r} is empty")
    header = [h.strip() for h in rows[0]]
    return _pairs(header, rows[1:], attribute, repr(str(path)))


def _pairs(header: list[str], rows: list, attribute: str, where: str) -> tuple[list[tuple[str, str]], str]:
    """(value, category) pairs of a header + rows table, and the name of its value column."""
    if "category" not in header:
        raise PolicyError(f"privacy.p_sensitive.categories: {where} needs a column named 'category' "
                          f"(found {header})")
    value_col = attribute if attribute in header else next((h for h in header if h != "category"), None)
    if value_col is None or (attribute not in header and len(header) != 2):
        raise PolicyError(f"privacy.p_sensitive.categories: {where} needs columns category,{attribute} "
                          f"(found {header})")
    ci, vi = header.index("category"), header.index(value_col)
    return [(str(r[vi]), str(r[ci])) for r in rows if len(r) > max(ci, vi)], value_col


def load_categories(spec: Any, attribute: str, con=None) -> tuple[dict[str, str], tuple[str, str] | None]:
    """value → category from a CSV path, a table (needs ``con``) or an inline table; and (table, value column)
    when it is a table of the database (the SQL check then joins that table)."""
    if isinstance(spec, dict):
        pairs = [(str(v), str(c)) for c, values in spec.items()
                 for v in (values if isinstance(values, list) else [values])]
        table = None
    elif isinstance(spec, str) and (spec.lower().endswith(".csv") or Path(spec).is_file()):
        if not Path(spec).is_file():
            raise PolicyError(f"privacy.p_sensitive.categories: file {spec!r} does not exist")
        pairs, table = _read_csv(Path(spec), attribute)[0], None
    elif isinstance(spec, str):
        if con is None:
            raise PolicyError(f"privacy.p_sensitive.categories names table {spec!r}: reading it needs a database "
                              "connection (pass con=), or give a CSV path / inline table")
        from ..data.source import named_relation

        relation = named_relation(con, spec)     # the whole name first, then schema.table (issue 28.7)
        if relation is None:
            raise PolicyError(f"privacy.p_sensitive.categories: table {spec!r} does not exist; "
                              "create it or give a CSV path (columns category,<value>)")
        cur = con.execute(render(exp.select("*").from_(relation.copy())))
        header = [d[0] for d in cur.description]
        pairs, value_col = _pairs(header, [[str(x) for x in r] for r in cur.fetchall()], attribute, repr(spec))
        table = (relation, value_col)
    else:
        raise PolicyError("privacy.p_sensitive.categories must be a CSV path, a table name or an inline table "
                          f"{{ category = [values] }}, got {spec!r}")
    mapping: dict[str, str] = {}
    for v, c in pairs:
        if mapping.setdefault(v, c) != c:
            raise PolicyError(f"privacy.p_sensitive.categories: value {v!r} is in two categories "
                              f"({mapping[v]!r} and {c!r}); each value needs exactly one")
    return mapping, table


class PSensitivity(PrivacyModel):
    """p-sensitive k-anonymity and its p+ / (p, α) variants on one sensitive attribute (module docstring)."""

    name = "p_sensitive"
    monotone = True
    needs_sensitive = True

    def __init__(self, attribute: str, p: int, categories: dict[str, str] | None = None, plus: bool = False,
                 alpha: float | None = None, weights: dict[str, float] | None = None,
                 table: tuple[exp.Table, str] | None = None):
        self.attribute, self.p, self.plus, self.alpha = attribute, int(p), bool(plus), alpha
        self.categories, self.table = categories or {}, table
        cats = sorted(set(self.categories.values()), key=_sort_key)
        self.category_names = cats
        if alpha is not None:
            if weights is None:
                n = len(cats)
                weights = {c: (i / (n - 1) if n > 1 else 1.0) for i, c in enumerate(cats)}
            weights = {str(c): float(w) for c, w in weights.items()}
            unknown = sorted(set(weights) - set(cats))
            missing = sorted(set(cats) - set(weights))
            if unknown or missing:
                raise PolicyError(f"privacy.p_sensitive.weights must give one weight per category {cats}: "
                                  f"unknown {unknown}, missing {missing}")
        self.weights = weights
        self.portable = not (self.plus or self.alpha is not None)
        self.needs_values = not self.portable  # the compiler adds per-class value lists only for these

    @classmethod
    def from_policy(cls, attribute: str, spec: Any, con=None) -> "PSensitivity":
        """Build the model from ``privacy.p_sensitive`` (keys and types checked by the policy schema); reads the
        category table."""
        if not isinstance(spec, dict):
            spec = {"p": spec}
        p, plus, alpha = spec["p"], bool(spec.get("plus", False)), spec.get("alpha")
        if (plus or alpha is not None) and spec.get("categories") is None:
            raise PolicyError("privacy.p_sensitive with plus = true or alpha needs categories = \"file.csv\" "
                              "(columns category,<value>), a table name, or an inline { category = [values] }")
        mapping, table = (load_categories(spec["categories"], attribute, con) if spec.get("categories") is not None
                          else ({}, None))
        return cls(attribute, p, mapping, plus, alpha, spec.get("weights"), table)

    # -- numpy ---------------------------------------------------------------------------------------------------
    def _category_pairs(self, stats: ClassStats) -> tuple[np.ndarray, np.ndarray]:
        sc = stats.sensitive[self.attribute]
        if sc.labels is None:
            raise PolicyError(f"{self.describe()} needs the sensitive values of each code (SensitiveCounts.labels)")
        index = {c: i for i, c in enumerate(self.category_names)}
        cat_of_value = np.array([index.get(self.categories.get(None if v is None else str(v)), -1)
                                 for v in sc.labels], dtype=np.int64)
        cat = cat_of_value[sc.val]
        keep = cat >= 0
        pair = np.unique(sc.cls[keep].astype(np.int64) * max(len(index), 1) + cat[keep])
        return pair // max(len(index), 1), pair % max(len(index), 1)

    def values(self, stats: ClassStats) -> dict[str, np.ndarray]:
        """Per class: distinct values, and (when configured) distinct categories and category weight."""
        sc = stats.sensitive[self.attribute]
        out = {"distinct": np.bincount(sc.cls, minlength=stats.n_classes).astype(float)}
        if self.plus or self.alpha is not None:
            cls, cat = self._category_pairs(stats)
            out["categories"] = np.bincount(cls, minlength=stats.n_classes).astype(float)
            if self.alpha is not None:
                w = np.array([self.weights[c] for c in self.category_names])
                out["weight"] = np.bincount(cls, weights=w[cat], minlength=stats.n_classes)
        return out

    def check(self, stats: ClassStats) -> np.ndarray:
        v = self.values(stats)
        ok = v["distinct"] >= self.p
        if self.plus:
            ok &= v["categories"] >= self.p
        if self.alpha is not None:
            ok &= v["weight"] >= self.alpha - EPS
        return ok

    def measure(self, stats: ClassStats) -> np.ndarray:
        v = self.values(stats)
        return v["categories"] if self.plus else v["distinct"]

    # -- SQL -----------------------------------------------------------------------------------------------------
    def _category_relation(self) -> exp.Expression:
        """(value, category) rows as text: the named table, or inline VALUES."""
        if self.table is not None:
            relation, value_col = self.table     # the table its name resolved to when the model was built
            text = exp.DataType.build("VARCHAR")
            q = exp.select(alias(exp.Cast(this=col(value_col), to=text), "__val"),
                           alias(exp.Cast(this=col("category"), to=text.copy()), "__cat")).from_(relation.copy())
            return exp.Subquery(this=q, alias=exp.TableAlias(this=ident("pc")))
        rows = sorted(self.categories.items()) or [("", "")]
        return values_table(rows, ["__val", "__cat"], "pc")

    def _matching_categories(self, cols: ClassColumns) -> exp.Select:
        contains = func("list_contains", cols.ref(f"__values__{self.attribute}"), col("__val", "pc"))
        return exp.select(col("__cat", "pc")).from_(self._category_relation()).where(contains)

    def sql_checks(self, cols: ClassColumns) -> list[SQLCheck]:
        sa = self.attribute
        d = cols.distinct(sa)
        out = [SQLCheck(f"p_sensitive__{sa}", d, exp.GTE(this=d, expression=lit(self.p)),
                        f"distinct values >= {self.p} on {sa}")]
        if self.plus:
            inner = self._matching_categories(cols)
            n_cat = exp.Subquery(this=exp.select(exp.Count(this=exp.Distinct(expressions=[col("__cat")])))
                                 .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("m")))))
            out.append(SQLCheck(f"p_plus__{sa}", n_cat, exp.GTE(this=n_cat.copy(), expression=lit(self.p)),
                                f"distinct categories >= {self.p} on {sa}"))
        if self.alpha is not None:
            w_rel = values_table(sorted(self.weights.items()), ["__cat", "__w"], "pw")
            in_class = exp.In(this=col("__cat", "pw"), query=exp.Subquery(this=self._matching_categories(cols)))
            total = exp.Subquery(this=exp.select(exp.Coalesce(this=exp.Sum(this=col("__w", "pw")),
                                                              expressions=[lit(0.0)]))
                                 .from_(w_rel).where(in_class))
            out.append(SQLCheck(f"p_alpha__{sa}", total,
                                exp.GTE(this=total.copy(), expression=lit(self.alpha - EPS)),
                                f"category weight >= {self.alpha} on {sa}"))
        return out

    def describe(self) -> str:
        kind = "p+-sensitivity" if self.plus else "p-sensitivity"
        if self.alpha is not None:
            kind = f"(p, α)-sensitivity (α = {self.alpha})" + (" with p+" if self.plus else "")
        return f"{kind} (p = {self.p}) on {self.attribute}"


__all__ = ["PSensitivity", "load_categories"]


# -- the [privacy] key --------------------------------------------------------------------------------------------
P_SENSITIVE = section("privacy.p_sensitive",
                      key("p", integer(ge=1), "distinct sensitive values (and categories with `plus`) per class",
                          REQUIRED),
                      key("categories", any_of(Text(what="path or table name"),
                                               MapOf(any_of(ListOf(Scalar()), Scalar()), "category")),
                          "category of each value: a CSV path (columns category,<value>), a table, or inline "
                          "{ category = [values] }"),
                      key("plus", Boolean(), "p+-sensitivity: also >= p distinct categories", False),
                      key("alpha", number(ge=0), "(p, α)-sensitivity: category weights of a class sum to >= α"),
                      key("weights", MapOf(number(), "category"), "weight per category (default (i−1)/(n−1))"))

register_model_key(ModelKey(
    key("p_sensitive", any_of(integer(ge=1), section_table(P_SENSITIVE)), "p-sensitive, p+-sensitive, (p, α)-sensitive "
        "k-anonymity (an integer is { p = … })"),
    build=lambda spec, attribute, context: [PSensitivity.from_policy(attribute, spec, context.con)],
    sections=(("`p_sensitive = { … }` (or an integer: the `p`)", P_SENSITIVE),), classes=(PSensitivity,),
    examples=(2, {"p": 2, "plus": True, "categories": {"low": ["a", "b"], "high": ["c", "d", "e", "f"]}},
              {"p": 1, "alpha": 0.5, "categories": {"low": ["a", "b"], "mid": ["c", "d"], "high": ["e", "f"]}})))
