"""The SQL form of a policy, parsed and rendered with sqlglot.

Grammar (DuckDB expression syntax for values: strings, numbers, booleans, lists ``[...]``, structs ``{'k': v}``)::

    CREATE [OR REPLACE] ANONYMIZED VIEW release_name
    WITH (method = 'optimal', seed = 0, k = 5, max_suppression = 0.0,
          l_diversity = {'kind': 'distinct', 'l': 2}, method_params = {...}, count_column = 'n', ...)
    AS SELECT quasi(age, taxonomy => 'adult_age'), quasi(zip, taxonomy => {'kind': 'mask', 'levels': 5}),
              sensitive(salary), insensitive(weight), identifier(name, action => 'pseudonymize')
    FROM source

Options in WITH are the top-level policy keys (method, seed, count_column, default_role, method_params, metrics) and
the ``[privacy]`` keys (k, l_diversity, requirements, ...); anything else is an error that names the option and the
closest known one (anon_sql/policy/keys.py). A role function's ``key => value`` options are that role's attribute keys.
"""
from __future__ import annotations

import logging
import re
from typing import Any

import sqlglot
from sqlglot import exp

from ..errors import PolicyError
from .keys import ATTRIBUTE, ROLES, SQL_TOP_LEVEL, check_sql_option, closest
from ..common.sqlbuild import ident, lit


def _strip_anonymized(sql: str) -> str:
    """Blank out the ANONYMIZED keyword after CREATE [OR REPLACE], by token position (the rest is standard SQL);
    spaces of the same length keep every line and column of a parse error those of the statement as written."""
    tokens = sqlglot.tokenize(sql, read="duckdb")
    words = [t.text.upper() for t in tokens[:5]]
    if not words or words[0] != "CREATE":
        raise PolicyError("a SQL policy starts with CREATE [OR REPLACE] ANONYMIZED VIEW name ...")
    pos = 1
    if words[1:3] == ["OR", "REPLACE"]:
        pos = 3
    if len(words) <= pos + 1 or words[pos] != "ANONYMIZED" or words[pos + 1] != "VIEW":
        raise PolicyError("a SQL policy starts with CREATE [OR REPLACE] ANONYMIZED VIEW name ...")
    tok = tokens[pos]
    return sql[: tok.start] + " " * (tok.end + 1 - tok.start) + sql[tok.end + 1:]


def _parse_error(err: sqlglot.errors.ParseError, text: str) -> str:
    """sqlglot's first parse error against the statement as written: what, where, and its line with a caret."""
    first = err.errors[0] if err.errors else {}
    line, col = first.get("line"), first.get("col")
    lines = text.split("\n")
    if not isinstance(line, int) or not isinstance(col, int) or not 1 <= line <= len(lines):
        return str(err)
    what = _plain_words(first.get("description") or str(err))
    return f"{what} (line {line}, column {col} of the statement)\n  {lines[line - 1]}\n  {' ' * (col - 1)}^"


# sqlglot's "Required keyword: 'value' missing for <class 'sqlglot.expressions....Property'>" in a user's words
_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")
_WHAT = {"Property": "a WITH option", "Anonymous": "a function call", "Column": "a column", "Table": "a table"}


def _plain_words(description: str) -> str:
    """A parse error's description without sqlglot's class names (hostile round 3, SH4)."""
    found = _REQUIRED.search(description)
    if not found:
        return description
    key, cls = found.groups()
    return (f"{_WHAT.get(cls, 'an expression')} has no {key} (the statement ends, or a part is missing, here); "
            "complete it, e.g. WITH (method = 'optimal', k = 5)" if cls == "Property" else
            f"{_WHAT.get(cls, 'an expression')} has no {key} (the statement ends, or a part is missing, here)")


