"""One Kineto reader: a trace imports to the same run with the native scanner and without it.

Both feed the same columnar converter (`importers.chunkconv`): the native scanner's chunks, or
the pure-Python chunks (`_native.pychunks`) that `PROF_ENGINE_NATIVE=0` selects. Each stored
table is compared partition by partition and row for row (ids included), and before that the
converter's batches in the order it gives them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fixture_path, stored_rows
from prof_engine import _native
from prof_engine.importers import chrome, scan


def _import(cwd: Path, traces: list[Path], native: str) -> Path:
    """`prof-engine import TRACES -o run<native>` in a process of its own with PROF_ENGINE_NATIVE=native."""
    out = cwd / f"run{native}"
    proc = subprocess.run(
        [sys.executable, "-m", "prof_engine", "import", *map(str, traces), "-o", str(out)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PROF_ENGINE_NATIVE": native},
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return out


@pytest.mark.skipif(_native.load() is None, reason="the native scanner is not built here")
@pytest.mark.parametrize("folder", ["kineto_v100_resnet50_2021", "hta_nccl_parser_rank0_ws2"])
def test_native_and_python_chunks_import_the_same_run(tmp_path, folder):
    traces = sorted(p for p in fixture_path("kineto", folder).iterdir() if ".json" in p.name)
    native, python = _import(tmp_path, traces, "1"), _import(tmp_path, traces, "0")
    manifests = [json.loads((run / "manifest.json").read_text(encoding="utf-8")) for run in (native, python)]
    assert manifests[0]["tables"] == manifests[1]["tables"]
    assert [s["info"] for s in manifests[0]["sources"]] == [s["info"] for s in manifests[1]["sources"]]
    counts = manifests[0]["tables"]
    assert counts["slices"] and counts["flows"]
    if folder == "kineto_v100_resnet50_2021":
        assert counts["memory_events"]
    for table in ("slices", "flows", "memory_events", "comm", "marks", "counters"):
        assert stored_rows(native, table) == stored_rows(python, table), table


def _converted(path: Path, native: bool, monkeypatch) -> dict:
    """The converter's rows of `path`, table by table in the order it sends them, with its counts
    and findings; from the native scanner's chunks or the pure-Python ones."""
    rows: dict[str, list] = {}
    with monkeypatch.context() as m:
        m.setattr(scan, "available", lambda: native)
        _, conv = chrome.convert_file(
            path, 0, lambda table, batch: rows.setdefault(table, []).extend(batch.to_pylist())
        )
    return {"counts": conv.counts, "lanes": conv.lanes, "anomalies": chrome.anomalies(conv), **rows}


@pytest.mark.skipif(_native.load() is None, reason="the native scanner is not built here")
def test_native_and_python_chunks_convert_alike_in_order(monkeypatch):
    path = next(p for p in fixture_path("kineto", "kineto_v100_resnet50_2021").iterdir() if ".json" in p.name)
    native = _converted(path, True, monkeypatch)
    assert native == _converted(path, False, monkeypatch)
    assert native["slices"] and native["flows"] and native["memory_events"]
