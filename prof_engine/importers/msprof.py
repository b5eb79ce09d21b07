"""CANN msprof legacy PROF_* directories, and lone Ascend Chrome traces, → canonical records.

Owns two kinds of unit (ascend_formats.md §1.1, §2.5, §2.7, §2.10):

* `msprof`: one legacy device directory `PROF_*/device_<id>/` (CANN ≤ 7.0) holding
  `info.json.<id>` (rank_id, device metadata), `start_info.<id>` / `end_info.<id>` (clock anchors)
  and `timeline/{msprof,step_trace,task_time,hccl}_<dev>_<model>_<iter>.json` (Chrome trace
  arrays, one set per model and iteration). `msprof_*` files hold every lane (Ascend Hardware
  tasks, CANN API calls, HCCL, the Step Trace thread of the current iteration); `task_time_*` and
  `hccl_*` repeat its Ascend Hardware and HCCL lanes, `step_trace_*` holds the `Iteration N`
  records of all iterations. So `msprof_*` files are read first and the other files only add
  events not already read (same phase, name, thread and start): nothing is counted twice.
  Timestamps are host CLOCK_MONOTONIC_RAW µs; the source's clock offset is
  `collectionTimeBegin(µs)·1000 − clockMonotonicRaw(ns)` from start_info, applied by the store
  (`SourceFile.offset_ns`). Lanes map through `AscendConverter` (process_name metadata), with the
  legacy differences: the process label is `NPU` without a number (the device id comes from the
  directory), the HCCL lane's `Communication Kernel` thread holds the collective ops and `Plane k`
  threads their tasks, kernels carry no OP Type (it is read from the MindSpore node name
  `…/Cast-op239` → `Cast`). `Iteration N` records become kind `step` with step N on the device;
  the other Step Trace records (FP_BP Time, Iteration Refresh, Reduce) are `device_range`. Host
  records of a per-iteration file (CANN `GE@Infer`, which starts before the device's iteration)
  take the iteration the file is sliced for — the source's own attribution.
* `ascend_trace`: a lone Ascend Chrome trace file (`trace_view.json`, `msprof_*.json`; found by
  `ascend_trace`) passed directly, converted by `AscendConverter` (with its sibling
  kernel_details.csv when present).
  A lone legacy timeline (monotonic clock) is refused: only its PROF_* directory anchors it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine.errors import InputError
from prof_engine.importers import ascend, chunkconv
from prof_engine.importers.chrome import Args, Described, Sink, _int, _text, chunks, with_anomalies
from prof_engine.importers.formats import Format
from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text, read_json
from prof_engine.importers.scan import RAW, US
from prof_engine.store.builder import SourceFile
from prof_engine.store.quality import add_finding

DEVICE_DIR = re.compile(r"device_(\d+)")
TIMELINE = re.compile(r"(msprof|step_trace|task_time|hccl)_(\d+)_(\d+)_(\d+)\.json")
FILE_ORDER = {"msprof": 0, "step_trace": 1, "task_time": 2, "hccl": 3}  # msprof_* first: the others only add
STEP_TRACE_CATEGORIES = {"Iteration Time", "FP_BP Time", "Iteration Refresh", "Reduce", "Data_aug Bound"}
DEVICE_LANES = {"Ascend Hardware", "HCCL", "Communication", "Step Trace", "Overlap Analysis"}
# MindSpore node `…/Scope/Cast-op239`: the type is the identifier before the last `-op<N>[_<M>]`.
# Matched from the end (`_node_type`): a search for it backtracks quadratically on long fused names.
NODE_SUFFIX = re.compile(r"\d+(?:_\d+)?\n?")  # after `-op` (`\n?`: `$` of the former search)
_TRAILING_IDENT = re.compile(r"[A-Za-z0-9_]*")  # matched on the reversed text: the identifier's tail
EPOCH_MIN_NS = 10**18  # 2001-09-09: an earlier timestamp is not epoch time (a monotonic clock)
MERGED_DIR = "mindstudio_profiler_output"  # CANN >= 8's merged deliverables (`msprof_output`)


class _Extra(msgspec.Struct, gc=False):
    """Legacy args keys that `chrome.Args` does not read."""

    task_type: Any = msgspec.field(default=None, name="task type")
    iteration: Any = msgspec.field(default=None, name="Iteration ID")


_EXTRA = msgspec.json.Decoder(_Extra)


# -- detection ---------------------------------------------------------------------------------
def is_device_dir(path: Path) -> bool:
    """A legacy `device_<id>/` directory with timeline/msprof_*.json files."""
    return bool(DEVICE_DIR.fullmatch(path.name)) and bool(_timeline_files(path))


def prof_folder(path: Path) -> bool:
    """A CANN msprof PROF_* directory, a directory of them, its mindstudio_profiler_output/, or a
    legacy device directory: the folders whose msprof units are looked for (this format's and
    `msprof_output`'s; a PROF_* deeper down is another folder's)."""
    return (
        path.name.startswith("PROF_")
        or any(p.is_dir() for p in path.glob("PROF_*"))
        or (path / MERGED_DIR).is_dir()
        or path.name == MERGED_DIR
        or is_device_dir(path)
    )


def units(path: Path) -> list[Path]:
    """The legacy device directories at or under an msprof folder (`prof_folder`); [] elsewhere.

    Raises a one-line InputError for an msprof folder with neither these nor msprof's merged
    output (a raw-only PROF_* layout): the last of the PROF_* layout's formats says it."""
    if not prof_folder(path):
        return []
    if path.name == MERGED_DIR:
        path = path.parent
    if is_device_dir(path):
        return [path]
    found = sorted((d for d in path.rglob("device_*") if d.is_dir() and is_device_dir(d)), key=str)
    if not found and not any(p.is_dir() for p in path.rglob(MERGED_DIR)):
        raise InputError(
            f"{path}: a CANN msprof PROF_* directory with neither per-device timelines "
            "(device_N/timeline/msprof_*.json) nor mindstudio_profiler_output/ (msprof_*.json, op_summary_*.csv): "
            "no profiling data to import (was it exported with --type=db only? the msprof_*.db export is not read yet)"
        )
    return found


