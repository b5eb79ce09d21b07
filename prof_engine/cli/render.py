"""Terminal rendering of results (rich). Only the CLI imports this module.

Tables never cut a number: every column gets an explicit width the table fits in; when the console
is too narrow for all of them, the least important columns are left out and a note names them.
Names wrap over lines (never an ellipsis); limited rows are counted in a note.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from prof_engine.engine import Result
from prof_engine.engine.tables import cell_text, is_number, write_csv

_ColorSystem = Literal["auto", "standard", "256", "truecolor", "windows"]  # rich.Console's color_system

# Piped output is not cut to 80 columns (tables stay whole for `less -S` and logs), unless the
# user says a width with COLUMNS, which rich honours when the width is left to it.
PIPED_WIDTH = 240
out = Console(
    soft_wrap=False, width=None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else PIPED_WIDTH
)
err = Console(stderr=True, soft_wrap=True)


# Columns of sentences (advice's, data_quality's, info's values): wrapped over lines, never cut.
PROSE = ("Finding", "Suggestion", "Detail", "Meaning", "value")
# Columns that say which row this is: kept to the last when a table must lose columns.
IDENTITY = ("Rank", "Device", "Step", "Stream", "Item", "Name", "Op Name", "OP Type", "API Name", "Rule", "item")
# Columns that go first when a table must lose some: parts of a breakdown that matter least.
MINOR = ("Overlapped", "Preparing", "Bubble", "Stage", "Variance", "Core Type", "Task Type")
NAME_WIDTH = 48  # a name column wraps at this width at most
TEXT_MIN, PROSE_MIN = 16, 20  # the narrowest a name or a sentence column is squeezed to
HEADER_MIN = 14  # a header word longer than this folds


@dataclass(frozen=True)
class Column:
    """A column to print: `kind` is "number" (never narrower than its widest cell, so never cut
    or wrapped), "text" (a name: wraps at NAME_WIDTH) or "prose" (a sentence: wraps)."""

    header: str
    kind: str = "text"
    justify: JustifyMethod = "left"


def _lines_width(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _range(col: Column, cells: list[str]) -> tuple[int, int]:
    """(narrowest, natural) width of a column: numbers never narrower than their widest cell."""
    widest = max((_lines_width(c) for c in cells), default=0)
    header = cell_len(col.header)
    header_min = min(max((cell_len(w) for w in col.header.split()), default=0), HEADER_MIN)
    if col.kind == "number":
        return max(widest, header_min), max(widest, header)
    natural = min(max(widest, header), NAME_WIDTH) if col.kind == "text" else max(widest, header)
    floor = TEXT_MIN if col.kind == "text" else PROSE_MIN
    return min(natural, max(floor, header_min)), natural


def _table_width(widths: Sequence[int]) -> int:
    """Width of a rich table with these column widths: padding of 1 each side, a rule between
    columns and one at each edge."""
    return sum(widths) + 3 * len(widths) + 1


def layout(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None, priority: Sequence[str] = ()
) -> tuple[list[int], list[int]]:
    """(indexes of the columns shown, their widths) for a table that fits `width` (None: every
    column at its natural width). Columns are left out least important first: MINOR ones, then
    the others not in `priority` right to left, then `priority`'s from its end; the first column
    always stays."""
    ranges = [_range(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    if width is None or _table_width([hi for _, hi in ranges]) <= width:
        return shown, [hi for _, hi in ranges]
    named = [i for h in priority for i, c in enumerate(columns) if c.header == h]
    rest = [i for i in reversed(shown) if i not in named]
    order = (
        [i for i in rest if columns[i].header in MINOR]
        + [i for i in rest if columns[i].header not in MINOR]
        + named[::-1]
    )
    for i in order:
        if _table_width([ranges[j][0] for j in shown]) <= width or len(shown) == 1:
            break
        if i != 0:
            shown.remove(i)
    widths = [ranges[j][0] for j in shown]
    spare = width - _table_width(widths)
    wants = [ranges[j][1] - ranges[j][0] for j in shown]
    if spare > 0 and sum(wants) > 0:  # share the room left among the columns that would use it
        give = [min(w, math.floor(spare * w / sum(wants))) for w in wants]
        for k in range(len(give)):
            if sum(give) < spare and give[k] < wants[k]:
                give[k] += min(wants[k] - give[k], spare - sum(give))
        widths = [w + g for w, g in zip(widths, give)]
    return shown, widths


def grid(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    wide: bool = False,
    priority: Sequence[str] = (),
    styles: Sequence[str | None] | None = None,
    hint: str = "--wide shows all",
) -> None:
    """Print text `rows` under `columns` at the console's width (all columns with `wide`), every
    cell whole; a note names the columns left out, and `hint` says how to see them."""
    shown, widths = layout(columns, rows, None if wide else out.width, priority)
    t = Table(title=title, title_justify="left", title_style="bold", header_style="bold cyan")
    for i, w in zip(shown, widths):
        c = columns[i]
        # every header and cell as Text: a name such as `[memory]` is data, not rich markup
        t.add_column(Text(c.header, overflow="fold"), justify=c.justify, width=w, overflow="fold")
    for k, row in enumerate(rows):
        t.add_row(*(Text(row[i]) for i in shown), style=styles[k] if styles else None)
    needed = _table_width(widths)
    if needed > out.width:  # --wide: the table as wide as it is (a terminal wraps the lines)
        Console(
            file=out.file,
            width=needed,
            soft_wrap=False,
            force_terminal=out.is_terminal,
            color_system=cast(_ColorSystem, out.color_system),
            no_color=out.no_color,
        ).print(t)
    else:
        out.print(t)
    if hidden := [c.header for i, c in enumerate(columns) if i not in shown]:
        n = len(hidden)
        note(f"… {n} column{'s' if n > 1 else ''} hidden ({', '.join(hidden)}): {hint}")


def note(text: str) -> None:
    """A line under a table (rows or columns left out): one line, for grep, which the terminal
    wraps where it must."""
    out.print(Text(text, style="dim"), soft_wrap=True)


def table(
    result: Result,
    title: str | None = None,
    limit: int | None = None,
    *,
    wide: bool = False,
    more: str = "",
    hint: str = "--wide shows all",
    priority: Sequence[str] | None = None,
) -> None:
    """Print `result` as a terminal table (its first `limit` rows): numbers whole, names wrapped,
    columns that do not fit named in a note (`priority`: the columns kept longest, most important
    first; by default the main time column and the identity ones); `… N more rows` (then `more`,
    how to see them) where rows were left out, here or by the query (`Result.total`)."""
    arrow = result.arrow()
    head = arrow.slice(0, limit) if limit else arrow
    columns = [
        Column(name, "number", "right") if is_number(typ) else Column(name, "prose" if name in PROSE else "text")
        for name, typ in zip(arrow.column_names, arrow.schema.types)
    ]
    cols = [[cell_text(v) for v in c.to_pylist()] for c in head.columns]
    rows = list(zip(*cols)) if cols else []
    grid(
        columns,
        rows,
        title=title,
        wide=wide,
        hint=hint,
        priority=_main_value(columns) + [c.header for c in columns if c.header in IDENTITY]
        if priority is None
        else priority,
    )
    if (left := result.total - head.num_rows) > 0:
        note(f"… {left:,} more row{'s' if left > 1 else ''}" + (f": {more}" if more else ""))


def _main_value(columns: Sequence[Column]) -> list[str]:
    """The first time column (`Step Time(us)`, `Total Time(us)`): what the table is about."""
    return [
        c.header
        for c in columns
        if c.kind == "number"
        and c.header not in IDENTITY
        and any(w in c.header for w in ("Time", "Duration", "(us)", "(ms)"))
    ][:1]


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
