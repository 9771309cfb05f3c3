"""The search objectives and what a lattice node can measure — names only, so that validating a policy's
``objective`` does not load the lattice (numpy, pyarrow); the formulas live in :mod:`anon_sql.methods.lattice` and
:mod:`anon_sql.udfs.utility`."""
from __future__ import annotations

# objective → True when higher is better (the table in docs/search.md maps each to ARX's quality model)
OBJECTIVES: dict[str, bool] = {"distinct_rows": True, "ncp": False, "discernibility": False, "precision": True,
                               "dm_star": False, "non_uniform_entropy": False, "aecs": False, "height": False}
# what a node's evaluation can measure: the objectives, and non-uniform entropy's monotone variant (ARX's two)
MEASURES: dict[str, bool] = {**OBJECTIVES, "non_uniform_entropy_monotone": False}


def measure_key(objective: str, monotone: bool = False) -> str:
    """The measure an objective optimizes: non-uniform entropy has a monotone variant (ARX's
    ``createEntropyMetric(true)``: suppressed records cost what their generalized values cost)."""
    return objective + "_monotone" if monotone and objective == "non_uniform_entropy" else objective


__all__ = ["OBJECTIVES", "MEASURES", "measure_key"]
