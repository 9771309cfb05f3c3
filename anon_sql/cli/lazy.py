"""What lets ``anon-sql`` start at once: modules imported on first attribute use, and a command group that imports
a command's module only when that command runs (``--help`` lists them from a table, importing nothing).

scikit-learn, scipy, pandas and pyspark cost seconds to import; a command that does not need them must not pay.
``bench/bench_startup.py`` measures it; ``tests/cli/test_cli_startup.py`` guards which modules ``--help`` loads."""
from __future__ import annotations

import importlib
from typing import Any

import click


class LazyModule:
    """A stand-in for a module, imported on first attribute access (``duckdb.connect`` imports duckdb then)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


class LazyGroup(click.Group):
    """A click group whose ``lazy`` commands (name → (module, attribute, one-line help)) are imported when run."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, attr, _ = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, with lazy commands' help from the table (nothing imported)."""
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                if self.commands[name].hidden:
                    continue
                rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                rows.append((name, click.Command(name, help=self.lazy[name][2]).get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
