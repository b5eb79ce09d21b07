"""A run the collector recorded, as a unit of import: its tables → staging files of one unit.

The collector writes one run per process (per rank). Merging the rank runs of a job into one run
re-stages each with its own file index: record ids are renumbered `index << 40 | n` (parent,
launch and communication links follow), `rank` holds the file index as staging requires, and the
steps, nesting and times the run holds are kept as stated (finalize keeps a stated step/depth).
"""

from __future__ import annotations

import json
from pathlib import Path

from prof_engine import schema
from prof_engine.errors import InputError
from prof_engine.store.builder import SourceFile, duckdb_connect
from prof_engine.store.manifest import MANIFEST
from prof_engine.store.partitions import hive_types

COLLECTOR_FORMAT = "collector"
_ID_COLUMNS = {"slices": ("id", "parent_id", "launch_id"), "comm": ("slice_id",)}


def is_collector_run(path: Path) -> bool:
    """Whether `path` is a run directory the collector wrote."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and (manifest.get("source") or {}).get("format") == COLLECTOR_FORMAT


def _source(path: Path, index: int) -> tuple[SourceFile, dict]:
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    sources = manifest.get("sources") or []
    if len(sources) != 1:
        raise InputError(f"{path}: a collector run holds one source, this one {len(sources)}")
    s = sources[0]
    info = SourceFile(
        path=str(path),
        format=COLLECTOR_FORMAT,
        rank=int(s["rank"]),
        index=index,
        version=s.get("version"),
        bytes=int(s.get("bytes") or 0),
        events=int(s.get("events") or 0),
        host=s.get("host"),
        devices=s.get("devices") or [],
        lanes=s.get("lanes") or [],
        info={**(s.get("info") or {}), "program": s.get("path")},
    )
    return info, manifest


def _select(table: str, index: int, present: set[str]) -> str:
    """The staged columns of `table` from a run's table `t` that has the columns `present` (a run
    written before a column was added to the schema reads NULL for it)."""
    cols = []
    for c in schema.tables()[table].columns:
        if c.name == "rank":
            expr = f"{index}"
        elif c.name not in present:
            expr = "NULL"
        elif c.name in _ID_COLUMNS.get(table, ()):
            expr = f"(SELECT new FROM idmap WHERE old = t.{c.name})" if c.name != "id" else "m.new"
        else:
            expr = f't."{c.name}"'
        cols.append(f'CAST({expr} AS {c.sql_type}) AS "{c.name}"')
    return ", ".join(cols)


def stage_run(path: Path | str, index: int, staging: Path | str) -> SourceFile:
    """Stage the collector run at `path` as import unit `index` into `staging/<table>/`."""
    path, staging = Path(path), Path(staging)
    info, manifest = _source(path, index)
    tag = f"run{index}"
    con = duckdb_connect(staging / f"_spill_{tag}")
    try:
        for table in sorted(schema.stored_tables(), key=lambda t: t != "slices"):  # slices first: the id map
            if schema.tables()[table].derived:  # finalize computes it again
                continue
            if not (path / table).is_dir() or not any((path / table).rglob("*.parquet")):
                continue
            src = (
                f"read_parquet('{path / table}/**/*.parquet', hive_partitioning = true, union_by_name = true, "
                f"hive_types = {hive_types((path / table).rglob('*.parquet'))})"
            )
            con.execute(f"CREATE OR REPLACE TEMP VIEW t_{table} AS SELECT * FROM {src}")
            if table == "slices":
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE idmap AS SELECT id AS old, "
                    f"({index}::BIGINT << 40) + row_number() OVER (ORDER BY id) AS new FROM t_slices"
                )
            join = " JOIN idmap m ON m.old = t.id" if table == "slices" else ""
            (staging / table).mkdir(parents=True, exist_ok=True)
            present = {r[0] for r in con.execute(f"DESCRIBE t_{table}").fetchall()}
            con.execute(
                f"COPY (SELECT {_select(table, index, present)} FROM t_{table} t{join}) "
                f"TO '{staging / table / tag}.parquet' (FORMAT parquet, COMPRESSION zstd)"
            )
    finally:
        con.close()
    info.info["recorded_steps"] = len(manifest.get("steps") or [])
    return info
