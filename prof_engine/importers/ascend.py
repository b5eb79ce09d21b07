"""Ascend torch_npu / MindSpore profiler output (`*_ascend_pt`, `*_ascend_ms`) → canonical records.

A rank directory holds `ASCEND_PROFILER_OUTPUT/` with `trace_view.json` (a Chrome trace array
whose processes are lanes: Python, CANN, Ascend Hardware, HCCL/Communication, Overlap Analysis,
counters) and `kernel_details.csv` (one row per device task with its OP Type and core type).
Lanes are found through the `process_name` / `process_labels` metadata, never by decoding pid
numbers (their encoding changed between versions). Device tasks from the trace are enriched with
their kernel_details row (matched on stream, task id and start, ±1 ns: the two files round
differently; on name and start where the CSV has no Task ID / Stream ID, as at Level0). Rows
matched to no trace record are counted as the finding `unmatched_vendor_rows`. The vendor's own
Overlap Analysis lane is left out: prof-engine recomputes it. Without a trace_view.json, device
tasks come from kernel_details.csv alone.
MindSpore's host CPU ops (`CPU OP` lane, FRAMEWORK/cpu_op_* files), `Scope Layer` lane: see `mindspore_cpu`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from prof_engine.errors import InputError
from prof_engine.importers import chunkconv, classify, mindspore_cpu, vendor_csv
from prof_engine.importers.chrome import Args, ChromeConverter, Described, Sink, _int, _text, chunks, with_anomalies
from prof_engine.importers.formats import Format, Progress
from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text, read_json
from prof_engine.importers.units import BadTime, us_text_to_ns
from prof_engine.importers.vendor_csv import VendorCsv
from prof_engine.store.builder import SourceFile
from prof_engine.store.quality import add_finding

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"

# kernel_details.csv / op_summary column names across versions → one name (ascend_formats.md §2.1).
KERNEL_COLUMNS = {
    "Name": ("Name", "Op Name"),
    "Type": ("Type", "OP Type"),
    "Core": ("Accelerator Core", "Task Type"),
    "Start": ("Start Time(us)", "Task Start Time(us)"),
    "Duration": ("Duration(us)", "Task Duration(us)"),
    "Stream": ("Stream ID",),
    "Task": ("Task ID",),
    "Step": ("Step Id", "Step ID"),
    "Shapes": ("Input Shapes",),
    "Types": ("Input Data Types",),
}
# kernel_details.csv columns prof-engine derives itself (not kept in a task's args).
KERNEL_DERIVED = ("Wait Time(us)",)
# kernel_details.csv / op_summary columns of µs that the importers read in ns (`read_csv(times=...)`).
KERNEL_TIMES = ("Start", "Duration")
# Sentinels that mean "no value" in Ascend CSVs (§0.8).
NULLS = {"", "N/A", "NA", "4294967295", "18446744073709551615"}
COPY_TASK_TYPES = re.compile(r"DMA|MEMCPY|SDMA", re.IGNORECASE)
# Device tasks that HCCL issues for a collective (reductions, notifies are SYNC).
COMM_TASK_TYPES = re.compile(r"REDUCE|HCCL|COMMUNICATION", re.IGNORECASE)
# Synchronisation and bookkeeping tasks of the task scheduler: not compute, not copies.
SYNC_TASK_TYPES = re.compile(r"NOTIFY|WRITE.?VALUE|EVENT|PLACE.?HOLDER|WAIT|RECORD|BARRIER|PROFILING", re.IGNORECASE)


def task_kind(task_type: str, in_kernel_list: bool, has_kernel_list: bool) -> str:
    """Kind of an Ascend device task from its task type: a task in the vendor's compute-op list
    (kernel_details / COMPUTE_TASK_INFO) is a kernel; else copies, synchronisation and HCCL's
    own tasks by name; anything else is compute unless the vendor's list exists and leaves it out."""
    if in_kernel_list:
        return "kernel"
    if COPY_TASK_TYPES.search(task_type):
        return "memcpy"
    if SYNC_TASK_TYPES.search(task_type):
        return "sync"
    if COMM_TASK_TYPES.search(task_type):
        return "comm_task"
    return "other" if has_kernel_list or not task_type else "kernel"


def is_rank_dir(path: Path) -> bool:
    return (path / OUTPUT_DIR).is_dir()


