"""Privacy models: one class per model, built from a policy's ``[privacy]`` table (its keys, types and ranges are
declared and checked in anon_sql/schema.py)."""
from __future__ import annotations

from .base import ClassColumns, ClassStats, PrivacyModel, SensitiveCounts, SQLCheck
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
            models.append(TCloseness(sa, spec["t"], spec.get("distance", "equal")))
        if p.simpson:
            models.append(SimpsonDiversity(sa, p.simpson.get("diversity"), p.simpson.get("evenness")))
        if p.theta:
            models.append(ThetaSensitivity(sa, p.theta["mu"]))
        if p.p_sensitive is not None:
            models.append(PSensitivity.from_policy(sa, p.p_sensitive, con))
    return models


__all__ = ["build_models", "PrivacyModel", "ClassStats", "SensitiveCounts", "SQLCheck", "ClassColumns",
           "KAnonymity", "DistinctLDiversity", "EntropyLDiversity", "RecursiveCLDiversity", "TCloseness",
           "SimpsonDiversity", "ThetaSensitivity", "PSensitivity"]
