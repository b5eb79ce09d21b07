"""Terminal rendering of results (rich). Only the CLI imports this module."""

from __future__ import annotations

import math
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from prof_engine.engine import Result
from prof_engine.engine.tables import cell_text, is_number, write_csv

# Piped output is not cut to 80 columns: tables stay whole for `less -S` and logs.
out = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 240)
err = Console(stderr=True, soft_wrap=True)


# Columns of sentences (advice's, data_quality's, info's values): wrapped over lines, never cut.
PROSE = ("Finding", "Suggestion", "Detail", "Meaning", "value")


def table(result: Result, title: str | None = None, limit: int | None = None, max_width: int = 48) -> None:
    """Print `result` as a terminal table (first `limit` rows); numbers are never cut, names are
    (prose columns wrap)."""
    t = Table(title=title, title_justify="left", title_style="bold", header_style="bold cyan")
    arrow = result.arrow()
    # every header and cell as Text: a name such as `[memory]` is data, not rich markup
    for name, typ in zip(arrow.column_names, arrow.schema.types):
        if is_number(typ):
            t.add_column(Text(name), justify="right", no_wrap=True, overflow="fold")
        elif name in PROSE:
            t.add_column(Text(name), min_width=24, ratio=1, overflow="fold")
        else:
            t.add_column(Text(name), max_width=max_width, no_wrap=True, overflow="ellipsis")
    rows = result.rows()
    for row in rows[:limit] if limit else rows:
        t.add_row(*(Text(cell_text(v)) for v in row))
    out.print(t)
    if limit and len(rows) > limit:
        out.print(f"[dim]… {len(rows) - limit} more rows[/dim]")


def csv(result: Result) -> None:
    arrow = result.arrow()
    write_csv(arrow.to_batches(), arrow.schema, sys.stdout.buffer)


def json_text(value: object) -> str:
    """`value` as strict JSON: a float that is not finite (a division by zero) becomes null, where
    Python would write `Infinity` or `NaN`, which JSON readers refuse."""
    import json

    def finite(v: object) -> object:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(value), default=str, ensure_ascii=False, allow_nan=False)


def json_lines(result: Result) -> None:
    for row in result.arrow().to_pylist():
        sys.stdout.write(json_text(row) + "\n")
