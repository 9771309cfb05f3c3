"""Statistical disclosure control: masking macros, PII detection and re-identification risk (SUDA2, individual and
household risk). Standalone functions over a DuckDB connection; the policy and CLI wire them in."""
from __future__ import annotations

from .detect import detect
from .masking import fake_mapping, fake_select, install_masking, mask_expression, shuffle_select
from .risk import RiskResult, household_risk, individual_risk
from .suda import SudaResult, suda2

__all__ = ["RiskResult", "SudaResult", "detect", "fake_mapping", "fake_select", "household_risk", "individual_risk",
           "install_masking", "mask_expression", "shuffle_select", "suda2"]
