"""Privacy models: one class per model, one module per family (k and ``<S, k>`` rules, l-diversity, t-closeness,
Simpson, θ, p-sensitivity, the distribution models, slicing), built from a policy's ``[privacy]`` table. Each family's
module declares its ``[privacy]`` key (type, range, docs) and how a setting becomes models in the registry
(models/registry.py), which the policy schema reads. The contract is models/base.py."""
from __future__ import annotations

from .base import ClassColumns, ClassStats, PrivacyModel, SensitiveCounts, SQLCheck, find, largest_is_worst, requirement_texts
from .registry import REGISTRY, ModelKey, build_models, make_model, model_class, model_classes, model_keys
from .distribution import AlphaKAnonymity, BetaLikeness, DeltaDisclosure
from .hierarchical import HierarchicalTCloseness, resolve_taxonomy
from .k_anonymity import GroupKAnonymity, KAnonymity, group_rules
from .l_diversity import DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity
from .p_sensitive import PSensitivity
from .population import DeltaPresence, KMap, Population, PopulationModel
from .safepub import SafePub
from .simpson import SimpsonDiversity
from .slicing import SlicingGuide, SlicingLDiversity
from .t_closeness import TCloseness, equal_distance
from .theta import ThetaCapacity, ThetaFeasible, ThetaSensitivity
from .wildcard_k import WildcardKAnonymity


def population_models(models) -> list[PopulationModel]:
    """The models that compare classes with a population table (k-map, δ-presence)."""
    return [m for m in models if getattr(m, "needs_population", False)]


__all__ = ["build_models", "find", "group_rules", "PrivacyModel", "ClassStats", "SensitiveCounts", "SQLCheck",
           "ClassColumns", "KAnonymity", "GroupKAnonymity", "SlicingGuide", "SlicingLDiversity", "ThetaFeasible",
           "ThetaCapacity", "DistinctLDiversity", "EntropyLDiversity", "RecursiveCLDiversity", "TCloseness",
           "SimpsonDiversity", "ThetaSensitivity", "PSensitivity", "AlphaKAnonymity", "BetaLikeness", "DeltaDisclosure",
           "HierarchicalTCloseness", "KMap", "DeltaPresence", "Population", "PopulationModel", "population_models",
           "largest_is_worst", "requirement_texts", "REGISTRY", "ModelKey", "model_keys", "model_classes",
           "model_class", "make_model", "equal_distance", "SafePub", "WildcardKAnonymity"]
