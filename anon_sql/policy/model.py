"""Release policies: attribute roles, taxonomies, privacy models, method and seed — from TOML, SQL or Python.

The three forms are equivalent: ``Policy.from_toml(p.to_toml()) == p`` and ``Policy.from_sql(p.to_sql()) == p``.
Every form is checked against the policy schema (anon_sql/policy/keys.py): unknown keys, wrong types and out-of-range
values are PolicyErrors; this module adds the checks that relate keys to each other.
"""
from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import keys as schema
from ..errors import PolicyError


@dataclass
class Attribute:
    """One column's role in the release and, for a quasi-identifier, its taxonomy."""

    name: str
    role: str
    taxonomy: str | dict[str, Any] | None = None
    action: str = "drop"
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        schema.ATTRIBUTE.check(self.to_dict(), f"attributes.{self.name}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.taxonomy is not None:
            out["taxonomy"] = copy.deepcopy(self.taxonomy)
        if self.action != "drop":
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
    k_map: dict[str, Any] | None = None              # { k = 5, population = "table" }
    delta_presence: dict[str, Any] | None = None     # { delta_min = 0.0, delta_max = 0.5, population = "table" }
    requirements: list[Requirement] = field(default_factory=list)
    differential_privacy: dict[str, Any] | None = None   # SafePub: { epsilon = 2.0, delta = 1e-5 }
    # settings of registered model keys that have no field above (a model added by its own module alone)
    others: dict[str, Any] = field(default_factory=dict)

    def setting(self, name: str) -> Any:
        """The setting of a model's ``[privacy]`` key (None when not given)."""
        return getattr(self, name) if name in FIELDS else self.others.get(name)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Privacy":
        """Read a ``[privacy]`` table (checked against the schema; None values mean "not given")."""
        d = {k: v for k, v in (d or {}).items() if v is not None}
        schema.PRIVACY.check(d, "privacy")
        reqs = [Requirement(quasi=list(r["quasi"]), k=r["k"]) for r in d.pop("requirements", [])]
        others = {k: d.pop(k) for k in list(d) if k not in FIELDS}
        return cls(requirements=reqs, others=others, **d)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.k is not None:
            out["k"] = self.k
        out["max_suppression"] = self.max_suppression
        for name in schema.PRIVACY.keys:
            if name in ("k", "max_suppression", "requirements"):
                continue
            v = self.setting(name)
            if v is not None:
                out[name] = copy.deepcopy(v)
        if self.requirements:
            out["requirements"] = [r.to_dict() for r in self.requirements]
        return out


FIELDS = frozenset(f for f in Privacy.__dataclass_fields__ if f != "others")


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
    privacy_unit: str | None = None
    related: dict[str, Any] = field(default_factory=dict)   # name → [related.<name>] table (docs/units.md)
    default_role: str | None = None
    method_params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PolicyError("policy `name` (the release table to create) must be a non-empty string")
        if not isinstance(self.source, str) or not self.source.strip():
            raise PolicyError("policy `source` must name a table, a view, or a .csv/.parquet path")
        if not isinstance(self.privacy, Privacy):
            raise PolicyError(f"Policy(privacy=...) takes a Privacy (or use Policy.from_dict), got {self.privacy!r}")
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

    @property
    def related_sensitive(self) -> dict[str, str]:
        """The sensitive columns of the related tables (docs/units.md): column → its ``[related.<name>]``."""
        return {c: name for name, spec in self.related.items()
                for c, a in (spec.get("attributes") or {}).items() if (a or {}).get("role") == "sensitive"}

    def validate(self) -> None:
        """Check what can be checked without data: every key, type and range against the schema, then
        requirements naming quasi-identifiers and models that need a sensitive attribute."""
        for name, attr in self.attributes.items():
            if not isinstance(attr, Attribute) or attr.name != name:
                raise PolicyError(f"Policy(attributes=...) maps each column name to its Attribute; {name!r} does not")
        schema.check_policy_dict(self.to_dict())
        p = self.privacy
        for r in p.requirements:
            unknown = [q for q in r.quasi if q not in self.quasi]
            if unknown:
                raise PolicyError(
                    f"privacy.requirements: {unknown} are not quasi-identifiers of the policy "
                    f"(quasi-identifiers: {self.quasi})"
                )
        needs_sa = [k for k in schema.sensitive_model_keys() if p.setting(k) is not None]
        if needs_sa and not (self.sensitive or self.related_sensitive):
            raise PolicyError(
                f"the policy asks for a sensitive-attribute model ({', '.join(needs_sa)}) but no attribute has "
                "role = \"sensitive\""
            )
        if self.count_column and self.count_column in self.attributes:
            raise PolicyError(f"count_column {self.count_column!r} cannot also be an attribute of the policy")
        for name, spec in self.related.items():
            if not self.privacy_unit:
                raise PolicyError(f"[related.{name}] needs privacy_unit: its rows belong to units of the unit table "
                                  "(privacy_unit = \"<the unit table's key column>\")")
            if any(bad in name for bad in ("/", "\\", "..", "\x00")):   # round 8, E08: a Parquet export's file part
                raise PolicyError(f"[related.{name}]: a related table's name may not hold '/', '\\', '..' or NUL (it "
                                  "names the table <release>_<name> and an exported file X.<name>.parquet): rename "
                                  "it to letters, digits and '_'")
            if not name or name.startswith("_"):   # <release>__<x> is the product's own namespace (round 7, E03)
                raise PolicyError(f"[related.{name}]: a related table's name may not be empty or start with '_' "
                                  f"(it is released as <release>_<name>, and <release>__* are the names anon_sql "
                                  "gives its own tables: __classes, __metadata, __units, ...): rename it, e.g. "
                                  f"[related.{name.lstrip('_') or 'events'}]")
            for column, attr in (spec.get("attributes") or {}).items():
                applied = [k for k in ("mask", "perturb") if attr.get(k) is not None]
                if applied:   # round 9, M11: accepted, never applied, and the raw values released
                    raise PolicyError(f"[related.{name}.attributes.{column}] {applied[0]}: a related table's columns "
                                      "are released as they are (or dropped / pseudonymized as identifiers); masks "
                                      "and perturbations apply to the unit table only: drop the column (role = "
                                      "\"identifier\"), or mask it in a view over the related table")
                if attr.get("role") not in ("identifier", "insensitive", "sensitive"):
                    raise PolicyError(f"[related.{name}.attributes.{column}] role = {attr.get('role')!r}: a related "
                                      "table's columns are identifier, insensitive or sensitive (a person holds the "
                                      "values of their rows); quasi-identifiers live in the unit table")
        if self.privacy_unit:
            unit = self.attributes.get(self.privacy_unit)
            if unit is not None and unit.role != "identifier":
                raise PolicyError(
                    f"privacy_unit {self.privacy_unit!r} identifies a person, so it is never released as it is: "
                    f"declare [attributes.{self.privacy_unit}] role = \"identifier\" (action = \"drop\" or "
                    f"\"pseudonymize\"), not role = {unit.role!r}")
            if unit is not None and unit.options.get("rows_are_people"):   # round 8, U26: a contradiction
                raise PolicyError(f"[attributes.{self.privacy_unit}] rows_are_people = true says its rows are "
                                  f"different people, but privacy_unit = {self.privacy_unit!r} says each value is "
                                  "one person whose rows belong together: remove one of them")
            if self.count_column:
                raise PolicyError(f"privacy_unit and count_column cannot be combined: a count column says each row "
                                  f"stands for several records, a unit says whose rows they are; remove one")

    # -- dict / TOML ---------------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Policy":
        """Read a policy dict (the shape of the TOML file), checked against the schema (anon_sql/policy/keys.py)."""
        if not isinstance(d, dict):
            raise PolicyError(f"a policy is a table of keys (name, source, attributes, privacy, ...), got {d!r}")
        d = {k: v for k, v in copy.deepcopy(d).items() if v is not None}
        schema.TOP.check(d)
        attrs: dict[str, Attribute] = {}
        for name, spec in (d.pop("attributes", None) or {}).items():
            spec = dict(spec)
            role = spec.pop("role")
            taxonomy = spec.pop("taxonomy", None)
            action = spec.pop("action", "drop")
            attrs[name] = Attribute(name, role, taxonomy, action, spec)
        privacy = Privacy.from_dict(d.pop("privacy", {}) or {})
        return cls(attributes=attrs, privacy=privacy, **d)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "source": self.source, "method": self.method, "seed": self.seed}
        if self.privacy_unit:
            out["privacy_unit"] = self.privacy_unit
        if self.related:
            out["related"] = copy.deepcopy(self.related)
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
            text = read_policy_file(text)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise PolicyError(f"the policy is not valid TOML: {err}") from None
        return cls.from_dict(data)

    def to_toml(self) -> str:
        """The policy as TOML text (readable back with :meth:`from_toml`)."""
        return dump_toml(self.to_dict())

    def to_json(self) -> str:
        return json.dumps(self.to_dict())       # attribute order is meaningful (QI order, tie-breaks): keep it

    # -- SQL -----------------------------------------------------------------------------------------------------
    @classmethod
    def from_sql(cls, sql: str) -> "Policy":
        """Parse ``CREATE ANONYMIZED VIEW name WITH (...) AS SELECT quasi(col, ...), ... FROM source``."""
        from .sql import parse_policy_sql

        return cls.from_dict(parse_policy_sql(sql))

    def to_sql(self, pretty: bool = True) -> str:
        from .sql import render_policy_sql

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
        return Policy.from_sql(read_policy_file(text))
    return Policy.from_toml(text)


def read_policy_file(path: str) -> str:
    """A policy file's text; a file that is not UTF-8 (binary, another encoding) is a PolicyError naming the byte."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PolicyError(f"policy file {path!r} is not UTF-8 text (byte {data[err.start]:#04x} at offset "
                          f"{err.start}); save it as UTF-8") from None


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


def dump_toml(d: dict[str, Any]) -> str:
    """A policy dict as TOML text (top-level keys, then [attributes.*], [privacy] with [[privacy.requirements]],
    [method_params], [metrics]); no checking: Policy.to_toml writes a checked policy."""
    lines: list[str] = []
    tables = []
    for k, v in d.items():
        if isinstance(v, dict) and k in ("attributes", "privacy", "method_params", "metrics", "related"):
            tables.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in tables:
        if k == "related":
            for name, spec in v.items():
                lines.append("")
                lines.append(f"[related.{_toml_key(name)}]")
                lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in spec.items() if a != "attributes")
                for column, attr in (spec.get("attributes") or {}).items():
                    lines.append("")
                    lines.append(f"[related.{_toml_key(name)}.attributes.{_toml_key(column)}]")
                    lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in attr.items())
            continue
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