def _timeline_files(device_dir: Path) -> list[Path]:
    files = [p for p in (device_dir / "timeline").glob("*.json") if TIMELINE.fullmatch(p.name)]
    if not any(p.name.startswith("msprof_") for p in files):
        return []
    return sorted(files, key=_timeline_order)


def _timeline_order(path: Path) -> tuple:
    m = TIMELINE.fullmatch(path.name)
    assert m is not None  # _timeline_files kept only names that match
    return (FILE_ORDER[m.group(1)], *map(int, m.groups()[1:]))


# -- conversion --------------------------------------------------------------------------------
class LegacyConverter(ascend.AscendConverter):
    """AscendConverter for one legacy device: fixed device name, per-file lane metadata, steps."""

    def __init__(self, file_index: int, sink: Sink, device_id: int) -> None:
        super().__init__(file_index, sink, [], {})
        self.device = f"npu{device_id}"
        self.file_iteration: int | None = None
        self._step: int | None = None

    def use_file(self, meta: list[Event], iteration: int | None) -> None:
        """Lane names of the next file (pids are per file: the same pid may name other lanes)."""
        self.set_lanes(meta)
        self.file_iteration = iteration

    def point_device(self, pid: str | None) -> str:
        pid = pid or ""
        if self.process.get(pid) in DEVICE_LANES or self.label.get(pid, "").startswith("NPU"):
            return self.device
        return "host"

    def describe(self, ev: Event, a: Args, name: str, cat: str | None) -> Described | None:
        pid = _text(ev.pid) or ""
        lane, thread = self.process.get(pid, ""), self.thread.get((pid, _text(ev.tid) or ""), "")
        if cat in STEP_TRACE_CATEGORIES or lane == "Step Trace":
            if cat != "Iteration Time":
                return Described("device_range", self.device)
            extra = _EXTRA.decode(args_text(ev)) if args_text(ev) else _Extra()
            self._step = _int(extra.iteration) if extra.iteration is not None else _int(name.rpartition(" ")[2])
            return Described("step", self.device)
        if lane in ("HCCL", "Communication") and thread == "Communication Kernel":
            return Described("comm", self.device, op_type=_node_type(name), task_type="HCCL")
        if lane in ("HCCL", "Communication"):
            extra = _EXTRA.decode(args_text(ev)) if args_text(ev) else _Extra()
            return Described("comm_task", self.device, task_type=_text(extra.task_type))
        d = super().describe(ev, a, name, cat)
        if d is not None and d.kind == "kernel" and d.op_type is None:
            d = d._replace(op_type=_node_type(name))
        return d

    def after_slice(self, a: Args, d: Described) -> None:
        steps = self.tables["slices"].cols["step"]
        if d.kind == "step":
            steps[-1] = self._step
        elif d.device == "host" and self.file_iteration is not None:
            steps[-1] = self.file_iteration  # the iteration msprof sliced this host record into
        if d.kind == "comm":
            self._comm_row(d.device, d.op_type, None, None, None, None)
        else:
            super().after_slice(a, d)


