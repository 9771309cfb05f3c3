"""Statistical disclosure control in a release (docs/sdc.md): the policy's ``perturb`` and whole-column ``mask``
(shuffle, fake) applied to the source before classes are formed, so every model is verified over the values released.

Resolve writes the perturbed source to a TEMP table (seeded by the policy's seed; the utility of the perturbation is
measured there against the original); inside the release's transaction :func:`persist` copies it to the working table
``anon_work."<release>__perturbed"``, which ``__source`` then reads. A refused release rolls the copy back, and the
TEMP table goes with the rest of what resolve made (:func:`discard_prepared`). Macro masks (partial, hash, …) are not here:
they are expressions of the ``__source`` view (anon_sql.compiler.views.source_view).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..common.sqlbuild import ident, render
from ..data.source import Source
from ..errors import PolicyError
from ..policy.model import Policy
from ..sdc.masking import TABLE_MASKS, fake_select, shuffle_select
from ..common.columns import is_numeric
from ..sdc.perturb import perturb, validate_groups, validate_perturbation
from ..sdc.portable import INLINE_MASKS
from ..sdc.utility import perturbation_utility

ROW_ID = "__anon_sdc_id"
#: what runs row by row in SQL (the rest reads whole columns: numpy, or SQL windows and joins)
ROWWISE_KINDS = ("top_code", "bottom_code", "noise")
SPARK_ALTERNATIVES = ("every perturb kind, the anon.* masks, shuffle, fake and local suppression run on Spark "
                      "(docs/sdc.md, \"Engines\")")
#: utility of the perturbation stored with the release's metrics (lower is better: 0 = kept exactly)
UTILITY_METRICS = {"il1s": "perturbation_il1s", "means": "perturbation_means", "variances": "perturbation_variances",
                   "covariances": "perturbation_covariances", "correlations": "perturbation_correlations"}


@dataclass
class Prepared:
    """The source as perturbed and table-masked (a TEMP table) and what was done to it."""

    temp: exp.Table
    original: exp.Expression
    perturbation: dict[str, dict[str, Any]] = field(default_factory=dict)
    masks: dict[str, str] = field(default_factory=dict)         # column → shuffle | fake
    utility: dict[str, Any] = field(default_factory=dict)
    engine_owned: bool = False     # a view of the engine's (Spark): its cleanup drops it, not discard

    def record(self) -> dict[str, Any]:
        """What the release records in its plan (``anon.releases.plan``): per column or group, the kind and its
        parameters and measures (PRAM's matrix, MDAV's SSE/SST, cells coded, pairs swapped), and the masks."""
        util = {k: v for k, v in self.utility.items() if k != "pairs"}
        util["pairs"] = {f"{a}|{b}": v for (a, b), v in self.utility.get("pairs", {}).items()}
        return {"perturbed": self.perturbation, "table_masks": self.masks, "utility": util}

    def metrics(self) -> dict[str, float]:
        return {name: float(self.utility[key]) for key, name in UTILITY_METRICS.items()
                if self.utility.get(key) is not None}


def perturb_specs(policy: Policy) -> dict[str, dict[str, Any]]:
    """Column → its ``perturb`` table, in the policy's order."""
    return {a.name: dict(a.options["perturb"]) for a in policy.attributes.values() if a.options.get("perturb")}


def mask_specs(policy: Policy) -> dict[str, dict[str, Any]]:
    """Column → its ``mask`` table, in the policy's order."""
    return {a.name: dict(a.options["mask"]) for a in policy.attributes.values() if a.options.get("mask")}


def refuse_whole_identifiers(con: Any, policy: Policy, src: Source) -> None:
    """Refuse an identifier masked with ``partial`` that would release some of its values whole (hostile round 8,
    P06c / M3): a value exactly ``keep_start + keep_end`` characters long keeps every character (the pad only sits
    between them), and an identifier is never released as it is. PolicyError naming the column and the count."""
    for column, spec in mask_specs(policy).items():
        kept = int(spec.get("keep_start") or 0) + int(spec.get("keep_end") or 0)
        if policy.attributes[column].role != "identifier" or spec.get("function") != "partial" or kept == 0:
            continue
        length = exp.Length(this=exp.Cast(this=exp.column(column, quoted=True), to=exp.DataType.build("VARCHAR")))
        query = exp.select(exp.Count(this=exp.Star())).from_(src.relation.copy()).where(
            exp.EQ(this=length, expression=exp.Literal.number(kept)))
        whole = int(con.execute(render(query)).fetchall()[0][0])
        if whole:
            raise PolicyError(f"attributes.{column}.mask: partial keeps keep_start + keep_end = {kept} characters, "
                              f"the whole of {whole} value(s) of identifier {column!r} (they are {kept} characters "
                              "long), and an identifier is never released as it is: keep fewer characters (e.g. "
                              "keep_start = 0, keep_end = 4), or use \"hash\" or \"redact\"")


