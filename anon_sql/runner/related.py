"""Related tables: rows that belong to a unit of the unit table, released beside it (docs/units.md).

A policy's ``[related.<name>]`` table is released as ``<release>_<name>`` in the release's transaction, once the
unit table is verified: the rows of the released units only (a suppressed unit leaves no row in any table), its
identifiers dropped or pseudonymized, its unit key pseudonymized with the same function as the unit table's unit
(the same person has the same pseudonym in every table) or dropped when the unit is dropped. Checked at resolve
time, before anything is created: the source exists, every column has a role, the key has the unit's type, no row's
key is missing from the unit table (orphans), and the source is no release's output.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from ..catalog import identity
from ..catalog.ownership import existing
from ..catalog.read import recorded_release
from ..catalog.store import released_names
from ..common.columns import UNIT
from ..common.sqlbuild import alias, col, dtype, ident, lit, render
from ..common.wording import counted
from ..data.source import Source, describe, refuse_shadowed_source, resolve_source
from ..errors import PolicyError, SourceError
from ..policy.model import Policy
from .digests import table_content


@dataclass
class RelatedTable:
    """One related table resolved against the database: its source, key and the role of each column."""

    name: str
    source: Source
    key: str
    roles: dict[str, dict[str, Any]]   # column → its attribute table (role, action)

    def target(self, release: str) -> exp.Table:
        return exp.Table(this=ident(f"{release}_{self.name}"))


def related_elsewhere(policy: Policy, engine: str) -> str:
    """Why ``[related.*]`` tables are refused on an engine that cannot write them, and what works there."""
    return (f"related table(s) {sorted(policy.related)} are released by the DuckDB engine only (the unit table and "
            f"every related table are written in one transaction, marked in the catalog); engine {engine!r} "
            f"releases the unit table alone with privacy_unit {policy.privacy_unit!r}: drop [related.*] from the "
            "policy, or release with anon_sql.release(duckdb_connection, policy) (docs/units.md)")


def resolve_related(con: Any, policy: Policy, src: Source) -> list[RelatedTable]:
    """Each ``[related.<name>]`` of the policy checked against the database (SourceError / PolicyError naming the
    table, the column and the count)."""
    out = []
    unit = policy.privacy_unit
    outputs = release_outputs(con) | {policy.name, *(f"{policy.name}_{n}" for n in policy.related)}
    targets: dict[str, str] = {}
    quasi = {q.lower(): q for q in policy.quasi}
    identifiers = {c.lower(): c for c, a in policy.attributes.items() if a.role == "identifier"}
    for name, spec in policy.related.items():
        where = f"[related.{name}]"
        target = f"{policy.name}_{name}"
        if target.lower() in targets:     # DuckDB's names are case-insensitive: two targets would be one table
            raise PolicyError(f"{where} and [related.{targets[target.lower()]}] would both be released as table "
                              f"{target!r} (DuckDB does not tell names apart by case): rename one of them")
        targets[target.lower()] = name
        source = spec["source"]
        if source in outputs:
            raise PolicyError(f"{where} source {source!r} is a release's output; relate the raw table instead")
        refuse_shadowed_source(con, source, f"{where} source {source!r}")   # round 15, M39 (U03)
        rel = resolve_source(con, source)
        if rel.label.lower() == src.label.lower():
            raise PolicyError(f"{where} source {source!r} is the unit table itself: its rows would be released a "
                              "second time beside the person's key, with none of the unit table's generalization; "
                              "relate a table of events (rows that belong to a unit), not the unit table")
        key = spec["key"]
        if key not in rel.columns:
            raise PolicyError(f"{where} key {key!r} is not a column of {rel.label!r} ({rel.columns})")
        if str(rel.types.get(key)).upper() != str(src.types.get(unit)).upper():
            raise PolicyError(f"{where} key {key!r} of {rel.label!r} is {rel.types.get(key)}, but privacy_unit "
                              f"{unit!r} of {src.label!r} is {src.types.get(unit)}: give them one type (cast in a "
                              "view over the related table)")
        attrs = dict(spec.get("attributes") or {})
        others = [c for c in rel.columns if c not in attrs and c != key]
        if others and not spec.get("default_role"):
            raise PolicyError(f"{where}: column(s) {others} of {rel.label!r} have no role: list them in "
                              f"[related.{name}.attributes.<column>] or set default_role")
        unknown = [c for c in attrs if c not in rel.columns]
        if unknown:
            raise PolicyError(f"{where} names column(s) {unknown} that {rel.label!r} does not have ({rel.columns})")
        roles = {c: attrs.get(c) or {"role": spec["default_role"]} for c in rel.columns if c != key}
        raw_ids = [c for c, a in roles.items() if c.lower() in identifiers and a.get("role") != "identifier"]
        if raw_ids:
            raise PolicyError(f"{where} would release column(s) {raw_ids} of {rel.label!r} as they are, named like "
                              f"identifier(s) {[identifiers[c.lower()] for c in raw_ids]} of the unit table, which the "
                              f"policy does not release: declare them identifiers here too ([related.{name}.attributes."
                              f"{raw_ids[0]}] role = \"identifier\", dropped or pseudonymized)")
        kept_qis = [c for c, a in roles.items() if c.lower() in quasi
                    and not (a.get("role") == "identifier" and a.get("action", "drop") == "drop")]
        if kept_qis:
            raise PolicyError(f"{where} would release column(s) {kept_qis} of {rel.label!r}, named like quasi-"
                              f"identifier(s) {[quasi[c.lower()] for c in kept_qis]} of the unit table: beside the "
                              "person's key they would undo that generalization; drop them ([related."
                              f"{name}.attributes.{kept_qis[0]}] role = \"identifier\") or, if they mean something "
                              "else, rename them in a view over the related table")
        units = exp.select(col(unit)).from_(src.relation.copy()).where(
            exp.Not(this=exp.Is(this=col(unit), expression=exp.Null())))
        orphans = exp.select(exp.Count(this=exp.Star())).from_(rel.relation.copy()).where(exp.Not(this=exp.In(
            this=col(key), query=exp.Subquery(this=units))))
        nulls = exp.select(exp.Count(this=exp.Star())).from_(rel.relation.copy()).where(
            exp.Is(this=col(key), expression=exp.Null()))
        n_orphans = sum(int(con.execute(render(q)).fetchall()[0][0]) for q in (orphans, nulls))
        if n_orphans:
            raise SourceError(f"{where}: {rel.label!r} holds {counted(n_orphans, 'row')} whose key {key!r} is no "
                              f"{unit!r} of {src.label!r} (orphans, NULL keys included): remove them or add their "
                              "units")
        out.append(RelatedTable(name, rel, key, roles))
    return out


def with_related_sensitive(policy: Policy, src: Source, tables: list[RelatedTable]) -> tuple[Policy, Source]:
    """The unit table joined with the sensitive columns of its related table (docs/units.md): one row per (person,
    related row), a person without related rows once with NULL values, so the sensitive-attribute models count the
    people holding each value; the policy gains those columns as sensitive attributes. Refuses sensitive columns
    in two related tables, a name the unit table has, and a dropped unit (the released tables could not be joined
    and ``check`` could not verify them)."""
    sensitive = policy.related_sensitive
    if not sensitive:
        return policy, src
    owners = sorted(set(sensitive.values()))
    if len(owners) > 1:
        raise PolicyError(f"sensitive columns in several related tables ({', '.join(owners)}): a person's values are "
                          "read from one related table; declare the others' columns insensitive, or relate one "
                          "table (a view joining them)")
    name = owners[0]
    clash = [c for c in sensitive if c in src.columns]
    if clash:
        raise PolicyError(f"[related.{name}] sensitive column(s) {clash} are also columns of {src.label!r}: rename "
                          "them in a view over the related table")
    unit = policy.privacy_unit
    if policy.attributes[unit].action != "pseudonymize":
        raise PolicyError(f"[related.{name}] holds sensitive column(s) {sorted(sensitive)}, but privacy_unit {unit!r} "
                          "is dropped: the released tables could then not be joined (each person's values would be "
                          f"unlinked rows) and `check` could not verify them per person; pseudonymize {unit!r} "
                          "(action = \"pseudonymize\"), or declare the related columns insensitive")
    table = next(t for t in tables if t.name == name)
    u, r = ident("u"), ident("r")
    values = exp.select(*[col(t) for t in (table.key, *sensitive)]).from_(table.source.relation.copy())
    joined = (exp.select(exp.Column(this=exp.Star(), table=u), *[col(c, "r") for c in sensitive])
              .from_(exp.Subquery(this=src.select_all(), alias=exp.TableAlias(this=u)))
              .join(exp.Subquery(this=values, alias=exp.TableAlias(this=r)),
                    on=exp.EQ(this=col(unit, "u"), expression=col(table.key, "r")), join_type="left"))
    relation = exp.Subquery(this=joined, alias=exp.TableAlias(this=ident("__with_related")))
    types = {**src.types, **{c: table.source.types[c] for c in sensitive}}
    joined_src = Source(src.label, relation, [*src.columns, *sensitive], types)
    d = policy.to_dict()
    for c in sensitive:
        d["attributes"][c] = dict(policy.related[name]["attributes"][c])
    return Policy.from_dict(d), joined_src


def one_row_per_unit(engine: Any, policy: Policy, release: exp.Table) -> int:
    """Rewrite the verified release (still holding ``__unit``) as one row per person without the related sensitive
    columns, which ``<release>_<name>`` releases; returns its rows. Every other column is constant per person (it
    comes from the unit table's row), so the distinct rows with the unit are the people's rows."""
    cursor = engine.con.execute(render(exp.select(exp.Star()).from_(release.copy()).limit(0)))
    described = cursor.description
    cursor.fetchall()   # (DuckDB 2: a result holds the connection until fetched)
    keep = [d[0] for d in described if d[0] not in policy.related_sensitive]
    rows = exp.select(*[col(c) for c in keep]).distinct().from_(release.copy())
    ordered = exp.select(exp.Star()).from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("x")))).order_by(
        *[exp.Ordered(this=col(c), nulls_first=True) for c in keep])
    engine.execute(exp.Create(this=release.copy(), kind="TABLE", expression=ordered, replace=True))
    return int(engine.con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(release.copy())))
               .fetchall()[0][0])


def released_shapes(con: Any, written: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """What ``check`` compares each related table with, in this database and in a shared file (hostile round 7, C08
    / C05): per related name, the columns (name, type) and rows of the table :func:`release_related` wrote, and the
    digest of its rows (round 10, C12: a related row's insensitive column set to the raw Id passed)."""
    out = {}
    for name, t in written.items():
        table = exp.Table(this=ident(t["table"]))
        columns = [[str(c[0]), str(c[1])] for c in describe(con, table)]
        out[name] = {"columns": columns, "released": t["released"],
                     "content": table_content(con, table, [c[0] for c in columns], dict(columns))}
    return out


def count_rows(con: Any, src: Source) -> int:
    """The rows of a source."""
    return int(con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(src.relation.copy())))
               .fetchall()[0][0])