def units(path: Path) -> list[Path]:
    """The rank directories at or under `path` (a rank dir itself, or a cluster of them)."""
    if is_rank_dir(path):
        return [path]
    return sorted({p.parent for p in path.rglob(OUTPUT_DIR) if p.is_dir()}, key=str)


def _rank_in_range(rank: int, where: Path) -> int:
    if rank >= 1 << 31:  # ranks are int32 in the run store, and no job has 2^31 processes
        raise InputError(f"{where}: rank {rank} is out of range (a rank is below 2^31)")
    return rank


def rank_of(rank_dir: Path) -> int | None:
    """Rank from `profiler_info_<rank>.json` (msprof-analyze's rule), else its `rank_id`."""
    for info in sorted(rank_dir.glob("profiler_info*.json")):
        m = re.fullmatch(r"profiler_info_(\d+)\.json", info.name)
        if m:
            return _rank_in_range(int(m.group(1)), info)
        try:
            data = read_json(info, "profiler_info JSON")
        except InputError:
            continue
        rank = data.get("rank_id") if isinstance(data, dict) else None
        if rank is not None and str(rank).lstrip("-").isdigit() and int(rank) >= 0:
            return _rank_in_range(int(rank), info)
    return None


def read_csv(
    path: Path,
    columns: Mapping[str, tuple[str, ...]],
    required: tuple[str, ...] = ("Name", "Start", "Duration"),
    limit: int | None = None,
    rest: tuple[str, ...] | None = None,
    times: tuple[str, ...] = (),
    *,
    info: dict[str, Any] | None = None,
    device: str | None = None,
    ragged: bool = False,
    optional: bool = False,
    unique: bool = False,
) -> list[dict[str, Any]]:
    """Rows of an Ascend CSV (`read_rows`, without the reader)."""
    return read_rows(
        path,
        columns,
        required,
        limit,
        rest,
        times,
        info=info,
        device=device,
        ragged=ragged,
        optional=optional,
        unique=unique,
    )[0]


def read_rows(
    path: Path,
    columns: Mapping[str, tuple[str, ...]],
    required: tuple[str, ...] = ("Name", "Start", "Duration"),
    limit: int | None = None,
    rest: tuple[str, ...] | None = None,
    times: tuple[str, ...] = (),
    *,
    info: dict[str, Any] | None = None,
    device: str | None = None,
    ragged: bool = False,
    optional: bool = False,
    unique: bool = False,
) -> tuple[list[dict[str, Any]], VendorCsv]:
    """Rows of an Ascend CSV, read strictly (`vendor_csv`), with columns resolved by name through
    `columns` (headers drift across versions), trailing tabs stripped and sentinels mapped to None;
    and the reader (what it left out, whether the file is truncated). With `rest` (headers to
    leave out of it), the other columns that hold a value are kept too, by header, in
    `row["_rest"]`, numbers as numbers. Each key of `times` (columns of µs) has its cell in ns
    too, as `row[key + "_ns"]` (None where empty); a cell that is not a time names the file and
    column.

    What cannot be read is said, never read as empty: rows left out (a stray quote, a row cut
    short) are the finding `vendor_rows_left_out` in `info` (an InputError without `info`); a
    header without a column of `required` is an InputError, or with `optional` the finding
    `vendor_file_left_out` (the file adds nothing); so is, with `info`, a file of no rows.
    With `ragged`, a row of more or fewer cells than the header (the 2023 exporter left a cell
    out) has its cells shifted from an unknown place on: it keeps only its cells up to the last
    required column (names and times come first in every version), and `row["_ragged"]`; one
    cut short before that is left out. With `unique` (a list of one row per task: two alike are
    one task written twice), a row equal to an earlier one is read once, and counted as the
    finding `duplicate_vendor_rows` (an InputError without `info`)."""
    table = VendorCsv(path, ragged=ragged)
    header = table.header
    index = {}
    for key, names in columns.items():
        found = next((header.index(n) for n in names if n in header), None)
        if found is not None:
            index[key] = found
    missing = [k for k in required if k not in index]
    if missing:
        shown = ", ".join(columns[k][0] for k in missing)
        what = f"{path}: no column {shown} (header: {', '.join(header[:12]) or 'none'})"
        if not optional:
            raise InputError(what)
        if info is not None:
            vendor_finding(info, "vendor_file_left_out", 1, f"{what}: left out", device)
        return [], table
    used = set(index.values())
    last_required = max((index[k] for k in required), default=len(header) - 1)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    twice = 0
    for n, line in table.rows(limit):
        if unique:
            whole = tuple(line)
            if whole in seen:
                twice += 1
                continue
            seen.add(whole)
        ragged_row = len(line) != len(header)
        if ragged_row:
            if len(line) <= last_required:  # cut before a column it needs
                table.leave_out(vendor_csv.SHORT, n)
                continue
            line = line[: last_required + 1]
        row: dict[str, Any] = {key: _cell(line, i) for key, i in index.items()}
        if ragged_row:
            row["_ragged"] = True
        if rest is not None:
            row["_rest"] = {
                h: _number(v)
                for i, h in enumerate(header)
                if i not in used and h not in rest and (v := _cell(line, i)) is not None
            }
        for key in times:
            if key in index:
                row[f"{key}_ns"] = cell_time(path, header[index[key]], row[key])
        rows.append(row)
    if twice:
        if info is None:
            raise InputError(f"{path}: {twice} rows repeat an earlier row exactly (corrupt?)")
        vendor_finding(
            info, "duplicate_vendor_rows", twice, f"{path}: {twice} exact duplicate rows, each read once", device
        )
    if table.count():
        if info is None:
            raise InputError(table.error())
        vendor_finding(info, "vendor_rows_left_out", table.count(), table.finding(), device)
    elif not rows and info is not None and limit is None:
        vendor_finding(info, "vendor_file_left_out", 1, f"{path}: no rows (header only): adds nothing", device)
    return rows, table


