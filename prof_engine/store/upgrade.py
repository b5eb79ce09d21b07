"""A run as an import of today would store it: every derived table and column (schema 2.0).

Runs of schema 1.x lack some of what finalisation now derives (`launch_name` before 1.2, `lanes`
before 1.3, their order before 1.4, `self_dur` of user ranges before 1.5, `launch_api*` before
1.6), and a live collector run, finalised batch by batch, lacks what needs all of a rank's records
(`lanes`, `lane_totals`, stream waits, launching calls). `upgrade_run` re-stages the run's stored
tables, one import unit per rank, and runs the import's finalisation over them
(`builder.finalize_unit`, `RunBuilder`): the same code, so the same rows.

What is re-staged is what an importer stages, plus what the run already settled that an import
would settle the same way: record ids (unique in the run already), each record's step (a step
the source stated wins in finalisation, and a step finalisation assigned is what it assigns
again) and the collector's nesting (its push/pop ranges state theirs; a collector run is imported
so, `importers.runstore`). Other runs' nesting is computed again (user ranges nest with host ops
since 1.5); every other finalised column is recomputed from the staged records.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

import duckdb

from prof_engine import schema
from prof_engine._sql import list_literal, literal
from prof_engine.errors import RunError
from prof_engine.store.builder import FINALIZE_THREADS, Finalized, RunBuilder, SourceFile, duckdb_connect, finalize_unit
from prof_engine.store.location import is_uri
from prof_engine.store.manifest import MANIFEST, finalised, load_manifest, own_process_groups
from prof_engine.store.partitions import hive_types

COLLECTOR_FORMAT = "collector"
# Nesting that only finalisation computes for the records of an imported source (no importer states
# it); the collector's push/pop ranges state theirs, so a collector run keeps it.
_NESTING = ("depth", "parent_id")
_EMPTY_SUMMARY: dict[str, Any] = {"devices": [], "steps": [], "start_ns": None, "end_ns": None}


def needs_upgrade(manifest: dict[str, Any]) -> bool:
    """Whether a run of this manifest lacks some of what an import of today stores."""
    return str(manifest.get("schema_version")) != schema.schema_version() or not finalised(manifest)


def upgrade_run(
    run: Path | str, out: Path | str | None = None, *, force: bool = False, memory_limit: str | None = None
) -> Path:
    """Rewrite the run at `run` as an import of today would store it (schema 2.0, every derived
    column); return its path. In place by default, atomically (the new run is written beside it,
    then swapped in, under the run's lock, as `import --force` does); to `out` instead if given
    (an existing `out` only with `force`). A run already current is left as it is (`out`: copied
    through the same re-finalisation). `memory_limit` caps DuckDB per rank, as for an import."""
    if remote := [p for p in (run, out) if p is not None and is_uri(p)]:
        raise RunError(
            f"{remote[-1]}: runs on object storage are read in place, not rewritten; "
            f"upgrade a local copy (and upload that)"
        )
    src = Path(run).absolute()
    manifest = load_manifest(src)
    version = str(manifest.get("schema_version", ""))
    if version.split(".")[0] not in ("1", schema.schema_version().split(".")[0]):
        raise RunError(
            f"{src}: schema version {version or '?'} is not one this prof-engine upgrades "
            f"(1.x to {schema.schema_version()}); re-import the source"
        )
    if out is None:
        if manifest.get("state") == "recording":
            raise RunError(
                f"{src}: still recording; upgrade it once its collector has closed it "
                f"(or write the upgrade elsewhere with -o OUT)"
            )
        if not needs_upgrade(manifest):
            return src
        target, force = src, True
    else:
        target = Path(out).absolute()
        if target == src:
            raise RunError(f"{src}: -o names the run itself; leave it out to upgrade in place")
    return rebuild(src, manifest, target, force=force, memory_limit=memory_limit)


def rebuild(
    src: Path,
    manifest: dict[str, Any],
    target: Path,
    *,
    force: bool = False,
    memory_limit: str | None = None,
    extras: bool = True,
) -> Path:
    """Re-stage the run at `src` (whose manifest is `manifest`) rank by rank and finalise it into
    a run at `target` (see the module docstring). `extras`: what else the run directory holds
    (the collector's kept Kineto traces, `traces/`) goes with it, as hard links where it can."""
    groups = manifest.get("process_groups") or []
    sources = [_source_file(own_process_groups(s, groups), i) for i, s in enumerate(manifest.get("sources") or [])]
    by_rank: dict[int, list[SourceFile]] = {}
    for s in sources:
        by_rank.setdefault(s.rank, []).append(s)
    keep_nesting = (manifest.get("source") or {}).get("format") == COLLECTOR_FORMAT
    # the tables' files, listed once: a live run may publish more meanwhile (slices last), which
    # this snapshot leaves out
    files = {
        name: sorted((src / name).rglob("*.parquet"), key=str) if (src / name).is_dir() else []
        for name, t in schema.stored_tables().items()
        if not t.derived
    }
    threads = max(1, min(os.cpu_count() or 1, FINALIZE_THREADS))
    with RunBuilder(target, force=force) as builder:
        units: list[tuple[SourceFile, Finalized]] = []
        for rank, group in sorted(by_rank.items()):
            first = group[0]
            unit = builder.unit_dir(first.index)
            if _stage_rank(src, files, rank, unit / "staging", keep_nesting):
                done = finalize_unit(
                    unit, [(0, rank, 0)], memory_limit=memory_limit, threads=threads, label=f"{src} (rank {rank})"
                )
            else:  # a rank without records (its source held none)
                (unit / "out").mkdir(parents=True, exist_ok=True)
                done = Finalized({}, dict(_EMPTY_SUMMARY))
            units.append((first, done))
            for other in group[1:]:  # its records went with the rank's unit
                (builder.unit_dir(other.index) / "out").mkdir(parents=True, exist_ok=True)
                units.append((other, Finalized({}, dict(_EMPTY_SUMMARY))))
        units.sort(key=lambda u: u[0].index)
        if extras:
            _carry_extras(src, builder.tmp)
        extra = {"state": manifest["state"]} if "state" in manifest else {}
        return builder.finalize(
            units,
            (manifest.get("source") or {}).get("format") or "unknown",
            manifest.get("metadata") or {},
            skipped=manifest.get("skipped") or [],
            findings=manifest.get("findings") or [],
            extra=extra,
        )


def _carry_extras(src: Path, into: Path) -> None:
    """Link (else copy) into `into` what run directory `src` holds beside its manifest and tables."""
    tables = set(schema.stored_tables())
    for entry in src.iterdir():
        if entry.name == MANIFEST or entry.name in tables or entry.name.startswith("."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, into / entry.name, copy_function=_link_or_copy, symlinks=True)
        else:
            _link_or_copy(entry, into / entry.name)


def _link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _source_file(entry: dict[str, Any], position: int) -> SourceFile:
    """A manifest's source entry as the import's `SourceFile` (fields an older writer did not know
    take their defaults; an entry without an index takes its position)."""
    known = {f.name for f in fields(SourceFile)}
    values = {k: v for k, v in entry.items() if k in known}
    values.setdefault("index", position)
    values.setdefault("format", "unknown")
    values.setdefault("path", "")
    return SourceFile(**values)


def _stage_rank(src: Path, files: dict[str, list[Path]], rank: int, staging: Path, keep_nesting: bool) -> bool:
    """Write rank `rank`'s records of each table of run `src` (its `files`) as one staging file per
    table under `staging/<table>/`, as an importer stages them (`rank` holds file index 0); whether
    it has any slices. Rows keep their order in the run (DuckDB told to keep it)."""
    con = duckdb_connect(staging.parent / "_spill_stage", threads=1)
    try:
        con.execute("SET preserve_insertion_order = true")
        has_slices = False
        for name, listed in files.items():
            if not listed:
                continue
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW t AS SELECT * FROM read_parquet({list_literal(listed)}, hive_partitioning = true, "
                f"union_by_name = true, hive_types = {hive_types(listed)}) WHERE rank = {int(rank)}"
            )
            present = {r[0] for r in con.execute("DESCRIBE t").fetchall()}
            if not con.execute("SELECT count(*) FROM (SELECT 1 FROM t LIMIT 1)").fetchall()[0][0]:
                continue
            (staging / name).mkdir(parents=True, exist_ok=True)
            target = staging / name / "upgrade.parquet"
            con.execute(
                f"COPY (SELECT {_select(name, present, keep_nesting)} FROM t) TO {literal(str(target))} "
                f"(FORMAT parquet, COMPRESSION lz4)"
            )
            has_slices |= name == "slices"
        return has_slices
    except duckdb.Error as e:
        raise RunError(f"{src}: cannot read its records to upgrade it ({str(e).splitlines()[0]})") from None
    finally:
        con.close()
        shutil.rmtree(staging.parent / "_spill_stage", ignore_errors=True)


def _select(table: str, present: set[str], keep_nesting: bool) -> str:
    """The staged columns of `table` from a run's rows `t` that have the columns `present`: a
    column the run's schema version lacks, and nesting finalisation computes again, read NULL."""
    cols = []
    for c in schema.tables()[table].columns:
        if c.name == "rank":
            expr = "0"
        elif c.name not in present or (table == "slices" and c.name in _NESTING and not keep_nesting):
            expr = "NULL"
        else:
            expr = f'"{c.name}"'
        cols.append(f'CAST({expr} AS {c.sql_type}) AS "{c.name}"')
    return ", ".join(cols)


def snapshot(run: Path, manifest: dict[str, Any], into: Path) -> Path:
    """A finalised copy at `into` (which must not exist) of the live collector run at `run`, for
    reading it whole while it records, or after its writer died (`Run` opens it instead)."""
    if (into / MANIFEST).exists():
        raise RunError(f"{into}: already exists")
    return rebuild(Path(run).absolute(), manifest, Path(into).absolute(), extras=False)
