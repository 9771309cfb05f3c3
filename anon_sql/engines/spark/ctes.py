"""Common table expressions that a statement reads more than once, hoisted out as views of their own.

Spark inlines every CTE at each reference, so a CTE read twice is computed twice — a second scan of the data under
it (the checks view's per-class aggregate is read three times; slicing's risk query more). The Spark engine caches
each hoisted CTE as a lazily cached temporary view, so it is computed once, when first read.
"""
from __future__ import annotations

from itertools import count
from typing import Callable, Iterator, NamedTuple

from sqlglot import exp

from ...common.sqlbuild import ident


class Hoisted(NamedTuple):
    """A CTE moved out of its statement: the view's name, its query, and whether it was marked ``MATERIALIZED``."""
    name: str
    body: exp.Expression
    materialized: bool


def hoist_shared(query: exp.Expression, owner: str, fresh: Callable[[str], str] = str) -> list[Hoisted]:
    """Move every CTE of ``query`` read at least twice in its scope, or marked ``MATERIALIZED``, out of it (in
    place): each becomes ``<owner>__cte<n>`` (passed through ``fresh``, which may rename it away from existing
    objects) and its references read that name (aliased as the CTE was). Returns them in creation order (a hoisted
    CTE after those it reads). The earlier CTEs of the same ``WITH`` that a hoisted body reads go with it; a CTE that
    reads a CTE of an enclosing ``WITH`` stays where it is (its mark dropped: Spark has no ``MATERIALIZED``)."""
    out: list[Hoisted] = []
    _hoist(query, owner, out, count(1), fresh)
    return out


def _hoist(query: exp.Expression, owner: str, out: list[Hoisted], numbers: Iterator[int],
           fresh: Callable[[str], str]) -> None:
    for w in list(query.find_all(exp.With)):          # breadth first: enclosing WITHs before nested ones
        if w.root() is not query:
            continue                                   # inside a body hoisted (and handled) already
        scope = w.parent
        outer = {c.alias for a in _ancestors(scope) for c in a.expressions}
        for cte in list(w.expressions):
            refs = _refs(scope, cte)
            body = cte.this
            materialized = bool(cte.args.get("materialized"))
            cte.set("materialized", None)
            if len(refs) < (1 if materialized else 2) or _reads(body) & outer:
                continue
            name = fresh(f"{owner}__cte{next(numbers)}")
            deps = _deps(w, cte)
            body.pop()
            if deps:
                own = body.args.get("with_")
                body.set("with_", exp.With(expressions=[d.copy() for d in deps] + (own.expressions if own else [])))
            _hoist(body, owner, out, numbers, fresh)
            out.append(Hoisted(name, body, materialized))
            for t in refs:
                if not t.args.get("alias"):
                    t.set("alias", exp.TableAlias(this=ident(cte.alias)))
                t.set("this", ident(name))
            cte.pop()
        for cte in list(w.expressions):               # what only the hoisted bodies read
            if not _refs(scope, cte):
                cte.pop()
        if not w.expressions:
            w.pop()


def _ancestors(node: exp.Expression) -> Iterator[exp.With]:
    """The WITH clauses of the queries enclosing ``node``."""
    parent = node.parent
    while parent is not None:
        w = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if isinstance(w, exp.With):
            yield w
        parent = parent.parent


def _reads(node: exp.Expression) -> set[str]:
    return {t.name for t in node.find_all(exp.Table) if not t.args.get("db")}


def _refs(scope: exp.Expression, cte: exp.CTE) -> list[exp.Table]:
    """Tables of ``scope`` naming ``cte`` (outside its own body)."""
    return [t for t in scope.find_all(exp.Table)
            if not t.args.get("db") and t.name == cte.alias and not _inside(t, cte)]


def _inside(node: exp.Expression, ancestor: exp.Expression) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _deps(w: exp.With, cte: exp.CTE) -> list[exp.CTE]:
    """The CTEs before ``cte`` in ``w`` that its body reads, directly or through each other, in ``w``'s order."""
    earlier = w.expressions[:w.expressions.index(cte)]
    by_name = {c.alias: c for c in earlier}
    need: set[str] = set()
    todo = [cte]
    while todo:
        for name in _reads(todo.pop().this) & by_name.keys():
            if name not in need:
                need.add(name)
                todo.append(by_name[name])
    return [c for c in earlier if c.alias in need]
