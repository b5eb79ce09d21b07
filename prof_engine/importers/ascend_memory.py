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

from pathlib import Path

from prof_engine.importers.units import us_text_to_ns

MIB = 1024 * 1024
RECORD = {"Component": ("Component",), "Timestamp": ("Timestamp(us)",), "Device": ("Device Type", "Device"),
          "allocated_bytes": ("Total Allocated(MB)",), "reserved_bytes": ("Total Reserved(MB)",),
          "active_bytes": ("Total Active(MB)",)}
OPERATOR = {"Name": ("Name",), "Size": ("Size(KB)",), "Alloc": ("Allocation Time(us)",),
            "Release": ("Release Time(us)",), "AllocTotal": ("Allocation Total Allocated(MB)",),
            "AllocReserved": ("Allocation Total Reserved(MB)",), "ReleaseTotal": ("Release Total Allocated(MB)",),
            "ReleaseReserved": ("Release Total Reserved(MB)",), "Device": ("Device Type",)}


def _device(text: str | None) -> str:
    """`NPU:0` → npu0."""
    kind, _, index = (text or "NPU:0").partition(":")
    return f"{kind.strip().lower() or 'npu'}{index.strip() or 0}"


def _bytes(mb: str | None) -> float | None:
    return None if mb is None else float(mb) * MIB


def _rows(path: Path, columns: dict[str, tuple[str, ...]]) -> list[dict[str, str | None]]:
    from prof_engine.importers.ascend import read_csv

    return read_csv(path, columns, required=()) if path.is_file() else []


def convert_memory(output_dir: Path, conv) -> None:
    """Add the memory files of `output_dir` (ASCEND_PROFILER_OUTPUT) to converter `conv`'s tables."""
    for fname, prefix in (("memory_record.csv", "memory"), ("npu_module_mem.csv", "module_memory")):
        for r in _rows(output_dir / fname, RECORD):
            ts = us_text_to_ns(r["Timestamp"] or "")
            if ts is None:
                continue
            for series in ("allocated_bytes", "reserved_bytes", "active_bytes"):
                value = _bytes(r.get(series))
                if value is None:
                    continue
                conv.add_row("counters", {"rank": conv.file_index, "device": _device(r["Device"]),
                                          "name": f"{prefix}/{r['Component']}", "series": series, "ts": ts,
                                          "value": value})
    for r in _rows(output_dir / "operator_memory.csv", OPERATOR):
        size = float(r["Size"]) * 1024 if r["Size"] is not None else None
        if size is None:
            continue
        for when, sign, total, reserved in (("Alloc", 1, "AllocTotal", "AllocReserved"),
                                             ("Release", -1, "ReleaseTotal", "ReleaseReserved")):
            ts = us_text_to_ns(r[when] or "")
            if ts is None or (size < 0 and sign > 0):
                continue
            conv.add_row("memory_events", {
                "rank": conv.file_index, "device": _device(r["Device"]), "ts": ts, "op_name": r["Name"],
                "bytes": int(round(abs(size))) * sign, "total_allocated": _int_or_none(_bytes(r[total])),
                "total_reserved": _int_or_none(_bytes(r[reserved]))})


def _int_or_none(v: float | None) -> int | None:
    return None if v is None else int(round(v))

