"""The method contract (after scikit-learn): parameters from the policy, ``plan(context)`` returns one of two plans.

* :class:`LevelPlan` — full-domain recoding: one generalization level per quasi-identifier.
* :class:`AssignmentPlan` — local recoding: record → ec_id plus the released quasi-identifier values of each class.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable


from ..errors import PolicyError
from ..policy.keys import Key, section

if TYPE_CHECKING:
    import pandas as pd

ROW_ID = "__row"


@dataclass
class LevelPlan:
    """A node of the generalization lattice: attribute → level (level 0 = original value).

    Every field the runner acts on is typed; ``info`` is the method's report (shown in ``Release.info``, stored
    with the release) and nothing reads a decision from it."""

    levels: dict[str, int]
    info: dict[str, Any] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)   # a search's steps, recorded in anon.search_trace
    # a quasi-identifier varies inside a privacy unit: the classes are the units' signatures (their sets of released
    # QI tuples, multi-relational k-anonymity; compiler/signature.py), set by the runner, not by the method
    signatures: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.levels)

    def details(self) -> dict[str, Any]:
        """The report for ``Release.info``: ``info`` and the trace."""
        return {**self.info, "trace": self.trace} if self.trace else dict(self.info)


@dataclass
class AssignmentPlan:
    """Record → class assignment.

    ``assignment`` has columns ``__row`` (the deterministic row key of the ``__source`` view) and ``ec_id``;
    ``class_values`` has ``ec_id`` and one released (text) value per quasi-identifier (per row with ``row_values``);
    ``noise`` optionally holds dummy records (all released columns + ``ec_id``) that the method adds (θ-sensitive
    k-anonymity). The other typed fields are what the compiler, the runner and the catalog act on; ``info`` is the
    method's report only.
    """

    assignment: pd.DataFrame | None           # None with ``tuple_classes``: the compiled release writes it
    class_values: pd.DataFrame                # or a Spark DataFrame (a Spark planner's per-row values)
    noise: pd.DataFrame | None = None
    info: dict[str, Any] = field(default_factory=dict)
    noise_flag: str | None = None             # the boolean column that marks noise records in the release
    row_values: bool = False                  # class_values keyed by __row: released values per row (slicing)
    released_quasi: list[str] | None = None   # the quasi-identifiers it generalizes (None: all; the others are
                                              # released unchanged, so insensitive in the release)
    table_check: dict[str, Any] | None = None   # a whole-table requirement verified in SQL (slicing l-diversity)
    ec_stats: pd.DataFrame | None = None      # per-class statistics merged into anon.equivalence_classes.stats
    # interval-recoded numeric QIs: QI → [{"high": upper bound, "text": released value}] (the cut points that send
    # any value, a population's too, to its released interval; k-map / δ-presence match populations through them)
    value_intervals: dict[str, list[dict[str, Any]]] | None = None
    # the class as a function of the QI values (Mondrian): one row per distinct QI tuple of the source, columns
    # ``q<i>`` (the i-th QI as the method read it: numeric QIs DOUBLE, others VARCHAR) and ``ec_id`` (an Arrow
    # table). DuckDB's general view then joins the source on the QI tuple, not on ``__row``: no sort of every row
    tuple_classes: Any = None

    def details(self) -> dict[str, Any]:
        """The report for ``Release.info`` and ``Release.plan``: ``info`` and the typed fields that are set."""
        out = dict(self.info)
        typed = {"noise_flag": self.noise_flag, "released_quasi": self.released_quasi,
                 "row_values": self.row_values or None, "slicing_check": self.table_check,
                 "value_intervals": self.value_intervals,
                 # a scalar a shared file keeps (it leaves the interval bounds out): its values need the intervals
                 "interval_recoded": True if self.value_intervals else None}
        out.update({k: v for k, v in typed.items() if v is not None})
        return out

    def as_dict(self) -> dict[str, Any]:
        values = self.class_values   # pandas, or a Spark DataFrame a Spark planner left in Spark (counted there)
        classes = (values.select("ec_id").distinct().count() if hasattr(values, "toPandas")
                   else values["ec_id"].nunique())
        return {"kind": "assignment", "classes": int(classes), **self.details()}


Plan = LevelPlan | AssignmentPlan


@dataclass
class MethodContext:
    """What a method may use: the connection, the resolved policy pieces and a progress callback."""

    con: Any
    policy: Any
    source_view: str | Any       # the ``__source`` view (identifiers dropped): a name, or a qualified sqlglot
                                 # table (DuckDB's working schema); read it through ``sqlbuild.table(...)``
    taxonomies: dict[str, Any]   # quasi-identifier → Taxonomy (only those that have one)
    models: list[Any]
    records: int
    progress: Callable[[str], None] = lambda message: None
    # the release's base counts (``base_counts.keys`` with their weight ``__w``, already aggregated by resolve) when
    # the engine keeps them: a method reading "base" may group these rows instead of the source's
    base: Any = None
    # the quasi-identifiers that vary inside a privacy unit (docs/units.md): a method with ``varying_units`` plans
    # over the units' signatures
    varying: tuple[str, ...] = ()
    # those base counts as fetched by resolve (an Arrow table: ``base_counts.keys`` as text ``__v<i>``, weight
    # ``__w``) when it read them whole for the coverage check: a lattice search codes these rows, no second read
    base_rows: Any = None


class Method:
    """Base class of every anonymization method."""

    name = "method"
    plan_kind = "levels"          # "levels" or "assignment"
    needs_taxonomies = True       # full-domain methods refuse quasi-identifiers without a taxonomy
    # what of the data the method plans from: "nothing" (the policy alone), "base" (the distinct quasi-identifier /
    # sensitive combinations with their record counts: lattice searches), "rows" (the source's records). An engine
    # chooses how to give a method its data from this, never from the method's name.
    reads = "rows"
    parameters: tuple[Key, ...] = ()   # the [method_params] keys it takes: types, ranges, defaults, docs
    # whether planning counts the population of k-map / δ-presence per class (a split, merge or level that fails
    # them is not taken); otherwise they are verified on the release only and failing classes are suppressed
    plans_population = False
    # whether it releases with a privacy unit (counts distinct people per class, suppresses whole people;
    # docs/units.md); a method that does not is refused for a policy with ``privacy_unit``
    counts_units = False
    # whether it plans with quasi-identifiers that vary inside a unit (multi-relational k-anonymity over signatures)
    varying_units = False
    # whether it plans on the distinct (QI, sensitive) combinations with their record counts and releases a class
    # per QI tuple (Mondrian): on an engine with ``combination_base``, resolve aggregates the source once into the
    # base counts, which the coverage check, the plan, the released rows and ``__assignment`` all read (issue 29.2)
    plans_combinations = False
    # whether its plans release values per row (slicing's permuted buckets, local suppression's cells): its classes
    # are not grouped by the quasi-identifiers, which the release's recorded policy holds as insensitive
    # (runner/plan.py); `check` derives that policy from the declared one through this flag
    releases_rows = False

    def __init__(self, **params: Any):
        section(f"[method_params] of method {self.name!r}", *self.parameters).check(params, "method_params")
        self.params = params

    def param(self, name: str) -> Any:
        """A parameter's value from the policy, else the default its declaration gives."""
        if name in self.params:
            return self.params[name]
        return next(k.default for k in self.parameters if k.name == name)

    def plan(self, ctx: MethodContext) -> Plan:
        raise NotImplementedError


def single_record_sensitive(policy: Any, method: str, role: str, moves: str) -> str:
    """The one sensitive attribute of a method that works on single records (θ, adaptive): refuses several (or no)
    sensitive attributes and a count column, saying what the method does with them (``role``, ``moves``)."""
    if len(policy.sensitive) != 1:
        raise PolicyError(f"method {method!r} {role} exactly one sensitive attribute; the policy has "
                          f"{policy.sensitive or 'none'}: give exactly one column role = \"sensitive\"")
    if policy.count_column:
        raise PolicyError(f"method {method!r} {moves}: expand the count column {policy.count_column!r} to one row "
                          "per record and drop count_column")
    return policy.sensitive[0]
