"""Create a run's views in a DuckDB connection (`attach`): its canonical tables as views over its
Parquet files, listed once, and the files of `queries/` (`create`) in the order they require."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote

import duckdb

from prof_engine import schema
from prof_engine._sql import list_literal, literal
from prof_engine.engine.connection import given_peaks, query_error
from prof_engine.engine.snapshots import snapshot_of
from prof_engine.engine.views import ViewDef, closure, definitions
from prof_engine.errors import QueryError, RunError
from prof_engine.store.location import is_remote, register
from prof_engine.store.manifest import (
    cann_args,
    finalised,
    host_only_ranks_possible,
    quality_rules,
    restrict,
    run_devices,
    run_findings,
    run_ranks,
)
from prof_engine.store.partitions import NULL_PARTITION, hive_types, rank_dir


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# Files of queries/ that attaching a run whole (`compare`) does not run: their table macros are bound
# at creation (a macro has no deferred binding), and binding `show`'s summaries, which read most of
# the views, took ~0.13 s of every attach. `Run.summary` creates them at its first call.
ON_DEMAND = ("_summary",)


# Files of queries/ that only finalisation uses (the lanes' macros: every run stores the lanes); not
# created in a run's session, whatever its queries name (~19 ms).
FINALIZE_ONLY = ("_lanes",)


def _create_table(con: duckdb.DuckDBPyConnection, name: str, table: schema.Table, rows: Sequence[tuple] = ()) -> None:
    """A table of `table`'s columns holding `rows`, in the current schema (an Arrow registration
    would be connection-wide, and Arrow built from Python values imports pandas). The rows go in
    as one list per column, unnested side by side: `executemany` binds a statement per row (8 s
    for the 27,000 rows of a 3,000-rank run)."""
    con.execute(f'CREATE TABLE "{name}" ({", ".join(f"{_ident(c.name)} {c.sql_type}" for c in table.columns)})')
    if rows:
        unnested = ", ".join(f"unnest(?::{c.sql_type}[])" for c in table.columns)
        con.execute(f'INSERT INTO "{name}" SELECT {unnested}', [list(column) for column in zip(*rows, strict=True)])


def _parquet_source(files: list[Path]) -> str:
    return f"read_parquet({list_literal(files)}, hive_partitioning = true, hive_types = {hive_types(files)})"


def step_numbers(manifest: dict) -> list[int]:
    """The run's steps (the manifest lists each per rank), in order."""
    return sorted({s["step"] for s in manifest.get("steps", [])})


def check_steps(path: Path, manifest: dict, steps: list[int]) -> None:
    """QueryError if a step asked for is none of the run's: every view would be silently empty."""
    known = step_numbers(manifest)
    missing = sorted(set(steps) - set(known))
    if missing:
        have = (
            "none"
            if not known
            else ", ".join(map(str, known))
            if len(known) <= 10
            else f"{len(known)}, {known[0]}..{known[-1]}"
        )
        raise QueryError(
            f"{path}: no step{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} in this run (its steps: {have})"
        )


def _partition_files(table_dir: Path, ranks: list[int] | None = None) -> list[Path]:
    """The Parquet files of a table, rank by rank in rank order (then by path), so that a view
    without an ORDER BY lists ranks as groups of ranks computed apart do (`engine.grouped`); with
    `ranks`, only those under the ranks' `rank=<r>` directories are listed."""
    dirs = [table_dir] if ranks is None else [table_dir / rank_dir(r) for r in ranks]
    return sorted((f for d in dirs for f in _parquet_files(d)), key=lambda f: _rank_order(table_dir, f))


def _parquet_files(top: Path) -> Iterator[Path]:
    """The Parquet files under `top`. Locally by `os.walk`: pathlib's rglob took 2 of the 3 s of
    opening a 1,000-rank run (9,000 files); a run on object storage lists through its `RemotePath`."""
    if is_remote(top):
        yield from top.rglob("*.parquet")
        return
    for where, _, names in os.walk(top):
        yield from (Path(where, n) for n in names if n.endswith(".parquet"))


