"""Importers: foreign trace formats → a prof-engine run. Format detection lives here, in one place."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prof_engine.errors import InputError
from prof_engine.importers.chrome import convert_file
from prof_engine.importers.jsonstream import open_bytes
from prof_engine.store import RunBuilder, SourceFile

Progress = Callable[[int, int], None]

_TRACE_SUFFIXES = (".json", ".json.gz")
_ASCEND_MARKERS = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")


def detect(path: Path) -> str:
    """Format of one source file by its content: 'chrome' (Chrome trace / Kineto JSON)."""
    try:
        with open_bytes(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError, zlib.error) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise InputError(f"{path}: cannot read ({reason}; truncated or corrupt gzip?)") from None
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise InputError(f"{path}: file is empty")
    if text[:1] == b"{" and (b'"traceEvents"' in head or len(head) < (1 << 16)):
        return "chrome"  # a small object without traceEvents is reported precisely by the reader
    if text[:1] == b"[" and re.match(rb"\[\s*(\{|\])", text):
        return "chrome"
    raise InputError(f"{path}: unknown file type (prof-engine imports Chrome/Kineto trace JSON, .json or .json.gz)")


def _looks_ascend(path: Path) -> bool:
    if path.name.startswith("PROF_") or path.name.endswith(("_ascend_pt", "_ascend_ms")):
        return True
    return any((path / m).exists() for m in _ASCEND_MARKERS)


def _skipped(rel: Path) -> bool:
    """Hidden files and prof-engine runs (a directory scan must not re-import its own output)."""
    return any(part.startswith(".") for part in rel.parts) or rel.name == "manifest.json"


def expand_sources(sources: Sequence[Path]) -> list[Path]:
    """Trace files named by `sources`: files as given, directories by their *.json / *.json.gz files."""
    files: list[Path] = []
    for src in map(Path, sources):
        if not src.exists():
            raise InputError(f"{src}: no such file or directory")
        if src.is_file():
            files.append(src)
            continue
        if _looks_ascend(src):
            raise InputError(
                f"{src}: an Ascend profiler directory (torch_npu / MindSpore / msprof); this version of "
                "prof-engine imports Chrome/Kineto traces only"
            )
        found = sorted(p for p in src.rglob("*") if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)
                       and not _skipped(p.relative_to(src)))
        if not found:
            raise InputError(f"{src}: no trace files (*.json, *.json.gz) in this directory")
        files.extend(found)
    return files


def _source_info(path: Path, index: int, header: dict[str, Any], conv: Any, nbytes: int) -> SourceFile:
    dist = header.get("distributedInfo") or {}
    rank = dist.get("rank") if isinstance(dist, dict) else None
    base = header.get("baseTimeNanoseconds")
    kineto = any(k in header for k in ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"))
    devices = [
        {k: d.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms") if k in d}
        for d in header.get("deviceProperties") or [] if isinstance(d, dict)
    ]
    info = {k: header[k] for k in ("distributedInfo", "trace_id", "displayTimeUnit") if k in header}
    return SourceFile(
        path=str(path), format="kineto" if kineto else "chrome", rank=int(rank) if isinstance(rank, int) else index,
        offset_ns=int(base) if isinstance(base, (int, float)) else 0,
        version=str(header["schemaVersion"]) if "schemaVersion" in header else None,
        bytes=nbytes, events=sum(conv.counts.values()), host=header.get("host_name"),
        devices=devices, lanes=list(conv.lanes.values()), info=info,
    )


def import_sources(
    sources: Sequence[Path | str], out: Path | str, *, force: bool = False,
    progress: Progress | None = None, metadata: dict[str, Any] | None = None,
) -> Path:
    """Import trace files or directories into the run at `out`; return its path.

    A directory with one trace per rank becomes one run with a rank per file (the rank is read
    from each trace's `distributedInfo.rank`, else the file's position in sorted order).
    """
    files = expand_sources([Path(s) for s in sources])
    for f in files:
        detect(f)
    total = sum(f.stat().st_size for f in files)
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(done, total)

    with RunBuilder(Path(out), force=force) as builder:
        infos = []
        for index, path in enumerate(files):
            reader, conv = convert_file(path, index, builder.sink, step)
            infos.append(_source_info(path, index, reader.header, conv, path.stat().st_size))
        _check_ranks(infos)
        fmt = "kineto" if all(i.format == "kineto" for i in infos) else "chrome"
        return builder.finalize(infos, fmt, metadata)


def _check_ranks(infos: list[SourceFile]) -> None:
    seen: dict[int, str] = {}
    for i in infos:
        if i.rank in seen:
            raise InputError(
                f"{i.path} and {seen[i.rank]} both hold rank {i.rank}: import one trace per rank "
                "(separate runs for separate captures)"
            )
        seen[i.rank] = i.path
