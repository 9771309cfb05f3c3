"""Exceptions raised by anon_sql; each message names what was wrong and how to fix it."""
from __future__ import annotations


class AnonSQLError(Exception):
    """Base class of every anon_sql error (CLI exit code 1 unless a subclass says otherwise)."""

    exit_code = 1


class PolicyError(AnonSQLError, ValueError):
    """The policy is malformed or contradicts the data (unknown column, bad parameter, ...)."""

    exit_code = 2


class TaxonomyError(AnonSQLError, ValueError):
    """A taxonomy is malformed or does not cover the data."""

    exit_code = 2


class SourceError(AnonSQLError, ValueError):
    """The source table or file cannot be read, or is empty."""


class PrivacyRequirementError(AnonSQLError):
    """A privacy requirement cannot be met; nothing was created (CLI exit code 3)."""

    exit_code = 3


class ReleaseExistsError(AnonSQLError):
    """The release table already exists and replace was not requested."""
