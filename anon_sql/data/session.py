"""What of a DuckDB session can change what a view returns: the functions whose result the session chooses, and
the settings a session may change that are more than tuning (speed, memory, output, logging).

A budgeted view's units must be the database's, not the analyst's: ``SET VARIABLE split = true`` read through
``getvariable``, or ``SET TimeZone`` changing a TIMESTAMPTZ's text, split each person into several units while the
budget was charged as for people (hostile round 14, M35)."""
from __future__ import annotations

import functools

import duckdb

# functions a view or macro may call whose result the session picks: SET VARIABLE, SET, USE, the query's own text,
# SET custom_user_agent, the moment the query runs (``age(ts)`` counts from today); :func:`unstable_functions` adds
# every function DuckDB itself marks other than CONSISTENT (hostile round 15, M38: ``in_search_path``,
# ``txid_current``, ``current_query_id`` were missing from a list of names)
SESSION_READERS = frozenset({
    "getvariable", "current_setting", "current_query", "current_schema", "current_schemas", "current_database",
    "current_catalog", "user_agent", "age", "now", "today", "current_date", "current_time", "current_timestamp",
    "localtime", "localtimestamp", "get_current_time", "get_current_timestamp", "transaction_timestamp",
})
# the settings whose default comes from the machine (the process's TZ, its locale), pinned for a budgeted view to a
# value that does not (hostile round 15, M37: a process started with another TZ was "at the default")
PINNED = {
    "TimeZone": frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu",
                           "GMT", "Etc/GMT", "Etc/GMT+0", "Etc/GMT-0", "Etc/GMT0", "GMT0", "GMT+0", "GMT-0",
                           "Greenwich", "Etc/Greenwich"}),
    "Calendar": frozenset({"gregorian"}),
}
_PINNED_TO = {"TimeZone": "UTC", "Calendar": "gregorian"}
# a parameter of one of these types makes an overload depend on TimeZone / Calendar, which PINNED fixes
_ZONED = ("TIME ZONE", "TIMESTAMPTZ", "TIMETZ")
_UNSTABLE = ("SELECT DISTINCT lower(function_name), parameter_types FROM duckdb_functions() "
             "WHERE stability IN ('CONSISTENT_WITHIN_QUERY', 'VOLATILE')")