def _rank_order(table_dir: Path, f: Path) -> tuple[int, str]:
    """A file's place: its `rank=<r>` directory's rank (the NULL rank's: after every rank), then its path."""
    number = f.relative_to(table_dir).parts[0].removeprefix("rank=")
    return (int(number) if number.isdigit() else 1 << 62, str(f))


def _in_sorted_order(table_dir: Path, files: list[Path]) -> list[Path] | None:
    """`files` of a table written in its `sort_by` order (`partitions.SortedWriter`: a file per
    rank and partition, rows in order) listed by rank and partition, so that reading them in turn
    reads the rows in order; None where they are not one file per rank and partition."""
    if not files:
        return []
    levels = {f: dict(p.split("=", 1) for p in f.relative_to(table_dir).parts[:-1]) for f in files}

    def key(f: Path) -> tuple:  # rank, then the directory level below it: device=<escaped>
        rank = levels[f].get("rank", NULL_PARTITION)
        return (None if rank == NULL_PARTITION else int(rank), unquote(levels[f].get("device", "")))

    keys = {f: key(f) for f in files}
    if any(k[0] is None for k in keys.values()) or len(set(keys.values())) < len(files):
        return None
    return sorted(files, key=keys.__getitem__)


def _register_tables(
    con: duckdb.DuckDBPyConnection, path: Path, manifest: dict, steps: list[int] | None, ranks: list[int] | None = None
) -> tuple[dict[str, str], set[str]]:
    """Create the run's tables as views; return the SELECT each must have once the views of
    `queries/` exist (`attach`): until then a table with files reads an empty table of its types.
    And the tables whose view reads their rows in their `sort_by` order (`_in_sorted_order`).

    Why: DuckDB binds a table's scan again at every reference, and the views reference `slices`
    dozens of times, at CREATE and at each query. With a glob that means listing the directory
    tree each time: tens of seconds to open a run of a thousand partitions. So the files are
    listed once, here, and the views are created against the empty stand-ins, which bind at no
    cost. Every file has the schema's columns and types, so no footer is read to check: the writer
    casts every batch to them, and `read_manifest` opens runs of this major version alone (2.0 is
    its only minor; a later one must keep them, `schemas/_version.toml`)."""
    rows = manifest.get("tables", {})
    _create_table(con, "_run_ranks", schema.tables()["run_ranks"], run_ranks(manifest))
    con.execute("CREATE VIEW run_ranks AS SELECT * FROM _run_ranks")
    _create_table(con, "_run_devices", schema.tables()["run_devices"], run_devices(manifest))
    con.execute("CREATE VIEW run_devices AS SELECT * FROM _run_devices")
    _create_table(con, "_run_findings", schema.tables()["run_findings"], run_findings(manifest))
    con.execute("CREATE VIEW run_findings AS SELECT * FROM _run_findings")
    _create_table(con, "_quality_rules", schema.tables()["quality_rules"], quality_rules())
    con.execute("CREATE VIEW quality_rules AS SELECT * FROM _quality_rules")
    final, in_order = {}, set()
    filters = ([f"step IN ({', '.join(map(str, steps))})"] if steps else []) + (
        [f"rank IN ({', '.join(map(str, ranks))})"] if ranks is not None else []
    )
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    for name, table in schema.stored_tables().items():
        cols = ", ".join(f'"{c}"' for c in table.column_names)
        files = _partition_files(path / name, ranks) if rows.get(name) and (path / name).is_dir() else []
        if table.sort_by:
            ordered = _in_sorted_order(path / name, files)
            if ordered is not None:
                files = ordered
                in_order.add(name)
        if files:
            _READS.setdefault(con, set()).update(str(f) for f in files)
            final[name] = f"SELECT {cols} FROM {_parquet_source(files)}{where}"
            con.execute(f'CREATE TABLE "_shape_{name}" AS SELECT {cols} FROM {_parquet_source(files[:1])} LIMIT 0')
            src = f'"_shape_{name}"'
        else:
            _create_table(con, f"_empty_{name}", table)
            src = f"_empty_{name}"
        con.execute(f"CREATE VIEW {name} AS SELECT {cols} FROM {src}{where}")
        con.execute(f"COMMENT ON VIEW {name} IS {literal(table.description)}")
    return final, in_order


