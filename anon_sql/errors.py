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
    """A table, release, database or file that was named cannot be found or read, or is empty (CLI exit code 2)."""

    exit_code = 2


class PrivacyRequirementError(AnonSQLError):
    """A privacy requirement cannot be met; nothing was created (CLI exit code 3)."""

    exit_code = 3


class ReleaseExistsError(AnonSQLError):
    """A name anon_sql would create is taken: by an earlier release (pass replace), or by an object anon_sql did
    not create, which it never replaces (CLI exit code 2)."""

    exit_code = 2


class ResourceError(AnonSQLError):
    """The environment failed, not the input: the disk is full, a file or folder may not be written (permissions,
    a read-only file or connection), a file is locked by another process (CLI exit code 4)."""

    exit_code = 4


# what an environment failure says (DuckDB raises them as IOException, PermissionException or InvalidInputException)
_ENVIRONMENT_WORDS = ("no space left", "disk full", "permission denied", "read-only mode", "read-only file system",
                      "could not set lock", "conflicting lock", "lock on file", "quota exceeded")


def is_environment(err: BaseException) -> bool:
    """Is ``err`` a failure of the environment (disk, permissions, locks) rather than of the input or the code?"""
    if isinstance(err, ResourceError) or isinstance(err, (PermissionError, IsADirectoryError)):
        return True
    if isinstance(err, OSError) and err.errno in (28, 13, 1, 30, 122, 5):   # ENOSPC EACCES EPERM EROFS EDQUOT EIO
        return True
    text = str(err).lower()
    return type(err).__name__ in ("IOException", "PermissionException") or any(w in text for w in _ENVIRONMENT_WORDS)


class StatementError(AnonSQLError):
    """A statement of a SQL script failed; says which one (number, line, column) and keeps the cause's exit code."""

    def __init__(self, message: str, *, number: int, line: int, column: int, exit_code: int = 2) -> None:
        super().__init__(f"statement {number} (line {line}, column {column}): {message}")
        self.number, self.line, self.column = number, line, column
        self.exit_code = exit_code


class UnknownViewError(SourceError):
    """No anonymized view (release recorded in the catalog) of that name (CLI exit code 2)."""

    exit_code = 2


class TargetError(AnonSQLError, ValueError):
    """An output file cannot be written as asked: it exists, its folder is missing, or its suffix is not supported
    (CLI exit code 2). anon_sql never overwrites a file."""

    exit_code = 2


class ViewExistsError(ReleaseExistsError):
    """CREATE ANONYMIZED VIEW on a name that exists (CLI exit code 2: bad input, nothing changed)."""

    exit_code = 2
