"""Ascend memory files of a rank directory → `counters` (allocator totals over time) and `memory`
(per-op allocations and releases).

* memory_record.csv: Component (APP, PTA, GE, PTA+GE, WORKSPACE), Timestamp(us), Total
  Allocated/Reserved/Active(MB) → counters `memory/<Component>`, series allocated/reserved/active_bytes.
* npu_module_mem.csv: per CANN module, Total Reserved(MB) → counters `module_memory/<Component>`.
* operator_memory.csv: Name, Size(KB), Allocation/Release Time(us), totals(MB) → one `memory_events` row
  at allocation (+bytes) and one at release (−bytes) when the release lies in the capture.
torch_npu writes MB = KB / 1024 (MiB) and KB = 1024 B; an empty cell means "outside the capture
window" and stays NULL; a negative Size(KB) is a release whose allocation was not captured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prof_engine.errors import InputError
from prof_engine.importers.ascend import cell_time, read_csv

MIB = 1024 * 1024
RECORD = {
    "Component": ("Component",),
    "Timestamp": ("Timestamp(us)",),
    "Device": ("Device Type", "Device"),
    "allocated_bytes": ("Total Allocated(MB)",),
    "reserved_bytes": ("Total Reserved(MB)",),
    "active_bytes": ("Total Active(MB)",),
}
OPERATOR = {
    "Name": ("Name",),
    "Size": ("Size(KB)",),
    "Alloc": ("Allocation Time(us)",),
    "Release": ("Release Time(us)",),
    "AllocTotal": ("Allocation Total Allocated(MB)",),
    "AllocReserved": ("Allocation Total Reserved(MB)",),
    "ReleaseTotal": ("Release Total Allocated(MB)",),
    "ReleaseReserved": ("Release Total Reserved(MB)",),
    "Device": ("Device Type",),
}


def _device(text: str | None) -> str:
    """`NPU:0` → npu0."""
    kind, _, index = (text or "NPU:0").partition(":")
    return f"{kind.strip().lower() or 'npu'}{index.strip() or 0}"


def _bytes(path: Path, column: str, text: str | None, unit: int) -> float | None:
    """A cell of KB or MB (`unit` bytes) in bytes (None where empty); a cell that is not a number
    of bytes an int64 holds is a corrupt file."""
    if text is None:
        return None
    try:
        value = float(text) * unit
    except ValueError:
        value = math.nan
    if not abs(value) < 2**63:  # NaN too
        raise InputError(
            f"{path}: {column} {text[:40]!r} is not a number of bytes (corrupt or not a profiler's output?)"
        )
    return value


def _rows(
    path: Path, columns: Mapping[str, tuple[str, ...]], needed: tuple[str, ...], info: dict[str, Any], device: str
) -> list[dict[str, str | None]]:
    """The rows of a memory file, with a key per column of `columns` its header has; none where
    the header lacks one of `needed` (another version's columns: the file adds nothing, and the
    trace still imports), which is the finding `vendor_file_left_out` in `info`, as rows that
    cannot be read are `vendor_rows_left_out` (`ascend.read_rows`)."""
    if not path.is_file():
        return []
    return read_csv(path, columns, required=needed, info=info, device=device, optional=True)


def convert_memory(output_dir: Path, conv, info: dict[str, Any]) -> None:
    """Add the memory files of `output_dir` (ASCEND_PROFILER_OUTPUT) to converter `conv`'s tables;
    what they hold that cannot be read goes to the source's `info` as findings."""
    dev = f"npu{getattr(conv, 'device_index', 0)}"
    for fname, prefix in (("memory_record.csv", "memory"), ("npu_module_mem.csv", "module_memory")):
        path = output_dir / fname
        for r in _rows(path, RECORD, ("Component", "Timestamp"), info, dev):
            ts = cell_time(path, "Timestamp(us)", r["Timestamp"])
            if ts is None or r["Component"] is None:
                continue
            for series in ("allocated_bytes", "reserved_bytes", "active_bytes"):
                value = _bytes(path, RECORD[series][0], r.get(series), MIB)
                if value is None:
                    continue
                conv.add_row(
                    "counters",
                    {
                        "rank": conv.file_index,
                        "device": _device(r.get("Device")),
                        "name": f"{prefix}/{r['Component']}",
                        "series": series,
                        "ts": ts,
                        "value": value,
                    },
                )
    path = output_dir / "operator_memory.csv"
    for r in _rows(path, OPERATOR, ("Name", "Size", "Alloc"), info, dev):
        size = _bytes(path, "Size(KB)", r["Size"], 1024)
        if size is None:
            continue
        for when, sign, total, reserved in (
            ("Alloc", 1, "AllocTotal", "AllocReserved"),
            ("Release", -1, "ReleaseTotal", "ReleaseReserved"),
        ):
            ts = cell_time(path, OPERATOR[when][0], r.get(when))
            if ts is None or (size < 0 and sign > 0):
                continue
            conv.add_row(
                "memory_events",
                {
                    "rank": conv.file_index,
                    "device": _device(r.get("Device")),
                    "ts": ts,
                    "op_name": r["Name"],
                    "bytes": int(round(abs(size))) * sign,
                    "total_allocated": _int_or_none(_bytes(path, OPERATOR[total][0], r.get(total), MIB)),
                    "total_reserved": _int_or_none(_bytes(path, OPERATOR[reserved][0], r.get(reserved), MIB)),
                },
            )


def _int_or_none(v: float | None) -> int | None:
    return None if v is None else int(round(v))