#: why each seeded mask / perturbation is only as secret as the seed (hostile rounds 9 and 10, M7 and M14)
SEEDED_MASKS = {
    "noise": "its draw is keyed by the value itself: with the seed, trying the candidates inverts every value",
    "dnoise": "its draw is keyed by the value itself: with the seed, trying the candidates inverts every value",
    "fake": "a consistent fake is a keyed lookup of the raw value (Faker seeded by sha256 of the column's seed and "
            "the value; an inconsistent one draws its slot by the row's rank in the value order): with the seed, "
            "faking a list of candidates maps every released fake back to its raw value",
    "shuffle": "its permutation is drawn from the seed and the row's rank in the value order: with the seed, the "
               "permutation is known and undone",
}
SEEDED_PERTURBATIONS = {
    "swap": "its pairs of ranks are drawn from the seed alone: with the seed, every released value maps back to the "
            "value of its partner rank",
    "pram": "each row's draw is keyed by the seed and the row's rank in the value order: with the seed, whether and "
            "to what each value was changed is known",
    "noise": "its draws follow the rows' ranks in the value order from the seed: with the seed, the noise of every "
             "rank is known up to the column's sd",
}
SECRET_SEED = ("set seed to a secret random integer (e.g. python -c \"import secrets; print(secrets.randbits(62))\") "
               "and keep the policy private")


# the table masks' per-column seeds are taken modulo this (mask_seed): seeds equal modulo it give the same masks
MASK_SEED_MODULUS = 2**62


def refuse_public_seed(policy: Policy) -> None:
    """Refuse a seeded mask (``noise``, ``dnoise``, ``fake``, ``shuffle``) or a seeded perturbation (``swap``,
    ``pram``, ``noise``) under the default seed 0 (hostile round 9, M7; round 10, M14): each is a function of the
    raw values and the seed, so whoever knows the seed undoes it (X12: a consistent ``fake`` of 200 SSNs inverted
    from a list of candidates), and 0 is public. As SafePub does (runner/sampling.py). Microaggregation and top /
    bottom coding draw nothing, so they run under any seed. A multiple of 2⁶² is seed 0 too (round 11, M19: the
    masks' per-column seeds are taken modulo 2⁶², :func:`mask_seed`, so seed = 2⁶² gave seed 0's masks)."""
    if int(policy.seed) % MASK_SEED_MODULUS != 0:
        return
    said = "seed = 0 is the default" if int(policy.seed) == 0 else (
        f"seed = {int(policy.seed)} is a multiple of 2^62, the same masks as the default seed 0")
    for column, spec in mask_specs(policy).items():
        if spec.get("function") in SEEDED_MASKS:
            raise PolicyError(f"attributes.{column}.mask: a {spec['function']} mask is only as secret as the "
                              f"policy's seed ({SEEDED_MASKS[spec['function']]}), and {said}; {SECRET_SEED}")
    for column, spec in perturb_specs(policy).items():
        if spec.get("kind") in SEEDED_PERTURBATIONS:
            raise PolicyError(f"attributes.{column}.perturb: kind = \"{spec['kind']}\" is only as secret as the "
                              f"policy's seed ({SEEDED_PERTURBATIONS[spec['kind']]}), and {said}; {SECRET_SEED}")


def uses_sdc(policy: Policy) -> list[str]:
    """What of the policy is statistical disclosure control (for messages): ``perturb(col)``, ``mask(col)``, the
    local-suppression method."""
    out = [f"perturb ({c})" for c in perturb_specs(policy)] + [f"mask ({c})" for c in mask_specs(policy)]
    if policy.method == "local_suppression":
        out.append("method = \"local_suppression\"")
    return out


def rowwise(spec: dict[str, Any]) -> bool:
    """Whether a perturbation is row-local SQL (coding, independent noise), so it runs on Spark too."""
    return spec.get("kind") in ROWWISE_KINDS and not spec.get("correlated")


def refuse_elsewhere(engine_name: str, policy: Policy) -> None:
    """Refuse the SDC keys an engine other than DuckDB cannot run, naming what runs there. On Spark every
    ``perturb`` kind and known ``mask`` runs (:mod:`anon_sql.runner.sdc_engine`, :data:`INLINE_MASKS`), and local
    suppression too (:mod:`anon_sql.engines.spark.local_suppression`)."""
    if engine_name == "duckdb":
        return
    used = uses_sdc(policy)
    if engine_name == "spark":
        used = [f"mask ({c})" for c, m in mask_specs(policy).items()
                if m.get("function") not in INLINE_MASKS + TABLE_MASKS]
    if used:
        raise PolicyError(f"{', '.join(used)}: not available on {engine_name}; release this policy on DuckDB, or "
                          f"drop these keys (on {engine_name}: {SPARK_ALTERNATIVES})")