def _value(node: exp.Expression) -> Any:
    """Evaluate a literal expression (string, number, boolean, NULL, list, struct) to a Python value."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Neg):
        return -_value(node.this)
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Array):
        return [_value(e) for e in node.expressions]
    if isinstance(node, exp.Struct):
        out = {}
        for e in node.expressions:
            if isinstance(e, (exp.PropertyEQ, exp.EQ, exp.Slice)):
                key = e.this.name if not isinstance(e.this, exp.Literal) else e.this.this
                out[key] = _value(e.expression)
            else:
                raise PolicyError(f"cannot read struct field {e.sql('duckdb')!r}; write {{'key': value}}")
        return out
    if isinstance(node, (exp.Column, exp.Var, exp.Identifier)):
        return node.name
    raise PolicyError(f"cannot read policy value {node.sql('duckdb')!r}: use a string, number, list or struct")


def parse_policy_sql(sql: str) -> dict[str, Any]:
    """Parse the SQL form into the policy dict of :class:`anon_sql.Policy`."""
    text = sql.strip().rstrip(";")
    quiet = logging.getLogger("sqlglot")       # no "falling back to parsing as a Command" warning on stderr
    level, quiet.level = quiet.level, logging.ERROR
    try:
        tree = sqlglot.parse_one(_strip_anonymized(text), read="duckdb")
    except sqlglot.errors.ParseError as err:
        raise PolicyError(f"cannot parse the SQL policy: {_parse_error(err, text)}") from None
    except sqlglot.errors.TokenError as err:     # an unterminated string or quoted name (a truncated statement)
        raise PolicyError(f"cannot parse the SQL policy: {str(err).splitlines()[0]} (an unterminated string or "
                          "quoted name?)") from None
    finally:
        quiet.level = level
    if not isinstance(tree, exp.Create) or not isinstance(tree.expression, exp.Select):
        raise PolicyError("a SQL policy is CREATE ANONYMIZED VIEW name WITH (...) AS SELECT ... FROM source")
    out: dict[str, Any] = {"name": tree.this.name if isinstance(tree.this, exp.Table) else tree.this.this.name}
    privacy: dict[str, Any] = {}
    for prop in (tree.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if not isinstance(prop, exp.Property):
            raise PolicyError(f"unexpected WITH option {prop.sql('duckdb')!r}; write name = value")
        key = prop.this.name if isinstance(prop.this, (exp.Var, exp.Identifier)) else str(prop.this)
        target = out if check_sql_option(key) == "top" else privacy
        if key in target:
            raise PolicyError(f"WITH option `{key}` is given twice; give it once")
        target[key] = _value(prop.args["value"])
    out["privacy"] = privacy
    select = tree.expression
    source = select.args.get("from_") or select.args.get("from")
    if source is None or not isinstance(source.this, exp.Table):
        raise PolicyError("a SQL policy needs FROM source (a table, a view, or a quoted .csv/.parquet path)")
    src = source.this
    if not isinstance(src.this, exp.Identifier):   # a table function: FROM read_csv('x.csv') has no name
        raise PolicyError(f"FROM {src.sql('duckdb')}: a SQL policy's source is a table, a view, or a quoted .csv/.parquet "
                          "path, not a table function; write e.g. FROM 'data.csv'")
    clauses = sorted(k for k, v in select.args.items() if v and k not in ("expressions", "from_", "from", "kind"))
    clauses += sorted(k for k, v in src.args.items() if v and k in ("joins", "sample", "pivots", "laterals"))
    if clauses:   # a WHERE, JOIN, LIMIT, ... was dropped silently before (hostile round 6, S38: rows it excluded released)
        raise PolicyError(f"a SQL policy's SELECT takes role functions FROM one source, nothing else (found: "
                          f"{', '.join(c.upper() for c in clauses)}); to filter or join, create a view first "
                          "(CREATE VIEW v AS SELECT ... WHERE ...) and release FROM v")
    if src.catalog:   # the database part was dropped before: FROM o.main.t released the current database's main.t (S43)
        raise PolicyError(f"FROM {src.sql('duckdb')}: a SQL policy's source is a table or view of the current "
                          f"database (table or schema.table); for another database's table create a view first "
                          f"(CREATE VIEW v AS SELECT * FROM {src.sql('duckdb')}) and release FROM v")
    out["source"] = src.name if not src.db else f"{src.db}.{src.name}"
    attributes: dict[str, Any] = {}
    for item in select.expressions:
        if not isinstance(item, exp.Anonymous) or item.name.lower() not in ROLES:
            close = closest(item.name.lower(), ROLES) if isinstance(item, exp.Func) and item.name else None
            raise PolicyError(
                f"select item {item.sql('duckdb')!r}: " + (f"unknown role function `{item.name}`, did you mean "
                                                           f"`{close}`? " if close else "")
                + "write quasi(col, taxonomy => ...), sensitive(col), insensitive(col) or "
                "identifier(col, action => 'drop'|'pseudonymize')"
            )
        args = item.expressions
        if not args or not isinstance(args[0], exp.Column):
            raise PolicyError(f"{item.sql('duckdb')!r}: the first argument is the column")
        spec: dict[str, Any] = {"role": item.name.lower()}
        for kw in args[1:]:
            if not isinstance(kw, exp.Kwarg):
                raise PolicyError(f"{item.sql('duckdb')!r}: options are written name => value")
            if kw.this.name in spec:
                raise PolicyError(f"{item.sql('duckdb')!r}: option `{kw.this.name}` is given twice")
            spec[kw.this.name] = _value(kw.expression)
        ATTRIBUTE.check(spec, f"attributes.{args[0].name}", where=f"{spec['role']}({args[0].name}, ...)")
        if args[0].name in attributes:
            raise PolicyError(f"column {args[0].name!r} appears in two roles ({attributes[args[0].name]['role']} "
                              f"and {spec['role']}); give each column one role")
        attributes[args[0].name] = spec
    out["attributes"] = attributes
    return out


def _to_node(value: Any) -> exp.Expression:
    if isinstance(value, dict):
        return exp.Struct(expressions=[exp.PropertyEQ(this=exp.Literal.string(k), expression=_to_node(v))
                                       for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return exp.Array(expressions=[_to_node(v) for v in value])
    return lit(value)


def render_policy_sql(d: dict[str, Any], pretty: bool = True) -> str:
    """Render a policy dict in the SQL form (parseable by :func:`parse_policy_sql`)."""
    props = []
    for key in SQL_TOP_LEVEL:
        if key in d and d[key] not in (None, {}):
            props.append(exp.Property(this=exp.Var(this=key), value=_to_node(d[key])))
    for key, value in d.get("privacy", {}).items():
        props.append(exp.Property(this=exp.Var(this=key), value=_to_node(value)))
    items = []
    for name, spec in d["attributes"].items():
        spec = dict(spec)
        role = spec.pop("role")
        kwargs = [exp.Kwarg(this=exp.Var(this=k), expression=_to_node(v)) for k, v in spec.items()]
        items.append(exp.Anonymous(this=role, expressions=[exp.Column(this=ident(name)), *kwargs]))
    select = exp.Select(expressions=items).from_(exp.Table(this=ident(d["source"])))
    # sqlglot's DuckDB generator has no WITH (...) on CREATE VIEW: join the sqlglot-rendered pieces ourselves.
    sep = ",\n  " if pretty else ", "
    options = sep.join(f"{p.this.name} = {p.args['value'].sql(dialect='duckdb')}" for p in props)
    head = f"CREATE ANONYMIZED VIEW {ident(d['name']).sql(dialect='duckdb')}"
    body = select.sql(dialect="duckdb", pretty=pretty)
    if pretty:
        return f"{head}\nWITH (\n  {options}\n)\nAS\n{body}"
    return f"{head} WITH ({options}) AS {body}"
