"""The policy schema: every key of every policy section, its type, range, default and meaning — declared once.

Everything that reads a policy checks it here (``Policy(...)``, ``Policy.from_dict`` / ``from_toml`` / ``from_sql``,
the SQL form's ``WITH (...)`` options and role functions), and the reference tables of docs/policy.md are generated
from it (anon_sql/policy/docs.py: ``python -m anon_sql.policy.docs --write docs/policy.md``; a test fails when the
file differs), so what is documented is exactly what is accepted.

An unknown key is a :class:`PolicyError` naming the key and its section, with the closest known key (difflib):
``unknown key `l_diversty` in [privacy]: did you mean `l_diversity`?``. Types are strict: a bool is not an integer,
text is never coerced to a number (``l = "2"`` is refused).

Adding a key is one declaration:

* a privacy model: one ``ModelKey`` in its model module (anon_sql/models/*.py), e.g. ``ModelKey(key("beta_likeness",
  table(BETA_LIKENESS), "..."), build=...)`` with its table's keys in ``BETA_LIKENESS =
  section("privacy.beta_likeness", key("beta", number(gt=0), "..."), ...)``; the models' registry hands the keys to
  :data:`PRIVACY` (:func:`registered_model_keys`); a new choice of an existing key is one more name in its
  ``choice(...)`` (e.g. ``"hierarchical"`` in :data:`T_DISTANCES`);
* a method parameter: one ``key(...)`` in the method class's ``parameters`` tuple (anon_sql/methods/*.py); the
  registry collects them (:func:`anon_sql.methods.method_parameters`);
* a search objective: its name in ``anon_sql.policy.objectives.OBJECTIVES`` (the ``objective`` choice reads that table);
* a metric parameter: one ``key(...)`` in :data:`METRICS`;
* an attribute option: one ``key(...)`` in its role's section of :data:`ATTRIBUTE` (e.g. a sensitive attribute's
  ``taxonomy`` for hierarchical t-closeness); an inline taxonomy kind: one section in :data:`TAXONOMY`.

Then run ``python -m anon_sql.policy.docs --write docs/policy.md``.
"""
from __future__ import annotations

import difflib
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..errors import PolicyError

REQUIRED = object()   # default of a key that must be given


# -- value types ---------------------------------------------------------------------------------------------------
class ValueType:
    """A value's type and range: :meth:`check` raises a PolicyError naming ``path``; :meth:`describe` is for humans."""

    def check(self, value: Any, path: str) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        try:
            self.check(value, "")
        except PolicyError:
            return False
        return True

    def fail(self, value: Any, path: str) -> PolicyError:
        return PolicyError(f"{path} must be {self.describe()}, got {value!r}{_kind_of(value)}")


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return " (a boolean)"
    if isinstance(value, str):
        return " (text)"
    return ""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and not (isinstance(v, float) and math.isnan(v))


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


@dataclass(frozen=True)
class Number(ValueType):
    """A number (integer if ``integer``) within optional bounds; ``ge``/``gt``/``le``/``lt`` as in the maths."""

    integer: bool = False
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def check(self, value: Any, path: str) -> None:
        ok = _is_int(value) if self.integer else _is_number(value)
        if ok and not math.isinf(value):
            ok = ((self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
                  and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))
        if not ok:
            raise self.fail(value, path)

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"
        low = (self.ge, "[") if self.ge is not None else (self.gt, "(") if self.gt is not None else None
        high = (self.le, "]") if self.le is not None else (self.lt, ")") if self.lt is not None else None
        if low and high:
            return f"{what} in {low[1]}{_fmt(low[0])}, {_fmt(high[0])}{high[1]}"
        if low:
            return f"{what} {'>=' if low[1] == '[' else '>'} {_fmt(low[0])}"
        if high:
            return f"{what} {'<=' if high[1] == ']' else '<'} {_fmt(high[0])}"
        return what


def integer(**bounds: float) -> Number:
    return Number(integer=True, **bounds)


def number(**bounds: float) -> Number:
    return Number(**bounds)


@dataclass(frozen=True)
class Text(ValueType):
    """Non-empty text (any text if ``empty``)."""

    empty: bool = False
    what: str = "text"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str) or (not self.empty and not value.strip()):
            raise self.fail(value, path)

    def describe(self) -> str:
        return self.what if self.empty else f"non-empty {self.what}"


