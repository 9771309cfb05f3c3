"""``method = "attribute_focused"``: seed 001's full scheme — fixed-interval numeric QIs, then l-diverse slicing.

Every numeric QI is first replaced by its interval mean (Algorithm 1, :func:`fixed_intervals`: ``intervals``,
``strategy``, ``theta``); slicing (Algorithms 2–4, :func:`slice_plan`) then runs on T* — the fixed-interval values
together with the original categorical QIs and the sensitive attribute ("every tuple t, which is a combination of
both anonymized numerical attributes and original categorical attributes"). Buckets are split on the T* values, the
matching probabilities are computed on them, and the release carries them (permuted with their column group).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PolicyError
from . import register_method
from .base import MethodContext
from .fixed_interval import INTERVAL_PARAMETERS, fixed_intervals, interval_params, decimal_places
from .local_values import QIColumn, SourceData, encode_numeric, format_numbers, load_source
from .slicing import Slicing, slicing_requirements


@register_method
class AttributeFocused(Slicing):
    """Fixed-interval numeric QIs + l-diverse slicing: the slicing parameters plus ``intervals`` (default k),
    ``strategy`` ("width" | "frequency") and ``theta``."""

    name = "attribute_focused"
    parameters = (*Slicing.parameters, *INTERVAL_PARAMETERS)

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.intervals, self.strategy, self.theta = interval_params(params)

    def prepared(self, ctx: MethodContext) -> tuple[SourceData, list[QIColumn], dict[str, Any]]:
        """The source with every numeric QI recoded to its fixed intervals (Algorithm 1), as slicing reads it."""
        _, k = slicing_requirements(ctx.policy, ctx.models)
        data = load_source(ctx)
        if not any(c.numeric for c in data.columns):
            raise PolicyError("method 'attribute_focused' needs at least one numeric quasi-identifier (for the "
                              f"fixed-interval step); {list(ctx.policy.quasi)} are all categorical: use method "
                              "'slicing'")
        n_int = int(self.intervals or k)
        columns, override, published, tables, merges = [], {}, {}, {}, {}
        for c in data.columns:
            if not c.numeric:
                columns.append(c)
                continue
            b, rel, tables[c.name], merges[c.name] = fixed_intervals(
                c.x, data.weights, n_int, k, self.strategy, decimal_places(data.types.get(c.name, "DOUBLE")), self.theta)
            labels = format_numbers(np.array([iv["released"] for iv in tables[c.name]], dtype=np.float64))
            text = np.full(len(b), None, dtype=object)
            text[b >= 0] = labels[b[b >= 0]]
            columns.append(encode_numeric(c.name, rel))
            override[c.name] = (text, rel)
            published[c.name] = [{"high": iv["high"], "text": str(t)} for iv, t in zip(tables[c.name], labels)]
        info = {"intervals": tables, "merges": merges, "strategy": self.strategy, "intervals_requested": n_int}
        return data, columns, {"override": override, "intervals": published, "info": info}


__all__ = ["AttributeFocused"]
