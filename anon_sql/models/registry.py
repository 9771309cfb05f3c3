"""The model registry: every ``[privacy]`` key of a privacy model, declared by the module of its model family.

A family's module declares one :class:`ModelKey` (its key, type and doc sections, how a policy's setting becomes
model instances, the classes it builds and example settings for the model battery) and registers it; the policy
schema reads the keys through :func:`anon_sql.policy.keys.register_model_catalog` (the policy layer sits below this
one) and :func:`build_models` builds a policy's models from them. Adding a model is one module plus its test, and its
module's name in :data:`MODULES`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..policy.keys import ModelKeyInfo, register_model_catalog
from .base import PrivacyModel
from .k_anonymity import GroupKAnonymity, KAnonymity
from .wildcard_k import WildcardKAnonymity

# the model families' modules, in the order of their [privacy] keys (docs/policy.md and the checks' order);
# t-closeness's key is declared by models/hierarchical.py, which knows both its distances' classes
MODULES = ("l_diversity", "hierarchical", "simpson", "theta", "p_sensitive", "distribution", "population", "safepub")


@dataclass
class BuildContext:
    """What building a model may read besides its setting: the policy, a connection (tables the setting names) and
    the populations already read (k-map and δ-presence on one population share it)."""

    policy: Any
    con: Any = None
    populations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelKey(ModelKeyInfo):
    """One ``[privacy]`` key and its models: ``build(setting, attribute, context)`` → the models of a given setting
    (``attribute``: the sensitive attribute, None for a whole-table key); ``classes``: every class it can build;
    ``examples``: settings the model battery (tests/contracts/test_model_contract.py) builds and checks."""

    build: Callable[[Any, str | None, BuildContext], list[PrivacyModel]] | None = None
    classes: tuple[type[PrivacyModel], ...] = ()
    examples: tuple[Any, ...] = ()


REGISTRY: dict[str, ModelKey] = {}


def register_model_key(entry: ModelKey) -> ModelKey:
    """Add a model family's key to the registry (called by its module on import)."""
    REGISTRY[entry.key.name] = entry
    return entry


def model_keys() -> list[ModelKey]:
    """Every registered model key: those of :data:`MODULES` in its order (importing them), then any other."""
    for name in MODULES:
        importlib.import_module(f"{__package__}.{name}")
    order = {n: i for i, n in enumerate(MODULES)}
    ranked = sorted(enumerate(REGISTRY.values()),
                    key=lambda e: (order.get(e[1].build.__module__.rsplit(".", 1)[-1], len(order)), e[0]))
    return [entry for _, entry in ranked]


def model_classes() -> list[type[PrivacyModel]]:
    """Every registered model class (k-anonymity and the ``<S, k>`` rules first)."""
    return list(dict.fromkeys([KAnonymity, GroupKAnonymity, *(c for m in model_keys() for c in m.classes)]))


def model_class(name: str) -> type[PrivacyModel]:
    """The model class called ``name`` (its ``name`` attribute: ``k_anonymity``, ``theta_feasible``, ...), among
    every model the package defines (the registered ones and the guides methods partition with)."""
    model_keys()                          # imports every family's module
    found: dict[str, type[PrivacyModel]] = {}
    stack = [PrivacyModel]
    while stack:
        cls = stack.pop(0)
        found.setdefault(cls.name, cls)   # a subclass of the same name (hierarchical t-closeness) comes later
        stack += cls.__subclasses__()
    if name not in found:
        raise KeyError(f"no privacy model is called {name!r} (models: {', '.join(sorted(found))})")
    return found[name]


def make_model(name: str, *args: Any, **kwargs: Any) -> PrivacyModel:
    """A model built by its ``name``: how a method makes the constraints it partitions or splits with (k-anonymity
    of a given k, θ-feasibility, slicing's guide) without importing a model class."""
    return model_class(name)(*args, **kwargs)


def build_models(policy, con=None) -> list[PrivacyModel]:
    """The models of a policy: k-anonymity first, then one per sensitive attribute and model key, then the
    whole-table keys (k-map, δ-presence), then the ``<S, k>`` group rules in their order; ``con`` lets a model read
    tables it names (p-sensitivity's category table)."""
    p = policy.privacy
    context = BuildContext(policy, con)
    keys = model_keys()
    models: list[PrivacyModel] = [KAnonymity(p.k if p.k is not None else 1)]
    for sa in policy.sensitive:
        for entry in keys:
            setting = p.setting(entry.key.name)
            if entry.per_attribute and setting is not None:
                models += entry.build(setting, sa, context)
    for entry in keys:
        setting = p.setting(entry.key.name)
        if not entry.per_attribute and setting is not None:
            models += entry.build(setting, None, context)
    models += [GroupKAnonymity(r.quasi, r.k, j) for j, r in enumerate(p.requirements)]
    if policy.method == "local_suppression" and p.k is not None:   # its suppressed cells are wildcards
        models.append(WildcardKAnonymity(p.k, policy.quasi))
    return models


register_model_catalog(model_keys)
