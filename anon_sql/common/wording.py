"""How the product words a count in what it prints: ``1 row``, ``2 rows``, ``1 class``, ``0 classes``.

One helper for every summary line and message (the CLI's output, ``Release.summary``, the text report, the SQL
statements' messages); a leaf module importing nothing, so any layer may use it."""
from __future__ import annotations

from typing import Any


def counted(n: Any, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular when ``n`` is 1 (``1 record``), plural otherwise (``0 records``, ``2.5 records``).

    The plural is ``plural`` when given (``leaf``/``leaves``), else the noun + ``es`` after s, x, z, ch or sh
    (``class``/``classes``), else + ``s``. A whole float prints as an integer (``3.0`` → ``3``), another float
    with up to 6 significant digits; anything else as it is."""
    if plural is None:
        plural = noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")
    try:
        one = n == 1 and not isinstance(n, bool)
    except (TypeError, ValueError):      # e.g. an array: never singular
        one = False
    if isinstance(n, float) or type(n).__name__.startswith("float"):
        n = int(n) if float(n).is_integer() else f"{float(n):.6g}"
    return f"{n} {noun if one else plural}"


__all__ = ["counted"]
