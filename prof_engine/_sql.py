"""SQL text shared by every layer that writes DuckDB statements."""

from __future__ import annotations


def literal(value: object) -> str:
    """`value` (text, a path) as a SQL string literal: quoted, with its quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"
