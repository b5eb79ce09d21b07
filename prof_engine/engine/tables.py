"""Arrow-side output helpers shared by exports, the report and the CLI: formula neutralisation,
CSV writing, cells as people read them, HTML tables."""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Collection
from queue import Queue
from typing import IO

import pyarrow as pa

# pyarrow.compute and pyarrow.csv load where they are used, by CSV output: a table on the
# terminal (`show`, `query`) needs neither (~0.1 s of CPU at start-up)

# A cell a spreadsheet would evaluate: starts with = + - @, a tab or a carriage return.
FORMULA_START = r"^[=+\-@\t\r]"
_DONE = object()  # the end of write_csv's batches
TITLED = 16  # characters of a text cell beyond which `html_table` repeats it in `title`, for hover


# Characters a terminal or a page would act on rather than show: C0 and C1 controls (ESC starts a
# terminal's escape sequences; a NUL, BEL, backspace or carriage return garble a line) but newline
# and tab, and the bidirectional overrides and isolates that reorder what follows (U+202E).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with each character in _UNPRINTABLE written as its escape (`\\x1b`, `\\u202e`): names come
    from the profiled program, and a terminal must show them, never run them."""
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def json_printable(text: str) -> str:
    """JSON text with the characters of _UNPRINTABLE that `json.dumps` leaves as they are (C1
    controls, DEL, bidirectional controls; it escapes C0 ones) written as `\\uNNNN`: the same JSON
    value, which a terminal shows rather than runs. They can stand only within strings."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def cell_text(v: object) -> str:
    """A value as a report shows it: numbers with thousands separators and at most 3 decimals
    (ns precision of µs values), `inf`/`nan` as such, NULL as nothing, a list or a struct as JSON,
    bytes as `blob_text` writes them; control characters escaped (`printable`)."""
    if v is None:
        return ""
    if isinstance(v, float):
        if not math.isfinite(v):  # inf, -inf, nan (a division by zero in a user's SQL)
            return str(v)
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"
    if isinstance(v, pa.MonthDayNano):  # a tuple, but one value
        return interval_text(v)
    if isinstance(v, (list, tuple, dict)):
        return printable(json_value(v))
    if isinstance(v, bytes):
        return blob_text(v)
    return printable(str(v))


def json_value(v: object) -> str:
    """A nested value (a list, a struct, a map's pairs) as JSON text: a float that is not finite as
    null (JSON has no NaN), what JSON has no type for (a timestamp, a decimal) as its text."""

    def finite(x: object) -> object:
        if isinstance(x, float):
            return x if math.isfinite(x) else None
        if isinstance(x, dict):
            return {str(k): finite(y) for k, y in x.items()}
        if isinstance(x, (list, tuple)) and not isinstance(x, pa.MonthDayNano):
            return [finite(y) for y in x]
        if isinstance(x, bytes):
            return blob_text(x)
        if isinstance(x, pa.MonthDayNano):
            return interval_text(x)
        return x

    return json.dumps(finite(v), default=str, ensure_ascii=False, allow_nan=False)


def blob_text(b: bytes) -> str:
    """Bytes as DuckDB writes a BLOB as text: printable ASCII as is, every other byte (and the
    backslash, so that the text reads back one way) as `\\xNN`."""
    return "".join(chr(c) if 0x20 <= c < 0x7F and c != 0x5C else f"\\x{c:02X}" for c in b)


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
    import pyarrow.compute as pc

    cols = []
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            # (no Python scalars in these calls: pyarrow imports pandas, 0.2 s, to convert one)
            risky = pc.match_substring_regex(col, FORMULA_START)  # NULL where the cell is: kept NULL
            if pc.any(risky).as_py():  # else keep the column: if_else would copy every string
                col = pc.if_else(risky, pc.utf8_replace_slice(col, 0, 0, "'"), col)
        cols.append(col)
    return type(batch).from_arrays(cols, schema=batch.schema)


def _needs_text(typ: pa.DataType) -> bool:
    """Whether Arrow's CSV writer cannot write a column of `typ` (it refuses nested types,
    intervals, and binary that is not UTF-8: DuckDB's BLOB and BIT)."""
    if pa.types.is_dictionary(typ):
        return _needs_text(typ.value_type)
    return (
        pa.types.is_nested(typ)
        or pa.types.is_interval(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_fixed_size_binary(typ)
    )


def interval_text(v: pa.MonthDayNano) -> str:
    """An interval (DuckDB's INTERVAL) as `<m> months <d> days <n> ns`."""
    return f"{v.months} months {v.days} days {v.nanoseconds} ns"


def csv_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` as `write_csv` writes it: a column Arrow cannot write as CSV is text (`csv_columns`)."""
    return pa.schema([f.with_type(pa.string()) if _needs_text(f.type) else f for f in schema])


def csv_columns(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """`batch` with each column Arrow's CSV writer cannot write as text, one rule per kind: a list,
    struct, map or union as JSON (`json_value`: `[1, 2]`, `{"a": 1}`, a map as its pairs), an
    interval as `<m> months <d> days <n> ns`, bytes as `blob_text` (`\\x05\\xFD`)."""
    if not any(_needs_text(t) for t in batch.schema.types):
        return batch
    cols = []
    for col, typ in zip(batch.columns, batch.schema.types):
        if _needs_text(typ):
            value = typ.value_type if pa.types.is_dictionary(typ) else typ
            text = (
                json_value if pa.types.is_nested(value) else interval_text if pa.types.is_interval(value) else blob_text
            )
            col = pa.array([None if v is None else text(v) for v in col.to_pylist()], pa.string())
        cols.append(col)
    return type(batch).from_arrays(cols, schema=csv_schema(batch.schema))


def write_csv(batches, schema: pa.Schema, sink: str | IO[bytes]) -> int:
    """Stream record batches to CSV (header, quoting only where needed), neutralised; return rows.
    Columns CSV has no form for are written as text (`csv_columns`), then neutralised like the rest.

    A second thread neutralises and writes each batch while the next one is produced (DuckDB,
    Arrow compute and the CSV writer all release the GIL): on two cores that hides most of the
    writing behind the query."""
    import pyarrow.csv as pacsv

    queue: Queue = Queue(maxsize=2)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            options = pacsv.WriteOptions(quoting_style="needed")
            with pacsv.CSVWriter(sink, csv_schema(schema), write_options=options) as w:
                while (batch := queue.get()) is not _DONE:
                    w.write(neutralise(csv_columns(batch)))
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
