"""Chrome trace / Kineto JSON files (torch.profiler, TensorBoard's `trace.json.gz`, Catapult): the
importer protocol's entry for them. The converter is `chrome.py`; this module says which files are
such traces and what the manifest keeps of one (`kineto_source_info`); the collector's writer
converts its torch cycles through `convert` too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prof_engine.errors import InputError
from prof_engine.importers.chrome import convert_file, with_anomalies
from prof_engine.importers.formats import TRACE_ARRAY, Format, Progress, lead
from prof_engine.importers.jsonstream import names_trace_events
from prof_engine.store.builder import SourceFile
from prof_engine.store.quality import add_finding


def sniff(path: Path, head: bytes) -> bool:
    """A JSON array of events, or an object naming `traceEvents`; a small object without it too:
    the reader then says precisely what it lacks."""
    text = lead(head)
    if text[:1] == b"{":
        return b'"traceEvents"' in head or len(head) < (1 << 16) or names_trace_events(path)
    return bool(TRACE_ARRAY.match(text))


def convert(path: Path, index: int, sink: Any, progress: Progress) -> SourceFile:
    reader, conv = convert_file(path, index, sink, progress)
    return kineto_source_info(path, index, reader.header, conv, path.stat().st_size)


def kineto_source_info(path: Path, index: int, header: dict[str, Any], conv: Any, nbytes: int) -> SourceFile:
    """What the manifest keeps of one Chrome/Kineto trace file (rank, clock offset, devices, lanes)."""
    dist = header.get("distributedInfo") or {}
    rank, base = dist.get("rank") if isinstance(dist, dict) else None, header.get("baseTimeNanoseconds")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else None  # else: the file's index
    base = base if isinstance(base, (int, float)) and not isinstance(base, bool) else None  # else: 0
    if rank is not None and not 0 <= rank < 2**31:
        raise InputError(f"{path}: distributedInfo.rank {rank} is not a rank (a whole number from 0 to {2**31 - 1})")
    if base is not None and not 0 <= base < 2**62:
        raise InputError(f"{path}: baseTimeNanoseconds {base} is not a time (ns since 1970, from 0 to 2^62)")
    kineto = any(k in header for k in ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"))
    props = header.get("deviceProperties")
    devices = [
        {k: d.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms") if k in d}
        for d in (props if isinstance(props, list) else [])
        if isinstance(d, dict)
    ]
    info: dict[str, Any] = {k: header[k] for k in ("distributedInfo", "trace_id", "displayTimeUnit") if k in header}
    info["rank_from"] = "file order" if rank is None else "distributedInfo.rank"
    if base:
        add_finding(
            info, "clock_anchor", 1, f"{path.name}: baseTimeNanoseconds {int(base)} ns added to every ts", total=None
        )
    return SourceFile(
        path=str(path),
        format="kineto" if kineto else "chrome",
        rank=index if rank is None else rank,
        index=index,
        offset_ns=0 if base is None else int(base),
        version=str(header["schemaVersion"]) if "schemaVersion" in header else None,
        bytes=nbytes,
        events=sum(conv.counts.values()),
        host=host if isinstance(host := header.get("host_name"), str) else None,
        devices=devices,
        lanes=list(conv.lanes.values()),
        info=with_anomalies(info, conv),  # both sides' findings: clock_anchor kept
    )


# the Chrome family's names: a folder scan reads *.json / *.json.gz files only
FORMAT = Format("chrome", "kineto", convert, files=re.compile(r"(?is).*\.json(\.gz)?"), sniff=sniff)