@dataclass(frozen=True)
class Choice(ValueType):
    """One of a fixed list of names (or of a list computed on use, for registries that grow)."""

    names: tuple[str, ...] | Callable[[], Iterable[str]]
    noun: str = ""    # "method": the error reads "unknown method 'x'" (else "<path> must be one of ...")

    def options(self) -> list[str]:
        return list(self.names() if callable(self.names) else self.names)

    def check(self, value: Any, path: str) -> None:
        options = self.options()
        if not isinstance(value, str) or value not in options:
            close = closest(value, options) if isinstance(value, str) else None
            if self.noun:
                hint = f": did you mean {close!r}?" if close else ""
                raise PolicyError(f"unknown {self.noun} {value!r}{hint} ({path} is one of {', '.join(options)})")
            hint = f" (did you mean {close!r}?)" if close else ""
            raise PolicyError(f"{path} must be one of {options}, got {value!r}{hint}")

    def describe(self) -> str:
        return "one of " + ", ".join(f"`{n}`" for n in self.options())


def choice(*names: str) -> Choice:
    return Choice(tuple(names))


@dataclass(frozen=True)
class Boolean(ValueType):
    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, bool):
            raise self.fail(value, path)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Scalar(ValueType):
    """Any text, number or boolean (a data value)."""

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, (str, int, float)):
            raise self.fail(value, path)

    def describe(self) -> str:
        return "a value (text, number or boolean)"


@dataclass(frozen=True)
class AnyTable(ValueType):
    """A table checked elsewhere (``[method_params]``: against the chosen method's own section)."""

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            raise self.fail(value, path)

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class ListOf(ValueType):
    item: ValueType
    min_len: int = 0

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, (list, tuple)) or len(value) < self.min_len:
            raise self.fail(value, path)
        for i, v in enumerate(value):
            self.item.check(v, f"{path}[{i}]")

    def describe(self) -> str:
        size = {0: "a list", 1: "a non-empty list"}.get(self.min_len, f"a list of at least {self.min_len}")
        return f"{size}, each {self.item.describe()}"


@dataclass(frozen=True)
class MapOf(ValueType):
    """A table whose keys are free (attribute names, categories, leaves); every value of ``value`` type."""

    value: ValueType
    what: str = "name"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            raise self.fail(value, path)
        for k, v in value.items():
            if not isinstance(k, str):
                raise PolicyError(f"{path}: key {k!r} must be text")
            self.value.check(v, f"{path}.{k}")

    def describe(self) -> str:
        return f"a table {{ {self.what} = {self.value.describe()} }}"


@dataclass(frozen=True)
class AnyOf(ValueType):
    """The first of several types that accepts the value; the error lists them all."""

    types: tuple[ValueType, ...]

    def check(self, value: Any, path: str) -> None:
        for t in self.types:
            # a table that has the right shape reports its own (more precise) error
            if isinstance(t, (Table, Tagged)) and isinstance(value, Mapping):
                t.check(value, path)
                return
            if t.accepts(value):
                return
        raise self.fail(value, path)

    def describe(self) -> str:
        return " or ".join(t.describe() for t in self.types)


def any_of(*types: ValueType) -> AnyOf:
    return AnyOf(tuple(types))


# -- sections: tables with known keys --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Key:
    """One key of a section: its name, type, default (``REQUIRED`` when it must be given) and meaning."""

    name: str
    type: ValueType
    doc: str
    default: Any = None


def key(name: str, type_: ValueType, doc: str, default: Any = None) -> Key:
    return Key(name, type_, doc, default)


@dataclass
class Section:
    """A table of known keys; ``title`` names it in messages and docs (``[privacy]``, ``[attributes.<column>]``)."""

    title: str
    keys: dict[str, Key]
    doc: str = ""
    rules: list[Callable[[Mapping[str, Any], str], None]] = field(default_factory=list)

    def add(self, *keys: Key) -> "Section":
        """Declare more keys (for code that extends the product; docs pick them up)."""
        for k in keys:
            self.keys[k.name] = k
        return self

    def check(self, d: Any, path: str | None = None, where: str | None = None) -> None:
        """Refuse unknown keys (with the closest known one), missing required keys, and values of the wrong type.
        ``path`` prefixes value names in messages (``privacy.k``); ``where`` names the section (default: title)."""
        where = where or self.title
        if not isinstance(d, Mapping):
            raise PolicyError(f"{where} must be a table of keys ({', '.join(self.keys)}), got {d!r}")
        for name in d:
            if name not in self.keys:
                raise unknown_key(name, where, self.keys)
        for k in self.keys.values():
            if k.default is REQUIRED and d.get(k.name) is None:
                raise PolicyError(f"{where} needs `{k.name}` ({k.type.describe()}): {k.doc}")
        for name, value in d.items():
            if value is not None:
                self.keys[name].type.check(value, f"{path}.{name}" if path else name)
        for rule in self.rules:
            rule(d, path or where)


