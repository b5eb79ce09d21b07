"""CANN msprof PROF_* directories with `mindstudio_profiler_output/` (CANN ≥ 8) → canonical records.

One unit per PROF_* directory (msprof-analyze's rule: a PROF_* directory is one rank), read from
its merged text deliverables (ascend_formats.md §0.9-10, §1.1, §2.1, §2.7):

* `msprof_<timestamp>.json`, or when msprof sliced a large timeline `msprof_slice_<i>_<timestamp>.json`
  (i = 0, 1, …): Chrome trace arrays in local epoch µs, lanes mapped through
  `ascend.AscendConverter` (process_name / process_labels metadata, labels `NPU <device id>`).
  Slices are fed in slice order into one converter. msprof repeats the `ph: "M"` metadata at the
  head of every slice (`MsprofDataStorage.slice_data_list`, `FileSliceHelper._pretreat_json_data`),
  so lane names are gathered from all slices and each metadata event is fed once.
* `op_summary_<timestamp>.csv` or `op_summary_slice_<i>_<timestamp>.csv` (> 1,000,000 rows, each
  slice with its header): the kernel list, columns resolved through `ascend.KERNEL_COLUMNS` plus
  `Device_id`; rows of `Device_id` `host` are not device tasks and are left out, the others form
  one kernel list per device, matched to that device's `Ascend Hardware` tasks. Without a
  timeline the kernel rows themselves become the device tasks.

Where several exports left files of one slice index, the newest timestamp wins (msprof's own
`get_newest_file_list` rule). A slice index missing below the highest one is an error: the
timeline or kernel list would be silently incomplete. The rank is `device_<id>/info.json.<id>`'s
`rank_id` (the lowest device's), else the device id. Memory and the other summaries are not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from prof_engine.errors import InputError
from prof_engine.importers import ascend, chunkconv, msprof
from prof_engine.importers.chrome import Args, Described, Sink, _text, chunks, with_anomalies
from prof_engine.importers.formats import Format
from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text
from prof_engine.store.builder import SourceFile

OUTPUT_DIR = msprof.MERGED_DIR
TIMELINE = re.compile(r"msprof(?:_slice_(\d+))?_(\d{14})\.json")
OP_SUMMARY = re.compile(r"op_summary(?:_slice_(\d+))?_(\d{14})\.csv")
SUMMARY_COLUMNS = {**ascend.KERNEL_COLUMNS, "Device": ("Device_id",)}
HOST = "host"


# -- detection ---------------------------------------------------------------------------------
def has_output(path: Path) -> bool:
    """A PROF_* directory holding msprof's merged deliverables (`mindstudio_profiler_output/`)."""
    return (path / OUTPUT_DIR).is_dir()


def units(path: Path) -> list[Path]:
    """The PROF_* directories with `mindstudio_profiler_output/` at or under an msprof folder
    (`msprof.prof_folder`), one unit each; [] elsewhere. The legacy device directories beside them
    are `msprof`'s units (the PROF_* layout's next format)."""
    if not msprof.prof_folder(path):
        return []
    if path.name == OUTPUT_DIR:
        path = path.parent
    return [path] if has_output(path) else sorted({p.parent for p in path.rglob(OUTPUT_DIR) if p.is_dir()}, key=str)


def slice_files(output_dir: Path, pattern: re.Pattern[str], stem: str) -> list[Path]:
    """The files of one deliverable in slice order (an unsliced file is slice 0), newest export per
    slice; a one-line InputError when a slice below the highest one is missing."""
    newest: dict[int, tuple[str, Path]] = {}
    for p in output_dir.iterdir():
        m = pattern.fullmatch(p.name)
        if m and p.is_file():
            i, stamp = int(m.group(1) or 0), m.group(2)
            if i not in newest or stamp > newest[i][0]:
                newest[i] = (stamp, p)
    missing = [i for i in range(max(newest, default=-1) + 1) if i not in newest]
    if missing:
        raise InputError(
            f"{output_dir}: {stem} slice(s) {', '.join(map(str, missing))} missing (found slice(s) "
            f"{', '.join(map(str, sorted(newest)))}): msprof splits a large {stem} into "
            f"{stem}_slice_<i>_<timestamp> files numbered from 0, and every slice is needed"
        )
    return [newest[i][1] for i in sorted(newest)]


# -- conversion --------------------------------------------------------------------------------
class OutputConverter(ascend.AscendConverter):
    """AscendConverter whose kernel list is chosen by the device of each event (one per NPU)."""

    def __init__(
        self, file_index: int, sink: Sink, meta: list[Event], kernels: dict[str, dict[tuple, dict]], device_index: int
    ) -> None:
        super().__init__(file_index, sink, meta, {}, device_index)
        self.by_device = kernels

    def describe(self, ev: Event, a: Args, name: str, cat: str | None) -> Described | None:
        self.kernels = self.by_device.get(self.point_device(_text(ev.pid)), {})
        return super().describe(ev, a, name, cat)


def _meta_key(ev: Event) -> tuple:
    raw = args_text(ev)
    args = json.dumps(json.loads(raw), sort_keys=True) if raw else ""
    return _text(ev.name), _text(ev.pid), _text(ev.tid), args


