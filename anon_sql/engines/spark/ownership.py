"""What a Spark release may create or replace: only what an anon_sql release of this session created.

The DuckDB rule (:mod:`anon_sql.catalog.ownership`) on Spark, which has no catalog: the session's configuration keeps the names
of the releases it made (``spark.anon_sql.releases``, a JSON list). A release name or working name (``__source``,
``__general``, …) that is a table or view of the session and not one of those releases' objects is refused — never
dropped or redefined, whatever ``replace`` says; an earlier release is replaced only with ``replace``.
"""
from __future__ import annotations

import json
from typing import Any

from ...errors import ReleaseExistsError
from ...compiler.views import COUNTED_ROWS
from ...catalog.ownership import WORKING_SUFFIXES
from .session import table_exists

CONF_KEY = "spark.anon_sql.releases"
# a DataFrame / path source's view, and a population file's (k-map, δ-presence), are the release's too
# a release by people keeps its rows with the unit apart from the released view (SparkEngine.drop_unit)
UNITS_SUFFIX = "__units"
CLAIMED = (*WORKING_SUFFIXES, "__" + COUNTED_ROWS, UNITS_SUFFIX)   # what a release of a name makes besides its views' inputs
SUFFIXES = (*CLAIMED, "__input", "__population")


def spark_releases_made(spark: Any) -> list[str]:
    """The release names this session's releases created (oldest first)."""
    return list(json.loads(spark.conf.get(CONF_KEY, None) or "[]"))


def remember_spark_release(spark: Any, name: str) -> None:
    """Remember that a release of this session created ``name`` (and its working objects)."""
    names = spark_releases_made(spark)
    if name not in names:
        spark.conf.set(CONF_KEY, json.dumps(names + [name]))


def owner(spark: Any, name: str) -> str | None:
    """The recorded release that ``name`` belongs to (the release itself or one of its working objects), else None."""
    for release in spark_releases_made(spark):
        if name == release or any(name == release + s for s in SUFFIXES):
            return release
    return None


def check_working_name(spark: Any, name: str) -> None:
    """Refuse to create the working object ``name`` over a table or view that no release of this session made."""
    if table_exists(spark, name) and owner(spark, name) is None:
        raise ReleaseExistsError(
            f"a table or view named {name!r} already exists in the Spark session and was not created by an anon_sql "
            "release; anon_sql never replaces what it did not create: choose another release name")


def claim_spark_release_name(spark: Any, name: str, *, replace: bool = False, dry_run: bool = False) -> bool:
    """May a release named ``name`` be created in this session? True when it replaces an earlier release of that name.

    Raises :class:`ReleaseExistsError` when ``name`` or one of its working names is a table or view that no release of
    this session created, or when it is an earlier release and ``replace`` was not given."""
    exists = table_exists(spark, name)
    ours = name in spark_releases_made(spark)
    if exists and not ours:
        raise ReleaseExistsError(
            f"a table or view named {name!r} already exists in the Spark session and is not a release of anon_sql "
            "(none of this session's releases made it); anon_sql never drops what it did not create: choose another "
            "release name")
    if exists and not (replace or dry_run):
        raise ReleaseExistsError(f"release {name!r} already exists in the Spark session; pass replace=True (CLI: "
                                 "--replace) to replace it, or choose another name")
    foreign = [name + s for s in CLAIMED if table_exists(spark, name + s) and not ours]
    if foreign:
        raise ReleaseExistsError(
            f"release {name!r} would create working objects named {foreign}, which already exist in the Spark session "
            "and were not created by an anon_sql release of that name; anon_sql never replaces them: choose another "
            "release name")
    return exists


__all__ = ["CONF_KEY", "UNITS_SUFFIX", "check_working_name", "claim_spark_release_name", "owner", "remember_spark_release", "spark_releases_made"]