def section(title: str, *keys: Key, doc: str = "", rules: Iterable[Callable] = ()) -> Section:
    return Section(title, {k.name: k for k in keys}, doc, list(rules))


def closest(name: Any, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib), if any is close enough to be a likely typo."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key(name: Any, where: str, known: Iterable[str]) -> PolicyError:
    """The error for an unknown key: names it and its section, suggests the closest known key."""
    known = list(known)
    close = closest(name, known)
    hint = f": did you mean `{close}`?" if close else f"; known keys: {', '.join(known) or 'none'}"
    return PolicyError(f"unknown key `{name}` in {where}{hint}")


@dataclass(frozen=True)
class Table(ValueType):
    """A nested table checked against a section (an inline table such as ``theta = { mu = 0.6 }``)."""

    section: Section
    label: str = ""   # how docs name it ("see [privacy]"); default: its keys

    def check(self, value: Any, path: str) -> None:
        self.section.check(value, path, f"[{path}]" if path else None)

    def describe(self) -> str:
        return self.label or "a table { " + ", ".join(f"{k} = …" for k in self.section.keys) + " }"


def section_table(s: Section, label: str = "") -> Table:
    return Table(s, label)


@dataclass(frozen=True)
class Tagged(ValueType):
    """A table whose ``tag`` key (``kind``, ``role``) chooses the section its other keys are checked against."""

    tag: str
    variants: dict[str, Section]
    default: str | None = None
    noun: str = "table"

    def variant(self, value: Mapping, path: str) -> Section:
        name = value.get(self.tag, self.default)
        if name is None:
            raise PolicyError(f"{path} needs `{self.tag}`: one of {list(self.variants)}")
        Choice(tuple(self.variants)).check(name, f"{path}.{self.tag}")
        return self.variants[name]

    def check(self, value: Any, path: str, where: str | None = None) -> None:
        if not isinstance(value, Mapping):
            raise self.fail(value, path)
        every = dict.fromkeys(k for s in self.variants.values() for k in s.keys)
        for name in value:      # a key of no variant (a misspelled tag, too) is named before the variant is chosen
            if name not in every:
                raise unknown_key(name, where or f"[{path}]", every)
        chosen = self.variant(value, path)
        for name in value:
            if name not in chosen.keys:
                tag = value.get(self.tag, self.default)
                owners = [n for n, s in self.variants.items() if name in s.keys]
                raise PolicyError(f"{where or f'[{path}]'}: `{name}` does not apply to {self.tag} = {tag!r}, only to "
                                  f"{self.tag} = {' | '.join(repr(o) for o in owners)}")
        chosen.check(value, path, where or f"[{path}] ({self.tag} = {value.get(self.tag, self.default)!r})")

    def describe(self) -> str:
        return f"a {self.noun} with `{self.tag}` = " + " | ".join(f"`{n}`" for n in self.variants)


# -- the policy's sections -------------------------------------------------------------------------------------------
ROLES = ("identifier", "quasi", "sensitive", "insensitive")
IDENTIFIER_ACTIONS = ("drop", "pseudonymize")
T_DISTANCES = ("equal", "ordered", "hierarchical")
TAXONOMY_KINDS = ("file", "interval", "mask", "date", "top", "mapping")


def _one_of_keys(*names: str) -> Callable[[Mapping[str, Any], str], None]:
    def rule(d: Mapping[str, Any], where: str) -> None:
        given = [n for n in names if d.get(n) is not None]
        if len(given) != 1:
            raise PolicyError(f"{where} needs exactly one of {', '.join(f'`{n}`' for n in names)}"
                              + (f" (got {', '.join(given)})" if given else ""))
    return rule


def at_least_one_key(*names: str) -> Callable[[Mapping[str, Any], str], None]:
    def rule(d: Mapping[str, Any], where: str) -> None:
        if all(d.get(n) is None for n in names):
            raise PolicyError(f"{where} needs at least one of {', '.join(f'`{n}`' for n in names)}")
    return rule


def _taxonomy_kind(kind: str, *keys: Key, doc: str = "", rules: Iterable[Callable] = ()) -> Section:
    return section(f"taxonomy kind = \"{kind}\"", key("kind", choice(kind), "the builder", REQUIRED), *keys,
                   doc=doc, rules=rules)


