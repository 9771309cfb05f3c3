"""Release policies: attribute roles, taxonomies, privacy models, method and seed — from TOML, SQL or Python.

The three forms are equivalent: ``Policy.from_toml(p.to_toml()) == p`` and ``Policy.from_sql(p.to_sql()) == p``.
"""
from __future__ import annotations

import copy
import math
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PolicyError

ROLES = ("identifier", "quasi", "sensitive", "insensitive")
IDENTIFIER_ACTIONS = ("drop", "pseudonymize")
L_KINDS = ("distinct", "entropy", "recursive", "slicing")


@dataclass
class Attribute:
    """One column's role in the release and, for a quasi-identifier, its taxonomy."""

    name: str
    role: str
    taxonomy: str | dict[str, Any] | None = None
    action: str = "drop"
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise PolicyError(
                f"attribute {self.name!r}: role {self.role!r} is not one of {', '.join(ROLES)}"
            )
        if self.role == "identifier" and self.action not in IDENTIFIER_ACTIONS:
            raise PolicyError(
                f"attribute {self.name!r}: action {self.action!r} is not one of {', '.join(IDENTIFIER_ACTIONS)}"
            )
        if self.taxonomy is not None and self.role not in ("quasi", "sensitive"):
            raise PolicyError(
                f"attribute {self.name!r}: only quasi-identifiers (generalization) and sensitive attributes "
                f"(hierarchical t-closeness) take a taxonomy (its role is {self.role!r})"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.taxonomy is not None:
            out["taxonomy"] = copy.deepcopy(self.taxonomy)
        if self.role == "identifier" and self.action != "drop":
            out["action"] = self.action
        out.update(copy.deepcopy(self.options))
        return out


@dataclass
class Requirement:
    """An extra <S, k> requirement: every group over the quasi-identifier subset S has at least k records."""

    quasi: list[str]
    k: int

    def to_dict(self) -> dict[str, Any]:
        return {"quasi": list(self.quasi), "k": self.k}


@dataclass
class Privacy:
    """The privacy models a release must satisfy (all of them, verified in SQL on the released table)."""

    k: int | None = None
    max_suppression: float = 0.0
    l_diversity: dict[str, Any] | None = None
    t_closeness: float | dict[str, Any] | None = None
    simpson: dict[str, float] | None = None
    theta: dict[str, float] | None = None
    p_sensitive: dict[str, Any] | None = None
    alpha: float | None = None                       # (α, k)-anonymity
    beta_likeness: dict[str, Any] | None = None      # { beta = 1.0, kind = "basic" | "enhanced" }
    delta_disclosure: float | dict[str, Any] | None = None   # δ, or { delta = 1.0, log = "e" | "2" }
    requirements: list[Requirement] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = ("k", "max_suppression", "l_diversity", "t_closeness", "simpson", "theta", "p_sensitive", "alpha",
              "beta_likeness", "delta_disclosure", "requirements")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Privacy":
        d = dict(d or {})
        reqs = [Requirement(quasi=list(r["quasi"]), k=int(r["k"])) for r in d.pop("requirements", [])]
        known = {k: d.pop(k) for k in list(d) if k in cls._KNOWN}
        return cls(requirements=reqs, extra=d, **known)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.k is not None:
            out["k"] = self.k
        out["max_suppression"] = self.max_suppression
        for name in ("l_diversity", "t_closeness", "simpson", "theta", "p_sensitive", "alpha", "beta_likeness",
                     "delta_disclosure"):
            v = getattr(self, name)
            if v is not None:
                out[name] = copy.deepcopy(v)
        out.update(copy.deepcopy(self.extra))
        if self.requirements:
            out["requirements"] = [r.to_dict() for r in self.requirements]
        return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _validate_distribution_models(p: Privacy) -> None:
    """privacy.alpha in (0, 1]; privacy.beta_likeness = { beta > 0, kind basic|enhanced };
    privacy.delta_disclosure = δ > 0 or { delta > 0, log = "e" | "2" }."""
    if p.alpha is not None and not (_number(p.alpha) and 0 < p.alpha <= 1):
        raise PolicyError(f"privacy.alpha ((α, k)-anonymity) must be a share in (0, 1], got {p.alpha!r}")
    if p.beta_likeness is not None:
        b = p.beta_likeness
        if not isinstance(b, dict) or set(b) - {"beta", "kind"} or not _number(b.get("beta")) or b["beta"] <= 0 \
                or b.get("kind", "basic") not in ("basic", "enhanced"):
            raise PolicyError("privacy.beta_likeness must be { beta = <number > 0>, kind = \"basic\" | \"enhanced\" }, "
                              f"got {b!r}")
    if p.delta_disclosure is not None:
        d = p.delta_disclosure if isinstance(p.delta_disclosure, dict) else {"delta": p.delta_disclosure}
        if set(d) - {"delta", "log"} or not _number(d.get("delta")) or d["delta"] <= 0 \
                or str(d.get("log", "e")) not in ("e", "2"):
            raise PolicyError("privacy.delta_disclosure must be δ > 0 or { delta = <number > 0>, log = \"e\" | \"2\" }, "
                              f"got {p.delta_disclosure!r}")


@dataclass
class Policy:
    """A release policy. Build it from TOML (:meth:`from_toml`), SQL (:meth:`from_sql`) or directly."""

    name: str
    source: str
    attributes: dict[str, Attribute]
    privacy: Privacy = field(default_factory=Privacy)
    method: str = "levels"
    seed: int = 0
    count_column: str | None = None
    default_role: str | None = None
    method_params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PolicyError("policy `name` (the release table to create) must be a non-empty string")
        if not isinstance(self.source, str) or not self.source.strip():
            raise PolicyError("policy `source` must name a table, a view, or a .csv/.parquet path")
        if self.default_role is not None and self.default_role not in ROLES:
            raise PolicyError(f"default_role {self.default_role!r} is not one of {', '.join(ROLES)}")
        self.validate()

    # -- derived views -------------------------------------------------------------------------------------------
    def by_role(self, role: str) -> list[str]:
        return [a.name for a in self.attributes.values() if a.role == role]

    @property
    def quasi(self) -> list[str]:
        return self.by_role("quasi")

    @property
    def sensitive(self) -> list[str]:
        return self.by_role("sensitive")

    def validate(self) -> None:
        """Check what can be checked without data: parameters in range, requirements naming quasi-identifiers."""
        p = self.privacy
        if p.k is not None and (not isinstance(p.k, int) or isinstance(p.k, bool) or p.k < 1):
            raise PolicyError(f"privacy.k must be an integer >= 1, got {p.k!r}")
        if not isinstance(p.max_suppression, (int, float)) or not 0 <= p.max_suppression <= 1:
            raise PolicyError(
                f"privacy.max_suppression is a fraction of records in [0, 1], got {p.max_suppression!r}"
            )
        for r in p.requirements:
            unknown = [q for q in r.quasi if q not in self.quasi]
            if unknown:
                raise PolicyError(
                    f"privacy.requirements: {unknown} are not quasi-identifiers of the policy "
                    f"(quasi-identifiers: {self.quasi})"
                )
            if r.k < 1:
                raise PolicyError(f"privacy.requirements: k must be >= 1, got {r.k}")
        if p.l_diversity is not None:
            kind = p.l_diversity.get("kind", "distinct")
            if kind not in L_KINDS:
                raise PolicyError(f"privacy.l_diversity.kind {kind!r} is not one of {', '.join(L_KINDS)}")
            if "l" not in p.l_diversity or float(p.l_diversity["l"]) < 1:
                raise PolicyError("privacy.l_diversity needs l >= 1, e.g. { kind = \"distinct\", l = 2 }")
            if kind == "recursive" and "c" not in p.l_diversity:
                raise PolicyError("privacy.l_diversity kind 'recursive' needs c, e.g. { kind = \"recursive\", c = 3, l = 2 }")
        if p.theta is not None and not 0 < float(p.theta.get("mu", -1)) <= 1:
            raise PolicyError(f"privacy.theta.mu must be in (0, 1] (the paper uses 0.5–0.9), got {p.theta.get('mu')!r}")
        _validate_distribution_models(p)
        needs_sa = (p.l_diversity or p.t_closeness is not None or p.simpson or p.theta or p.p_sensitive
                    or p.alpha is not None or p.beta_likeness is not None or p.delta_disclosure is not None)
        if needs_sa and not self.sensitive:
            raise PolicyError(
                "the policy asks for a sensitive-attribute model (l-diversity, t-closeness, Simpson, θ, "
                "p-sensitivity, α, β-likeness or δ-disclosure) but no attribute has role = \"sensitive\""
            )
        if self.count_column and self.count_column in self.attributes:
            raise PolicyError(f"count_column {self.count_column!r} cannot also be an attribute of the policy")

    # -- dict / TOML ---------------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Policy":
        d = copy.deepcopy(d)
        missing = [k for k in ("name", "source") if k not in d]
        if missing:
            raise PolicyError(f"the policy is missing {', '.join(missing)}")
        attrs: dict[str, Attribute] = {}
        for name, spec in (d.pop("attributes", None) or {}).items():
            if not isinstance(spec, dict) or "role" not in spec:
                raise PolicyError(f"attribute {name!r} needs a role, e.g. [attributes.{name}] role = \"quasi\"")
            spec = dict(spec)
            role = spec.pop("role")
            taxonomy = spec.pop("taxonomy", None)
            action = spec.pop("action", "drop")
            attrs[name] = Attribute(name, role, taxonomy, action, spec)
        privacy = Privacy.from_dict(d.pop("privacy", {}) or {})
        known = {k: d.pop(k) for k in ("name", "source", "method", "seed", "count_column", "default_role",
                                        "method_params", "metrics") if k in d}
        if d:
            raise PolicyError(f"unknown policy keys: {sorted(d)}; see the policy reference in docs/policy.md")
        return cls(attributes=attrs, privacy=privacy, **known)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "source": self.source, "method": self.method, "seed": self.seed}
        if self.count_column:
            out["count_column"] = self.count_column
        if self.default_role:
            out["default_role"] = self.default_role
        out["attributes"] = {a.name: a.to_dict() for a in self.attributes.values()}
        out["privacy"] = self.privacy.to_dict()
        if self.method_params:
            out["method_params"] = copy.deepcopy(self.method_params)
        if self.metrics:
            out["metrics"] = copy.deepcopy(self.metrics)
        return out

    @classmethod
    def from_toml(cls, path_or_text: str | Path) -> "Policy":
        """Read a policy from a TOML file path or TOML text."""
        text = str(path_or_text)
        if "\n" not in text and Path(text).suffix == ".toml":
            if not Path(text).exists():
                raise PolicyError(f"policy file {text!r} does not exist")
            text = Path(text).read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise PolicyError(f"the policy is not valid TOML: {err}") from None
        return cls.from_dict(data)

    def to_toml(self) -> str:
        """The policy as TOML text (readable back with :meth:`from_toml`)."""
        return _dump_toml(self.to_dict())

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    # -- SQL -----------------------------------------------------------------------------------------------------
    @classmethod
    def from_sql(cls, sql: str) -> "Policy":
        """Parse ``CREATE ANONYMIZED VIEW name WITH (...) AS SELECT quasi(col, ...), ... FROM source``."""
        from .policy_sql import parse_policy_sql

        return cls.from_dict(parse_policy_sql(sql))

    def to_sql(self, pretty: bool = True) -> str:
        from .policy_sql import render_policy_sql

        return render_policy_sql(self.to_dict(), pretty=pretty)

    def replace(self, **changes: Any) -> "Policy":
        """A copy with top-level fields changed (``privacy`` may be a dict of privacy fields to change)."""
        d = self.to_dict()
        for key, value in changes.items():
            if key == "privacy":
                d["privacy"].update(value)
            else:
                d[key] = value
        return Policy.from_dict(d)


