"""Built-in taxonomies shipped with the package (ARX format: value;level1;...;*), usable by name in policies."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from .taxonomy import Taxonomy, from_arx_text

_PACKAGE = "anon_sql.taxonomies"   # the CSV files (the repository's taxonomies/ folder, data only)


def names() -> list[str]:
    """Names of the built-in taxonomies (file names without .csv)."""
    return sorted(p.name[:-4] for p in resources.files(_PACKAGE).iterdir() if p.name.endswith(".csv"))


def load_builtin_taxonomy(name: str) -> Taxonomy | None:
    """A built-in taxonomy by name, or None (a fresh copy each call: parsed and validated once per process)."""
    tax = _parsed(name)
    if tax is None:
        return None
    return tax.copy(keep_fingerprint=True)    # no re-validation nor digest: both done once for the cached one


@lru_cache(maxsize=None)
def _parsed(name: str) -> Taxonomy | None:
    """Parse a shipped file once (they are package data, never changed while the process runs)."""
    if name not in names():
        return None
    text = resources.files(_PACKAGE).joinpath(name + ".csv").read_text(encoding="utf-8")
    return from_arx_text(text, name, spec={"kind": "builtin", "name": name})
