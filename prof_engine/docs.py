"""Generate the reference pages from their sources of truth: `python -m prof_engine.docs` writes
docs/schema.md (from schemas/), docs/views.md (from the headers of queries/*.sql) and docs/cli.md
(from the typer app's commands, arguments and options)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from prof_engine.engine.views import public_views
from prof_engine.schema import reference_markdown


def views_markdown() -> str:
    lines = [
        "# Views",
        "",
        "Generated from the headers of `queries/*.sql` by `python -m prof_engine.docs`; do not edit by hand.",
        "Every view has `Rank` (and, where it applies, `Device` and `Step`) columns; times are µs, as in msprof.",
        "Scope `rank`: computed from each rank's records alone, so a run opened restricted to some ranks",
        "(`prof_engine.open(path, ranks=[...])`) gives the whole run's rows of those ranks; scope `cluster`:",
        "compares ranks (on a restricted run, only those it holds).",
        "",
    ]
    for v in public_views():
        lines += [f"## `{v.name}`", "", v.answers, "", f"Scope: {v.scope}", ""]
        if v.matches:
            lines += [f"Matches: {v.matches}", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.description} |" for c in v.columns]
        lines.append("")
    return "\n".join(lines)


def _plain(text: str) -> str:
    """Help text (plain click text: no markup) as markdown: a paragraph marked `\\b`, which click
    prints unwrapped (an example's title, then its command lines), becomes the title and a code block."""
    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        if paragraph.startswith("\b\n"):
            title, *commands = paragraph[2:].splitlines()
            paragraph = "\n".join([title, "", "```", *(c.strip() for c in commands), "```"])
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)


def cli_markdown() -> str:
    """Every command of `prof-engine` with its help, arguments and options, read from the typer app
    itself so that the page cannot drift from what `--help` prints."""
    import typer

    from prof_engine.cli import app

    group: Any = typer.main.get_command(app)  # a click group; typer vendors its own click, so no isinstance
    root = group.context_class(group, info_name="prof-engine")
    names = group.list_commands(root)
    lines = [
        "# Command line",
        "",
        "Generated from the `prof-engine` typer app by `python -m prof_engine.docs`; do not edit by hand.",
        "`prof-engine COMMAND --help` prints the same. A user error prints one `Error: ...` line and exits 1.",
        "",
        *[f"- [`{name}`](#{name})" for name in names],
        "",
    ]
    for name in names:
        command = group.get_command(root, name)
        ctx = command.context_class(command, info_name=name, parent=root)
        params = [p for p in command.get_params(ctx) if p.name != "help"]
        args = [p for p in params if p.param_type_name == "argument"]
        usage = ["prof-engine", name, *(["[OPTIONS]"] if len(args) < len(params) else [])]
        for a in args:
            metavar = a.metavar or a.name.upper()
            metavar += "..." if a.nargs == -1 and not metavar.endswith("...") else ""
            usage.append(metavar if a.required else f"[{metavar}]")
        lines += [f"## {name}", "", "```", " ".join(usage), "```", "", _plain(command.help or ""), ""]
        rows = []
        for param in params:
            if param.param_type_name == "option":
                flags = ", ".join([*param.opts, *param.secondary_opts])
                if not param.is_flag:  # the help record's flags end with the metavar `--help` prints
                    record = param.get_help_record(ctx)
                    last = record[0].split(", ")[-1] if record else ""
                    metavar = (last.split(" ", 1)[1] if " " in last else "VALUE").strip("<>").upper()
                    # a repeatable option: its element's type (typer 0.29 says LIST[INT], older ones INT)
                    flags += " " + (metavar[5:-1] if metavar.startswith("LIST[") else metavar)
                flags = f"`{flags}`"
                default = None if param.is_flag else param.default
            else:
                flags, default = f"`{param.metavar or param.name.upper()}`", None
            text = _plain(param.help or "").replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")
            if param.required:
                text += " Required."
            if default not in (None, (), []):
                text += f" Default: `{default}`."
            rows.append(f"| {flags} | {text.strip()} |")
        if rows:
            lines += ["| argument or option | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines).rstrip()


README_START, README_END = "<!-- views:start -->", "<!-- views:end -->"


def readme_views_table() -> str:
    """The view table of README.md (between the views markers)."""
    rows = ["| view | answers |", "|---|---|"] + [f"| `{v.name}` | {v.summary} |" for v in public_views()]
    return "\n".join(rows)


def update_readme(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    head, _, rest = text.partition(README_START)
    _, _, tail = rest.partition(README_END)
    readme.write_text(f"{head}{README_START}\n{readme_views_table()}\n{README_END}{tail}", encoding="utf-8")


PAGES = {"schema.md": reference_markdown, "views.md": views_markdown, "cli.md": cli_markdown}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (out / name).write_text(render() + "\n", encoding="utf-8")
    update_readme(out.parent / "README.md")


if __name__ == "__main__":
    if len(sys.argv) > 2 or sys.argv[1:2] and sys.argv[1].startswith("-"):
        sys.exit(
            "usage: python -m prof_engine.docs [DOCS_DIR]  (default: the repo's docs/; README.md beside it "
            "gets the views table)"
        )
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs")