def number_rows(src: Source) -> exp.Select:
    """The source with ``ROW_ID`` = 1 … n in the order of its values (NULLs first): a parallel scan has no order, so
    the same data and seed give the same draws per record on every engine; equal rows are interchangeable."""
    order = exp.Order(expressions=[exp.Ordered(this=exp.column(c, quoted=True), nulls_first=True)
                                   for c in src.columns])
    return exp.select(exp.alias_(exp.Window(this=exp.RowNumber(), order=order), ident(ROW_ID)), exp.Star()) \
        .from_(src.relation.copy())


def mask_seed(seed: int, column: str) -> int:
    """A per-column seed for the table masks, so two shuffled columns get two permutations."""
    return (int(seed) * 1_000_003 + zlib.crc32(column.encode("utf-8"))) % MASK_SEED_MODULUS


def _temp(name: str) -> exp.Table:
    return exp.Table(this=ident(name))


def _create_temp(con: Any, name: exp.Table, query: exp.Expression) -> None:
    con.execute(render(exp.Create(this=name.copy(), kind="TABLE", replace=True, expression=query,
                                  properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))


def _drop(con: Any, name: exp.Table) -> None:
    con.execute(render(exp.Drop(tables=[name.copy()], kind="TABLE", exists=True)))


def prepare(con: Any, policy: Policy, src: Source) -> tuple[Prepared, Source] | None:
    """Perturb and table-mask the source as the policy says, into a TEMP table; return it with the source it now
    is (None when the policy perturbs and table-masks nothing). Every parameter is checked against the column's type
    first (a numeric perturbation of a text column is a PolicyError naming the attribute, the key and the fix)."""
    specs = perturb_specs(policy)
    table_masks = {c: m for c, m in mask_specs(policy).items() if m["function"] in TABLE_MASKS}
    if not specs and not table_masks:
        return None
    checked = {c: validate_perturbation(s, c, src.types.get(c, "")) for c, s in specs.items()}
    validate_groups(checked)
    base = f"{policy.name}__anon_sdc"
    numbered, perturbed, out = _temp(f"{base}_in"), _temp(f"{base}_pert"), _temp(f"{base}_out")
    prepared = Prepared(out, src.relation.copy())
    made = [numbered, perturbed]
    try:
        _create_temp(con, numbered, number_rows(src))
        result = perturb(con, numbered, checked, int(policy.seed), output=perturbed.name, temporary=True,
                         row_key=ROW_ID)
        prepared.perturbation = result.details
        numeric = [c for c, s in checked.items() if s["kind"] != "pram" and is_numeric(src.types.get(c, ""))]
        if numeric:
            prepared.utility = perturbation_utility(con, numbered, perturbed, numeric, row_id=ROW_ID)
        current = perturbed
        for i, (column, spec) in enumerate(table_masks.items()):
            seed = mask_seed(policy.seed, column)
            nxt = _temp(f"{base}_mask{i}")
            made.append(nxt)
            if spec["function"] == "shuffle":
                query = shuffle_select(current, column, seed, key_columns=[ROW_ID], columns=[ROW_ID, *src.columns])
            else:
                mapping = f"{base}_fake{i}"
                made.append(_temp(mapping))
                query = fake_select(con, current, column, spec, seed, key_columns=[ROW_ID], mapping_table=mapping,
                                    columns=[ROW_ID, *src.columns])
            _create_temp(con, nxt, query)
            prepared.masks[column] = spec["function"]
            current = nxt
        columns = [exp.column(c, quoted=True) for c in src.columns]
        _create_temp(con, out, exp.select(*columns).from_(current.copy()).order_by(exp.column(ROW_ID, quoted=True)))
    except BaseException:
        _drop(con, out)
        raise
    finally:
        for t in made:
            _drop(con, t)
    described = con.execute(render(exp.select(exp.Star()).from_(out.copy()).limit(0))).description
    types = {d[0]: str(d[1]) for d in described}
    return prepared, Source(src.label, out.copy(), list(src.columns), types)


def persist(engine: Any, prepared: Prepared, target: exp.Table) -> exp.Table:
    """Inside the release's transaction: the perturbed source as the working table ``target`` (replacing an
    earlier release's), which ``__source`` reads from then on."""
    if not target.args.get("db"):     # an engine without a working schema (Spark): a cached view of the session
        engine.create(exp.Create(this=target.copy(), kind="TABLE",
                                 expression=exp.select(exp.Star()).from_(prepared.temp.copy())))
        return target.copy()
    engine.execute(exp.Create(this=exp.Table(this=target.args["db"].copy()), kind="SCHEMA", exists=True))
    engine.execute(exp.Create(this=target.copy(), kind="TABLE", replace=True,
                              expression=exp.select(exp.Star()).from_(prepared.temp.copy())))
    return target.copy()


def discard_prepared(con: Any, prepared: Prepared | None) -> None:
    """Drop the TEMP table :func:`prepare` made."""
    if prepared is not None and not prepared.engine_owned:
        _drop(con, prepared.temp)