def create(con: duckdb.DuckDBPyConnection, view: ViewDef) -> None:
    try:
        con.execute(view.statements())
    except duckdb.Error as e:
        raise QueryError(f"queries/{view.path.name}: {e}") from None
    if view.public:
        con.execute(f'COMMENT ON VIEW "{view.name}" IS {literal(view.answers)}')


def attach(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    manifest: dict,
    steps: list[int] | None = None,
    peak_tflops: Mapping[str, float] | None = None,
    views: Sequence[str] | None = None,
    ranks: Sequence[int] | None = None,
) -> Path:
    """Create a run's tables and the views of `queries/` in the current schema of `con`
    (`peak_tflops`, `ranks`: see `Run`); return the directory whose files they read. `views`: the
    files of queries/ to create, with all they require (default: all but ON_DEMAND; a `Run`
    creates none here, and each when a query first reads it).

    Views and macros bind names in their own schema, so several runs can sit side by side in one
    session, one schema each, with the view SQL unchanged (see `prof_engine.engine.compare`).
    A live collector run (recording, or its writer killed) lacks what needs all of a rank's
    records; its views read a snapshot of it finalised whole (`store.upgrade.snapshot`), in a
    private temporary directory removed with `con` (`release_snapshots`).
    """
    register(con, path)  # a run on object storage: DuckDB reads it through pyarrow's file system
    if not finalised(manifest):
        if is_remote(path):
            raise RunError(f"{path}: a run still recording is read from its own directory, not object storage")
        path, manifest = snapshot_of(con, path, manifest)
    chosen = sorted({int(r) for r in ranks}) if ranks is not None else None
    # every rank the run holds, however few it is opened with: data_quality judges a rank's links
    # by it (links_to_absent_ranks), so that rank's rows are alike on every restriction (scope rank)
    held = ", ".join(str(int(r)) for r in manifest.get("ranks") or [])
    con.execute(f"CREATE OR REPLACE MACRO run_held_ranks() AS [{held}]::INTEGER[]")
    manifest = restrict(manifest, chosen)
    try:
        _attach(con, path, manifest, steps, given_peaks(peak_tflops), views, chosen)
    except duckdb.Error as e:  # reading the run's footers, within the session's memory limit
        raise query_error(e) from None
    return path


# The Parquet files each connection's views read (`_register_tables`): all `sandbox` lets it open.
_READS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, set[str]] = weakref.WeakKeyDictionary()


def _attach(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    manifest: dict,
    steps: list[int] | None,
    peaks: dict[str, float],
    views: Sequence[str] | None = None,
    ranks: list[int] | None = None,
) -> None:
    final, in_order = _register_tables(con, path, manifest, steps, ranks)
    _create_table(con, "_run_peaks", schema.tables()["run_peaks"], list(peaks.items()))
    con.execute("CREATE VIEW run_peaks AS SELECT * FROM _run_peaks")
    # Constants from the manifest and the files, which DuckDB folds into the views' plans:
    for macro, value in {
        # where no source writes CANN's keys, the args of API calls and tasks (most of the bytes
        # of 10 M records) are not read at all (`api_level`, `_operator_calls`)
        "run_cann_args": cann_args(manifest),
        # the lanes' files are read in overlap's order, which then sorts nothing
        "run_lanes_in_order": "lanes" in in_order,
        # whether a rank may fall back to host ops: if none, those branches never scan them
        "run_host_only_ranks": host_only_ranks_possible(manifest),
    }.items():
        con.execute(f"CREATE OR REPLACE MACRO {macro}() AS {str(bool(value)).lower()}")
    needed = closure(views) if views is not None else None
    for view in definitions().values():
        if view.name not in ON_DEMAND + FINALIZE_ONLY and (needed is None or view.name in needed):
            create(con, view)
    for name, select in final.items():  # the views bind afresh at each query: now they read the files
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
        con.execute(f"COMMENT ON VIEW {name} IS {literal(schema.stored_tables()[name].description)}")


def reads_of(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The Parquet files the views `attach` created in `con` read: all `sandbox` lets it open."""
    return _READS.get(con, set())
