"""The one strict reader of the vendors' CSV files (kernel_details, op_summary, l2_cache, the memory
files, step_trace_time, op_statistic, MindSpore's step_trace_raw): a row it cannot read is left
out and counted, never read as something else.

Python's csv module, left to itself, reads damage as data: a stray `"` opens a quoted cell that
swallows every later line into one cell (l2_cache.csv: 124 of 179 rows gone, no error), and a row
cut short reads as a row of empty cells (operator_memory.csv: an allocation without its release, a
17 MB leak). The files read here hold no cell that spans lines (only operator_details.csv's `Call
Stack` does, and no importer reads it), so each physical line is one row:

* a row whose quotes do not close on its line, or with text after a closing quote, or a `"`
  inside a cell it does not quote, has *a stray quote*: left out;
* a row of fewer or more cells than the header is *cut short* / *too long*: left out, unless the
  caller takes ragged rows (the 2023 kernel_details exporter left a cell out of some rows);
* a last line without its newline that is short is the end of a truncated file: left out
  (`truncated` is set), ragged or not.

`left_out` counts the rows left out by reason, with the first one's line number; `finding`
words them for a data-quality finding (`vendor_rows_left_out`), `error` for an InputError.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

QUOTE = "with a stray quote"
SHORT = "cut short (fewer cells than the header)"
LONG = "too long (more cells than the header)"
TRUNCATED = "cut short at the end of the file (truncated)"


def _parse(line: str) -> list[str] | None:
    """The cells of one physical line, None where its quotes are broken."""
    try:
        cells = next(csv.reader((line,), strict=True), [])
    except csv.Error:  # a quote that does not close on the line, or text after a closing quote
        return None
    for c in cells:
        if '"' in c and '"' + c.replace('"', '""') + '"' not in line:
            return None  # a quote inside a cell the line does not quote
    return cells


class VendorCsv:
    """A vendor CSV file read strictly (see the module docstring). `header` is read on opening
    (empty for an empty file); `rows()` yields (line number, cells) of the readable rows."""

    def __init__(self, path: Path, ragged: bool = False) -> None:
        self.path = path
        self.ragged = ragged
        self.left_out: dict[str, list[int]] = {}  # reason -> [count, first line number]
        self.read = 0  # rows yielded
        self.truncated = False
        self._lines = self._physical_lines()
        self.header: list[str] = []
        for n, line in self._lines:
            cells = _parse(line)
            if cells is None:
                self.leave_out(QUOTE, n)
                continue
            if cells:
                self.header = [h.strip() for h in cells]
                break

    def _physical_lines(self) -> Iterator[tuple[int, str]]:
        with open(self.path, newline="", encoding="utf-8-sig") as f:
            yield from enumerate(f, 1)

    def leave_out(self, reason: str, line: int) -> None:
        seen = self.left_out.setdefault(reason, [0, line])
        seen[0] += 1

    def rows(self, limit: int | None = None) -> Iterator[tuple[int, list[str]]]:
        """(line number, cells) of each readable row after the header, up to `limit` rows. Fast
        path: one csv reader over the file, a line with quotes checked once more (`_parse`); a row
        that takes more than one line, or a reader error, has its lines parsed one by one instead."""
        width = len(self.header)
        lines: list[tuple[int, str]] = []  # the physical lines of the record being read

        def feed() -> Iterator[str]:
            for n, line in self._lines:
                lines.append((n, line))
                yield line

        reader = csv.reader(feed(), strict=True)
        while limit is None or self.read < limit:
            lines.clear()
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error:
                cells = None
            got: list[tuple[int, str, list[str] | None]]
            # a line with no quote has nothing `_parse` could find broken: the reader's cells stand
            if cells is not None and len(lines) == 1 and ('"' not in lines[0][1] or _parse(lines[0][1]) is not None):
                got = [(lines[0][0], lines[0][1], cells)]
            else:  # a quoted cell ran over lines, or broke: each of those lines is a row of its own
                got = [(n, line, _parse(line)) for n, line in lines]
            for n, line, one in got:
                if one is None:
                    self.leave_out(QUOTE, n)
                elif not one:
                    continue  # a blank line
                elif len(one) < width and not line.endswith(("\n", "\r")):
                    self.truncated = True
                    self.leave_out(TRUNCATED, n)
                elif len(one) != width and not self.ragged:
                    self.leave_out(SHORT if len(one) < width else LONG, n)
                else:
                    self.read += 1
                    yield n, one

    def count(self) -> int:
        """Rows left out."""
        return sum(c for c, _ in self.left_out.values())

    def reasons(self) -> str:
        return "; ".join(f"{c} {r} (first: line {n})" for r, (c, n) in self.left_out.items())

    def finding(self) -> str:
        """A one-line detail for the `vendor_rows_left_out` finding."""
        return f"{self.path}: {self.count()} of {self.count() + self.read} rows left out: {self.reasons()}"

    def error(self) -> str:
        """A one-line InputError message for a file whose every row is needed."""
        return f"{self.path}: rows that cannot be read: {self.reasons()} (corrupt or not a profiler's output?)"