def release_outputs(con: Any) -> set[str]:
    """The tables the recorded releases wrote: each release and its related tables (``<release>_<name>``)."""
    out = set()
    for name in released_names(con):
        out.add(name)
        row = recorded_release(con, name) or {}
        try:
            related = json.loads(row.get("policy_json") or "{}").get("related") or {}
        except ValueError:
            related = {}
        out.update(f"{name}_{n}" for n in related)
    return out


def related_marker(release: str, name: str) -> str:
    """The comment a related table carries between its write and the release's identity marks (and for good in a
    database released before related tables were marked: what ``replace`` accepts there)."""
    return f"anon_sql related table {name!r} of release {release!r}"


def foreign_related(con: Any, release: str, names: Sequence[str]) -> dict[str, str]:
    """The existing tables ``<release>_<name>`` (``names``: related names) that release ``release`` did not write,
    with why, by target name: their comment and columns are not the identity ``anon.owned_objects`` recorded for them
    (hostile round 7, X07: a comment alone can be written by anyone); a table recorded before related tables had
    identities is recognised by :func:`related_marker`. A table whose name differs from the target only in case is
    the same name to DuckDB: it is this release's only when recorded as such under that spelling (a related name
    whose case changed, round 8's N15), else the user's (round 9, M10). Tables that do not exist give none."""
    targets = {f"{release}_{n}": n for n in names}
    if not targets:
        return {}
    found = existing(con, list(targets))   # DuckDB's names ignore case: lower-cased name → (as stored, kind)
    stored = {t: found.get(t.lower(), (t, "table"))[0] for t in targets}   # target → the name it exists under
    as_stored = {v: k for k, v in stored.items()}
    recorded = {k[1]: v for k, v in identity.owned(con, release).items() if k[0] is None and k[1] in as_stored}
    out = {}
    for (_, table), now in identity.seen(con, release, related=list(as_stored)).items():
        target = as_stored.get(table)
        if target is None:
            continue
        row = recorded.get(table)
        if row is None:   # recorded before related tables were marked: the fixed comment decides
            if table != target or now.comment != related_marker(release, targets[target]):
                out[target] = ("it does not carry anon_sql's marker" if table == target else
                               f"its name {table!r} differs only in case from {target!r}, which DuckDB treats as "
                               "one name, and anon_sql did not write it")
        elif now.comment != row["marker"]:
            out[target] = (f"it does not carry the marker anon_sql wrote on it (its comment is {now.comment!r}): it "
                           "was dropped and created again, not by anon_sql")
        elif now.fingerprint != row["fingerprint"]:
            out[target] = "its columns or their types changed since anon_sql wrote it"
    for target, table in stored.items():   # a view of that name (identity.seen lists tables only)
        if table != target and target not in out and found[target.lower()][1] == "view":
            out[target] = f"{table!r} is a view whose name differs only in case from {target!r}"
    return out