_TOP_KEY = key("top", Boolean(), "add a `*` level above the last one when it is not already `*`", True)
TAXONOMY = Tagged("kind", {
    "interval": _taxonomy_kind(
        "interval",
        key("widths", ListOf(number(gt=0), 1), "one bin width per level (bins aligned at 0), e.g. [5, 10, 20]"),
        key("bounds", ListOf(ListOf(number(), 2), 1),
            "cut points per level, last exclusive, e.g. [[20, 35, 45, 65, 86], [20, 45, 86]]"),
        _TOP_KEY, doc="numeric intervals: integer data `[20-24]`, other data `[20.5, 25.5)`",
        rules=[_one_of_keys("widths", "bounds")]),
    "mask": _taxonomy_kind("mask", key("levels", integer(ge=1), "characters masked at the top level "
                                       "(default: the longest value's length)"),
                           doc="level L replaces the last L characters by `*` (52003 → 5200* → …)"),
    "date": _taxonomy_kind("date", doc="day → month → year → `*`"),
    "top": _taxonomy_kind("top", doc="each value, then `*`"),
    "mapping": _taxonomy_kind("mapping", key("mapping", MapOf(ListOf(Scalar()), "leaf"),
                                             "leaf → [level1, level2, …], e.g. { Low = [\"Yes\"], No = [\"Any\"] }",
                                             REQUIRED), _TOP_KEY, doc="an explicit tree"),
    "file": _taxonomy_kind("file", key("path", Text(what="path"), "an ARX hierarchy CSV (`value;level1;…;*`)",
                                       REQUIRED), doc="an ARX CSV file"),
}, noun="inline taxonomy")

_ROLE = key("role", choice(*ROLES), "the column's role", REQUIRED)


def _perturb_kind(kind: str, *keys: Key, doc: str = "", rules: Iterable[Callable] = ()) -> Section:
    return section(f"perturb kind = \"{kind}\"", key("kind", choice(kind), "the perturbation", REQUIRED), *keys,
                   doc=doc, rules=rules)


def _group_needs_correlated(d: Mapping[str, Any], where: str) -> None:
    if d.get("group") is not None and not d.get("correlated"):
        raise PolicyError(f"{where}: `group` only applies to correlated noise; add correlated = true or remove group")


def _group_needs_mdav(d: Mapping[str, Any], where: str) -> None:
    if d.get("group") is not None and d.get("method", "mdav") != "mdav":
        raise PolicyError(f"{where}: individual_ranking aggregates each column on its own; remove `group` or use "
                          "method = \"mdav\"")


_REPLACEMENT = key("replacement", number(), "the value coded values become (default: the threshold)")
_GROUP = key("group", Text(what="name"), "columns sharing a group name are perturbed together (multivariate)")
PERTURB = Tagged("kind", {
    "microaggregation": _perturb_kind(
        "microaggregation", key("k", integer(ge=2), "records per group (groups hold k … 2k − 1)", REQUIRED),
        key("method", choice("mdav", "individual_ranking"), "MDAV, or individual ranking (sorted blocks of k)",
            "mdav"), _GROUP, doc="each value becomes its group's mean (numeric columns)", rules=[_group_needs_mdav]),
    "top_code": _perturb_kind("top_code", key("above", number(), "values above it are coded", REQUIRED), _REPLACEMENT,
                              doc="values above `above` become `above` (or `replacement`)"),
    "bottom_code": _perturb_kind("bottom_code", key("below", number(), "values below it are coded", REQUIRED),
                                 _REPLACEMENT, doc="values below `below` become `below` (or `replacement`)"),
    "pram": _perturb_kind("pram", key("retain", number(gt=0, le=1), "probability of keeping a value (P[v, v])",
                                      REQUIRED),
                          key("invariant", Boolean(), "R = P·Q keeps the marginals in expectation", False),
                          doc="each category replaced by a seeded draw from a transition matrix"),
    "noise": _perturb_kind("noise", key("scale", number(gt=0), "noise sd as a share of the column's sd", REQUIRED),
                           key("correlated", Boolean(), "draw from N(0, scale²·Σ): the covariance is kept up to "
                               "(1 + scale²)", False), _GROUP,
                           doc="x + e, e ~ N(0, (scale·σ)²), seeded (numeric columns)",
                           rules=[_group_needs_correlated]),
    "swap": _perturb_kind("swap", key("window", number(gt=0, le=100), "largest rank distance, in % of the rows",
                                      REQUIRED), doc="rank swapping, seeded (numeric columns)"),
}, noun="perturbation")


