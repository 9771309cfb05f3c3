"""The packaged SQL: catalog.sql (the ``anon`` catalog's tables) and macros.sql (the ``anon.*`` macros). Reading
them needs nothing but the standard library (``anon-sql check`` compares a file's macros with these at once)."""
from __future__ import annotations

import re
from importlib import resources


def macro_statements() -> list[str]:
    """The statements of the packaged sql/macros.sql (comments dropped, split at ';' ending a line)."""
    text = resources.files("anon_sql.sql").joinpath("macros.sql").read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in re.split(r";[ \t]*$", body, flags=re.M) if s.strip()]


__all__ = ["macro_statements"]
