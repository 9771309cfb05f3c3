"""Parsing and validation of the DP statements: CREATE / SHOW / DROP PRIVACY BUDGET and BigQuery's
`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...)`. Produces typed records; nothing here touches a database.

The SELECT is tokenized with sqlglot: the OPTIONS header is read from the tokens, COUNT/SUM/AVG calls are renamed to
anonymous functions (so `contribution_bounds_per_group => (lo, hi)` parses as a keyword argument), and the rest is
parsed by sqlglot's DuckDB dialect. Every refusal is a PolicyError (CLI exit 2) naming what is supported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from anon_sql.errors import PolicyError

__all__ = ["Aggregate", "DPQuery", "BudgetStatement", "is_dp_statement", "parse_statement", "parse_dp_select",
           "OPTIONS", "SUPPORTED", "VOLATILE"]

SUPPORTED = ("supported: SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = …, delta = …, max_groups_contributed "
             "= …) <group columns>, COUNT(*), COUNT(col), COUNT(DISTINCT <privacy unit>), SUM(col, "
             "contribution_bounds_per_group => (lo, hi)), AVG(col, contribution_bounds_per_group => (lo, hi)), "
             "PERCENTILE_CONT(col, fraction, contribution_bounds_per_row => (lo, hi)) FROM <one table> [WHERE …] "
             "[GROUP BY columns]")
MAX_CONTRIBUTED = 100_000   # the largest max_groups_contributed / max_rows_contributed (OpenDP: u32; DuckDB: arg_min n)
OPTIONS = {"epsilon", "delta", "max_groups_contributed", "max_rows_contributed", "intervals", "privacy_unit_column"}
_AGGREGATES = {"COUNT", "SUM", "AVG", "PERCENTILE_CONT"}
_PREFIX = "ANON_DP_"
_BOUNDS = "contribution_bounds_per_group"
_ROW_BOUNDS = "contribution_bounds_per_row"   # BigQuery's name for PERCENTILE_CONT's clamp bounds
# DuckDB's VOLATILE functions (duckdb_functions().stability): the bounding plan reads the rows once per pass, so a
# row kept by one read and dropped by another would let a unit reach more groups than max_groups_contributed
VOLATILE = {"random", "setseed", "uuid", "uuidv4", "uuidv7", "gen_random_uuid", "nextval", "currval", "setval",
            "current_query", "current_query_id", "current_transaction_id", "current_connection_id", "error",
            "sleep_ms", "stats", "vector_type", "write_log"}


@dataclass(frozen=True)
class Aggregate:
    kind: str  # count | count_column | count_distinct | sum | avg | percentile
    alias: str
    argument: exp.Expression | None = None  # the column or expression aggregated (None for COUNT(*))
    bounds: tuple[float, float] | None = None  # per unit and group (COUNT: (0, max rows)); PERCENTILE_CONT: per value
    fraction: float | None = None  # PERCENTILE_CONT's quantile level in [0, 1] (0.5: the median)


@dataclass(frozen=True)
class DPQuery:
    text: str
    epsilon: float
    delta: float | None
    max_groups_contributed: int
    max_rows_contributed: int
    intervals: float | None
    privacy_unit_column: str | None
    table: exp.Table
    where: exp.Expression | None
    group_by: list[exp.Column]
    # select order: ("group", index into group_by, alias) or ("aggregate", Aggregate)
    outputs: list[tuple] = field(default_factory=list)

    @property
    def aggregates(self) -> list[Aggregate]:
        return [o[1] for o in self.outputs if o[0] == "aggregate"]


@dataclass(frozen=True)
class BudgetStatement:
    action: str  # create | show | drop
    table: str | None = None
    options: dict = field(default_factory=dict)


def _tokens(text: str):
    if not isinstance(text, str):
        raise PolicyError(f"statement {text!r}: expected SQL text")
    try:
        tokens = sqlglot.tokenize(text, read="duckdb")
    except sqlglot.errors.TokenError as error:
        raise PolicyError(f"cannot read the statement: {error}") from None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    return tokens


def _words(tokens, count: int) -> list[str]:
    return [t.text.upper() for t in tokens[:count]]


def is_dp_statement(text: str) -> bool:
    """True for CREATE PRIVACY BUDGET, SHOW PRIVACY BUDGETS, DROP PRIVACY BUDGET and SELECT WITH DIFFERENTIAL_PRIVACY."""
    try:
        tokens = _tokens(text)
    except PolicyError:
        return False
    words = _words(tokens, 3)
    return (words[:3] in (["CREATE", "PRIVACY", "BUDGET"], ["DROP", "PRIVACY", "BUDGET"], ["SHOW", "PRIVACY", "BUDGETS"],
                          ["SELECT", "WITH", "DIFFERENTIAL_PRIVACY"]))


def _value(tokens, i: int, name: str):
    """A literal option value starting at tokens[i]: number (optionally signed), string, TRUE/FALSE or a bare name."""
    sign = 1
    if i < len(tokens) and tokens[i].token_type in (TokenType.DASH, TokenType.PLUS):
        sign = -1 if tokens[i].token_type == TokenType.DASH else 1
        i += 1
    if i >= len(tokens):
        raise PolicyError(f"option {name}: missing value")
    token = tokens[i]
    if token.token_type == TokenType.NUMBER:
        number = float(token.text)
        if number.is_integer() and not any(c in token.text for c in ".eE"):
            number = int(token.text)
        return sign * number, i + 1
    if sign != 1 or (i > 0 and tokens[i - 1].token_type == TokenType.PLUS):
        raise PolicyError(f"option {name}: a sign must be followed by a number")
    if token.token_type == TokenType.STRING:
        return token.text, i + 1
    if token.token_type in (TokenType.TRUE, TokenType.FALSE):
        return token.token_type == TokenType.TRUE, i + 1
    if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
        return token.text, i + 1
    raise PolicyError(f"option {name}: expected a number or a quoted string, found {token.text!r}")


def _options(tokens, i: int, allowed: set[str], where: str) -> tuple[dict, int]:
    """`( name = value, ... )` starting at tokens[i] (the opening parenthesis); returns the options and the index after."""
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        raise PolicyError(f"{where}: expected ( name = value, ... )")
    i += 1
    options: dict = {}
    while True:
        if i >= len(tokens):
            raise PolicyError(f"{where}: missing closing parenthesis")
        if tokens[i].token_type == TokenType.R_PAREN and not options:
            return options, i + 1
        name = tokens[i].text.lower()
        if tokens[i].token_type not in (TokenType.VAR, TokenType.IDENTIFIER) and not tokens[i].text.isidentifier():
            raise PolicyError(f"{where}: expected an option name, found {tokens[i].text!r}")
        if name not in allowed:
            raise PolicyError(f"{where}: unknown option {tokens[i].text!r}; supported: {', '.join(sorted(allowed))}")
        if name in options:
            raise PolicyError(f"{where}: option {name} given twice")
        if i + 1 >= len(tokens) or tokens[i + 1].token_type not in (TokenType.EQ,):
            raise PolicyError(f"{where}: expected {name} = value")
        options[name], i = _value(tokens, i + 2, name)
        if i >= len(tokens):
            raise PolicyError(f"{where}: missing closing parenthesis")
        if tokens[i].token_type == TokenType.COMMA:
            i += 1
            continue
        if tokens[i].token_type == TokenType.R_PAREN:
            return options, i + 1
        raise PolicyError(f"{where}: expected , or ) after {name}, found {tokens[i].text!r}")


def _table_text(text: str, tokens, start: int, stop: int, where: str) -> str:
    if start >= stop:
        raise PolicyError(f"{where}: name the table, e.g. CREATE PRIVACY BUDGET ON visits WITH (...)")
    return text[tokens[start].start:tokens[stop - 1].end + 1]


def parse_statement(text: str):
    """A BudgetStatement or a DPQuery; PolicyError for anything else."""
    tokens = _tokens(text)
    words = _words(tokens, 4)
    if words[:3] == ["SHOW", "PRIVACY", "BUDGETS"]:
        if len(tokens) != 3:
            raise PolicyError("SHOW PRIVACY BUDGETS takes nothing after it")
        return BudgetStatement("show")
    if words[:4] == ["DROP", "PRIVACY", "BUDGET", "ON"]:
        return BudgetStatement("drop", _table_text(text, tokens, 4, len(tokens), "DROP PRIVACY BUDGET ON <table>"))
    if words[:4] == ["CREATE", "PRIVACY", "BUDGET", "ON"]:
        where = "CREATE PRIVACY BUDGET ON <table> WITH (epsilon = …, delta = …, privacy_unit = '<column>')"
        stop = next((j for j in range(4, len(tokens)) if tokens[j].token_type == TokenType.WITH), None)
        if stop is None:
            raise PolicyError(f"expected {where}")
        table = _table_text(text, tokens, 4, stop, where)
        options, end = _options(tokens, stop + 1, {"epsilon", "delta", "privacy_unit"}, where)
        if end != len(tokens):
            raise PolicyError(f"{where}: unexpected {tokens[end].text!r} after the options")
        missing = {"epsilon", "delta", "privacy_unit"} - set(options)
        if missing:
            raise PolicyError(f"{where}: missing {', '.join(sorted(missing))}")
        return BudgetStatement("create", table, options)
    if words[:3] == ["SELECT", "WITH", "DIFFERENTIAL_PRIVACY"]:
        return parse_dp_select(text)
    raise PolicyError("not a DP statement; supported: CREATE PRIVACY BUDGET ON <table> WITH (...), SHOW PRIVACY "
                      "BUDGETS, DROP PRIVACY BUDGET ON <table>, SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...) ...")


def _number(options: dict, name: str, default=None, integer: bool = False):
    value = options.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(f"option {name} = {value!r}: expected a number")
    if integer and value != int(value):
        raise PolicyError(f"option {name} = {value!r}: expected a whole number")
    return int(value) if integer else float(value)


def _check_options(options: dict) -> dict:
    epsilon = _number(options, "epsilon")
    if epsilon is None:
        raise PolicyError("OPTIONS: epsilon is required, e.g. OPTIONS (epsilon = 0.5, delta = 1e-6)")
    if epsilon <= 0:
        raise PolicyError(f"option epsilon = {epsilon:g}: must be > 0 (e.g. epsilon = 0.5)")
    delta = _number(options, "delta")
    if delta is not None and not (0 <= delta < 1):
        raise PolicyError(f"option delta = {delta:g}: must be in (0, 1/units), e.g. delta = 1e-7")
    groups = _number(options, "max_groups_contributed", 1, integer=True)
    if not 1 <= groups <= MAX_CONTRIBUTED:   # OpenDP counts them in 32 bits (hostile round 17, D12: a traceback)
        raise PolicyError(f"option max_groups_contributed = {groups}: must be between 1 and {MAX_CONTRIBUTED:,}")
    rows = _number(options, "max_rows_contributed", 1, integer=True)
    if not 1 <= rows <= MAX_CONTRIBUTED:
        raise PolicyError(f"option max_rows_contributed = {rows}: must be between 1 and {MAX_CONTRIBUTED:,}")
    intervals = _number(options, "intervals")
    if intervals is not None and not (0 < intervals < 1):
        raise PolicyError(f"option intervals = {intervals:g}: the confidence level must be in (0, 1), e.g. 0.95")
    unit = options.get("privacy_unit_column")
    if unit is not None and not isinstance(unit, str):
        raise PolicyError(f"option privacy_unit_column = {unit!r}: expected a column name")
    return {"epsilon": epsilon, "delta": delta, "max_groups_contributed": groups, "max_rows_contributed": rows,
            "intervals": intervals, "privacy_unit_column": unit}


def parse_dp_select(text: str) -> DPQuery:
    """`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...) <items> FROM <table> [WHERE] [GROUP BY]` as a DPQuery."""
    tokens = _tokens(text)
    if _words(tokens, 4) != ["SELECT", "WITH", "DIFFERENTIAL_PRIVACY", "OPTIONS"]:
        raise PolicyError("expected SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...); " + SUPPORTED)
    options, body = _options(tokens, 4, OPTIONS, "OPTIONS")
    options = _check_options(options)
    if body >= len(tokens):
        raise PolicyError("nothing selected; " + SUPPORTED)
    # Rebuild "SELECT <rest>" from the original text, renaming aggregate calls so sqlglot keeps their keyword args.
    pieces, cursor = ["SELECT "], tokens[body].start
    for j in range(body, len(tokens) - 1):
        token = tokens[j]
        if token.text.upper() in _AGGREGATES and tokens[j + 1].token_type == TokenType.L_PAREN \
                and token.token_type != TokenType.STRING:
            pieces += [text[cursor:token.start], _PREFIX + token.text.upper()]
            cursor = token.end + 1
    pieces.append(text[cursor:tokens[-1].end + 1])
    try:
        tree = sqlglot.parse_one("".join(pieces), read="duckdb")
    except sqlglot.errors.SqlglotError as error:
        raise PolicyError(f"cannot parse the DP query: {str(error).splitlines()[0]}; " + SUPPORTED) from None
    return _build(text, tree, options)


def _refuse_inside(node: exp.Expression, where: str) -> None:
    for sub in node.walk():
        if isinstance(sub, exp.Window):
            raise PolicyError(f"window functions (OVER …) are not supported in a DP query ({where}); " + SUPPORTED)
        if isinstance(sub, (exp.Select, exp.Subquery, exp.Exists, exp.Union)):
            raise PolicyError(f"subqueries are not supported in a DP query ({where}); " + SUPPORTED)
        if isinstance(sub, exp.AggFunc) or (isinstance(sub, exp.Anonymous) and sub.name.upper().startswith(_PREFIX)):
            raise PolicyError(f"aggregates are not supported in {where} of a DP query; " + SUPPORTED)
        if isinstance(sub, (exp.Rand, exp.Uuid)) or (isinstance(sub, exp.Anonymous) and sub.name.lower() in VOLATILE):
            raise PolicyError(f"{sub.sql(dialect='duckdb')} in {where}: a DP query takes no random or volatile "
                              "function (each unit's rows are read more than once; a row one read keeps and another "
                              "drops would break max_groups_contributed); filter by the table's own values")


def _bounds(argument: exp.Expression, kind: str, option: str = _BOUNDS) -> tuple[float, float]:
    """The (lower, upper) numbers of ``option => (lo, hi)``; refused naming ``option`` as the user's aggregate takes
    it (PERCENTILE_CONT's is contribution_bounds_per_row)."""
    value = argument.expression if isinstance(argument, exp.Kwarg) else None
    if not isinstance(value, (exp.Tuple, exp.Paren)):
        raise PolicyError(f"{kind.upper()}: write {option} => (lower, upper) with two numbers")
    items = value.expressions if isinstance(value, exp.Tuple) else [value.this]
    numbers = []
    for item in items:
        negative = isinstance(item, exp.Neg)
        item = item.this if negative else item
        if not (isinstance(item, exp.Literal) and not item.is_string):
            raise PolicyError(f"{kind.upper()}: {option} takes two numbers, found {value.sql(dialect='duckdb')}")
        number = float(item.this) * (-1 if negative else 1)
        if not math.isfinite(number):
            raise PolicyError(f"{kind.upper()}: {option} must be finite")
        numbers.append(number)
    if len(numbers) != 2 or numbers[0] > numbers[1]:
        raise PolicyError(f"{kind.upper()}: {option} => (lower, upper) with lower ≤ upper, "
                          f"found {value.sql(dialect='duckdb')}")
    return numbers[0], numbers[1]


def _fraction(node: exp.Expression) -> float:
    """PERCENTILE_CONT's second argument: a number literal in [0, 1] (a signed one too: -0.0 is 0)."""
    number = node.this if isinstance(node, exp.Neg) else node
    if not (isinstance(number, exp.Literal) and not number.is_string):
        raise PolicyError(f"PERCENTILE_CONT: the fraction must be a number in [0, 1] (0.5 for the median), "
                          f"found {node.sql(dialect='duckdb')}")
    value = (-float(number.this) if number is not node else float(number.this)) + 0.0   # + 0.0: -0.0 becomes 0.0
    if not (0 <= value <= 1):
        raise PolicyError(f"PERCENTILE_CONT: the fraction must be in [0, 1] (0.5 for the median), found {value:g}")
    return value


def _percentile(node: exp.Anonymous, alias: str | None) -> Aggregate:
    """PERCENTILE_CONT(col, fraction, contribution_bounds_per_row => (lo, hi)): values clamped to the bounds, the
    quantile chosen among candidates spread over them (BigQuery's DP PERCENTILE_CONT)."""
    kwargs = [a for a in node.expressions if isinstance(a, exp.Kwarg)]
    positional = [a for a in node.expressions if not isinstance(a, exp.Kwarg)]
    for kwarg in kwargs:
        if kwarg.this.name.lower() not in (_ROW_BOUNDS, _BOUNDS):
            raise PolicyError(f"PERCENTILE_CONT: unknown argument {kwarg.this.name!r}; only {_ROW_BOUNDS} => (lo, hi)")
    if len(kwargs) > 1:
        raise PolicyError(f"PERCENTILE_CONT: {_ROW_BOUNDS} given twice")
    if len(positional) != 2 or isinstance(positional[0], (exp.Star, exp.Distinct)):
        raise PolicyError("PERCENTILE_CONT takes a column and a fraction (plus "
                          f"{_ROW_BOUNDS} => (lo, hi)), e.g. PERCENTILE_CONT(age, 0.5, {_ROW_BOUNDS} => (0, 100))")
    argument, fraction = positional[0], _fraction(positional[1])
    _refuse_inside(argument, "PERCENTILE_CONT's argument")
    if not kwargs:
        raise PolicyError(f"PERCENTILE_CONT({argument.sql(dialect='duckdb')}, {fraction:g}) needs {_ROW_BOUNDS} => "
                          "(lower, upper): values are clamped to them and the answer is one of the candidates "
                          "spread over them")
    bounds = _bounds(kwargs[0], "PERCENTILE_CONT", _ROW_BOUNDS)
    if not math.isfinite(bounds[1] - bounds[0]):
        raise PolicyError(f"PERCENTILE_CONT: {_ROW_BOUNDS} => {bounds} spans more than a float can hold; narrow them")
    default = f"percentile_cont_{argument.sql(dialect='duckdb')}"
    return Aggregate("percentile", alias or default, argument, bounds, fraction)


def _aggregate(node: exp.Anonymous, alias: str | None) -> Aggregate:
    name = node.name.upper()[len(_PREFIX):]
    if name == "PERCENTILE_CONT":
        return _percentile(node, alias)
    args = list(node.expressions)
    kwargs = [a for a in args if isinstance(a, exp.Kwarg)]
    positional = [a for a in args if not isinstance(a, exp.Kwarg)]
    for kwarg in kwargs:
        if kwarg.this.name.lower() != _BOUNDS:
            raise PolicyError(f"{name}: unknown argument {kwarg.this.name!r}; only {_BOUNDS} => (lo, hi)")
    if len(kwargs) > 1:
        raise PolicyError(f"{name}: {_BOUNDS} given twice")
    bounds = _bounds(kwargs[0], name) if kwargs else None
    if len(positional) != 1:
        raise PolicyError(f"{name} takes one argument (plus {_BOUNDS} => (lo, hi)); " + SUPPORTED)
    argument = positional[0]
    if name == "COUNT":
        if isinstance(argument, exp.Distinct):
            if bounds is not None:
                raise PolicyError("COUNT(DISTINCT <privacy unit>) counts people: it takes no contribution bounds")
            if len(argument.expressions) != 1 or not isinstance(argument.expressions[0], exp.Column):
                raise PolicyError("COUNT(DISTINCT …) is supported only on the privacy unit column (it counts people)")
            column = argument.expressions[0]
            return Aggregate("count_distinct", alias or f"count_distinct_{column.name}", column)
        if bounds is not None:
            if bounds[0] != 0 or bounds[1] < 1 or not float(bounds[1]).is_integer():
                raise PolicyError(f"COUNT: {_BOUNDS} => (0, n) with a whole n ≥ 1 (the rows one unit may add to a "
                                  f"group), found {bounds}")
        if isinstance(argument, exp.Star):
            return Aggregate("count", alias or "count", None, bounds)
        _refuse_inside(argument, "COUNT's argument")
        return Aggregate("count_column", alias or f"count_{argument.sql(dialect='duckdb')}", argument, bounds)
    if isinstance(argument, (exp.Star, exp.Distinct)):
        raise PolicyError(f"{name}(*) / {name}(DISTINCT …) are not supported; " + SUPPORTED)
    _refuse_inside(argument, f"{name}'s argument")
    if bounds is None:
        raise PolicyError(f"{name}({argument.sql(dialect='duckdb')}) needs {_BOUNDS} => (lower, upper): the values "
                          "one unit adds to a group are clamped to them (they set the noise)")
    default = f"{name.lower()}_{argument.sql(dialect='duckdb')}"
    return Aggregate(name.lower(), alias or default, argument, bounds)


def _build(text: str, tree: exp.Expression, options: dict) -> DPQuery:
    if not isinstance(tree, exp.Select):
        raise PolicyError("a DP query is one SELECT (no UNION, INTERSECT, …); " + SUPPORTED)
    for key, what in (("joins", "JOIN"), ("having", "HAVING"), ("order", "ORDER BY"), ("limit", "LIMIT"),
                      ("offset", "OFFSET"), ("qualify", "QUALIFY"), ("with_", "WITH (CTEs)"), ("distinct", "DISTINCT"),
                      ("windows", "WINDOW")):
        if tree.args.get(key):
            extra = " (order or filter the returned DataFrame instead)" if key in ("having", "order", "limit",
                                                                                     "offset", "qualify") else ""
            raise PolicyError(f"{what} is not supported in a DP query{extra}; " + SUPPORTED)
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise PolicyError("a DP query needs FROM <table>; " + SUPPORTED)
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier) or table.args.get("joins"):
        raise PolicyError(f"FROM {table.sql(dialect='duckdb')}: a DP query reads one table by name "
                          "(no subqueries, joins, table functions); " + SUPPORTED)
    if isinstance(table.args.get("alias"), exp.TableAlias) and table.args["alias"].columns:
        raise PolicyError("column aliases on the table are not supported in a DP query")
    if tree.args.get("sample") or table.args.get("sample"):
        raise PolicyError(f"FROM {table.name} USING SAMPLE / TABLESAMPLE: a DP query reads the whole table (a sample "
                          "was ignored before); filter with WHERE on the table's own values")
    where = tree.args.get("where")
    if where is not None:
        _refuse_inside(where.this, "WHERE")
        where = where.this
    group_by: list[exp.Column] = []
    group = tree.args.get("group")
    if group is not None:
        if group.args.get("all") or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
            raise PolicyError("GROUP BY ALL / ROLLUP / CUBE / GROUPING SETS are not supported; list the columns")
        for item in group.expressions:
            if not isinstance(item, exp.Column) or not item.name:
                raise PolicyError(f"GROUP BY {item.sql(dialect='duckdb')}: a DP query groups by plain columns")
            group_by.append(item)
    names = [c.name.lower() for c in group_by]
    if len(set(names)) != len(names):
        raise PolicyError("GROUP BY lists a column twice")
    outputs: list[tuple] = []
    if any(isinstance(sub, exp.Window) for item in tree.expressions for sub in item.walk()):
        # before any item's own refusal: the window is the cause (hostile round 4, D03)
        raise PolicyError("window functions (OVER …) are not supported in a DP query; " + SUPPORTED)
    for item in tree.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if node.name.lower() not in names:
                raise PolicyError(f"column {node.sql(dialect='duckdb')} is neither in GROUP BY nor aggregated; "
                                  "a DP query selects GROUP BY columns and DP aggregates only")
            outputs.append(("group", names.index(node.name.lower()), alias or node.name))
        elif isinstance(node, exp.Anonymous) and node.name.upper().startswith(_PREFIX):
            outputs.append(("aggregate", _aggregate(node, alias)))
        else:
            shown = node.sql(dialect="duckdb").replace(_PREFIX, "")  # the user's spelling, not the parser's marker
            raise PolicyError(f"{shown} is not supported in a DP SELECT list (only GROUP BY "
                              "columns and DP aggregates, each on its own); " + SUPPORTED)
    labels = [o[2] if o[0] == "group" else o[1].alias for o in outputs]
    if options["intervals"] is not None:
        labels += [f"{a.alias}_{end}" for a in [o[1] for o in outputs if o[0] == "aggregate"] for end in ("low", "high")]
    lowered = [label.lower() for label in labels]
    duplicate = next((label for label in labels if lowered.count(label.lower()) > 1), None)
    if duplicate is not None:
        raise PolicyError(f"output column {duplicate!r} appears twice: give each item its own AS alias")
    if not outputs:
        raise PolicyError("nothing selected; " + SUPPORTED)
    return DPQuery(text=text, table=table, where=where, group_by=group_by, outputs=outputs, **options)
