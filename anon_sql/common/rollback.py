"""Rolling back after a failure without hiding it (issue 28.4)."""
from __future__ import annotations

from typing import Callable


def rollback_keeping_cause(rollback: Callable[[], None], errors: tuple[type[BaseException], ...]) -> None:
    """Call ``rollback`` after a failure; when the rollback fails too (an I/O error already aborted the transaction:
    "cannot rollback - no transaction is active"), swallow that, so that the original error is the one raised."""
    try:
        rollback()
    except errors:
        pass


__all__ = ["rollback_keeping_cause"]
