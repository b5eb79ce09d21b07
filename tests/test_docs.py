"""The docs are a front door and a reference that cannot drift: README.md stays short, docs/cli.md is
what the typer app says, and every relative link in README.md and docs/*.md resolves."""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from prof_engine import docs

PAGES = [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_a_front_door():
    """What it is, the Quick start, one worked example, the views, links: at most 10 KB."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 10 * 1024
    assert not re.search(r"\b[Ss]top \d+|\b[Ii]ssue \d+", text), "internal milestones belong in git history"


def test_cli_reference_covers_every_command_and_option():
    """docs/cli.md is generated from the app (test_views_doc checks the file is current); each
    command's every option must be in it, so a new option shows up without editing the page."""
    import typer

    from prof_engine.cli import app

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == docs.cli_markdown() + "\n", "regenerate with `python -m prof_engine.docs`"
    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="prof-engine")
    for name in group.list_commands(root):
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        command = group.get_command(root, name)
        for param in command.get_params(command.context_class(command, parent=root)):
            for opt in param.opts if param.param_type_name == "option" and param.name != "help" else ():
                assert opt in section, f"{name}: {opt} missing from docs/cli.md"


def _anchors(page) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target} does not resolve"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: {dest.name} has no heading for #{anchor}"
