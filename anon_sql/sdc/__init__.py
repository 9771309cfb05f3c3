"""Statistical disclosure control (sdcMicro and PostgreSQL Anonymizer's toolbox): perturbation (microaggregation, coding,
PRAM, noise, swapping), local suppression, masking macros, PII detection and re-identification risk (SUDA2, individual
and household risk). Import the submodules: this package imports nothing, so that loading one tool loads no other."""
