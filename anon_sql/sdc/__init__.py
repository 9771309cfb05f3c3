"""Statistical disclosure control: perturbation, masking, risk (sdcMicro and PostgreSQL Anonymizer's toolbox)."""