def _mask_function(function: str, *keys: Key, doc: str = "", rules: Iterable[Callable] = ()) -> Section:
    return section(f"mask function = \"{function}\"", key("function", choice(function), "the masking function",
                                                             REQUIRED), *keys, doc=doc, rules=rules)


def _interval_text(d: Mapping[str, Any], where: str) -> None:
    from ..sdc.masking import mask_expression   # the macro's own check: a DuckDB interval text

    mask_expression("x", dict(d))


def _known_faker_provider(d: Mapping[str, Any], where: str) -> None:
    from ..sdc.masking import faker_providers   # refuses an unknown locale, naming close ones

    provider, locale = d.get("provider"), d.get("locale", "en_US")
    names = faker_providers(locale)
    if provider not in names:
        close = difflib.get_close_matches(str(provider), names, n=5, cutoff=0.5)
        raise PolicyError(f"{where}.provider = {provider!r} is not a Faker provider of locale {locale!r}; "
                          + (f"did you mean {', '.join(close)}?" if close
                             else "e.g. first_name, last_name, name, email, phone_number, address, city"))


MASK = Tagged("function", {
    "partial": _mask_function("partial", key("keep_start", integer(ge=0), "characters kept at the start", REQUIRED),
                              key("pad", Text(empty=True), "what replaces the middle, e.g. \"XXXX\"", REQUIRED),
                              key("keep_end", integer(ge=0), "characters kept at the end", REQUIRED),
                              doc="`anon.partial(x, keep_start, pad, keep_end)`"),
    "partial_email": _mask_function("partial_email", doc="`anon.partial_email(x)`: first character and top level"),
    "redact": _mask_function("redact", key("replacement", Text(empty=True), "the text every value becomes",
                                           "[REDACTED]"), doc="`anon.redact(x)`"),
    "hash": _mask_function("hash", key("salt", Text(), "a secret salt (an unsalted hash of a small domain is "
                                       "reversed by hashing every candidate)", REQUIRED),
                           doc="`anon.hash(x, salt)`: sha256 hex"),
    "noise": _mask_function("noise", key("ratio", number(ge=0, le=1), "largest relative change", REQUIRED),
                            doc="`anon.noise(x, ratio, seed, x)`: x · U[1 − ratio, 1 + ratio], seeded"),
    "dnoise": _mask_function("dnoise", key("interval", Text(what="interval text"), "e.g. \"10 days\"", REQUIRED),
                             doc="`anon.dnoise(d, interval, seed, d)`: a date shifted by U[−interval, +interval]",
                             rules=[_interval_text]),
    "shuffle": _mask_function("shuffle", doc="the column permuted among the rows, seeded (refused under the default "
                                             "seed = 0: docs/sdc.md)"),
    "fake": _mask_function("fake", key("provider", Text(), "a Faker provider, e.g. \"first_name\"", REQUIRED),
                           key("locale", Text(), "a Faker locale", "en_US"),
                           key("consistent", Boolean(), "the same source value gets the same fake (seeded)", True),
                           doc="values from Faker, deterministic per seed: a consistent fake is a keyed lookup of "
                               "the raw value, only as secret as the seed (refused under the default seed = 0: "
                               "docs/sdc.md)",
                           rules=[_known_faker_provider]),
}, noun="mask")
_PERTURB_KEY = key("perturb", PERTURB, "perturbation before classes are formed: `{ kind = \"microaggregation\" "
                   "| \"top_code\" | \"bottom_code\" | \"pram\" | \"noise\" | \"swap\", … }` (docs/sdc.md)")
_MASK_KEY = key("mask", MASK, "a masking function in the released select: `{ function = \"partial\" | "
                "\"partial_email\" | \"redact\" | \"hash\" | \"noise\" | \"dnoise\" | \"shuffle\" | "
                "\"fake\", … }` (docs/sdc.md)")


