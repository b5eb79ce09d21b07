"""Arrow-side output helpers shared by exports and the CLI: formula neutralisation, CSV writing."""

from __future__ import annotations

from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

# A cell a spreadsheet would evaluate: starts with = + - @, a tab or a carriage return.
FORMULA_START = r"^[=+\-@\t\r]"


def neutralise(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """Prefix text cells that a spreadsheet would run as a formula with `'` (OWASP CSV injection)."""
    cols = []
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            risky = pc.fill_null(pc.match_substring_regex(col, FORMULA_START), False)
            col = pc.if_else(risky, pc.binary_join_element_wise("'", col, ""), col)
        cols.append(col)
    return type(batch).from_arrays(cols, schema=batch.schema)


def write_csv(batches, schema: pa.Schema, sink: str | IO[bytes]) -> int:
    """Stream record batches to CSV (header, quoting only where needed), neutralised; return rows."""
    rows = 0
    with pacsv.CSVWriter(sink, schema, write_options=pacsv.WriteOptions(quoting_style="needed")) as w:
        for batch in batches:
            w.write(neutralise(batch))
            rows += batch.num_rows
    return rows