def vendor_finding(info: dict[str, Any], rule: str, count: int, detail: str, device: str | None) -> None:
    """`add_finding` of a vendor file's damage (no share: files differ in size); a second file of
    the same rule and device adds its count and its detail, so each file stays named."""
    before = next((f for f in info.get("findings") or [] if f["rule"] == rule and f.get("device") == device), None)
    add_finding(info, rule, count, detail, device=device, total=None)
    if before is not None and count > 0:
        before["detail"] = f"{before['detail']}; {detail}"


def unquoted(v: str) -> str:
    """A shape as the profilers mean it: msprof quotes shapes itself (`"32,3,224,224"`), before
    torch_npu's CSV writer quotes them again; its database stores them quoted too."""
    return v[1:-1] if len(v) > 1 and v[0] == v[-1] == '"' else v


def _cell(line: list[str], i: int) -> str | None:
    v = unquoted(line[i].strip().strip("\t").strip() if i < len(line) else "")
    return None if v in NULLS else v


def _number(v: str) -> int | float | str:
    """A CSV cell as the number it writes (`32`, `0.186`), else as its text (`NCHW`, `YES`)."""
    try:
        return int(v)
    except ValueError:
        try:
            f = float(v)
        except ValueError:
            return v
        return f if math.isfinite(f) else v


L2_COLUMNS = {
    "Stream": ("Stream Id",),
    "Task": ("Task Id",),
    "Hit": ("Hit Rate",),
    "Victim": ("Victim Rate",),
    "Name": ("Op Name",),
}


def with_l2_cache(
    rows: list[dict[str, Any]], path: Path, info: dict[str, Any] | None = None, device: str | None = None
) -> None:
    """Put l2_cache.csv's L2 hit and victim rates into the args of the kernel_details rows they are
    of (`L2 Hit Rate`, `L2 Victim Rate`; `N/A` kept as null). The file has no times: its rows are
    matched on stream, task id and name, the n-th of a key to the n-th kernel_details row of it
    (task ids repeat as they wrap; both files list the tasks in time order). A file of other
    columns (another CANN version's) adds nothing, as the memory files do, and is the finding
    `vendor_file_left_out` in `info`: the trace still imports."""
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        by_key.setdefault((_int(r.get("Stream")), _int(r.get("Task")), r["Name"]), []).append(r)
    for l2 in read_csv(path, L2_COLUMNS, required=tuple(L2_COLUMNS), info=info, device=device, optional=True):
        matches = by_key.get((_int(l2.get("Stream")), _int(l2.get("Task")), l2.get("Name")))
        if matches:
            row = matches.pop(0)
            row["_rest"] = {
                **(row.get("_rest") or {}),
                "L2 Hit Rate": _rate(l2.get("Hit")),
                "L2 Victim Rate": _rate(l2["Victim"]),
            }


