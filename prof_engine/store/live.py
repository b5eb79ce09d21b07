"""A run written while the program that it records still runs (the store side of the collector).

`LiveRun` creates the run directory at once, with a manifest in state `recording`, so the run
opens from its first moment. Each `publish()` takes one batch of staged records (the same
staging layout an import uses), runs `queries/store/finalize.sql` over it in DuckDB, writes the
result as partition files into a hidden `.pending/<batch>/` directory inside the run and renames
each finished file into its partition directory. A rename is atomic, so a reader sees a whole
Parquet file or none; `slices` files are renamed last, so once a batch's steps are visible its
other tables are too. The manifest is rewritten atomically after a batch (at most once per
`manifest_interval_s`) and at `close()`, which marks the run `complete` and finalises it whole,
in place, as an import would have (`upgrade.rebuild`: schema 2.0, every derived column). A run
still recording, or whose writer was killed, opens through such a snapshot (`engine.catalog.attach`).

After a kill -9 the manifest may lag the files. `refresh()` recomputes what the manifest
summarises (rows, devices, steps, time span) from the partition files, and `read_manifest`
applies it to any run still marked `recording`, so a killed run opens with every published batch.
What a kill loses is what had not been renamed into place: the batch being written (its files
stay in `.pending/`, which readers ignore) and whatever the writer had not reached yet.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from prof_engine import schema
from prof_engine.errors import RunError
from prof_engine.store.builder import Totals, copy_tables, duckdb_connect, stage_views, staged_summary, summarise
from prof_engine.store.files import FILE_MODE, make_dirs, write_text
from prof_engine.store.manifest import MANIFEST, check_replaceable, is_run

PENDING = ".pending"
RECORDING, COMPLETE = "recording", "complete"


class LiveRun:
    """The run directory at `out`, published batch by batch; see the module docstring.

    Not thread-safe: one writer owns it. `sources` are the manifest's source entries (one
    per rank that records into this run); `set_sources` replaces them as the writer learns more.
    """

    def __init__(
        self,
        out: Path | str,
        *,
        sources: list[dict[str, Any]],
        source_format: str,
        force: bool = False,
        metadata: dict[str, Any] | None = None,
        manifest_interval_s: float = 1.0,
    ) -> None:
        self.out = Path(out).absolute()
        self._claim(force)
        self.manifest_interval_s = manifest_interval_s
        self._batches = 0
        self._written_at = 0.0
        self._dirty = False
        self._con: duckdb.DuckDBPyConnection | None = None
        self._totals = Totals()
        self.manifest: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "schema_version": schema.schema_version(),
            "state": RECORDING,
            "source": {"format": source_format, "versions": []},
            "sources": [],
            "ranks": [],
            "hosts": [],
            "tables": dict(self._totals.rows),
            "metadata": dict(metadata or {}),
            "skipped": [],
            "devices": [],
            "steps": [],
            "start_ns": None,
            "end_ns": None,
        }
        self.set_sources(sources)
        self._write_manifest()

    def _claim(self, force: bool) -> None:
        """Create the run directory; an existing run is replaced only with `force`."""
        check_replaceable(self.out, force, "pass force=True / --force to replace it")
        if self.out.exists():
            shutil.rmtree(self.out)
        make_dirs(self.out)

    def set_sources(self, sources: list[dict[str, Any]]) -> None:
        """Replace the manifest's source entries (written with the next manifest)."""
        m = self.manifest
        m["sources"] = sources
        m["ranks"] = sorted({s["rank"] for s in sources})
        m["hosts"] = sorted({s["host"] for s in sources if s.get("host")})
        m["source"]["versions"] = sorted({s["version"] for s in sources if s.get("version")})
        self._dirty = True

    def staging_dir(self) -> Path:
        """A fresh staging directory for the next batch (inside the run, so renames stay atomic)."""
        self._batches += 1
        path = self.out / PENDING / f"{self._batches:06d}-{uuid.uuid4().hex[:8]}"
        make_dirs(path / "staging")
        return path / "staging"

    def publish(self, staging: Path, files: list[tuple[int, int, int]], query: str | None = None) -> pa.Table | None:
        """Finalize the records staged in `staging` and publish them as partition files.

        `files` lists (file index, rank, offset ns) of the units staged there (file indexes must be
        new to this run: record ids are `file_index << 40 | seq`). `query`, if given, runs over
        the batch's `final_<table>` views before they go; its result is returned."""
        batch = Path(staging).parent
        con = self._connection()
        staged = stage_views(con, staging, files, whole=False)  # a rank's steps may span batches
        rows = copy_tables(con, batch / "out", staged)
        result = con.sql(query).to_arrow_table() if query else None
        summary = staged_summary(con)
        self._move_into_place(batch / "out")
        shutil.rmtree(batch, ignore_errors=True)
        self._totals.add(rows, summary)
        self._dirty = True
        if time.monotonic() - self._written_at >= self.manifest_interval_s:
            self._write_manifest()
        return result

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """One DuckDB connection for every batch (connecting costs more than a small batch's SQL)."""
        if self._con is None:
            self._con = duckdb_connect(
                self.out / PENDING / "spill", threads=1
            )  # the profiled program needs the cores more
        return self._con

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_con": None}  # a LiveRun travels to the writer process without one

    def _move_into_place(self, out: Path) -> None:
        tables = sorted(schema.stored_tables(), key=lambda t: t == "slices")  # slices last
        for name in tables:
            for part in sorted((out / name).rglob("*.parquet")):
                target = self.out / part.relative_to(out)
                make_dirs(target.parent)
                os.chmod(part, FILE_MODE)
                os.rename(part, target)

    def _write_manifest(self) -> None:
        m = self.manifest
        m.update(self._totals.manifest_fields())
        write_text(self.out / MANIFEST, json.dumps(m, indent=1, default=str))
        self._written_at = time.monotonic()
        self._dirty = False

    def flush_manifest(self) -> None:
        """Write the manifest now if a batch or a source changed it since the last write."""
        if self._dirty:
            self._write_manifest()

    def close(self, metadata: dict[str, Any] | None = None) -> Path:
        """Mark the run complete (final manifest), remove the pending directory, and finalise the
        run whole in place (`upgrade.rebuild`): a batch cannot know what needs all of a rank's
        records (the lanes, stream waits, launching calls), so a closed run holds them as an
        import does. Until that is swapped in, readers open a snapshot finalised alike."""
        from prof_engine.store.upgrade import rebuild

        if metadata:
            self.manifest["metadata"].update(metadata)
        self.manifest["state"] = COMPLETE
        self._write_manifest()
        if self._con is not None:
            self._con.close()
            self._con = None
        shutil.rmtree(self.out / PENDING, ignore_errors=True)
        return rebuild(self.out, self.manifest, self.out, force=True)