def _node_type(name: str) -> str | None:
    """`Cast` of `…/Cast-op239`: the run of `[A-Za-z0-9_]` before the last `-op<digits>` from its
    first letter on, in time linear in the name's length."""
    head, sep, suffix = name.rpartition("/")[2].rpartition("-op")
    if not sep or not NODE_SUFFIX.fullmatch(suffix):
        return None
    trailing = _TRAILING_IDENT.match(head[::-1])
    assert trailing is not None  # the pattern matches any text, if only its empty start
    ident = trailing.group()[::-1].lstrip("0123456789_")
    return ident or None


def _event_key(ev: Event) -> tuple:
    return ev.ph, _text(ev.name), _text(ev.tid), bytes(ev.ts)


def _feed_file(
    conv: LegacyConverter, path: Path, seen: set[tuple], primary: bool, progress: Callable[[int], None]
) -> None:
    """Feed one timeline file; events of secondary files already read from another file are dropped."""
    m = TIMELINE.fullmatch(path.name)
    assert m is not None  # a file _timeline_files listed
    conv.use_file(ascend._metadata(path), int(m.group(4)) if primary else None)
    for chunk in chunks(ChromeTraceReader(path, progress=progress)):
        events = chunk.events()
        if primary:
            seen.update(_event_key(ev) for ev in events if ev.ph != "M")
        else:
            keep = [i for i, ev in enumerate(events) if ev.ph == "M" or _event_key(ev) not in seen]
            seen.update(_event_key(events[i]) for i in keep if events[i].ph != "M")
            chunk = chunkconv.Rows(chunk, keep)
        conv.feed(chunk)


def convert_device_dir(device_dir: Path, index: int, sink: Sink, progress: Callable[[int], None]) -> SourceFile:
    """Stream one legacy device directory into `sink`; return what the manifest keeps about it."""
    named = DEVICE_DIR.fullmatch(device_dir.name)
    assert named is not None  # the caller found the directory by this pattern
    device_id = int(named.group(1))
    info = _read_json(device_dir / f"info.json.{device_id}", required=False)
    start = _read_json(device_dir / f"start_info.{device_id}", required=True)
    end = _read_json(device_dir / f"end_info.{device_id}", required=False)
    offset = _clock_offset(device_dir, start)
    conv = LegacyConverter(index, sink, device_id)
    seen: set[tuple] = set()
    files = _timeline_files(device_dir)
    for path in files:
        _feed_file(conv, path, seen, path.name.startswith("msprof_"), progress)
    conv.finish()
    rank = info.get("rank_id")
    found: dict[str, Any] = {}
    add_finding(
        found,
        "clock_anchor",
        1,
        f"{device_dir.name}: start_info.{device_id} (collectionTimeBegin, "
        f"clockMonotonicRaw) moves the monotonic timeline by {offset} ns",
        total=None,
    )
    return SourceFile(
        path=str(device_dir),
        format="msprof",
        rank=rank if isinstance(rank, int) and rank >= 0 else device_id,
        index=index,
        offset_ns=offset,
        bytes=sum(p.stat().st_size for p in files),
        events=sum(conv.counts.values()),
        host=info.get("hostname"),
        devices=[_device_info(device_id, info)],
        lanes=list(conv.lanes.values()),
        info={
            "rank_from": "info.json rank_id" if isinstance(rank, int) and rank >= 0 else "device id",
            "rank_id": info.get("rank_id"),
            "device_id": device_id,
            "start_info": start,
            "end_info": end,
            "timeline_files": [p.name for p in files],
            **with_anomalies(found, conv),
        },
    )


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise InputError(
                f"{path.parent}: no {path.name}: the legacy msprof timeline is on the host's "
                "CLOCK_MONOTONIC_RAW and cannot be placed in time without this clock anchor"
            )
        return {}
    data = read_json(path, "JSON (msprof collection metadata)")
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a JSON object (msprof collection metadata)")
    return data


