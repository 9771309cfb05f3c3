"""What a released value means: a digest of every taxonomy a release generalized through (issue 28.3).

A level plan stores level numbers; level 2 of ``age`` means whatever the taxonomy says at level 2 *today*. The
version row keeps, per quasi-identifier, the taxonomy's name and a digest of what defines its values, so that
``REFRESH ... KEEP PLAN`` can refuse when a taxonomy was rebuilt (the same level would release other bands) and
``plan_changed`` can say when two versions' values are not comparable.

* a named taxonomy (catalog, built-in, ARX CSV file, inline ``file`` or ``mapping``): the digest of its content
  (:meth:`anon_sql.data.taxonomy.Taxonomy.fingerprint`: every leaf's value at every level);
* an inline builder that derives its leaves from the data (``interval``, ``mask``, ``date``, ``top``): the digest
  of its spec. Such a taxonomy gains leaves with new data, but a value it releases (``[20-24]``, ``12***``) is
  defined by the spec alone, so new data never changes what an existing value means.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from ..data.taxonomy import Taxonomy, needs_values
from ..policy.model import Policy


def taxonomy_digests(policy: Policy, taxonomies: dict[str, Taxonomy]) -> dict[str, dict[str, str]]:
    """Quasi-identifier → ``{"taxonomy": name or "inline", "digest": hex}`` for each QI with a taxonomy."""
    out: dict[str, dict[str, str]] = {}
    for qi, tax in sorted(taxonomies.items()):
        attr = policy.attributes.get(qi)
        spec = attr.taxonomy if attr is not None else None
        if isinstance(spec, dict) and needs_values(spec):
            text = json.dumps(spec, sort_keys=True, default=str)
            out[qi] = {"taxonomy": "inline", "digest": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        else:
            out[qi] = {"taxonomy": spec if isinstance(spec, str) else "inline", "digest": tax.fingerprint()}
    return out


def parsed(recorded: Any) -> dict | None:
    """Recorded digests (JSON text or a dict) as a dict; None when absent or unreadable (an edited catalog: then
    nothing is known about what the values meant)."""
    if isinstance(recorded, dict):
        return recorded
    try:
        value = json.loads(recorded) if recorded else None
    except ValueError:
        return None
    return value if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()) else None


def changed(before: Any, after: dict[str, dict[str, str]]) -> list[str]:
    """The quasi-identifiers whose taxonomy digest differs between ``before`` (JSON text or dict, None when not
    recorded) and ``after``, each as ``"qi (taxonomy t)"``; every QI of ``after`` when nothing was recorded."""
    old = parsed(before)
    if old is None:
        return [f"{qi} (taxonomy {d['taxonomy']!r}: no digest recorded)" for qi, d in sorted(after.items())]
    out = []
    for qi in sorted(set(old) | set(after)):
        a, b = old.get(qi), after.get(qi)
        if a != b:
            name = (b or a)["taxonomy"]
            out.append(f"{qi} (taxonomy {name!r})")
    return out


__all__ = ["taxonomy_digests", "parsed", "changed"]