def _rate(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def cell_time(path: Path, column: str, text: str | None) -> int | None:
    """A CSV cell of µs in ns (None where empty); one that is not a time names its file and column."""
    try:
        return us_text_to_ns(text or "")
    except BadTime as e:
        raise InputError(f"{path}: {column}: {e} (corrupt or not a profiler's output?)") from None


def _kernel_index(rows: list[dict[str, Any]]) -> dict[tuple, dict]:
    """kernel_details rows (read with `KERNEL_TIMES`) by (stream, task id, start ns) and, where a
    row has no task id (communication ops; every row of a Level0 export, whose CSV has neither
    column), by (name, start ns)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        start = r["Start_ns"]
        if start is None:
            continue
        if r.get("Stream") is not None and r.get("Task") is not None:
            out[(_int(r["Stream"]), _int(r["Task"]), start)] = r
        else:
            out[(r["Name"], start)] = r
    return out


def _lookup(index: dict[tuple, dict], key: tuple, ts: int) -> dict | None:
    for t in (ts, ts - 1, ts + 1):
        r = index.get((*key, t))
        if r is not None:
            return r
    return None


def unmatched_rows(rows: list[dict[str, Any]], matched: set[int]) -> list[dict[str, Any]]:
    """The kernel_details rows whose `id()` is not in `matched`: no trace record has them (nor
    the tasks' op types, core types and shapes they hold)."""
    return [r for r in rows if id(r) not in matched]


class AscendConverter(ChromeConverter):
    """trace_view.json lanes → canonical kinds and devices (see the module docstring)."""

    cpu_ops: Path | None = None  # MindSpore's cpu_op_execute_timestamp file, read instead of the CPU OP lane
    # Where kernel_details.csv is truncated: its last row's start (ns). A task after it has no row
    # because the file ends, not because it is no compute op: typed by its task type alone.
    kernels_until: int | None = None
    past_list = 0  # device tasks after `kernels_until` with no kernel_details row

    def __init__(
        self, file_index: int, sink: Sink, meta: list[Event], kernels: dict[tuple, dict], device_index: int = 0
    ) -> None:
        super().__init__(file_index, sink)
        self.kernels = kernels
        self.matched: set[int] = set()  # id() of the kernel_details rows a trace record took
        self.device_index = device_index  # for lanes labelled "NPU" without an index
        self.set_lanes(meta)

    def set_lanes(self, meta: list[Event]) -> None:
        """Lane names from the metadata events: process names and labels by pid, thread names."""
        self.process: dict[str, str] = {}
        self.label: dict[str, str] = {}
        self.thread: dict[tuple[str, str], str] = {}
        for ev in meta:
            args = json.loads(args_text(ev)) if args_text(ev) else {}
            pid = _text(ev.pid) or ""
            if ev.name == "process_name":
                self.process[pid] = str(args.get("name", ""))
            elif ev.name == "process_labels":
                self.label[pid] = str(args.get("labels", ""))
            elif ev.name == "thread_name":
                self.thread[(pid, _text(ev.tid) or "")] = str(args.get("name", ""))

    def point_device(self, pid: str | None) -> str:
        label = self.label.get(pid or "", "CPU")
        if not label.startswith("NPU"):
            return "host"
        index = label[3:].strip()  # "NPU 3"; anything but a number names this file's device
        return f"npu{index if index.isdigit() and len(index) < 10 else self.device_index}"

    def describe(self, ev: Event, a: Args, name: str, cat: str | None) -> Described | None:
        pid = _text(ev.pid) or ""
        lane = self.process.get(pid, "")
        device = self.point_device(pid)
        if lane == "Overlap Analysis":
            return None  # derived by the vendor; prof-engine recomputes it (view `overlap`)
        if lane == mindspore_cpu.SCOPE_LANE:
            return None  # derived by the vendor from the op names (see mindspore_cpu)
        if lane == mindspore_cpu.CPU_LANE:  # MindSpore's host CPU ops: from the timestamp file where there is one
            return None if self.cpu_ops else Described("host_op", "host", op_type=mindspore_cpu.op_type(name))
        if lane == "CANN":
            return Described("api", device, correlation=_int(a.connection_id))
        if lane == "Ascend Hardware":
            return self._hardware_task(ev, a, name, device)
        if lane in ("HCCL", "Communication"):
            group_op = self.thread.get((pid, _text(ev.tid) or ""), "").startswith("Group")
            row = self._kernel_row((name,), us_text_to_ns(ev.ts) or 0) if group_op else None
            return Described(
                "comm" if group_op else "comm_task",
                device,
                correlation=_int(a.connection_id),
                op_type=row.get("Type") if row else None,
                task_type="HCCL" if group_op else a.ascend_task_type,
                more_args=row.get("_rest") if row else None,
            )
        if device == "host":
            kind = classify.kind_of(cat, name, False)
            return Described(kind, device, input_shapes=_ascend_shapes(a), input_types=_ascend_types(a))
        return Described("other", device)

    def add_slices(self, chunk: chunkconv.Chunk, rows: pa.Array, ts: pa.Array) -> None:
        """Each `X` event described by its own lane and kernel_details row (`describe`), in order."""
        for ev in chunk.events(rows.to_pylist()):
            self._slice(ev)

    def _hardware_task(self, ev: Event, a: Args, name: str, device: str) -> Described:
        stream = _int(a.physic_stream) if a.physic_stream is not None else _int(ev.tid)
        task_type = _text(a.ascend_task_type) or ""
        ts = us_text_to_ns(ev.ts) or 0
        row = self._kernel_row((stream, _int(a.task_id)), ts) or self._kernel_row((name,), ts)
        listed = bool(self.kernels) and (self.kernels_until is None or ts <= self.kernels_until)
        self.past_list += row is None and bool(self.kernels) and not listed
        kind = task_kind(task_type, row is not None, listed)
        return Described(
            kind,
            device,
            stream=stream,
            correlation=_int(a.connection_id),
            op_type=row.get("Type") if row else None,
            task_type=(row.get("Core") if row else None) or task_type or None,
            input_shapes=row.get("Shapes") if row else None,
            input_types=row.get("Types") if row else None,
            more_args=row.get("_rest") if row else None,
        )

    def _kernel_row(self, key: tuple, ts: int) -> dict | None:
        row = _lookup(self.kernels, key, ts)
        if row is not None:
            self.matched.add(id(row))
        return row

    def after_slice(self, a: Args, d: Described) -> None:
        if d.kind == "comm_task" and (a.src_rank is not None or a.transport is not None):
            self._comm_row(d.device, None, _text(a.data_type), None, _int(a.size_bytes), a)
        elif d.kind == "comm":
            self._comm_row(d.device, d.op_type, _text(a.hccl_data_type), _int(a.count), None, None)

    def _comm_row(
        self,
        device: str,
        collective: str | None,
        dtype: str | None,
        count: int | None,
        nbytes: int | None,
        a: Args | None,
    ) -> None:
        self.add_row(
            "comm",
            {
                "slice_id": self.seq,
                "rank": self.file_index,
                "device": device,
                "step": None,
                "collective": collective,
                "dtype": dtype,
                "in_nelems": count,
                "bytes": nbytes,
                "src_rank": _rank_or_none(a.src_rank) if a else None,
                "dst_rank": _rank_or_none(a.dst_rank) if a else None,
                "transport": _text(a.transport) if a else None,
            },
        )


def _rank_or_none(v: Any) -> int | None:
    r = _int(v)
    return None if r is None or r >= 4294967295 or r < 0 else r


def _ascend_shapes(a: Args) -> str | None:
    dims = a.input_dims
    if isinstance(dims, str):  # torch_npu writes "8,32;;" strings
        return dims
    from prof_engine.importers.chrome import shapes_text

    return shapes_text(dims)


def _ascend_types(a: Args) -> str | None:
    t = a.input_type
    if isinstance(t, str):
        return t
    return ";".join(map(str, t)) if isinstance(t, list) else None


def _metadata(path: Path) -> list[Event]:
    """The metadata (`M`) events of a trace file: its lanes, read before its other events."""
    meta = []
    for chunk in chunks(ChromeTraceReader(path)):
        ph = pc.fill_null(chunk.column("ph"), "")
        meta += chunk.events(pc.indices_nonzero(pc.equal(ph, "M")).to_pylist())
    return meta


def convert_rank_dir(
    rank_dir: Path, file_index: int, sink: Sink, progress: Callable[[int], None] | None = None
) -> tuple[ChromeConverter, dict[str, Any]]:
    """Stream one rank directory into `sink`; return the converter and what the manifest keeps."""
    out = rank_dir / OUTPUT_DIR
    trace = out / "trace_view.json"
    kernel_csv = out / "kernel_details.csv"
    info = _rank_info(rank_dir)
    device = f"npu{device_index(out)}"
    # the columns prof-engine has none of (Block Dim, formats, output shapes, PMU metrics) go in the args
    rows, table = (
        read_rows(
            kernel_csv,
            KERNEL_COLUMNS,
            rest=KERNEL_DERIVED,
            times=KERNEL_TIMES,
            info=info,
            device=device,
            ragged=True,
            unique=True,
        )
        if kernel_csv.is_file()
        else ([], None)
    )
    if rows and (out / "l2_cache.csv").is_file():
        with_l2_cache(rows, out / "l2_cache.csv", info, device)
    ragged = [r for r in rows if r.get("_ragged")]
    if ragged:
        add_finding(
            info,
            "ragged_vendor_rows",
            len(ragged),
            f"{kernel_csv}: {len(ragged)} rows of more or fewer cells than the header: kept up to "
            f"Duration (first: {ragged[0].get('Name')})",
            device=device,
        )
    cpu_ops = mindspore_cpu.timestamp_file(rank_dir)
    if trace.is_file():
        conv = AscendConverter(file_index, sink, _metadata(trace), _kernel_index(rows), device_index(out))
        conv.cpu_ops = cpu_ops
        if table is not None and table.truncated and rows:
            conv.kernels_until = max((r["Start_ns"] for r in rows if r["Start_ns"] is not None), default=None)
        for chunk in chunks(ChromeTraceReader(trace, progress=progress)):
            conv.feed(chunk)
        if cpu_ops is not None:
            mindspore_cpu.add_ops(conv, cpu_ops, info)
        convert_memory(out, conv, info)
        conv.finish()
        add_finding(
            info,
            "unlisted_device_tasks",
            conv.past_list,
            f"{kernel_csv} ends mid-row (truncated): {conv.past_list} trace_view.json device tasks after its "
            f"last row (start {conv.kernels_until} ns) have no row: kernel or not by their task type alone",
            device=device,
        )
        lost = unmatched_rows(rows, conv.matched)
        if lost:
            add_finding(
                info,
                "unmatched_vendor_rows",
                len(lost),
                f"{kernel_csv}: {len(lost)} of {len(rows)} rows match no trace_view.json task by stream, "
                f"task id and start, or name and start (first: {lost[0]['Name']})",
                device=f"npu{conv.device_index}",
            )
        return conv, info
    if rows:
        conv = AscendConverter(file_index, sink, [], {}, device_index(out))
        _kernel_rows_as_slices(conv, rows)
        if cpu_ops is not None:
            mindspore_cpu.add_ops(conv, cpu_ops, info)
        convert_memory(out, conv, info)
        conv.finish()
        return conv, info
    from prof_engine.importers import ascend_db  # imports this module: import here, not at the top

    database = ascend_db.find_db(out)
    if database is not None:  # exported with export_type=db
        db_conv = ascend_db.convert_db(database, file_index, sink, progress)
        for f in db_conv.info.get("findings") or []:
            vendor_finding(info, f["rule"], f["count"], f["detail"], f.get("device"))
        add_finding(
            info,
            "unmatched_vendor_rows",
            db_conv.unmatched_compute,
            f"{database}: {db_conv.unmatched_compute} COMPUTE_TASK_INFO rows describe no TASK row with a start and end",
            device=f"npu{db_conv.device}",
        )
        if cpu_ops is not None:  # the database reader takes no MindSpore CPU ops
            mindspore_cpu.add_ops(db_conv, cpu_ops, info)
            db_conv.finish()
        return db_conv, info
    if cpu_ops is not None:  # a MindSpore CPU profile whose trace_view.json is missing
        conv = AscendConverter(file_index, sink, [], {}, device_index(out))
        mindspore_cpu.add_ops(conv, cpu_ops, info)
        conv.finish()
        return conv, info
    if table is not None:  # the file is there, and no row of it could be read
        raise InputError(f"{kernel_csv}: no rows prof-engine can read, and no trace_view.json beside it")
    raise InputError(
        f"{rank_dir}: an Ascend profiler directory without trace_view.json or kernel_details.csv "
        f"in {OUTPUT_DIR}/ (nothing prof-engine can import: was it exported with export_type=db?)"
    )


def device_index(output_dir: Path) -> int:
    """The NPU index of a rank directory, from the `Device Type`/`Device` column (`NPU:1`) of its
    memory files: trace_view.json labels lanes "NPU" without it in some versions."""
    for name in ("memory_record.csv", "npu_module_mem.csv", "operator_memory.csv"):
        path = output_dir / name
        if path.is_file():
            # the first readable row (what the others hold is said where the file is read)
            for row in read_csv(path, {"Device": ("Device Type", "Device")}, required=(), limit=1, info={}):
                m = re.search(r"(\d+)\s*$", row.get("Device") or "")
                if m:
                    return int(m.group(1))
    return 0


def _kernel_rows_as_slices(conv: AscendConverter, rows: list[dict]) -> None:
    """Device tasks straight from kernel_details.csv (no trace; rows read with `KERNEL_TIMES`):
    step from its Step Id column, task id in the args as the trace's tasks have it (`Task Id`)."""
    for r in rows:
        start = r["Start_ns"]
        dur = None if start is None else conv.checked_dur(r["Name"] or "", start, r["Duration_ns"] or 0)
        if dur is None:
            continue
        comm = r.get("Core") in ("HCCL", "COMMUNICATION")
        step = _int(r.get("Step"))
        if step is not None and not 0 <= step <= classify.STEP_MAX:  # as the Kineto path's ProfilerStep#N
            conv.out_of_range_seen("step", 1, r["Name"] or "")
            step = None
        args = {**(r.get("_rest") or {}), **({"Task Id": task} if (task := _int(r.get("Task"))) is not None else {})}
        conv.seq += 1
        conv.add_row(
            "slices",
            {
                "id": conv.seq,
                "rank": conv.file_index,
                "device": f"npu{conv.device_index}",
                "step": step,
                "kind": "comm" if comm else "kernel",
                "name": r["Name"] or "",
                "category": "kernel_details",
                "op_type": r.get("Type"),
                "task_type": r.get("Core"),
                "ts": start,
                "dur": dur,
                "stream": _int(r.get("Stream")),
                "input_shapes": r.get("Shapes"),
                "input_types": r.get("Types"),
                "args": json.dumps(args, ensure_ascii=False) if args else None,
            },
        )


def convert_memory(output_dir: Path, conv: ChromeConverter, info: dict[str, Any]) -> None:
    from prof_engine.importers.ascend_memory import convert_memory as convert

    convert(output_dir, conv, info)


def _rank_info(rank_dir: Path) -> dict[str, Any]:
    """profiler_info / profiler_metadata content the manifest keeps (config, parallel groups)."""
    info: dict[str, Any] = {}
    for name in sorted(rank_dir.glob("profiler_info*.json")) + [rank_dir / "profiler_metadata.json"]:
        if name.is_file():
            data = read_json(name)
            if isinstance(data, dict):
                info.update(
                    {
                        k: v
                        for k, v in data.items()
                        if k in ("config", "rank_id", "distributed_args", "parallel_group_info", "end_info")
                    }
                )
    return info


# -- the importer protocol ---------------------------------------------------------------------
def convert(rank_dir: Path, index: int, sink: Sink, progress: Progress) -> SourceFile:
    """One rank directory (`convert_rank_dir`), and what the manifest keeps of it."""
    conv, info = convert_rank_dir(rank_dir, index, sink, progress)
    rank = rank_of(rank_dir)
    return SourceFile(
        path=str(rank_dir),
        format="mindspore" if rank_dir.name.endswith("_ascend_ms") else "torch_npu",
        rank=rank if rank is not None else index,
        index=index,
        bytes=sum(p.stat().st_size for p in rank_dir.rglob("*") if p.is_file()),
        events=sum(conv.counts.values()),
        lanes=list(conv.lanes.values()),
        info={"rank_from": "file order" if rank is None else "profiler_info", **with_anomalies(info, conv)},
    )


FORMAT = Format("ascend", "ascend", convert, units=units)
