"""The CLI reference, from the command definitions in ``tuner/cli.py`` (Typer, through its
click commands): each command's usage, its docstring and its arguments and options.
``elastune worker`` parses its own arguments (``worker/_main.py``): its ``--help`` is shown."""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import typer

from tuner.cli import app


def _cell(text: Any) -> str:
    return _prose(str(text)).replace("|", "\\|")


def _prose(text: str) -> str:
    """Help text as Markdown: one line, and [--option X] not read as a link."""
    return " ".join(text.split()).replace("[", "\\[").replace("]", "\\]")


# Typer builds click commands (its own copy of click in recent versions): each parameter's
# help record, the two columns of ``--help``, is what both agree on.
def _params_table(command: Any, ctx: Any) -> list[str]:
    rows = []
    for param in command.params:
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        names, help_ = record
        rows.append(f"| `{_cell(names)}` | {_cell(help_)} |")
    if not rows:
        return []
    return ["| argument or option | what |", "|---|---|", *rows, ""]


def _worker_help() -> str:
    from worker import _main

    out = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            _main._parse(["--help"])
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return out.getvalue().rstrip()


def _commands(group: Any, ctx: Any) -> list[tuple[Any, Any]]:
    found = []
    for name, command in group.commands.items():
        sub = type(ctx)(command, info_name=name, parent=ctx)
        found.append((command, sub))
        if hasattr(command, "commands"):
            found += _commands(command, sub)
    return found


def cli_markdown() -> str:
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="elastune")
    lines = [f"`elastune`: {_prose(root.help)}", ""]
    for command, sub in _commands(root, ctx):
        path = sub.command_path
        lines += [f"## `{path}`", ""]
        if command.help:
            lines += [_prose(command.help), ""]
        if hasattr(command, "commands"):
            lines += ["Commands: " + ", ".join(f"`{path} {n}`" for n in command.commands), ""]
            continue
        if path == "elastune worker":
            lines += ["```", _worker_help(), "```", ""]
            continue
        usage = " ".join(command.collect_usage_pieces(sub))
        lines += ["```", f"{path} {usage}", "```", "", *_params_table(command, sub)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(cli_markdown())