def _mask_or_pseudonymize(d: Mapping[str, Any], where: str) -> None:
    if d.get("mask") is not None and d.get("action", "drop") != "drop":
        raise PolicyError(f"{where}: `mask` and action = {d.get('action')!r} both say how the identifier is "
                          "released; keep one (a masked identifier is released masked)")
    function = (d.get("mask") or {}).get("function") if isinstance(d.get("mask"), Mapping) else None
    if function in _KEEPS_VALUES:   # hostile round 8, M3: a shuffled identifier publishes every raw identifier
        raise PolicyError(f"{where}.mask: function = {function!r} {_KEEPS_VALUES[function]}, and an identifier is "
                          "never released as it is: drop or pseudonymize it (action = \"pseudonymize\"), or mask it "
                          "with \"hash\", \"partial\", \"partial_email\", \"redact\" or \"fake\"")


# masks that release an identifier's raw values (permuted) or values next to them
_KEEPS_VALUES = {"shuffle": "releases every raw value (permuted among the rows)",
                 "noise": "releases each value moved by at most its ratio (ratio = 0: the raw value)",
                 "dnoise": "releases each value moved by at most its interval"}
ATTRIBUTE = Tagged("role", {
    "identifier": section("[attributes.<column>] role = \"identifier\"", _ROLE,
                          key("action", choice(*IDENTIFIER_ACTIONS),
                              "`drop` the column, or `pseudonymize` it (HMAC-SHA256 keyed by `$ANON_SQL_KEY` or "
                              "`key_file`; the key is never stored)", "drop"),
                          key("key_file", Text(what="path"), "file holding the pseudonym key (with `pseudonymize`)"),
                          key("rows_are_people", Boolean(), "the rows are different people even where this "
                              "column's values repeat (e.g. two patients named alike); without it, and without "
                              "`privacy_unit`, a repeated identifier is refused (docs/units.md)", False),
                          _MASK_KEY, doc="a direct identifier: never released as it is",
                          rules=[_mask_or_pseudonymize]),
    "quasi": section("[attributes.<column>] role = \"quasi\"", _ROLE,
                     key("taxonomy", any_of(Text(what="name or path"), TAXONOMY),
                         "a catalog name (`anon-sql taxonomy load`), a built-in (`adult_age`, …), a path to an ARX "
                         "CSV, or an inline taxonomy (below); full-domain methods need one"),
                     key("iv", number(ge=0), "identity-vulnerability weight of this QI for the IV-weighted metrics"),
                     _PERTURB_KEY, doc="a quasi-identifier: generalized until every model holds"),
    "sensitive": section("[attributes.<column>] role = \"sensitive\"", _ROLE,
                         key("taxonomy", any_of(Text(what="name or path"), TAXONOMY),
                             "the value hierarchy of hierarchical t-closeness (`distance = \"hierarchical\"`), "
                             "given as for a quasi-identifier"),
                         _PERTURB_KEY, doc="released unchanged; the sensitive-attribute models protect it"),
    "insensitive": section("[attributes.<column>] role = \"insensitive\"", _ROLE, _PERTURB_KEY, _MASK_KEY,
                           doc="released unchanged (or perturbed, or masked)"),
}, noun="table")

REQUIREMENT = section("[[privacy.requirements]]",
                      key("quasi", ListOf(Text(), 1), "the quasi-identifier subset S", REQUIRED),
                      key("k", integer(ge=1), "every group over S has >= k records", REQUIRED))


class PrivacySection(Section):
    """The ``[privacy]`` section: its own keys (``k``, ``max_suppression``, ``requirements``) around the keys of the
    privacy models, which the models' registry declares (:func:`registered_model_keys`, read on first use)."""

    def __init__(self, title: str, head: Iterable[Key], tail: Iterable[Key]):
        super().__init__(title, {})
        self.own, self.frame = None, (tuple(head), tuple(tail))

    @property
    def keys(self) -> dict[str, Key]:  # type: ignore[override]
        if self.own is None:
            head, tail = self.frame
            self.own = {k.name: k for k in (*head, *(m.key for m in registered_model_keys()), *tail)}
        return self.own

    @keys.setter
    def keys(self, value: dict[str, Key]) -> None:
        self.own = value or None


PRIVACY = PrivacySection(
    "[privacy]",
    [key("k", integer(ge=1), "k-anonymity: every class has >= k records (without it, k = 1)"),
     key("max_suppression", number(ge=0, le=1), "fraction of records that may be suppressed (removed, counted)", 0.0)],
    [key("requirements", ListOf(section_table(REQUIREMENT)), "extra <S, k> requirements (`[[privacy.requirements]]`)")],
)