def set_aside(out: Path) -> tuple[Path, str] | None:
    """Make room for a new recording into `out` without deleting what is there: a run at `out`
    is renamed (atomic, in its own directory) to a hidden sibling, returned with the time it was
    recorded, for the caller to delete once the new run is complete. None when `out` is absent or
    an empty directory. RunError, touching nothing, when `out` is anything but a prof-engine run:
    a user's directory or file is never moved nor deleted."""
    out = Path(out).absolute()
    if not out.exists() and not out.is_symlink():
        return None
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
        return None
    if out.is_symlink() or not out.is_dir() or not is_run(out):
        raise RunError(
            f"{out}: exists and is not a prof-engine run; refusing to record into it (nothing there was changed): "
            "choose another output path"
        )
    created = str(json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("created") or "at an unknown time")
    aside = out.with_name(f".{out.name}.replaced-{uuid.uuid4().hex[:8]}")
    os.rename(out, aside)
    return aside, created


def refresh(run: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with rows, devices, steps and time span recomputed from the run's partition files
    (for a run still `recording` or `interrupted`: files may have been published after its last
    manifest write)."""
    con = duckdb.connect()
    try:
        rows = {}
        for name in schema.stored_tables():
            glob = str(run / name / "**" / "*.parquet")
            has_files = any((run / name).rglob("*.parquet")) if (run / name).is_dir() else False
            rows[name] = (
                int(con.execute("SELECT count(*) FROM read_parquet(?)", [glob]).fetchall()[0][0]) if has_files else 0
            )
        summary = summarise(con, run)
    finally:
        con.close()
    return {**manifest, **summary, "tables": rows}
