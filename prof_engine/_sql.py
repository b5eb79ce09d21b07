"""SQL text and DuckDB settings shared by every layer that writes DuckDB statements."""

from __future__ import annotations

import re
from collections.abc import Iterable

import duckdb


def literal(value: object) -> str:
    """`value` (text, a path) as a SQL string literal: quoted, with its quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def list_literal(values: Iterable[object]) -> str:
    """`values` (paths, mostly: `read_parquet([...])`'s files) as a SQL list of string literals."""
    return "[" + ", ".join(map(literal, values)) + "]"


def no_progress_bar(con: duckdb.DuckDBPyConnection) -> None:
    """Turn DuckDB's own progress bar off (prof-engine shows its own; none may reach stdout). In
    Jupyter without ipywidgets DuckDB refuses to change the setting, and draws none anyway."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        pass


_SIZE_UNITS = {
    "b": 1,
    "bytes": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def size_bytes(size: str) -> float | None:
    """Bytes of a memory size as DuckDB takes or shows one (`80MB`, `2GB`, `76.2 MiB`, `512 bytes`);
    None for a form this does not read (DuckDB's own "none", "-1", a bare number)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]+)\s*", size)
    unit = _SIZE_UNITS.get(m[2].lower()) if m else None
    return None if unit is None or m is None else float(m[1]) * unit