METRICS = section(
    "[metrics]",
    key("compute", any_of(choice("all", "default"), ListOf(Text())),
        "metrics measured inside the release transaction and stored in `anon.metrics`: names, `\"all\"` or "
        "`\"default\"`"),
    key("risk_threshold", number(gt=0), "class size under which records count as at risk (default k)"),
    key("reid_quasi", ListOf(Text()), "the QI subset an attacker knows, for `reid_probability` (default: all)"),
    key("weights", MapOf(number(ge=0), "qi"), "per-QI weights of the weighted NCP"),
    key("iv", any_of(choice("uniform", "forest"), MapOf(number(ge=0), "qi")),
        "identity-vulnerability weights per QI, or how to get them (default: forest with a sensitive attribute)"),
    key("iv_trees", integer(ge=1), "trees of the IV random forest", 20),
    key("queries", integer(ge=1), "COUNT(*) queries of the `query_error` workload", 1000),
    key("query_dims", ListOf(integer(ge=1), 1), "QIs per query (default [1, 2, 3] up to |QI|)"),
    key("query_selectivity", ListOf(number(gt=0, le=1), 1), "selectivities of the workload"),
    key("query_seed", integer(), "seed of the workload (default: the policy's seed)"),
    key("recursive_l", integer(ge=1), "l of the recursive (c, l) summary (default: the policy's, else 2)"),
    key("t_distance", choice(*T_DISTANCES), "ground distance of the t-closeness summary"),
    key("silhouette_sample", integer(ge=1), "records sampled for the silhouette", 10_000),
)


# The privacy models are a layer above the policy too: anon_sql.models registers its catalog of [privacy] keys here
# when it is imported (each model family declares its key, type and doc sections in its own module), loaded by name
# on first use as the methods' catalog is.
_MODEL_CATALOG: dict[str, Callable[..., Any]] = {}
MODELS_MODULE = "anon_sql.models"


@dataclass(frozen=True)
class ModelKeyInfo:
    """What the policy layer knows of one model family's ``[privacy]`` key: the key itself, whether its models
    protect a sensitive attribute (one model per attribute; the policy then needs role = "sensitive") or compare the
    classes with a population table, and the sub-sections docs/policy.md lists under it (title, section)."""

    key: Key
    per_attribute: bool = True
    population: bool = False
    sections: tuple[tuple[str, Any], ...] = ()


def register_model_catalog(keys: Callable[[], list[ModelKeyInfo]]) -> None:
    """Called by :mod:`anon_sql.models`: how to list the models' ``[privacy]`` keys, in their order."""
    _MODEL_CATALOG.update(keys=keys)


def registered_model_keys() -> list[ModelKeyInfo]:
    """The ``[privacy]`` keys of the privacy models, in order (the models' registry, loaded on first use)."""
    if "keys" not in _MODEL_CATALOG:
        importlib.import_module(MODELS_MODULE)   # registers the catalog (see register_model_catalog)
    return list(_MODEL_CATALOG["keys"]())


def sensitive_model_keys() -> tuple[str, ...]:
    """The [privacy] keys whose models protect a sensitive attribute (a policy with one of them needs role =
    "sensitive")."""
    return tuple(m.key.name for m in registered_model_keys() if m.per_attribute)


def population_model_keys() -> tuple[str, ...]:
    """The [privacy] keys whose models compare each class with a population table."""
    return tuple(m.key.name for m in registered_model_keys() if m.population)


# The methods are a layer above the policy: anon_sql.methods registers its catalog here when it is imported. The
# policy package never imports it by name (that would be a cycle: methods read these keys); the first lookup loads the
# registry the way a plugin entry point is loaded, by its module name.
_METHOD_CATALOG: dict[str, Callable[..., Any]] = {}
METHODS_MODULE = "anon_sql.methods"


def register_method_catalog(names: Callable[[], list[str]], parameters: Callable[[str], tuple]) -> None:
    """Called by :mod:`anon_sql.methods`: how to list method names and read a method's ``[method_params]`` keys."""
    _METHOD_CATALOG.update(names=names, parameters=parameters)


def _method_catalog(what: str) -> Callable[..., Any]:
    if what not in _METHOD_CATALOG:
        importlib.import_module(METHODS_MODULE)   # registers the catalog (see register_method_catalog)
    return _METHOD_CATALOG[what]


def registered_method_names() -> list[str]:
    """Every method name (the methods' registry, loaded on first use)."""
    return _method_catalog("names")()


def registered_method_parameters(name: str) -> tuple:
    """The ``[method_params]`` keys of a method (its class's ``parameters``)."""
    return _method_catalog("parameters")(name)


