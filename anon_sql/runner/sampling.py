"""SafePub's random sample, in SQL: a policy with ``[privacy] differential_privacy`` is released from the records
that a seeded hash keeps with probability β; the rest count as suppressed (docs/dp.md).

Each record is kept when its uniform — the first 52 bits of ``sha256(seed ‖ US ‖ "safepub" ‖ US ‖ its columns and
its number among identical records as JSON)`` (:func:`anon_sql.sdc.portable.keyed_digest`, as PRAM and the seeded
masks draw) — is below β: one Bernoulli(β) draw per record, independent across records and unpredictable without the
seed, and the same draws for the same data and seed. Until session 15 the draw was DuckDB's ``hash(…, seed)``,
which folds the seed in as one XOR mask over every record's seed-0 hash: an attacker knowing the other records
recovered the mask from the released class counts in 10 s and decided membership for certain (hostile round 12, M28,
SP2). Identical records are numbered within their group (a window without ORDER BY: they are interchangeable, so the
kept set does not depend on the numbering). The draws are only as secret as the seed: a SafePub policy must set one
(0, the default, is refused).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from ..common.sqlbuild import alias, col, ident, render
from ..errors import PolicyError
from ..models.safepub import SafePubParameters, safepub_parameters
from ..policy.model import Policy
from ..sdc.portable import hex_fraction, keyed_digest

DUPLICATE = "__safepub_dup"
STREAM = "safepub"   # the sample's own stream of the seed (PRAM's are its columns' names)


@dataclass(frozen=True)
class Sampling:
    """What a SafePub release sampled: its parameters and the records before and after sampling."""

    parameters: SafePubParameters
    records: int
    sampled: int

    def metrics(self) -> dict[str, float]:
        """The figures the catalog records with the release (anon.metrics, direction "info")."""
        p = self.parameters
        figures = {"dp_epsilon": p.epsilon, "dp_delta": p.delta, "dp_beta": p.beta, "dp_k": float(p.k),
                   "dp_sampled": float(self.sampled), "dp_unsampled": float(self.records - self.sampled)}
        if p.epsilon_search > 0:   # the DP search's share, spent choosing the level vector (docs/dp.md)
            figures.update(dp_epsilon_search=p.epsilon_search, dp_epsilon_anon=p.epsilon_anon)
        return figures


def safepub_policy(policy: Policy, engine_name: str) -> tuple[Policy, SafePubParameters] | None:
    """For a policy with ``differential_privacy``: the policy as released (k raised to SafePub's k, every class
    below it suppressed: ``max_suppression`` 0 means 1) and the parameters; None for any other policy. Refuses
    what SafePub here does not do (another method, counted rows, a privacy unit, another engine, seed 0; levels
    together with a DP search)."""
    spec = policy.privacy.differential_privacy
    if spec is None:
        return None
    share = spec.get("search_share", 0.0)
    if share and (policy.method_params or {}).get("levels"):
        raise PolicyError(f"privacy.differential_privacy.search_share = {share}: the DP search chooses the level "
                          "vector, so method_params.levels must be left out (or set search_share = 0 to use it)")
    if share and policy.privacy_unit:
        raise PolicyError(f"privacy.differential_privacy.search_share = {share}: the DP search scores records, not "
                          f"people; it is not supported with privacy_unit = {policy.privacy_unit!r} (give the "
                          "level vector and search_share = 0)")
    if policy.privacy_unit:
        raise PolicyError(f"privacy.differential_privacy (SafePub) samples and suppresses records one by one, so its "
                          f"(epsilon, delta) would hold per row, not per person of privacy_unit "
                          f"{policy.privacy_unit!r} (a person with m rows gets about m times epsilon): release one row "
                          "per person (aggregate the rows first) without privacy_unit, or use the DP statements "
                          "(SELECT WITH DIFFERENTIAL_PRIVACY), which bound each person's contribution")
    if policy.method != "levels":
        raise PolicyError(f"privacy.differential_privacy (SafePub) needs method = \"levels\" with a given level "
                          f"vector or search_share > 0 (a DP search chooses it), not {policy.method!r}")
    if policy.count_column:
        raise PolicyError(f"privacy.differential_privacy samples records one by one: count_column "
                          f"{policy.count_column!r} (a row standing for several records) is not supported; expand "
                          "the rows first")
    if engine_name != "duckdb":
        raise PolicyError(f"privacy.differential_privacy samples with DuckDB's hash: engine {engine_name!r} is not "
                          "supported (run the release on DuckDB)")
    if policy.seed == 0:
        raise PolicyError("privacy.differential_privacy: the sample is only as secret as the seed, and seed = 0 is "
                          "the default; set seed to a secret random integer (e.g. python -c \"import secrets; "
                          "print(secrets.randbits(62))\") and keep the policy private")
    if not -2 ** 63 <= int(policy.seed) < 2 ** 63:   # hostile round 12, M28: 2^64 + 1 drew seed 0's sample
        raise PolicyError(f"privacy.differential_privacy: seed = {policy.seed} is outside a 64-bit integer; DuckDB "
                          "hashes a larger one by its two 64-bit halves, so 2^64 + 1 draws the public sample of "
                          "seed 0; set seed to a secret random integer below 2^63 (e.g. python -c \"import secrets; "
                          "print(secrets.randbits(62))\")")
    params = safepub_parameters(spec["epsilon"], spec["delta"], share)
    k = max(policy.privacy.k or 1, params.k)
    suppression = policy.privacy.max_suppression or 1.0
    return policy.replace(privacy={"k": k, "max_suppression": suppression}), params


def sampled_relation(relation: exp.Expression, columns: Sequence[str], beta: float, seed: int) -> exp.Subquery:
    """``relation`` restricted to the records whose keyed sha256 uniform is below ``beta`` (same columns)."""
    numbered = exp.select(exp.Star(), alias(exp.Window(this=exp.RowNumber(), partition_by=[col(c) for c in columns]),
                                            DUPLICATE)).from_(relation.copy())
    record = exp.func("TO_JSON", exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.Literal.string(f"c{i}"), expression=col(c))
        for i, c in enumerate([*columns, DUPLICATE])]))
    draw = hex_fraction(keyed_digest(int(seed), record, STREAM))
    kept = (exp.select(*(col(c) for c in columns))
            .from_(exp.Subquery(this=numbered, alias=exp.TableAlias(this=ident("__safepub_rows"))))
            .where(exp.LT(this=draw, expression=exp.Literal.number(repr(float(beta))))))
    return exp.Subquery(this=kept, alias=exp.TableAlias(this=ident("__safepub_sample")))


def count_sample(con: Any, relation: exp.Expression) -> int:
    """Records of the sampled relation."""
    return int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(relation.copy()))).fetchall()[0][0])


__all__ = ["Sampling", "safepub_policy", "sampled_relation", "count_sample"]
