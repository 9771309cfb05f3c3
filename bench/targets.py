"""Issue 29's table of targets, as data: each row says which benchmark record measures it (suite, case, rows) and
its goal, so that docs/benchmarks.md states where each stands — met, not met (with the figure), or not measured in
that run (with the command that measures it).

A new target is one more :class:`Target` in ``TARGETS`` (e.g. the large cases of issue 29.2 and 29.4 name the
records their scripts emit); ``python -m bench`` needs no other change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Target:
    """One goal: the records of ``suite`` whose case starts with ``case`` (and whose rows are ``rows``, when given)
    must have a ratio (``on="ratio"``) or a value (``on="value"``, in the record's unit) of at most ``limit``."""

    what: str                   # the row of the issue's table
    goal: str                   # as the issue writes it
    suite: str
    case: str
    limit: float
    rows: int | None = None
    on: str = "ratio"
    command: str = ""           # what measures it when no record of this run does

    def matches(self, record: dict[str, Any]) -> bool:
        return (record["suite"] == self.suite and record["case"].startswith(self.case)
                and (self.rows is None or record.get("rows") == self.rows))

    def figure(self, record: dict[str, Any]) -> float:
        return float(record["ratio"] if self.on == "ratio" else record["value"])


ISSUE = 29
MIXED = "bench_arx.py --mixed 1000000 --cases q8_k5_s0 q8_k5_s4 --repeat 1 --warmup 0"
TARGETS: list[Target] = [
    Target("Adult 30k, 8 QIs, k = 5, 0 % suppression (optimal)", "<= 2x ARX anonymize() + output", "arx",
           "q8_k5_s0:", 2.0, command="bench_arx.py --cases q8_k5_s0"),
    Target("Adult 30k, 4 % suppression", "<= 0.5x ARX", "arx", "q8_k5_s4:", 0.5,
           command="bench_arx.py --cases q8_k5_s4"),
    Target("1M mixed rows (bench/generate_mixed.py), 0 %", "<= 0.5x ARX", "arx",
           "mixed 1,000,000 rows, q8_k5_s0:", 0.5, command=MIXED),
    Target("the same 1M rows, 4 % suppression", "<= 0.1x ARX", "arx", "mixed 1,000,000 rows, q8_k5_s4:", 0.1,
           command=MIXED),
    Target("2M rows + 10 insensitive columns, level release", "<= 1.5x copy + GROUP BY", "release",
           "levels release, + 10 insensitive columns", 1.5, rows=2_000_000,
           command="bench_release.py --rows 2000000 --extra 10"),
    Target("300k full-domain release (optimal, k = 10, 1 %), peak RSS", "<= 250 MB", "memory",
           "optimal release, peak RSS", 250.0, rows=300_000, on="value",
           command="bench_memory.py --cases optimal:300000"),
    Target("optimal, 10M rows (resampled Adult)", "<= 3x one GROUP BY", "scale", "optimal release", 3.0,
           rows=10_000_000, command="bench_scale.py --rows 10000000 --methods optimal"),
    Target("Mondrian, 10M rows", "<= 3x one GROUP BY", "scale", "mondrian release", 3.0, rows=10_000_000,
           command="bench_scale.py --rows 10000000 --methods mondrian"),
    Target("Mondrian, 100M rows out of core", "<= 5x one GROUP BY", "scale", "mondrian release", 5.0,
           rows=100_000_000, command="bench_scale.py --rows 100000000 --methods mondrian --database FILE"),
    Target("optimal, 100M rows out of core", "<= 3x one GROUP BY", "scale", "optimal release", 3.0,
           rows=100_000_000, command="bench_scale.py --rows 100000000 --methods optimal --database FILE"),
    Target("Issue 24.6: level release with privacy_unit, 10M rows / 1M people", "<= 3x copy + one GROUP BY",
           "units", "level release, privacy unit", 3.0, rows=10_000_000,
           command="bench_units.py --rows 10000000 --cases level"),
    Target("Issue 24.6: Mondrian over 1M people of ~10 rows", "<= 1.5x Mondrian over 1M one-row people", "units",
           "mondrian release, 1 unit", 1.5, rows=10_000_000, command="bench_units.py --rows 10000000 --cases mondrian"),
    Target("Issue 25.7: DP GROUP BY (COUNT + bounded SUM, 50 groups, 1M units), m = 1, 10M rows",
           "<= 3x the same query without DP", "dp", "dp, max_groups_contributed = 1", 3.0, rows=10_000_000,
           command="bench_dp.py --rows 10000000 --repeat 3"),
    Target("Spark, first level release of a session, 10M", "<= 2.5x bare Spark GROUP BY", "spark", "levels release",
           2.5, rows=10_000_000, command="bench_spark.py --rows 10000000"),
]


def standing(records: list[dict[str, Any]], targets: list[Target] = TARGETS) -> list[str]:
    """The page's table: each target, the figure of the last record that measures it (a later run wins), met or not."""
    lines = [f"| issue {ISSUE} target | goal | measured (this page) | load avg | commit | stands |",
             "| --- | --- | ---: | --- | --- | --- |"]
    for t in targets:
        found = [r for r in records if t.matches(r)]
        if not found:
            lines.append(f"| {t.what} | {t.goal} | - | - | - | not measured for this page (`python bench/{t.command}`) |")
            continue
        r = found[-1]
        v = t.figure(r)
        shown = f"{v:.2f}x" if t.on == "ratio" else f"{v:.0f} {r['unit']}"
        load = " ".join(f"{x:.1f}" for x in r["load"])
        state = "**met**" if v <= t.limit else f"**not met** ({shown}, goal {t.goal})"
        lines.append(f"| {t.what} | {t.goal} | {shown} | {load} | `{r.get('commit', '-')}` | {state} |")
    return lines