def check_targets(con: Any, policy: Policy, tables: list[RelatedTable], replace: bool, dry_run: bool = False) -> None:
    """Refuse to overwrite an existing table named like a related release: always without ``replace``, and with it
    unless it is the table this release wrote (:func:`foreign_related`: a user's table of that name is never
    replaced)."""
    if dry_run:
        return
    found = existing(con, [t.target(policy.name).name for t in tables])   # in any case (round 9, M10)
    present = [t for t in tables if t.target(policy.name).name.lower() in found]
    if present and not replace:
        target = present[0].target(policy.name).name
        raise PolicyError(f"table {target!r} already exists: release with replace=True "
                          f"(--replace) to overwrite it, or rename [related.{present[0].name}]")
    foreign = foreign_related(con, policy.name, [t.name for t in present])
    for t in present:
        target = t.target(policy.name).name
        if target in foreign or found[target.lower()][1] != "table":
            why = foreign.get(target, "it is a view")
            raise PolicyError(f"{target!r} exists but is not the table release {policy.name!r} wrote for "
                              f"[related.{t.name}] ({why}): anon_sql replaces only what it created; rename or drop "
                              f"{target!r} yourself, or rename [related.{t.name}]")


def stale_related(con: Any, policy: Policy) -> list[exp.Table]:
    """The related tables the recorded release of ``policy``'s name wrote that ``policy`` no longer names (hostile
    round 7, X05: a replace with another related set left the old one behind, unowned): dropped in the replace's
    transaction. :class:`PolicyError` when one of them is not the table that release wrote (never dropped)."""
    row = recorded_release(con, policy.name) or {}
    try:
        before = json.loads(row.get("policy_json") or "{}").get("related") or {}
    except ValueError:
        before = {}
    now = {n.lower() for n in policy.related}   # DuckDB's names ignore case: `Conditions` is `conditions` (N15)
    gone = [n for n in before if n.lower() not in now]
    if not gone:
        return []
    foreign = foreign_related(con, policy.name, gone)
    if foreign:
        table, why = next(iter(foreign.items()))
        raise PolicyError(f"the earlier release {policy.name!r} wrote related table {table!r}, which this policy no "
                          f"longer names, so replacing the release drops it; but {table!r} is not that table "
                          f"({why}): anon_sql never drops what it did not create: rename or drop it yourself")
    found = existing(con, [f"{policy.name}_{n}" for n in gone])
    return [exp.Table(this=ident(f"{policy.name}_{n}")) for n in gone
            if found.get(f"{policy.name}_{n}".lower(), ("", ""))[1] == "table"]