def coerce_policy(policy: "Policy | dict | str | Path") -> Policy:
    """Accept a Policy, a dict, a TOML path/text, or a CREATE ANONYMIZED VIEW statement."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, dict):
        return Policy.from_dict(policy)
    text = str(policy)
    if text.lstrip().upper().startswith("CREATE"):
        return Policy.from_sql(text)
    if text.endswith(".sql") and Path(text).exists():
        return Policy.from_sql(Path(text).read_text(encoding="utf-8"))
    return Policy.from_toml(text)


# -- a small TOML writer for the policy's shape (tables, arrays of tables, inline tables, scalars) ---------------
def _toml_key(key: str) -> str:
    if key and all(c.isalnum() or c in "-_" for c in key) and key.isascii():
        return key
    return json.dumps(key, ensure_ascii=False)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if v is None:
        raise PolicyError("TOML has no null: remove the key instead")
    raise PolicyError(f"cannot write {type(v).__name__} to TOML")


def _dump_toml(d: dict[str, Any]) -> str:
    lines: list[str] = []
    tables = []
    for k, v in d.items():
        if isinstance(v, dict) and k in ("attributes", "privacy", "method_params", "metrics"):
            tables.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in tables:
        if k == "attributes":
            for name, spec in v.items():
                lines.append("")
                lines.append(f"[attributes.{_toml_key(name)}]")
                lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in spec.items())
            continue
        reqs = v.get("requirements") if k == "privacy" else None
        lines.append("")
        lines.append(f"[{k}]")
        lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in v.items() if not (k == "privacy" and a == "requirements"))
        for r in reqs or []:
            lines.append("")
            lines.append("[[privacy.requirements]]")
            lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in r.items())
    return "\n".join(lines) + "\n"
