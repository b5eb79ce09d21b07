"""Snapshots of live runs (a collector run still recording, or its writer killed) that a
connection reads, finalised whole in a private temporary directory removed with it."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import duckdb

from prof_engine.store.manifest import read_manifest

# Snapshots of live runs each connection reads (`attach`): removed by `release_snapshots`, or
# when the connection is garbage-collected or the process exits.
_SNAPSHOTS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, list[weakref.finalize]] = weakref.WeakKeyDictionary()


def snapshot_of(con: duckdb.DuckDBPyConnection, path: Path, manifest: dict) -> tuple[Path, dict]:
    """The live run at `path` finalised whole into a temporary directory removed with `con`: its
    path and manifest (`catalog.attach` reads it instead)."""
    from prof_engine.store.upgrade import snapshot

    where = Path(tempfile.mkdtemp(prefix="prof-engine-snapshot-"))
    remove_with(con, where)
    copy = snapshot(path, manifest, where / "run")
    return copy, read_manifest(copy)


def remove_with(con: duckdb.DuckDBPyConnection, directory: Path) -> None:
    """Remove `directory` (files a view of `con` reads) by `release_snapshots`, or when `con` is
    garbage-collected or the process exits."""
    _SNAPSHOTS.setdefault(con, []).append(weakref.finalize(con, shutil.rmtree, directory, True))


def release_snapshots(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the snapshots of live runs that `con` read (once it is closed)."""
    for remove in _SNAPSHOTS.pop(con, []):
        remove()
