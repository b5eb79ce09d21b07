"""Arrow-side output helpers shared by exports, the report and the CLI: formula neutralisation,
CSV writing, cells as people read them, HTML tables."""

from __future__ import annotations

import math
import threading
from collections.abc import Collection
from queue import Queue
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

# A cell a spreadsheet would evaluate: starts with = + - @, a tab or a carriage return.
FORMULA_START = r"^[=+\-@\t\r]"
_DONE = object()  # the end of write_csv's batches
TITLED = 16  # characters of a text cell beyond which `html_table` repeats it in `title`, for hover


def cell_text(v: object) -> str:
    """A value as a report shows it: numbers with thousands separators and at most 3 decimals
    (ns precision of µs values), `inf`/`nan` as such, NULL as nothing."""
    if v is None:
        return ""
    if isinstance(v, float):
        if not math.isfinite(v):  # inf, -inf, nan (a division by zero in a user's SQL)
            return str(v)
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"
    return str(v)


def is_number(typ: pa.DataType) -> bool:
    """Whether a column of `typ` holds numbers (shown right-aligned, never cut)."""
    return pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ)


def html_table(table: pa.Table, prose: Collection[str] = ()) -> str:
    """`table` as an HTML table: every name and value escaped (op and kernel names come from the
    profiled program: `<lambda>`, templates), numbers as `cell_text` writes them, right-aligned.
    Text cells are of class `t` and carry a long text whole in `title` too, for a page that cuts
    them to one line (the report: C++ kernel names run to hundreds of characters); those of the
    `prose` columns, sentences to read whole, are of class `p`."""
    from html import escape

    kinds = [
        "n" if is_number(t) else "p" if c in prose else "t" for c, t in zip(table.column_names, table.schema.types)
    ]

    def cell(v: object, kind: str) -> str:
        text = cell_text(v)
        title = f' title="{escape(text)}"' if kind == "t" and len(text) > TITLED else ""
        return f'<td class="{kind}"{title}>{escape(text)}</td>'

    head = "".join(f"<th>{escape(c)}</th>" for c in table.column_names)
    rows = "".join(
        "<tr>" + "".join(cell(v, k) for v, k in zip(row, kinds)) + "</tr>"
        for row in zip(*(c.to_pylist() for c in table.columns))
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def neutralise(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """Prefix text cells that a spreadsheet would run as a formula with `'` (OWASP CSV injection)."""
    cols = []
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            # (no Python scalars in these calls: pyarrow imports pandas, 0.2 s, to convert one)
            risky = pc.match_substring_regex(col, FORMULA_START)  # NULL where the cell is: kept NULL
            if pc.any(risky).as_py():  # else keep the column: if_else would copy every string
                col = pc.if_else(risky, pc.utf8_replace_slice(col, 0, 0, "'"), col)
        cols.append(col)
    return type(batch).from_arrays(cols, schema=batch.schema)


def write_csv(batches, schema: pa.Schema, sink: str | IO[bytes]) -> int:
    """Stream record batches to CSV (header, quoting only where needed), neutralised; return rows.

    A second thread neutralises and writes each batch while the next one is produced (DuckDB,
    Arrow compute and the CSV writer all release the GIL): on two cores that hides most of the
    writing behind the query."""
    queue: Queue = Queue(maxsize=2)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with pacsv.CSVWriter(sink, schema, write_options=pacsv.WriteOptions(quoting_style="needed")) as w:
                while (batch := queue.get()) is not _DONE:
                    w.write(neutralise(batch))
        except BaseException as e:  # handed to the producing thread, which raises it
            failed.append(e)
            while queue.get() is not _DONE:  # let the producer finish putting
                pass

    writer = threading.Thread(target=write, name="write_csv", daemon=True)
    writer.start()
    rows = 0
    try:
        for batch in batches:
            if failed:
                break
            queue.put(batch)
            rows += batch.num_rows
    finally:
        queue.put(_DONE)
        writer.join()
    if failed:
        raise failed[0]
    return rows
