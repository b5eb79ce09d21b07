"""Memory tables of an Ascend profiler database (`export_type=db`) → `counters` and `memory_events`,
the same rows the text export's memory files give (ascend_memory.py), so `memory` and
`memory_timeline` read alike for both exports (ascend_formats.md §2.9, §2.11; bytes, int ns):

* MEMORY_RECORD (component → STRING_IDS: PTA, GE, PTA+GE, WORKSPACE; timestamp, totalAllocated/
  Reserved/Active) → counters `memory/<component>`, series allocated/reserved/active_bytes.
  torch_npu's db writer stores 0 as GE's active total, which CANN does not track (memory_record.csv
  leaves the cell empty): no active_bytes sample for GE.
* NPU_MEM rows of type `app` → counters `memory/APP`, reserved_bytes = ddr + hbm: the APP rows that
  memory_record.csv takes from msprof's npu_mem (`memory(KB)`); the db's MEMORY_RECORD has none.
* NPU_MODULE_MEM (moduleId → ENUM_MODULE) → counters `module_memory/<module>`, reserved_bytes.
* OP_MEMORY (name → STRING_IDS, size) → memory_events: +size at allocationTime, −size at releaseTime
  when the release lies in the capture, with the allocator totals after each; a negative size is a
  release whose allocation was not captured (no allocation row), as in operator_memory.csv.

Devices are `npu<deviceId>` of each row (the converter's device where it is NULL). Every table is
optional (profile_memory may be off): a missing one adds nothing. Time columns may be declared
TEXT or NUMERIC in some versions and are cast in SQL.
"""

from __future__ import annotations

from typing import Any

SERIES = ("allocated_bytes", "reserved_bytes", "active_bytes")
NO_ACTIVE = {"GE"}  # components whose totalActive the db writer fills with a placeholder 0


def ns_sql(expr: str) -> str:
    """SQL of a time column (or NULL) as an integer of ns: some versions declare it TEXT or NUMERIC."""
    return "NULL" if expr == "NULL" else f"CAST(NULLIF({expr}, '') AS INTEGER)"


def convert_db_memory(db: Any, conv: Any) -> None:
    """Add the memory tables of profiler database `db` (ascend_db._Db) to converter `conv`'s tables."""
    for read in (_memory_record, _app_memory, _module_memory, _op_memory):
        read(db, conv)


def device_id(conv: Any, dev: Any) -> int:
    """A row's device id: its own, else (NULL or negative) the converter's."""
    return conv.device if dev is None or int(dev) < 0 else int(dev)


def _device(conv: Any, dev: Any) -> str:
    return f"npu{device_id(conv, dev)}"


def add_counter(conv: Any, device: str, name: str, ts: int, values: dict[str, Any], pid: str | None = None) -> None:
    """A counter sample of `conv`'s rank: a row per series of `values` that has a value."""
    for series, value in values.items():
        if value is not None:
            conv.add_row(
                "counters",
                {
                    "rank": conv.file_index,
                    "device": device,
                    "step": None,
                    "name": name,
                    "series": series,
                    "ts": ts,
                    "value": float(value),
                    "pid": pid,
                },
            )


def _memory_record(db: Any, conv: Any) -> None:
    if not db.has("MEMORY_RECORD", "component"):
        return
    c = lambda *n: db.col("m", "MEMORY_RECORD", *n)  # noqa: E731
    ts = c("timestamp", "timestampNs")
    if ts == "NULL":
        return
    sql = (
        f"SELECT s.value, {ns_sql(ts)}, {c('totalAllocated')}, {c('totalReserved')}, {c('totalActive')}, "
        f"{c('deviceId')} FROM MEMORY_RECORD m LEFT JOIN STRING_IDS s ON s.id = m.component"
    )
    for component, when, allocated, reserved, active, dev in db.rows(sql):
        if when is None:
            continue
        component = component or "unknown"
        values = dict(zip(SERIES, (allocated, reserved, None if component in NO_ACTIVE else active)))
        add_counter(conv, _device(conv, dev), f"memory/{component}", when, values)


def _app_memory(db: Any, conv: Any) -> None:
    if not db.has("NPU_MEM", "type"):
        return
    c = lambda *n: db.col("m", "NPU_MEM", *n)  # noqa: E731
    ts = c("timestampNs", "timestamp")
    if ts == "NULL":
        return
    sql = (
        f"SELECT {ns_sql(ts)}, coalesce({c('ddr')}, 0) + coalesce({c('hbm')}, 0), {c('deviceId')} FROM NPU_MEM m "
        "JOIN STRING_IDS s ON s.id = m.type WHERE upper(s.value) = 'APP'"
    )
    for when, reserved, dev in db.rows(sql):
        if when is not None:
            add_counter(conv, _device(conv, dev), "memory/APP", when, {"reserved_bytes": reserved})


def _module_memory(db: Any, conv: Any) -> None:
    if not db.has("NPU_MODULE_MEM", "moduleId", "totalReserved"):
        return
    c = lambda *n: db.col("m", "NPU_MODULE_MEM", *n)  # noqa: E731
    ts = c("timestampNs", "timestamp")
    if ts == "NULL":
        return
    modules = db.enum("ENUM_MODULE")
    sql = f"SELECT m.moduleId, {ns_sql(ts)}, m.totalReserved, {c('deviceId')} FROM NPU_MODULE_MEM m"
    for module, when, reserved, dev in db.rows(sql):
        if when is None:
            continue
        name = modules.get(module, str(module))
        add_counter(conv, _device(conv, dev), f"module_memory/{name}", when, {"reserved_bytes": reserved})


def _op_memory(db: Any, conv: Any) -> None:
    if not db.has("OP_MEMORY", "name", "size"):
        return
    c = lambda *n: db.col("o", "OP_MEMORY", *n)  # noqa: E731
    sql = (
        f"SELECT s.value, o.size, {ns_sql(c('allocationTime'))}, {ns_sql(c('releaseTime'))}, "
        f"{c('allocationTotalAllocated')}, {c('allocationTotalReserved')}, {c('releaseTotalAllocated')}, "
        f"{c('releaseTotalReserved')}, {c('deviceId')} FROM OP_MEMORY o LEFT JOIN STRING_IDS s ON s.id = o.name"
    )
    for name, size, alloc, release, alloc_total, alloc_reserved, rel_total, rel_reserved, dev in db.rows(sql):
        if size is None:
            continue
        size, device = int(size), _device(conv, dev)
        for when, sign, total, reserved in (
            (alloc, 1, alloc_total, alloc_reserved),
            (release, -1, rel_total, rel_reserved),
        ):
            if when is None or (size < 0 and sign > 0):
                continue
            conv.add_row(
                "memory_events",
                {
                    "rank": conv.file_index,
                    "device": device,
                    "step": None,
                    "ts": when,
                    "pid": None,
                    "tid": None,
                    "op_name": name,
                    "addr": None,
                    "bytes": abs(size) * sign,
                    "total_allocated": None if total is None else int(total),
                    "total_reserved": None if reserved is None else int(reserved),
                },
            )
