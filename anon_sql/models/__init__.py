"""Privacy models: one class per model, one module per family (k and ``<S, k>`` rules, l-diversity, t-closeness,
Simpson, θ, p-sensitivity, the distribution models, slicing), built from a policy's ``[privacy]`` table (its keys,
types and ranges are declared and checked in anon_sql/policy/keys.py). The contract is models/base.py."""
from __future__ import annotations

import math

from ..errors import PolicyError
from .base import ClassColumns, ClassStats, PrivacyModel, SensitiveCounts, SQLCheck, find, largest_is_worst
from .distribution import AlphaKAnonymity, BetaLikeness, DeltaDisclosure
from .hierarchical import HierarchicalTCloseness, resolve_taxonomy
from .k_anonymity import GroupKAnonymity, KAnonymity, group_rules
from .l_diversity import DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity
from .p_sensitive import PSensitivity
from .population import DeltaPresence, KMap, Population, PopulationModel
from .safepub import SafePub
from .simpson import SimpsonDiversity
from .slicing import SlicingGuide, SlicingLDiversity
from .t_closeness import TCloseness
from .theta import ThetaCapacity, ThetaFeasible, ThetaSensitivity
from .wildcard_k import WildcardKAnonymity


def build_models(policy, con=None) -> list[PrivacyModel]:
    """The models of a policy: k-anonymity first, then one per sensitive attribute and model, then the ``<S, k>``
    group rules in their order; ``con`` lets a model read tables it names (p-sensitivity's category table)."""
    p = policy.privacy
    models: list[PrivacyModel] = [KAnonymity(p.k if p.k is not None else 1)]
    for sa in policy.sensitive:
        if p.l_diversity:
            kind = p.l_diversity.get("kind", "distinct")
            l = p.l_diversity["l"]
            if kind == "distinct":
                models.append(DistinctLDiversity(sa, l))
            elif kind == "entropy":
                models.append(EntropyLDiversity(sa, l))
            elif kind == "recursive":
                models.append(RecursiveCLDiversity(sa, p.l_diversity["c"], l))
            elif kind == "slicing":   # a whole-table requirement, checked over the sliced release
                models.append(SlicingLDiversity(sa, l))
        if p.t_closeness is not None:
            spec = p.t_closeness if isinstance(p.t_closeness, dict) else {"t": p.t_closeness}
            distance = spec.get("distance", "equal")
            if distance == "hierarchical":
                spec_tax = policy.attributes[sa].taxonomy
                if spec_tax is None:
                    raise PolicyError(f"t_closeness distance 'hierarchical' needs a taxonomy for sensitive attribute "
                                      f"{sa!r}: [attributes.{sa}] role = \"sensitive\", taxonomy = \"file.csv\"")
                models.append(HierarchicalTCloseness(sa, spec["t"], resolve_taxonomy(spec_tax, sa, con)))
            else:
                models.append(TCloseness(sa, spec["t"], distance))
        if p.simpson:
            models.append(SimpsonDiversity(sa, p.simpson.get("diversity"), p.simpson.get("evenness")))
        if p.theta:
            models.append(ThetaSensitivity(sa, p.theta["mu"]))
        if p.p_sensitive is not None:
            models.append(PSensitivity.from_policy(sa, p.p_sensitive, con))
        if p.alpha is not None:
            models.append(AlphaKAnonymity(sa, p.alpha))
        if p.beta_likeness is not None:
            models.append(BetaLikeness(sa, p.beta_likeness["beta"], p.beta_likeness.get("kind", "basic") == "enhanced"))
        if p.delta_disclosure is not None:
            spec = p.delta_disclosure if isinstance(p.delta_disclosure, dict) else {"delta": p.delta_disclosure}
            models.append(DeltaDisclosure(sa, spec["delta"], 2.0 if str(spec.get("log", "e")) == "2" else math.e))
    populations: dict[str, Population] = {}
    if p.k_map is not None:
        pop = populations.setdefault(p.k_map["population"], Population(p.k_map["population"]))
        models.append(KMap(p.k_map["k"], pop))
    if p.delta_presence is not None:
        spec = p.delta_presence
        pop = populations.setdefault(spec["population"], Population(spec["population"]))
        models.append(DeltaPresence(spec.get("delta_min", 0.0), spec["delta_max"], pop))
    models += [GroupKAnonymity(r.quasi, r.k, j) for j, r in enumerate(p.requirements)]
    if p.differential_privacy is not None:
        spec = p.differential_privacy
        models.append(SafePub(spec["epsilon"], spec["delta"], spec.get("search_share", 0.0)))
    if policy.method == "local_suppression" and p.k is not None:   # its suppressed cells are wildcards
        models.append(WildcardKAnonymity(p.k, policy.quasi))
    return models


def population_models(models) -> list[PopulationModel]:
    """The models that compare classes with a population table (k-map, δ-presence)."""
    return [m for m in models if getattr(m, "needs_population", False)]


__all__ = ["build_models", "find", "group_rules", "PrivacyModel", "ClassStats", "SensitiveCounts", "SQLCheck",
           "ClassColumns", "KAnonymity", "GroupKAnonymity", "SlicingGuide", "SlicingLDiversity", "ThetaFeasible",
           "ThetaCapacity", "DistinctLDiversity", "EntropyLDiversity", "RecursiveCLDiversity", "TCloseness",
           "SimpsonDiversity", "ThetaSensitivity", "PSensitivity", "AlphaKAnonymity", "BetaLikeness", "DeltaDisclosure",
           "HierarchicalTCloseness", "KMap", "DeltaPresence", "Population", "PopulationModel", "population_models",
           "SafePub", "largest_is_worst", "WildcardKAnonymity"]