def drop_stale(engine: Any, tables: list[exp.Table]) -> None:
    """Drop :func:`stale_related`'s tables (inside the replace's transaction)."""
    for table in tables:
        engine.execute(exp.Drop(tables=[table.copy()], kind="TABLE", exists=True))


def release_related(engine: Any, policy: Policy, release: exp.Table, tables: list[RelatedTable],
                    pseudonym_function: str | None, replace: bool) -> dict[str, dict[str, int]]:
    """Write ``<release>_<name>`` for each related table from the verified release (which still holds the units in
    ``__unit``); returns per table its rows in, released and suppressed (rows of suppressed units)."""
    unit_attr = policy.attributes.get(policy.privacy_unit)
    pseudonymize = unit_attr is not None and unit_attr.action == "pseudonymize"
    out = {}
    for t in tables:
        items: list[exp.Expression] = []
        for c in t.source.columns:
            attr = t.roles.get(c, {"role": "identifier", "action": "pseudonymize" if pseudonymize else "drop"})
            if c == t.key:      # the unit's key follows the unit: the same pseudonym as the unit table, or gone
                attr = {"role": "identifier", "action": "pseudonymize" if pseudonymize else "drop"}
            if attr["role"] == "identifier":
                if attr.get("action", "drop") == "drop":
                    continue
                if not pseudonym_function:
                    raise PolicyError(f"[related.{t.name}] {c!r}: a related column is pseudonymized with the unit "
                                      "table's key, which the policy uses only when the unit is pseudonymized: "
                                      f"pseudonymize {policy.privacy_unit!r} too, or drop {c!r}")
                items.append(alias(exp.Anonymous(this=pseudonym_function,
                                                 expressions=[exp.Cast(this=col(c, "r"), to=dtype("VARCHAR"))]), c))
            else:
                items.append(col(c, "r"))
        if not items:
            raise PolicyError(f"[related.{t.name}] releases no column (every column is a dropped identifier)")
        kept = exp.select(col(UNIT)).distinct().from_(release.copy())
        query = (exp.select(*items)
                 .from_(exp.Subquery(this=exp.select(exp.Star()).from_(t.source.relation.copy()),
                                     alias=exp.TableAlias(this=ident("r"))))
                 .where(exp.In(this=col(t.key, "r"), query=exp.Subquery(this=kept))))
        ordered = exp.select(exp.Star()).from_(exp.Subquery(this=query, alias=exp.TableAlias(this=ident("x"))))
        ordered = ordered.order_by(*[exp.Ordered(this=col(i.alias_or_name), nulls_first=True) for i in items])
        target = t.target(policy.name)
        if replace:
            engine.execute(exp.Drop(tables=[target.copy()], kind="TABLE", exists=True))
        engine.execute(exp.Create(this=target.copy(), kind="TABLE", expression=ordered))
        engine.execute(exp.Comment(this=target.copy(), kind="TABLE", expression=lit(related_marker(policy.name,
                                                                                                   t.name))))
        rows_in = int(engine.con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(
            t.source.relation.copy()))).fetchall()[0][0])
        released = int(engine.con.execute(render(exp.select(exp.Count(this=exp.Star())).from_(
            target.copy()))).fetchall()[0][0])
        out[t.name] = {"table": target.name, "rows_in": rows_in, "released": released,
                       "suppressed": rows_in - released}
    return out
