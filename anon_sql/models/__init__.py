"""Privacy models: one class per model, built from a policy's ``[privacy]`` table."""
from __future__ import annotations

import math

from ..errors import PolicyError
from .base import ClassColumns, ClassStats, PrivacyModel, SensitiveCounts, SQLCheck
from .distribution import AlphaKAnonymity, BetaLikeness, DeltaDisclosure
from .hierarchical import HierarchicalTCloseness, resolve_taxonomy
from .p_sensitive import PSensitivity
from .standard import (DistinctLDiversity, EntropyLDiversity, KAnonymity, RecursiveCLDiversity, SimpsonDiversity,
                       TCloseness, ThetaSensitivity)


def build_models(policy, con=None) -> list[PrivacyModel]:
    """The class-level models of a policy (k-anonymity first, then one per sensitive attribute and model);
    ``con`` lets a model read tables it names (p-sensitivity's category table)."""
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
            # kind == "slicing" is verified by the slicing method's own check, not per generalized class
        if p.t_closeness is not None:
            spec = p.t_closeness if isinstance(p.t_closeness, dict) else {"t": p.t_closeness}
            if "t" not in spec:
                raise PolicyError("privacy.t_closeness needs t, e.g. t_closeness = 0.2 or { t = 0.2, distance = \"ordered\" }")
            distance = spec.get("distance", "equal")
            if distance not in ("equal", "ordered", "hierarchical"):
                raise PolicyError(f"privacy.t_closeness.distance {distance!r} is not 'equal', 'ordered' or "
                                  "'hierarchical'")
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
    return models


__all__ = ["build_models", "PrivacyModel", "ClassStats", "SensitiveCounts", "SQLCheck", "ClassColumns",
           "KAnonymity", "DistinctLDiversity", "EntropyLDiversity", "RecursiveCLDiversity", "TCloseness",
           "SimpsonDiversity", "ThetaSensitivity", "PSensitivity", "AlphaKAnonymity", "BetaLikeness", "DeltaDisclosure",
           "HierarchicalTCloseness"]
