"""Anonymization methods, looked up by the policy's ``method`` name."""
from __future__ import annotations

from ..errors import PolicyError
from .base import AssignmentPlan, LevelPlan, Method, MethodContext, Plan
from .levels import FixedLevels

REGISTRY: dict[str, type[Method]] = {"levels": FixedLevels}


def register(cls: type[Method]) -> type[Method]:
    """Add a method class to the registry under ``cls.name`` (usable as a decorator)."""
    REGISTRY[cls.name] = cls
    return cls


def get_method(name: str, params: dict) -> Method:
    load_all()
    if name not in REGISTRY:
        raise PolicyError(f"unknown method {name!r}; available: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](**(params or {}))


def load_all() -> None:
    """Import the method modules that register themselves (kept lazy so start-up stays fast)."""
    import importlib

    for module in ("search", "mondrian", "theta", "fixed_interval", "slicing", "attribute_focused", "adaptive", "upa"):
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{module}":
                raise


__all__ = ["REGISTRY", "register", "get_method", "Method", "MethodContext", "LevelPlan", "AssignmentPlan", "Plan"]
