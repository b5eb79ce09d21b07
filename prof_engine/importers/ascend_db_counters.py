"""Hardware counters of an Ascend profiler database (`export_type=db`) → `counters`, named, keyed
and scaled as the text export's trace_view.json has them (its `C` events, which the Chrome
converter reads into the same table), so that both exports of a job give the same tracks
(ascend_formats.md §2.5, §2.11; the db stores bytes, B/s, percent and int ns):

| db table | trace_view.json lane | counters: name, series, value |
|---|---|---|
| AICORE_FREQ | AI Core Freq | `AI Core Freq`, `MHz`: freq |
| NPU_MEM (type app, device) | NPU MEM | `APP/DDR`, `APP/HBM`, `APP/Memory` (and `Device/…`), `KB`: bytes / 1024; Memory = DDR + HBM |
| HBM (hbmId, type read/write) | HBM | `HBM <id>/Read`, `Read(MB/s)`: bandwidth / 2^20 (and Write) |
| LLC (llcId, mode read/write) | LLC | `LLC <id> Read/Hit Rate`, `Hit Rate(%)`: hitRate / 100; `LLC <id> Read/Throughput`, `Throughput(MB/s)`: throughput / 2^20 |
| SOC_BANDWIDTH_LEVEL | Stars Soc Info | `L2 Buffer Bw Level`, `Mata Bw Level`, a series of the same name: the level |
| ACC_PMU (accId) | Acc PMU | `read_bandwidth`, `write_band_width`, `read_ost`, `write_ost`, series `value`: the level, and `acc_id` |

The scales are those of the fixtures' two sessions of one job: their text form's HBM MB/s are the
db's B/s over 2^20 to within 0.2 % (10^6 would be 4.9 % off; LLC's B/s take the same scale), its
hit rates the db's percent over 100, its KB the bytes over 1024. QoS, which the text export shows, has no table in
the database. Devices are `npu<deviceId>` (the converter's device where it is NULL), pids the lane
pids trace_view.json gives them (`ascend_db._lane_pid`). Every table and column is optional.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from prof_engine.importers.ascend_db_memory import add_counter, device_id, ns_sql

MB = 1 << 20  # the text export's "MB/s" are MiB/s of the db's B/s
ACC_PMU = (
    ("read_bandwidth", "readBwLevel"),
    ("write_band_width", "writeBwLevel"),
    ("read_ost", "readOstLevel"),
    ("write_ost", "writeOstLevel"),
)


def convert_db_counters(db: Any, conv: Any, lane_pid: Any) -> None:
    """Add the hardware counter tables of profiler database `db` (ascend_db._Db) to converter
    `conv`'s `counters`; `lane_pid(lane, device)` gives a lane's trace_view.json pid."""
    for read in (_aicore_freq, _npu_mem, _hbm, _llc, _soc_bandwidth, _acc_pmu):
        read(db, conv, lane_pid)


def _rows(db: Any, table: str, columns: list[str], join: str = "") -> Any:
    """(ts, device, *columns) of `table`'s rows with a time, or nothing where the table or its
    time column is missing. `columns` are SQL over the table's alias `t`."""
    if not db.has(table):
        return ()
    ts = db.col("t", table, "timestampNs", "timestamp")
    if ts == "NULL":
        return ()
    sql = f"SELECT {ns_sql(ts)}, {db.col('t', table, 'deviceId')}, {', '.join(columns)} FROM {table} t {join}"
    return (row for row in db.rows(sql) if row[0] is not None)


def _add(conv: Any, lane_pid: Any, lane: str, dev: Any, name: str, ts: int, values: dict[str, Any]) -> None:
    device = device_id(conv, dev)
    pid = lane_pid(lane, device)
    conv._lane(pid, None, lane, f"NPU {device}", None)
    add_counter(conv, f"npu{device}", name, ts, values, pid)


