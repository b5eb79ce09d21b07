"""Generate the reference pages from their sources of truth: `python -m prof_engine.docs` writes
docs/schema.md (from schemas/) and docs/views.md (from the headers of queries/*.sql)."""

from __future__ import annotations

import sys
from pathlib import Path

from prof_engine.engine.views import public_views
from prof_engine.schema import reference_markdown


def views_markdown() -> str:
    lines = [
        "# Views",
        "",
        "Generated from the headers of `queries/*.sql` by `python -m prof_engine.docs`; do not edit by hand.",
        "Every view has `Rank` (and, where it applies, `Device` and `Step`) columns; times are µs, as in msprof.",
        "",
    ]
    for v in public_views():
        lines += [f"## `{v.name}`", "", v.answers, ""]
        if v.matches:
            lines += [f"Matches: {v.matches}", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.description} |" for c in v.columns]
        lines.append("")
    return "\n".join(lines)


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


PAGES = {"schema.md": reference_markdown, "views.md": views_markdown}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (out / name).write_text(render() + "\n", encoding="utf-8")
    update_readme(out.parent / "README.md")


if __name__ == "__main__":
    if len(sys.argv) > 2 or sys.argv[1:2] and sys.argv[1].startswith("-"):
        sys.exit("usage: python -m prof_engine.docs [DOCS_DIR]  (default: the repo's docs/; README.md beside it "
                 "gets the views table)")
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs")