def _clock_offset(device_dir: Path, start: dict[str, Any]) -> int:
    """ns to add to the monotonic-clock timeline: collectionTimeBegin(µs)·1000 − clockMonotonicRaw(ns)."""
    try:
        return int(str(start["collectionTimeBegin"])) * 1000 - int(str(start["clockMonotonicRaw"]))
    except (KeyError, ValueError):
        raise InputError(
            f"{device_dir}: start_info has no integer collectionTimeBegin / clockMonotonicRaw "
            f"(keys: {', '.join(start)})"
        ) from None


def _device_info(device_id: int, info: dict[str, Any]) -> dict[str, Any]:
    found = info.get("DeviceInfo")
    found = found if isinstance(found, list) else []  # a damaged info.json names no device: the id alone
    dev = next((d for d in found if isinstance(d, dict) and d.get("id") == device_id), None)
    dev = dev or next((d for d in found if isinstance(d, dict)), {})
    keep = ("ai_core_num", "aiv_num", "ai_cpu_core_num", "hwts_frequency", "aic_frequency", "aiv_frequency")
    return {"id": device_id, "name": f"npu{device_id}", **{k: dev[k] for k in keep if k in dev}}


# -- a lone Ascend Chrome trace -----------------------------------------------------------------
def convert_trace(path: Path, index: int, sink: Sink, progress: Callable[[int], None]) -> SourceFile:
    """Stream a lone Ascend Chrome trace (trace_view.json, msprof_*.json) through AscendConverter."""
    kernel_csv = path.parent / "kernel_details.csv"
    found: dict[str, Any] = {}  # what the kernel list holds that cannot be read
    rows = (
        ascend.read_csv(
            kernel_csv, ascend.KERNEL_COLUMNS, times=ascend.KERNEL_TIMES, info=found, ragged=True, unique=True
        )
        if kernel_csv.is_file()
        else []
    )
    conv = ascend.AscendConverter(index, sink, ascend._metadata(path), ascend._kernel_index(rows))
    checked = False
    for chunk in chunks(ChromeTraceReader(path, progress=progress)):
        if not checked:
            checked = check_epoch(path, chunk)
        conv.feed(chunk)
    conv.finish()
    rank = ascend.rank_of(path.parent.parent) if path.parent.name == ascend.OUTPUT_DIR else None
    return SourceFile(
        path=str(path),
        format="ascend_trace",
        rank=rank if rank is not None else index,
        index=index,
        bytes=path.stat().st_size,
        events=sum(conv.counts.values()),
        lanes=list(conv.lanes.values()),
        info={
            "rank_from": "profiler_info" if rank is not None else "file order",
            **({"kernel_details": str(kernel_csv)} if rows else {}),
            **with_anomalies(found, conv),
        },
    )


def check_epoch(path: Path, chunk: chunkconv.Chunk) -> bool:
    """Refuse a timeline whose first timestamp is not epoch time; True once a timestamp was seen."""
    ts = chunk.column("ts", US)
    timed = pc.and_(pc.not_equal(pc.fill_null(chunk.column("ph"), ""), "M"), pc.is_valid(ts))
    if not pc.any(timed).as_py():
        return False
    first = pc.index(timed, True).as_py()
    if ts[first].as_py() < EPOCH_MIN_NS:
        text = chunk.column("ts", RAW, pa.array([first], pa.int64()))[0].as_py()
        raise InputError(
            f"{path}: timestamps are not epoch time ({text} µs: a legacy "
            "msprof timeline on the host's monotonic clock); import its PROF_* directory, whose "
            "start_info.N places it in time"
        )
    return True


# -- the importer protocol ---------------------------------------------------------------------
# after msprof_output's in the registry: one PROF_* layout, its merged output's units listed first
FORMAT = Format("msprof", "ascend", convert_device_dir, units=units, layout="msprof")