def _aicore_freq(db: Any, conv: Any, lane_pid: Any) -> None:
    for ts, dev, freq in _rows(db, "AICORE_FREQ", [db.col("t", "AICORE_FREQ", "freq")]):
        _add(conv, lane_pid, "AI Core Freq", dev, "AI Core Freq", ts, {"MHz": freq})


def _npu_mem(db: Any, conv: Any, lane_pid: Any) -> None:
    c = partial(db.col, "t", "NPU_MEM")
    if c("type") == "NULL":
        return
    for ts, dev, kind, ddr, hbm in _rows(
        db, "NPU_MEM", ["s.value", c("ddr"), c("hbm")], "LEFT JOIN STRING_IDS s ON s.id = t.type"
    ):
        prefix = {"app": "APP", "device": "Device"}.get(str(kind).lower())
        if prefix is None:
            continue
        for part, value in (
            ("DDR", ddr),
            ("HBM", hbm),
            ("Memory", None if ddr is None and hbm is None else (ddr or 0) + (hbm or 0)),
        ):
            _add(
                conv, lane_pid, "NPU MEM", dev, f"{prefix}/{part}", ts, {"KB": None if value is None else value / 1024}
            )


def _direction(value: Any) -> str | None:
    return {"read": "Read", "write": "Write"}.get(str(value).lower())


def _hbm(db: Any, conv: Any, lane_pid: Any) -> None:
    c = partial(db.col, "t", "HBM")
    if c("type") == "NULL":
        return
    for ts, dev, hbm_id, way, bandwidth in _rows(
        db, "HBM", [c("hbmId"), "s.value", c("bandwidth")], "LEFT JOIN STRING_IDS s ON s.id = t.type"
    ):
        if (way := _direction(way)) is not None and bandwidth is not None:
            _add(conv, lane_pid, "HBM", dev, f"HBM {hbm_id}/{way}", ts, {f"{way}(MB/s)": bandwidth / MB})


def _llc(db: Any, conv: Any, lane_pid: Any) -> None:
    c = partial(db.col, "t", "LLC")
    if c("mode") == "NULL":
        return
    for ts, dev, llc_id, way, hit_rate, throughput in _rows(
        db, "LLC", [c("llcId"), "s.value", c("hitRate"), c("throughput")], "LEFT JOIN STRING_IDS s ON s.id = t.mode"
    ):
        if (way := _direction(way)) is None:
            continue
        _add(
            conv,
            lane_pid,
            "LLC",
            dev,
            f"LLC {llc_id} {way}/Hit Rate",
            ts,
            {"Hit Rate(%)": None if hit_rate is None else hit_rate / 100},
        )
        _add(
            conv,
            lane_pid,
            "LLC",
            dev,
            f"LLC {llc_id} {way}/Throughput",
            ts,
            {"Throughput(MB/s)": None if throughput is None else throughput / MB},
        )


def _soc_bandwidth(db: Any, conv: Any, lane_pid: Any) -> None:
    c = partial(db.col, "t", "SOC_BANDWIDTH_LEVEL")
    for ts, dev, l2, mata in _rows(db, "SOC_BANDWIDTH_LEVEL", [c("l2BufferBwLevel"), c("mataBwLevel")]):
        for name, value in (("L2 Buffer Bw Level", l2), ("Mata Bw Level", mata)):
            _add(conv, lane_pid, "Stars Soc Info", dev, name, ts, {name: value})


def _acc_pmu(db: Any, conv: Any, lane_pid: Any) -> None:
    c = partial(db.col, "t", "ACC_PMU")
    for ts, dev, acc_id, *levels in _rows(db, "ACC_PMU", [c("accId"), *(c(col) for _, col in ACC_PMU)]):
        for (name, _), level in zip(ACC_PMU, levels):
            if level is not None:
                _add(conv, lane_pid, "Acc PMU", dev, name, ts, {"value": level, "acc_id": acc_id})
