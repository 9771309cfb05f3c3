"""Anonymization methods, looked up by the policy's ``method`` name.

Each method class declares its ``[method_params]`` keys in ``parameters`` (anon_sql.policy.keys ``key(...)``
declarations); :func:`method_parameters` collects them for the policy schema and the generated docs.
"""
from __future__ import annotations

import importlib

from ..errors import PolicyError
from ..policy.keys import Key, closest, register_method_catalog
from .base import AssignmentPlan, LevelPlan, Method, MethodContext, Plan
from .levels import FixedLevels

REGISTRY: dict[str, type[Method]] = {"levels": FixedLevels}

# method name → the module that registers it (imported only when that method is used, so start-up stays fast)
_MODULES = {"iab": "search", "exhaustive": "search", "greedy": "search", "optimal": "search", "mondrian": "mondrian",
            "theta": "theta", "fixed_interval": "fixed_interval", "slicing": "slicing",
            "attribute_focused": "attribute_focused", "adaptive": "adaptive", "upa": "upa",
            "local_suppression": "local_suppression"}


# the methods whose plans release values per row (``Method.releases_rows``: slicing's buckets, local suppression's
# cells), known here without importing their modules (slicing loads scipy): `check` asks before it compiles anything
# (tests/contracts/test_method_contract.py holds this set to the classes' flags)
ROW_RELEASING = frozenset({"slicing", "attribute_focused", "local_suppression"})


def releases_rows(name: str) -> bool:
    """Does method ``name`` release values per row (every QI insensitive in its recorded policy)? A registered class
    answers by its flag; a built-in one not imported yet, by :data:`ROW_RELEASING`."""
    cls = REGISTRY.get(name)
    return bool(cls.releases_rows) if cls is not None else name in ROW_RELEASING


def declared_release_policy(declared):
    """The policy a release of ``declared`` records, derived from its method alone (not from a plan): what
    :func:`anon_sql.runner.plan.released_policy` gives for any plan of that method. ``check`` derives the released
    policy this way from the declared one the catalog keeps, so that the QIs, groupings and models it verifies come
    from the user's policy (issue 28.8)."""
    if not releases_rows(declared.method) or not declared.quasi:
        return declared
    d = declared.to_dict()
    for q in declared.quasi:
        d["attributes"][q] = {"role": "insensitive"}
    return type(declared).from_dict(d)


def register_method(cls: type[Method]) -> type[Method]:
    """Add a method class to the registry under ``cls.name`` (usable as a decorator)."""
    REGISTRY[cls.name] = cls
    return cls


def method_names() -> list[str]:
    """Every method name, built-in ones first (nothing is imported)."""
    return ["levels", *_MODULES, *(n for n in REGISTRY if n != "levels" and n not in _MODULES)]


def method_class(name: str) -> type[Method]:
    """The class of a method (imports its module only); unknown names suggest the closest one."""
    if name not in REGISTRY and name in _MODULES:
        importlib.import_module(f"{__name__}.{_MODULES[name]}")
    if name not in REGISTRY:
        hint = closest(name, method_names())
        raise PolicyError(f"unknown method {name!r}" + (f": did you mean {hint!r}?" if hint else "")
                          + f" (methods: {', '.join(method_names())})")
    return REGISTRY[name]


def method_parameters(name: str) -> tuple[Key, ...]:
    """The ``[method_params]`` keys a method takes (its class's ``parameters``)."""
    return tuple(method_class(name).parameters)


register_method_catalog(method_names, method_parameters)


def get_method(name: str, params: dict) -> Method:
    return method_class(name)(**(params or {}))


def load_all() -> None:
    """Import every method module (for listings and the demo; a single method loads through :func:`method_class`)."""
    for module in dict.fromkeys(_MODULES.values()):
        importlib.import_module(f"{__name__}.{module}")


__all__ = ["REGISTRY", "register_method", "get_method", "method_class", "method_names", "method_parameters", "load_all",
           "Method", "MethodContext", "LevelPlan", "AssignmentPlan", "Plan", "ROW_RELEASING", "releases_rows",
           "declared_release_policy"]