def _metadata(files: list[Path]) -> list[Event]:
    """The metadata events of all timeline slices, each once (msprof repeats them per slice)."""
    seen: set[tuple] = set()
    meta = []
    for path in files:
        for ev in ascend._metadata(path):
            key = _meta_key(ev)
            if key not in seen:
                seen.add(key)
                meta.append(ev)
    return meta


def _feed(conv: OutputConverter, files: list[Path], progress: Callable[[int], None]) -> None:
    """Feed the timeline slices in order, each metadata event once."""
    fed: set[tuple] = set()
    checked = False
    for path in files:
        for chunk in chunks(ChromeTraceReader(path, progress=progress)):
            if not checked:
                checked = msprof.check_epoch(path, chunk)
            meta = pc.indices_nonzero(pc.equal(pc.fill_null(chunk.column("ph"), ""), "M")).to_pylist()
            fed_before = {i for i, ev in zip(meta, chunk.events(meta)) if not _first(fed, _meta_key(ev))}
            if fed_before:
                chunk = chunkconv.Rows(chunk, [i for i in range(chunk.n) if i not in fed_before])
            conv.feed(chunk)


def _first(seen: set[tuple], key: tuple) -> bool:
    if key in seen:
        return False
    seen.add(key)
    return True


def _kernel_rows(files: list[Path], default: int, info: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """op_summary rows of all slices by device id; `host` rows left out, rows without a
    Device_id column (single-device exports) on the `default` device. Rows that cannot be read
    are the finding `vendor_rows_left_out` in `info`."""
    by_device: dict[int, list[dict[str, Any]]] = {}
    for path in files:
        for row in ascend.read_csv(
            path, SUMMARY_COLUMNS, times=ascend.KERNEL_TIMES, info=info, ragged=True, unique=True
        ):
            dev = row.pop("Device", None)
            if dev is not None and dev.lower() == HOST:
                continue
            if dev is not None and not dev.isdigit():
                raise InputError(f"{path}: Device_id {dev!r} is neither a device number nor 'host'")
            by_device.setdefault(default if dev is None else int(dev), []).append(row)
    return by_device


def _devices(prof_dir: Path) -> dict[int, dict[str, Any]]:
    """Device id → its `info.json.<id>` content (empty when absent), for each `device_<id>/`."""
    found = {}
    for d in prof_dir.glob("device_*"):
        m = msprof.DEVICE_DIR.fullmatch(d.name)
        if m and d.is_dir():
            found[int(m.group(1))] = msprof._read_json(d / f"info.json.{m.group(1)}", required=False)
    return dict(sorted(found.items()))


def convert(prof_dir: Path, index: int, sink: Sink, progress: Callable[[int], None]) -> SourceFile:
    """Stream one PROF_* directory's mindstudio_profiler_output into `sink`; return its manifest entry."""
    out = prof_dir / OUTPUT_DIR
    timelines = slice_files(out, TIMELINE, "msprof")
    summaries = slice_files(out, OP_SUMMARY, "op_summary")
    if not timelines and not summaries:
        raise InputError(
            f"{out}: no msprof timeline (msprof_<timestamp>.json, msprof_slice_<i>_<timestamp>.json) "
            "and no op_summary_<timestamp>.csv: nothing prof-engine can import from this "
            "msprof export (was it exported as .db only?)"
        )
    devices = _devices(prof_dir)
    default = next(iter(devices), 0)
    info: dict[str, Any] = {}
    kernels = _kernel_rows(summaries, default, info)
    conv = OutputConverter(
        index,
        sink,
        _metadata(timelines),
        {f"npu{d}": ascend._kernel_index(rows) for d, rows in kernels.items()},
        default,
    )
    _feed(conv, timelines, progress)
    if not timelines:
        for dev, rows in kernels.items():
            conv.device_index = dev
            ascend._kernel_rows_as_slices(conv, rows)
    conv.finish()
    progress(sum(p.stat().st_size for p in summaries))
    return _source(prof_dir, index, conv, devices, sorted(kernels), timelines + summaries, info)


def _source(
    prof_dir: Path,
    index: int,
    conv: OutputConverter,
    devices: dict[int, dict[str, Any]],
    kernel_devices: list[int],
    files: list[Path],
    found: dict[str, Any],
) -> SourceFile:
    """The manifest entry of a converted PROF_* directory: rank from the lowest device's rank_id."""
    ids = sorted(set(devices) | set(kernel_devices)) or [0]
    info = devices.get(next(iter(devices), ids[0]), {})
    rank = info.get("rank_id")
    return SourceFile(
        path=str(prof_dir),
        format="msprof",
        rank=rank if isinstance(rank, int) and rank >= 0 else next(iter(devices), ids[0]),
        index=index,
        bytes=sum(p.stat().st_size for p in files),
        events=sum(conv.counts.values()),
        host=info.get("hostname"),
        devices=[msprof._device_info(d, devices.get(d, {})) for d in ids],
        lanes=list(conv.lanes.values()),
        info={
            "rank_from": "info.json rank_id" if isinstance(rank, int) and rank >= 0 else "device id",
            "rank_id": info.get("rank_id"),
            "device_ids": ids,
            "output_files": [p.name for p in files],
            **with_anomalies(found, conv),
        },
    )


# -- the importer protocol ---------------------------------------------------------------------
FORMAT = Format("msprof_output", "ascend", convert, units=units, layout="msprof")
