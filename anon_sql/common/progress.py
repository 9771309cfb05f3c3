"""Progress messages that can carry counts: what a method or sweep reports through its ``progress`` callback.

A :class:`Progress` is a ``str`` (callbacks that print or compare messages keep working) with optional ``done`` /
``total`` / ``unit``, from which the CLI draws a bar with counts and, when ``total`` is known, an ETA."""
from __future__ import annotations


class Progress(str):
    """A progress message; ``done`` of ``total`` ``unit`` when the step is countable (``total`` None: unknown)."""

    done: int | None
    total: int | None
    unit: str

    def __new__(cls, message: str, done: int | None = None, total: int | None = None, unit: str = "") -> "Progress":
        obj = super().__new__(cls, message)
        obj.done, obj.total, obj.unit = done, total, unit
        return obj
