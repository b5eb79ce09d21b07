"""Terminal rendering of results (rich): the faces' one printer, used by the CLI and by
`Profiler.analyse(show=True)`; sources, store and engine never import it.

Tables never cut a number: every column gets an explicit width the table fits in; when the console
is too narrow for all of them, the least important columns are left out and a note names them.
Names wrap over lines (never an ellipsis); limited rows are counted in a note.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from rich.cells import cell_len
from rich.console import Console, ConsoleDimensions, JustifyMethod
from rich.table import Table
from rich.text import Text

from prof_engine.engine import Result
from prof_engine.engine.tables import cell_text, is_number, json_printable, json_value, printable, write_csv

_ColorSystem = Literal["auto", "standard", "256", "truecolor", "windows"]  # rich.Console's color_system

# Piped output is not cut to 80 columns (tables stay whole for `less -S` and logs), unless the
# user says a width with COLUMNS.
PIPED_WIDTH = 240


class _Stdout(Console):
    """stdout's console, its width read at each print (rich fixes it when the console is made,
    which is when this module loads: a command run in-process would inherit the COLUMNS of
    whichever command loaded it first): COLUMNS where set, else the terminal's, else PIPED_WIDTH."""

    fixed: tuple[int, int] | None = None  # a size a caller set (`size = ...`): kept as set

    @property
    def size(self) -> ConsoleDimensions:
        if self.fixed is not None:
            return ConsoleDimensions(*self.fixed)
        height = super().size.height
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit():
            return ConsoleDimensions(int(columns), height)
        if not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, height)
        return ConsoleDimensions(shutil.get_terminal_size().columns, height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self.fixed = new_size


out = _Stdout(soft_wrap=False)
err = Console(stderr=True, soft_wrap=True)


# Columns of sentences (advice's, data_quality's, info's values): wrapped over lines, never cut.
PROSE = ("Finding", "Suggestion", "Detail", "Meaning", "value")
# Columns that say which row this is: kept to the last when a table must lose columns.
IDENTITY = (
    "Rank",
    "Ranks",
    "Device",
    "Step",
    "Stream",
    "Item",
    "Name",
    "Op Name",
    "OP Type",
    "API Name",
    "Rule",
    "item",
)
# Columns that go first when a table must lose some: parts of a breakdown that matter least.
MINOR = ("Overlapped", "Preparing", "Bubble", "Stage", "Variance", "Core Type", "Task Type")
NAME_WIDTH = 48  # a name column wraps at this width at most
TEXT_MIN, PROSE_MIN = 16, 20  # the narrowest a name or a sentence column is squeezed to
HEADER_MIN = 14  # a header word longer than this folds


# Names as `show` prints them, the way Nsight Systems' base names and Perfetto's slice titles read:
# a C++ name loses its return type, template arguments (`<…>`) and argument lists, so that a 1,300-
# character at::native kernel takes one line; `--wide` and every export keep the name whole.
SHORT_MAX = 96  # a name still longer (rocBLAS/Tensile kernels run to 500) is cut in its middle
SHORTENED = "… names shortened (templates <…> and arguments elided): --wide prints them whole, as export writes"
_OPERATOR_CHARS = frozenset("<>=!+-*/%^&|~,[]")
_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_QUALIFIERS = frozenset({"const", "volatile", "&", "&&", "noexcept"})
_QUALIFIED = re.compile(r"\s*(?:const|volatile|noexcept|&&?)(?![\w])")


def _closing(name: str, i: int) -> int:
    """Index of the bracket that closes the one at `i` (len(name) if none): `<>`, `()`, `{}` and
    `[]` nest; a `>` with no `<` open (`->` in `(Host -> Device)`) is text."""
    stack = [_OPEN[name[i]]]
    j = i + 1
    while j < len(name) and stack:
        c = name[j]
        if name.startswith("operator", j) and (j == 0 or not (name[j - 1].isalnum() or name[j - 1] == "_")):
            j = _after_operator(name, j)
            continue
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c == stack[-1]:
            stack.pop()
        j += 1
    return j - 1 if not stack else len(name)


def _after_operator(name: str, i: int) -> int:
    """Index after `operator` at `i` and its symbol (`operator<`, `operator()`, `operator<<=`)."""
    j = i + len("operator")
    if name.startswith("()", j):
        return j + 2
    while j < len(name) and name[j] in _OPERATOR_CHARS:
        j += 1
    return j


def _is_cpp(name: str) -> bool:
    """Whether `name` reads as a C++ symbol: a scope (`a::b`), a template, or a signature `f(…)`.
    Other names (Ascend op names, `Memcpy HtoD (Host -> Device)`, `ProfilerStep#3`) stay as they are."""
    head = name.split("(", 1)[0]
    return "::" in name or "<" in head or (name.endswith(")") and head.isidentifier())


def _mangled_base(name: str) -> str | None:
    """The scope and name of an Itanium-mangled symbol (`_ZN5aiter6kernelIfEEvPT_` →
    `aiter::kernel<…>`), which some traces (ROCm's) keep mangled; None where it is not one this reads."""
    i, parts = 2, list[str]()
    nested = name.startswith("N", i)
    i += nested
    while i < len(name) and name[i] in "rVKRO":  # a member function's cv- and ref-qualifiers
        i += 1
    while i < len(name):
        if name.startswith("St", i) and not parts:
            parts.append("std")
            i += 2
        m = re.match(r"\d+", name[i:])
        if not m:
            break
        end = i + len(m.group()) + int(m.group())
        parts.append(name[i + len(m.group()) : end])
        i = end
        if not nested or name.startswith(("I", "E"), i):
            break
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return "::".join(parts) + ("<…>" if name.startswith("I", i) else "")


def short_name(name: str) -> str:
    """`name` shortened for a terminal table (see SHORT_MAX): `void at::native::foo<4, F<float>>(int,
    …)` → `at::native::foo<…>`; a template of one plain argument stays (`cutlass::Kernel2<cutlass_80_…>`,
    `sgemm<float>`: it names the instantiation); `(anonymous namespace)` → `(anon)`; an argument list
    inside the name (a lambda's scope) → `(…)`, the last one (the signature's) is dropped."""
    if name.startswith("_Z") and (base := _mangled_base(name)):
        name = base
    elif _is_cpp(name):
        out: list[str] = []
        i = 0
        while i < len(name):
            c = name[i]
            if name.startswith("operator", i) and (i == 0 or not (name[i - 1].isalnum() or name[i - 1] == "_")):
                j = _after_operator(name, i)
                out.append(name[i:j])
                i = j
            elif c in _OPEN:
                j = _closing(name, i)
                inner = name[i + 1 : j]
                rest = name[j + 1 :].strip()
                if c == "<":
                    plain = inner.strip() and not any(ch in inner for ch in "<(,: ")
                    out.append(f"<{inner.strip()}>" if plain else "<…>")
                elif c == "(" and inner == "anonymous namespace":
                    out.append("(anon)")
                elif c == "(" and (not rest or set(rest.split()) <= _QUALIFIERS or rest.startswith("[clone")):
                    break  # the signature's arguments, then only qualifiers
                elif c == "(":  # a function's scope (`f(int)::{lambda()#1}`): its cv-qualifiers go too
                    out.append("(…)" if inner.strip() else "()")
                    while m := _QUALIFIED.match(name, j + 1):
                        j = m.end() - 1
                elif c == "{" and inner.startswith("lambda("):
                    k = _closing(inner, len("lambda"))
                    args = inner[len("lambda(") : k]
                    out.append("{lambda" + ("(…)" if args.strip() else "()") + inner[k + 1 :] + "}")
                else:
                    out.append(c + short_name(inner) + name[j : j + 1])
                i = j + 1
            else:
                out.append(c)
                i += 1
        short = "".join(out).strip()
        # the return type: what comes before the last space at depth 0 (none are left inside)
        words = short.split(" ")
        if len(words) > 1 and not words[-2].endswith("operator") and ("(" in name or "<" in name):
            short = words[-1]
        name = short or name
    if len(name) > SHORT_MAX:
        head = SHORT_MAX * 2 // 3
        name = name[:head] + "…" + name[-(SHORT_MAX - head - 1) :]
    return name


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
    rows = [[printable(cell) for cell in row] for row in rows]  # names from a trace: shown, never run
    shown, widths = layout(columns, rows, None if wide else out.width, priority)
    t = Table(title=title, title_justify="left", title_style="bold", header_style="bold cyan")
    for i, w in zip(shown, widths):
        c = columns[i]
        # every header and cell as Text: a name such as `[memory]` is data, not rich markup
        t.add_column(Text(printable(c.header), overflow="fold"), justify=c.justify, width=w, overflow="fold")
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
    short_names: bool = False,
) -> bool:
    """Print `result` as a terminal table (its first `limit` rows): numbers whole, names wrapped,
    columns that do not fit named in a note (`priority`: the columns kept longest, most important
    first; by default the main time column and the identity ones); `… N more rows` (then `more`,
    how to see them) where rows were left out, here or by the query (`Result.total`). With
    `short_names`, names as `short_name` writes them; returns whether any was shortened."""
    arrow = result.arrow()
    head = arrow.slice(0, limit) if limit else arrow
    columns = [
        Column(name, "number", "right") if is_number(typ) else Column(name, "prose" if name in PROSE else "text")
        for name, typ in zip(arrow.column_names, arrow.schema.types)
    ]
    cols = [[cell_text(v) for v in c.to_pylist()] for c in head.columns]
    shortened = False
    if short_names:
        for col, cells in zip(columns, cols):
            if col.kind == "text":
                short = [short_name(c) for c in cells]
                shortened |= short != cells
                cells[:] = short
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
    return shortened


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
    """`value` as strict JSON (`tables.json_value`: a float that is not finite, a division by zero,
    as null, which JSON readers take where they refuse `NaN`), control characters escaped."""
    return json_printable(json_value(value))


def json_lines(result: Result) -> None:
    for row in result.arrow().to_pylist():
        sys.stdout.write(json_text(row) + "\n")