def unstable_functions(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The functions whose result is not the same for the same arguments in every session: DuckDB's own marks
    (``duckdb_functions().stability`` other than CONSISTENT: ``random``, ``nextval``, ``txid_current``,
    ``in_search_path``, …) and :data:`SESSION_READERS`. An overload that is unstable only through a parameter with a
    time zone (``year(TIMESTAMPTZ)``, ``TIMESTAMPTZ + INTERVAL``) is not counted: :data:`PINNED` fixes the time zone
    and the calendar it reads."""
    found = set(SESSION_READERS)
    for name, parameters in con.execute(_UNSTABLE).fetchall():
        if not any(z in str(t).upper() for t in parameters or () for z in _ZONED):
            found.add(str(name))
    return frozenset(found | registered_functions(con))


def registered_functions(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The functions of ``con`` with a form (parameters and result) that a fresh database lacks, macros aside: a
    Python UDF the process registered — DuckDB lists it as built-in and CONSISTENT whatever it computes, and under a
    built-in's name it adds an overload that wins for its argument types (hostile round 16: ``hash(BIGINT)`` and
    ``greatest(BIGINT, BIGINT)`` registered by the analyst split every person) — or an extension's. The reading
    session decides what they are, so a budgeted view may not call them (as a TEMP macro: round 11, M21)."""
    here = {(r[0], r[1]) for r in con.execute(_FUNCTIONS).fetchall()}
    return frozenset(name for name, form in here - _builtin_functions())


def overloaded_builtins(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The names of DuckDB's own functions to which this process added a form (:func:`registered_functions`): SQL
    that anon_sql writes with them (a DP query's ``hash``) could call the process's code instead."""
    builtin = {name for name, _ in _builtin_functions()}
    return frozenset(registered_functions(con) & builtin)


_FUNCTIONS = ("SELECT DISTINCT lower(function_name), function_type || '(' || CAST(parameter_types AS VARCHAR) || ') "
              "-> ' || coalesce(return_type, '') FROM duckdb_functions() WHERE function_type NOT IN ('macro', "
              "'table_macro')")


def _builtin_functions() -> frozenset[tuple[str, str]]:
    """The functions of a fresh in-memory database of this process, with their forms: DuckDB's own and its
    autoloaded extensions'."""
    return _fresh()[1]


# settings that tune how a query runs or reports, not which rows it returns (a name, or a prefix ending in "_");
# every other setting a session changes from DuckDB's default is refused for a budgeted view (fail closed: a
# setting DuckDB adds later is checked until it is listed here)
_TUNING = frozenset({
    "access_mode", "active_grammar_extensions", "allocator_", "allow_", "allowed_", "approximate_join_order_threshold",
    "arrow_", "asof_loop_join_threshold", "async_threads", "auto_checkpoint_skip_wal_threshold", "autoinstall_",
    "autoload_known_extensions", "block_allocator_memory", "cache_local_files", "catalog_error_max_schemas",
    "checkpoint_", "current_transaction_invalidation_policy", "custom_extension_repository", "custom_user_agent",
    "debug_", "default_block_size", "default_secret_storage", "default_transaction_invalidation_policy",
    "disable_parquet_prefetching", "disabled_compression_methods", "disabled_filesystems", "disabled_log_types",
    "disabled_optimizers", "duckdb_api", "dynamic_or_filter_threshold", "enable_external_access",
    "enable_external_file_cache", "enable_fsst_vectors", "enable_http_metadata_cache", "enable_logging",
    "enable_macro_dependencies", "enable_optimistic_write", "enable_optimizer", "enable_profiling",
    "enable_progress_bar", "enable_progress_bar_print", "enable_view_dependencies", "enabled_log_types",
    "errors_as_json", "explain_output", "extension_directories", "extension_repository_directory",
    "external_file_cache_", "external_threads", "file_search_path", "force_compression", "fsync_mode",
    "geometry_minimum_shredding_size", "home_directory", "http_", "immediate_transaction_mode", "index_scan_",
    "initial_column_segment_size", "late_materialization_max_rows", "lock_configuration", "log_query_path",
    "logging_", "max_execution_time", "max_memory", "max_streaming_buffer_size", "max_temp_directory_size",
    "max_vacuum_tasks", "memory_limit", "merge_join_threshold", "nested_loop_join_threshold",
    "operator_memory_limit", "ordered_aggregate_threshold", "pandas_analyze_sample", "parquet_metadata_cache",
    "parquet_prefetch_column_gap", "parquet_use_page_index", "partitioned_write_", "password", "perfect_ht_threshold",
    "pin_threads", "pivot_filter_threshold", "prefer_range_joins", "prefetch_all_parquet_files", "profile_output",
    "profiling_", "progress_bar_time", "python_", "read_ahead_depth", "redact_http_logs", "scheduler_process_partial",
    "schema", "search_path", "secret_directory", "show_behavior", "standard_vector_size", "storage_",
    "streaming_buffer_size", "temp_directory", "temp_file_encryption", "threads", "tracked_metrics", "user",
    "username", "validate_external_file_cache", "variant_minimum_shredding_size", "wal_", "warnings_as_errors",
    "worker_threads", "write_buffer_", "zstd_min_string_length",
})


def _tuning(name: str) -> bool:
    return name in _TUNING or any(p.endswith("_") and name.startswith(p) for p in _TUNING)


def _defaults() -> dict[str, str | None]:
    """DuckDB's default settings, as a fresh in-memory database of this process has them (the machine's time zone
    included)."""
    return _fresh()[0]


@functools.lru_cache(maxsize=1)
def _fresh() -> tuple[dict[str, str | None], frozenset[tuple[str, str]]]:
    """One fresh in-memory database of this process, read once: its settings and its functions' forms."""
    with duckdb.connect(":memory:") as fresh:
        return (dict(fresh.execute(_SETTINGS).fetchall()),
                frozenset((r[0], r[1]) for r in fresh.execute(_FUNCTIONS).fetchall()))


_SETTINGS = "SELECT name, value FROM duckdb_settings()"


def changed_settings(con: duckdb.DuckDBPyConnection, zone: bool = True) -> list[str]:
    """The settings of ``con``'s session, other than tuning, whose value is not the one a budgeted view is read
    with: :data:`PINNED` (``"TimeZone = 'Asia/Tokyo' (a budgeted view is read with TimeZone = 'UTC')"``), else DuckDB's
    default (``SET``, ``SET GLOBAL`` or the connection's config: ``"integer_division = 'true' (default
    'false')"``). A setting a fresh database does not have (an extension's) is not compared. ``zone=False``: the
    pinned settings are not compared (a DP query over a table of stored columns reads no time zone)."""
    defaults = _defaults()
    found = []
    for name, value in con.execute(_SETTINGS).fetchall():
        if name in PINNED:
            if zone and value not in PINNED[name]:
                found.append(f"{name} = {value!r} (a budgeted view is read with {name} = {_PINNED_TO[name]!r})")
        elif name in defaults and not _tuning(name) and value != defaults[name]:
            found.append(f"{name} = {value!r} (default {defaults[name]!r})")
    return found


def refuse_read_only(con: duckdb.DuckDBPyConnection, what: str) -> None:
    """Refuse (:class:`~anon_sql.errors.PolicyError`, exit 2) ``what`` — something that writes the database — in one
    line before it runs when the database is open read-only, instead of DuckDB's raw error (exit 4)."""
    if is_read_only(con):
        from ..errors import PolicyError

        raise PolicyError(f"{what} writes to the database, which is open read-only; nothing was done: open it "
                          "read-write (without --read-only)")


def is_read_only(con: duckdb.DuckDBPyConnection) -> bool:
    """Is the current database attached read-only (``--read-only``, ``read_only=True``)? A statement that writes
    is refused in one line before it runs, instead of DuckDB's raw error (hostile rounds 15 and 17, E50, X08)."""
    return bool(con.execute("SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
                            ).fetchall()[0][0])
