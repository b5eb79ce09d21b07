"""The canonical tables, loaded from `schemas/*.toml` (the single source of truth).

The writer takes its Arrow schemas from here, `validate()` checks record batches against them, and
`reference_markdown()` generates docs/schema.md.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache

import pyarrow as pa

from prof_engine._resources import data_dir

# A stored table's directory levels below its `rank=<r>`: the device. The step is a column, each
# row group a range of steps. (Runs of schema 1.0 had a level per step too; `prof-engine upgrade`
# alone reads those, `partitions.hive_types`.)
PARTITION_KEYS = ("device",)

_ARROW_TYPES = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}
_TABLE_KEYS = {"name", "description", "columns", "stored", "derived", "sort_by"}  # of a schemas/*.toml
_SQL_TYPES = {"int32": "INTEGER", "int64": "BIGINT", "string": "VARCHAR", "float64": "DOUBLE", "bool": "BOOLEAN"}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    unit: str = ""
    nullable: bool = False
    derived: bool = False  # computed across a rank's records when a run is finalised (see `derived`)

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW_TYPES[self.type]

    @property
    def sql_type(self) -> str:
        """The DuckDB type."""
        return _SQL_TYPES[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    stored: bool = True  # False: built from manifest.json when a run is opened, not a Parquet dataset
    # True: computed when a run is finalised (queries/store/finalize.sql), never staged by importers
    derived: bool = False
    # The order of its rows: rank, the partition keys, then columns within a partition (NULLs last).
    # A derived table with one is written as one file per rank and partition, its rows in this
    # order, so that a view reads them in order with no sort (`.sorted` in the manifest's `derived`).
    sort_by: tuple[str, ...] = ()

    @property
    def arrow_schema(self) -> pa.Schema:
        """Schema of the records as importers produce them (partition keys included)."""
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@cache
def schema_version() -> str:
    with open(data_dir("schemas") / "_version.toml", "rb") as f:
        return str(tomllib.load(f)["version"])


@cache
def tables() -> dict[str, Table]:
    """All canonical tables by name, in a stable order."""
    out: dict[str, Table] = {}
    for path in sorted(data_dir("schemas").glob("[!_]*.toml")):
        with open(path, "rb") as f:
            raw = tomllib.load(f)
        cols = tuple(Column(**c) for c in raw["columns"])
        for c in cols:
            if c.type not in _ARROW_TYPES:
                raise ValueError(f"{path.name}: column {c.name} has unknown type {c.type!r}")
        stored = raw.get("stored", True)
        missing = [k for k in ("device", "step") if k not in {c.name for c in cols}]
        if stored and missing:
            raise ValueError(f"{path.name}: columns {missing} are missing (every stored table has them)")
        if unknown := set(raw) - _TABLE_KEYS:  # a misspelt or retired key (`partition_by`) is no silent no-op
            raise ValueError(f"{path.name}: unknown keys {sorted(unknown)}")
        derived = bool(raw.get("derived", False))
        sort_by = tuple(raw.get("sort_by", ()))
        if sort_by and (
            not derived
            or sort_by[: 1 + len(PARTITION_KEYS)] != ("rank", *PARTITION_KEYS)
            or not set(sort_by) <= {c.name for c in cols}
        ):
            raise ValueError(f"{path.name}: sort_by must be rank, the partition keys, then columns of a derived table")
        out[raw["name"]] = Table(raw["name"], raw["description"], cols, stored, derived=derived, sort_by=sort_by)
    return out


def stored_tables() -> dict[str, Table]:
    """The tables a run holds as hive-partitioned Parquet datasets."""
    return {n: t for n, t in tables().items() if t.stored}


def derived_tables() -> dict[str, Table]:
    """The stored tables finalisation computes from the others (no importer writes them)."""
    return {n: t for n, t in stored_tables().items() if t.derived}


def derived() -> list[str]:
    """What finalisation derives across all records of a rank, so that it is right only where a
    rank was finalised whole (an import unit, not a live run's batch): the derived tables, columns
    as `table.column`, and a derived table stored in its `sort_by` order as `table.sorted`. A run's
    manifest lists those it holds (`derived`)."""
    return [
        *derived_tables(),
        *(f"{n}.{c.name}" for n, t in stored_tables().items() for c in t.columns if c.derived),
        *(f"{n}.sorted" for n, t in derived_tables().items() if t.sort_by),
    ]


def validate(table_name: str, batch: pa.RecordBatch | pa.Table) -> None:
    """Raise ValueError unless `batch` has exactly the canonical columns, types and non-null constraints."""
    table = tables()[table_name]
    if batch.schema.names != table.column_names:
        raise ValueError(f"{table_name}: columns {batch.schema.names} differ from the schema {table.column_names}")
    for col, field in zip(table.columns, batch.schema):
        if field.type != col.arrow_type:
            raise ValueError(f"{table_name}.{col.name}: type {field.type} is not {col.arrow_type}")
        if not col.nullable and batch.column(col.name).null_count:
            raise ValueError(f"{table_name}.{col.name}: {batch.column(col.name).null_count} NULLs in a non-null column")


def reference_markdown() -> str:
    """The schema reference page (docs/schema.md), generated from schemas/."""
    lines = [
        "# Canonical schema",
        "",
        f"Schema version {schema_version()}. Generated from `schemas/*.toml` by "
        "`python -m prof_engine.docs`; do not edit by hand.",
        "",
        "A run is a directory: `manifest.json` plus one hive-partitioned Parquet dataset per table, "
        "`<table>/rank=<r>/device=<d>/part-*.parquet`, the step a column (NULL: outside every step). A device's "
        "files each hold a range of steps, in step order, so a step filter skips the others by their "
        "statistics. Runs of schema 1.x are read only by `prof-engine upgrade`, which rewrites them in "
        "this layout. Times are int64 ns since the Unix epoch; durations int64 ns.",
        "",
    ]
    for t in tables().values():
        where = "" if t.stored else " Not stored: built when a run is opened."
        if t.sort_by:
            where += (
                f" Stored in the order ({', '.join(t.sort_by)}), NULLs last: a file per rank and "
                f"{' and '.join(PARTITION_KEYS)}."
            )
        lines += [
            f"## `{t.name}`",
            "",
            t.description + where,
            "",
            "| column | type | unit | null | meaning |",
            "|---|---|---|---|---|",
        ]
        for c in t.columns:
            lines.append(f"| `{c.name}` | {c.type} | {c.unit} | {'yes' if c.nullable else ''} | {c.description} |")
        lines.append("")
    return "\n".join(lines)
