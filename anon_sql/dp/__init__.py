"""Differential privacy: DP aggregate queries over a per-table privacy budget, and SafePub parameters."""
