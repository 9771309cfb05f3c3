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


class StatementError(AnonSQLError):
    """A statement of a SQL script failed; says which one (number, line, column) and keeps the cause's exit code."""

    def __init__(self, message: str, *, number: int, line: int, column: int, exit_code: int = 2) -> None:
        super().__init__(f"statement {number} (line {line}, column {column}): {message}")
        self.number, self.line, self.column = number, line, column
        self.exit_code = exit_code


class UnknownViewError(SourceError):
    """No anonymized view (release recorded in the catalog) of that name (CLI exit code 2)."""

    exit_code = 2


class ViewExistsError(ReleaseExistsError):
    """CREATE ANONYMIZED VIEW on a name that exists (CLI exit code 2: bad input, nothing changed)."""

    exit_code = 2