RELATED = section(
    "[related.<name>]",
    key("source", Text(), "table, view or `.csv` / `.parquet` path whose rows belong to the units", REQUIRED),
    key("key", Text(what="column name"), "the column holding the unit's value (the unit table's `privacy_unit`)",
        REQUIRED),
    key("default_role", choice("identifier", "insensitive"), "role of the columns `attributes` does not list"),
    key("attributes", MapOf(ATTRIBUTE, "column"), "`[related.<name>.attributes.<column>]`: role per column "
        "(`identifier`, `insensitive`, or `sensitive`: a person holds the values of their rows, checked per "
        "person by the sensitive-attribute models; docs/units.md)", {}),
    doc="a table whose rows belong to one unit each, released as `<release>_<name>` (docs/units.md)")

TOP = section(
    "the policy (top level)",
    key("name", Text(), "the release table to create (any characters; quoted by sqlglot)", REQUIRED),
    key("source", Text(), "table or view of the database, or a `.csv` / `.parquet` path (from Python, "
        "`release(..., source=X)` also takes a pandas / Polars DataFrame, a pyarrow Table or Dataset, or a DuckDB "
        "relation in its place: see docs/api.md)", REQUIRED),
    key("method", Choice(registered_method_names, "method"), "the anonymization method", "levels"),
    key("seed", integer(), "seed of every random step", 0),
    key("privacy_unit", Text(what="column name"), "the column that identifies the person (the unit) when a person "
        "may have several rows: every guarantee then counts distinct units, not rows (k = people per class, a "
        "sensitive value's share = people holding it), and suppression removes a person with all their rows. The "
        "column is an identifier (dropped, or pseudonymized with `action = \"pseudonymize\"`); docs/units.md"),
    key("related", MapOf(section_table(RELATED, "a table (`[related.<name>]` below)"), "name"),
        "`[related.<name>]`: tables whose rows belong to the units (needs `privacy_unit`): each released as "
        "`<release>_<name>` with the rows of the released units only, the unit key pseudonymized as in the unit "
        "table or dropped (docs/units.md)"),
    key("count_column", Text(), "each row stands for n records (a whole number >= 1 on every row, checked against "
        "the data); class sizes are SUM(n)"),
    key("default_role", choice(*ROLES), "role of columns the policy does not list (else listing them is an error)"),
    key("attributes", MapOf(ATTRIBUTE, "column"), "`[attributes.<column>]`: one table per column (below)", {}),
    key("privacy", section_table(PRIVACY, "a table (`[privacy]` below)"), "the privacy models", {}),
    key("method_params", AnyTable(), "`[method_params]`: parameters of the chosen method (below)", {}),
    key("metrics", section_table(METRICS, "a table (`[metrics]` below)"), "metrics measured with the release", {}),
)
# method_params is checked against the chosen method's own section (check_method_params), not the MapOf above

#: WITH (...) options of the SQL form: top-level keys except those the statement itself gives, then [privacy] keys
SQL_TOP_LEVEL = tuple(k for k in TOP.keys if k not in ("name", "source", "attributes", "privacy"))


def method_params_section(method: str) -> Section:
    """The ``[method_params]`` section of a method (its class's ``parameters``)."""
    return section(f"[method_params] of method {method!r}", *registered_method_parameters(method))


def check_policy_dict(d: Any) -> None:
    """Check a whole policy dict (the shape of ``Policy.to_dict``) against the schema; raise the first error."""
    TOP.check(d)
    method = d.get("method") or "levels"
    method_params_section(method).check(d.get("method_params") or {}, "method_params")


def check_sql_option(name: str) -> str:
    """Where a ``WITH (...)`` option of the SQL form goes: ``"top"`` or ``"privacy"``; anything else is refused."""
    if name in SQL_TOP_LEVEL:
        return "top"
    if name in PRIVACY.keys:
        return "privacy"
    if name in ("name", "source", "attributes"):
        raise PolicyError(f"`{name}` is not a WITH option: the statement gives it (CREATE ANONYMIZED VIEW name "
                          "... AS SELECT quasi(col), ... FROM source)")
    owners = [m for m in registered_method_names() if name in {k.name for k in registered_method_parameters(m)}]
    if owners:
        raise PolicyError(f"`{name}` is a parameter of method(s) {', '.join(owners)}, not a WITH option: give it "
                          f"inside method_params, e.g. method_params = {{'{name}': ...}}")
    raise unknown_key(name, "the WITH (...) options", [*SQL_TOP_LEVEL, *PRIVACY.keys])
