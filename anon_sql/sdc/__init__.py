"""Statistical disclosure control: masking macros, PII detection and re-identification risk (SUDA2, individual and
household risk). Standalone functions over a DuckDB connection; the policy and CLI wire them in."""
from __future__ import annotations

from .masking import fake_mapping, fake_select, install_masking, mask_expression, shuffle_select

__all__ = ["fake_mapping", "fake_select", "install_masking", "mask_expression", "shuffle_select"]
