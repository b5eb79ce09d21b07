"""Directories prof-engine cannot import, explained in one line: what was found and what is supported.

Owns the recognition of Ascend-side folders that hold no importable profile:

* msprof collection metadata only (`info.json`, `sample.json`, `start_info`, `end_info`,
  `host_start.log`, with or without a `.N` device suffix): device description, collection
  switches and clock anchors, but no profiling data;
* msprof-analyze outputs (`cluster_analysis_output/`, `cluster_step_trace_time.csv`,
  `cluster_communication*.json`): reports derived from profiles, not traces — mixed with loose
  files they are not one profiler output (a trace in them can be imported by passing it directly);
* any directory whose JSON/CSV files include no trace at all.

`explain(dir)` returns that line, or None for a directory the ordinary trace scan should handle.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from prof_engine.importers.jsonstream import names_trace_events, open_bytes

SUPPORTED = (
    "prof-engine imports Chrome/Kineto traces (*.json, *.json.gz), torch_npu/MindSpore "
    "*_ascend_pt|*_ascend_ms directories (text or .db) and msprof PROF_* directories"
)
METADATA = re.compile(r"(info\.json|sample\.json|start_info|end_info|host_start\.log|dev_start\.log)(\.\d+)?")
DOCS = re.compile(r".*\.(md|txt|done)")
ANALYZE = re.compile(r"cluster_analysis_output|cluster_step_trace_time\.csv|cluster_communication(_matrix)?\.json")
DATA_SUFFIXES = (".json", ".json.gz", ".csv")


def _files(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def is_trace(path: Path) -> bool:
    """Cheap sniff: a Chrome trace array or an object with `traceEvents` in its first 64 KiB.
    Unreadable files count as traces, so the import reports their precise error."""
    try:
        with open_bytes(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError, zlib.error):
        return True
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return (
        bool(re.match(rb"\[\s*(\{|\])", text))
        or b'"traceEvents"' in head
        or (text[:1] == b"{" and len(head) == 1 << 16 and names_trace_events(path))
    )


def _names(paths: list[Path], root: Path, limit: int = 4) -> str:
    names = [str(p.relative_to(root)) for p in paths[:limit]]
    return ", ".join(names) + (f", … ({len(paths)} in all)" if len(paths) > limit else "")


def explain(path: Path) -> str | None:
    """Why the directory `path` cannot be imported, in one line; None when it may hold traces."""
    files = _files(path)
    data = [p for p in files if not DOCS.fullmatch(p.name)]
    if data and all(METADATA.fullmatch(p.name) for p in data):
        return (
            f"{path}: msprof collection metadata only ({_names(data, path, 6)}): device info, collection "
            f"switches and clock anchors, no profiling data to import; {SUPPORTED}"
        )
    analyze = [
        p
        for p in path.rglob("*")
        if ANALYZE.fullmatch(p.name) and not (p.parent != path and ANALYZE.fullmatch(p.parent.name))
    ]
    if analyze:
        loose = [
            p for p in data if p.name.endswith(DATA_SUFFIXES) and not any(a in p.parents or a == p for a in analyze)
        ]
        traces = [p for p in loose if p.name.lower().endswith((".json", ".json.gz")) and is_trace(p)]
        hint = f"; to import a trace in it, pass the file itself: {_names(traces, path, 2)}" if traces else ""
        beside = f" beside {len(loose)} loose JSON/CSV file(s)" if loose else ""
        return (
            f"{path}: msprof-analyze outputs ({_names(analyze, path, 2)}){beside}, not one profiler output: "
            f"derived reports are not traces{hint}"
        )
    candidates = [p for p in data if p.name.lower().endswith(DATA_SUFFIXES)]
    if candidates and not any(p.name.lower().endswith((".json", ".json.gz")) and is_trace(p) for p in candidates):
        json_files = [p for p in candidates if not p.name.endswith(".csv")]
        csv_files = [p for p in candidates if p.name.endswith(".csv")]
        found = [
            f"{len(fs)} {what} ({_names(fs, path, 3)})"
            for fs, what in ((json_files, "JSON file(s) that are not traces"), (csv_files, "CSV file(s)"))
            if fs
        ]
        return f"{path}: no trace in this directory, only {' and '.join(found)}; {SUPPORTED}"
    return None
