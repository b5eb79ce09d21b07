"""The answer to a query (`Result`): one result type, converted on demand."""

from __future__ import annotations

import importlib

import pyarrow as pa

from prof_engine.errors import QueryError


def _optional(module: str, install: str):
    """`module`, imported; a missing one is one line naming what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise QueryError(f"{module} is not installed: pip install '{install}'") from None


class Result:
    """The answer to a query: one result type, converted on demand (`.arrow()`, `.pl()`, `.df()`)."""

    def __init__(self, table: pa.Table, total: int | None = None) -> None:
        self._table = table
        # rows of the whole answer, where this holds only its first ones (`Run.summary`'s tables)
        self.total = table.num_rows if total is None else total

    @property
    def columns(self) -> list[str]:
        return self._table.column_names

    def __len__(self) -> int:
        return self._table.num_rows

    def arrow(self) -> pa.Table:
        return self._table

    def pl(self):
        """The rows as a polars DataFrame (polars is an optional extra: `prof-engine[polars]`)."""
        return _optional("polars", "prof-engine[polars]").from_arrow(self._table)

    def df(self):
        """The rows as a pandas DataFrame (pandas is not a dependency: `pip install pandas`)."""
        _optional("pandas", "pandas")
        return self._table.to_pandas()

    def rows(self) -> list[tuple]:
        cols = [c.to_pylist() for c in self._table.columns]
        return list(zip(*cols))

    def __repr__(self) -> str:
        return f"<Result {self._table.num_rows} rows × {self._table.num_columns} columns: {', '.join(self.columns)}>"

    def _repr_html_(self, max_rows: int = 20) -> str:
        """A table of the first `max_rows` rows, as Jupyter shows a result (`tables.html_table`:
        every name and value escaped)."""
        from prof_engine.engine.tables import html_table

        head = self._table.slice(0, max_rows)
        more = f", first {head.num_rows} shown" if head.num_rows < self._table.num_rows else ""
        return f"{html_table(head)}<p>{self._table.num_rows} rows × {self._table.num_columns} columns{more}</p>"
