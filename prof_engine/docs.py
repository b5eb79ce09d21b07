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


PAGES = {"schema.md": reference_markdown, "views.md": views_markdown}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (out / name).write_text(render() + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs")
