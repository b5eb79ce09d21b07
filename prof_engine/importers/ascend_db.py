"""Ascend torch_npu / MindSpore `.db` export (`export_type=db`) → canonical records.

A rank directory exported as a database holds `ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db`
(or `ascend_mindspore_profiler*.db`): SQLite in msprof's unified schema, every string interned in
`STRING_IDS`, enums in `ENUM_*` tables, all times int ns since the epoch (ascend_formats.md §2.11).
It is read with Python's sqlite3 (read-only), strings resolved by SQL joins, rows streamed with
`fetchmany` into the same column buffers the trace_view.json importer fills, so both exports of a
job give the same canonical tables:

* PYTORCH_API → host_op / step (`ProfilerStep#N`) / python / other (enqueue, dequeue), as the
  Python lane of trace_view.json; `startNs` is TEXT there, cast in SQL.
* CANN_API → api, named `<Layer>@<api>` as trace_view.json's CANN lane (`AscendCL@aclrtMemcpyAsync`),
  level (ENUM_API_TYPE) in `args.level`, correlation = connectionId.
* TASK (⋈ COMPUTE_TASK_INFO) → kernel with its op type and core type; other tasks → memcpy / sync,
  or `other` for a compute-typed task without compute info (HCCL/FFTS container tasks, category
  `container_task`), as the Ascend Hardware lane with kernel_details.csv.
* COMMUNICATION_OP → comm (+ a comm row: collective, group, dtype, count);
  COMMUNICATION_TASK_INFO ⋈ TASK → comm_task (+ a comm row: src/dst rank, transport, bytes).
* memory tables → counters and memory_events (ascend_db_memory.py); hardware counter tables
  (AICORE_FREQ, NPU_MEM, HBM, LLC, SOC_BANDWIDTH_LEVEL, ACC_PMU) → counters as trace_view.json
  names them (ascend_db_counters.py); records that share a connection id → flows (ascend_db_flows.py).

Devices are `npu<deviceId>` with the device id the database records (TASK.deviceId,
RANK_DEVICE_MAP). pid/tid are those trace_view.json would show (lane pid = OS pid << 10 |
sort index << 5 | device, tid = thread, stream or plane), so host ops and API calls nest apart as
in the text export. OVERLAP_ANALYSIS is skipped: prof-engine recomputes overlap. Column names
that drift between versions are looked up with PRAGMA table_info; missing optional columns read
as NULL.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from prof_engine.errors import InputError
from prof_engine.importers import classify
from prof_engine.importers.ascend import NULLS, _rank_or_none, task_kind, unquoted, vendor_finding
from prof_engine.importers.ascend_db_counters import convert_db_counters
from prof_engine.importers.ascend_db_flows import convert_db_flows
from prof_engine.importers.ascend_db_memory import convert_db_memory
from prof_engine.importers.chrome import ChromeConverter, Sink

DB_NAME = re.compile(r"ascend_(pytorch|mindspore)_profiler(_\d+)?\.db")
FETCH_ROWS = 20_000
RECORD_TABLES = ("PYTORCH_API", "CANN_API", "TASK")
# Category of a device task that contains others (`_task`): kind other, counted by no report.
CONTAINER_TASK = "container_task"
# Tables of one row per record: an exact duplicate row would count its record twice (a doubled
# TASK doubles every kernel count), so each is read as its distinct rows where it has duplicates.
DEDUPED_TABLES = (*RECORD_TABLES, "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO")
# trace_view.json lane sort indices of this torch_npu generation (pid = os_pid << 10 | index << 5 | device).
LANE_INDEX = {
    "CANN": 7,
    "Ascend Hardware": 13,
    "AI Core Freq": 14,
    "HCCL": 15,
    "HBM": 17,
    "LLC": 18,
    "NPU MEM": 19,
    "Stars Soc Info": 20,
    "Acc PMU": 21,
}
# msprof's CANN lane naming: level → layer prefix (`AscendCL@aclrtMemcpyAsync`), else `Api@`.
LEVEL_PREFIX = {"acl": "AscendCL", "runtime": "Runtime", "model": "Model", "node": "Node", "hccl": "Hccl"}
API_TYPES = {
    5000: "runtime",
    5500: "hccl",
    10000: "node",
    15000: "model",
    20000: "acl",
    50001: "op",
    50002: "queue",
    50003: "trace",
    50004: "mstx",
}  # when ENUM_API_TYPE is absent
PYTORCH_CATEGORY = {"op": "cpu_op", "trace": "python_function"}  # queue → enqueue / dequeue by name
_JSON = msgspec.json.Encoder()


def find_db(out_dir: Path) -> Path | None:
    """The profiler database of a rank's ASCEND_PROFILER_OUTPUT directory, if any."""
    found = sorted(p for p in out_dir.glob("ascend_*_profiler*.db") if DB_NAME.fullmatch(p.name))
    return found[0] if found else None


def _lane_pid(os_pid: int | None, lane: str, device: int) -> str:
    return str(((os_pid or 0) << 10) | (LANE_INDEX[lane] << 5) | (device & 31))


def _dims_and_types(dtypes_col: str | None, shapes_col: str | None) -> tuple[str | None, str | None]:
    """(Input Dims, Input type) of a PYTORCH_API row. torch_npu has written the two columns swapped
    (dims in inputDtypes): dims never hold letters, types always do. An empty dims string is stored
    as NULL; trace_view.json writes it as "" wherever there are types."""
    if (shapes_col and re.search(r"[A-Za-z]", shapes_col)) or (dtypes_col and not re.search(r"[A-Za-z]", dtypes_col)):
        dtypes_col, shapes_col = shapes_col, dtypes_col
    return ("" if shapes_col is None and dtypes_col is not None else shapes_col), dtypes_col


def _value(v: Any) -> Any:
    return None if isinstance(v, str) and v.strip() in NULLS else v


def _unquoted(v: Any) -> Any:
    """A database value as the text export writes it (`ascend.unquoted`), sentinels as None."""
    v = _value(v)
    return unquoted(v) if isinstance(v, str) else v


def _kernel_details(
    block_dim: Any, mix_block_dim: Any, in_formats: Any, out_shapes: Any, out_types: Any, out_formats: Any, metrics: Any
) -> dict[str, Any]:
    """A compute task's COMPUTE_TASK_INFO and TASK_PMU_INFO values under the names and units of the
    text export's kernel_details.csv (what its importer keeps in a task's args): `Block Dim`, ...,
    PMU times in µs (`aic_mac_time(us)`; the database's are ns), `aicore_time(us)` and
    `aiv_time(us)` for the total times."""
    out: dict[str, Any] = {}
    for key, v in (
        ("Block Dim", block_dim),
        ("Mix Block Dim", mix_block_dim),
        ("Input Formats", in_formats),
        ("Output Shapes", out_shapes),
        ("Output Data Types", out_types),
        ("Output Formats", out_formats),
    ):
        v = _unquoted(v)
        if v is not None:
            out[key] = v
    for name, value in msgspec.json.decode(metrics).items() if metrics else ():
        if name.endswith("_time"):
            name = {"aic_total_time": "aicore_time", "aiv_total_time": "aiv_time"}.get(name, name) + "(us)"
            value = value / 1000 if isinstance(value, (int, float)) else value
        out[name] = value
    return out


class _Db:
    """A read-only profiler database: its tables and columns, enum tables, streamed queries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: dict[str, set[str]] = {}
        # Nothing is written beside an input (it may lie in a read-only archive): SQLite's read-only
        # mode still makes -shm/-wal files for a WAL database, so the file is opened immutable, or,
        # where a write-ahead log with content lies beside it, a private copy of both is read.
        self._copy: tempfile.TemporaryDirectory | None = None
        wal = path.with_name(path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            self._copy = tempfile.TemporaryDirectory(prefix="prof_engine_db_")
            copy = Path(self._copy.name) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            self.con = sqlite3.connect(copy.as_uri() + "?mode=ro", uri=True)
        else:
            self.con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)

    def close(self) -> None:
        self.con.close()
        if self._copy is not None:
            self._copy.cleanup()

    def load_schema(self) -> None:
        """Tables (and views: a table may be written as one) and their columns (PRAGMA table_info);
        InputError if the record tables are missing. A record table with exact duplicate rows is
        shadowed by a temporary view of its distinct rows (`duplicates` counts what it drops)."""
        names = [r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        self.columns = {t: {r[1] for r in self.con.execute(f'PRAGMA table_info("{t}")')} for t in names}
        if "STRING_IDS" not in self.columns or not any(t in self.columns for t in RECORD_TABLES):
            raise InputError(
                f"{self.path}: not an Ascend profiler database (needs STRING_IDS and one of "
                f"{', '.join(RECORD_TABLES)}; has {', '.join(sorted(names)[:12]) or 'no tables'})"
            )
        self.duplicates: dict[str, int] = {}
        for t in DEDUPED_TABLES:
            if t in self.columns:
                n = self.scalar(
                    f'SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT * FROM main."{t}")) FROM main."{t}"'
                )
                if n:
                    # unqualified names find the temp schema first: every reader of `t` reads it once
                    self.con.execute(f'CREATE TEMP VIEW "{t}" AS SELECT DISTINCT * FROM main."{t}"')
                    self.duplicates[t] = n

    def has(self, table: str, *required: str) -> bool:
        cols = self.columns.get(table)
        if cols is None:
            return False
        missing = [c for c in required if c not in cols]
        if missing:
            raise InputError(f"{self.path}: table {table} lacks column {', '.join(missing)} (unknown schema version)")
        return True

    def offers(self, table: str, *columns: str) -> bool:
        """Whether `table` exists with `columns`, for what the database may lack without being of an
        unknown schema (flows: `has` refuses a table without a column it requires)."""
        return table in self.columns and set(columns) <= self.columns[table]

    def col(self, alias: str, table: str, *names: str) -> str:
        """`alias.name` for the first of `names` the table has (names drift across versions), else NULL."""
        cols = self.columns.get(table, set())
        return next((f"{alias}.{n}" for n in names if n in cols), "NULL")

    def enum(self, table: str, default: dict[int, str] | None = None) -> dict[int, str]:
        if table not in self.columns:
            return dict(default or {})
        return {int(i): str(n) for i, n in self.con.execute(f'SELECT id, name FROM "{table}"')}

    def rows(self, sql: str) -> Iterator[tuple]:
        cur = self.con.execute(sql)
        while batch := cur.fetchmany(FETCH_ROWS):
            yield from batch

    def scalar(self, sql: str) -> Any:
        row = self.con.execute(sql).fetchone()
        return row[0] if row else None


class DbConverter(ChromeConverter):
    """Fills the canonical column buffers from a profiler database (ids = file_index << 40 + seq)."""

    def __init__(self, file_index: int, sink: Sink, db: _Db) -> None:
        super().__init__(file_index, sink)
        self.db = db
        self.device = self._device_id()
        self.os_pid = self._os_pid()
        self.api_types = db.enum("ENUM_API_TYPE", API_TYPES)
        self.unmatched_compute = 0  # COMPUTE_TASK_INFO rows of no TASK row with a start and end
        self.info: dict[str, Any] = {}  # its findings (store.quality), for the source's info
        for table, n in db.duplicates.items():
            vendor_finding(
                self.info,
                "duplicate_vendor_rows",
                n,
                f"{db.path}: table {table}: {n} exact duplicate rows, each read once",
                f"npu{self.device}",
            )

    def _device_id(self) -> int:
        """The rank's device: RANK_DEVICE_MAP, else NPU_INFO, else the first task's; 0 if none."""
        for table, col, sql in (
            ("RANK_DEVICE_MAP", "deviceId", "SELECT deviceId FROM RANK_DEVICE_MAP WHERE deviceId >= 0 LIMIT 1"),
            ("NPU_INFO", "id", "SELECT id FROM NPU_INFO WHERE id >= 0 ORDER BY id LIMIT 1"),
            ("TASK", "deviceId", "SELECT deviceId FROM TASK WHERE deviceId >= 0 LIMIT 1"),
        ):
            if col in self.db.columns.get(table, ()):
                v = self.db.scalar(sql)
                if v is not None:
                    return int(v)
        return 0

    def _os_pid(self) -> int | None:
        db = self.db
        if "globalPid" in db.columns.get("TASK", ()):
            v = db.scalar("SELECT globalPid FROM TASK WHERE globalPid IS NOT NULL LIMIT 1")
            if v is not None:
                return int(v)
        for table in ("CANN_API", "PYTORCH_API"):
            if "globalTid" in db.columns.get(table, ()):
                v = db.scalar(f"SELECT globalTid FROM {table} WHERE globalTid IS NOT NULL LIMIT 1")
                if v is not None:
                    return int(v) >> 32
        return None

    def convert(self, progress: Callable[[int], None] | None = None) -> None:
        for read in (self._pytorch_api, self._cann_api, self._tasks, self._comm_ops, self._comm_tasks):
            read()
        convert_db_memory(self.db, self)  # MEMORY_RECORD, NPU_MEM (APP), NPU_MODULE_MEM, OP_MEMORY
        # AICORE_FREQ, NPU_MEM, HBM, LLC, SOC_BANDWIDTH_LEVEL, ACC_PMU
        convert_db_counters(self.db, self, lambda lane, device: _lane_pid(self.os_pid, lane, device))
        kernels = self._kernel_list()
        convert_db_flows(self.db, self, self._flow_end, lambda ttype, listed: task_kind(ttype, listed, kernels))
        self.finish()
        if progress:
            progress(self.db.path.stat().st_size)

    # -- rows -----------------------------------------------------------------------------------
    def _add_slice(self, source: str, kind: str, name: str, ts: int, end: int, **values: Any) -> None:
        dur = self.checked_dur(name, ts, end - ts)  # the Kineto path's value checks
        if dur is None:
            return
        self.seq += 1
        self.counts[source] = self.counts.get(source, 0) + 1
        values.update(
            id=self.seq,
            rank=self.file_index,
            kind=kind,
            name=name,
            ts=ts,
            dur=dur,
            step=classify.step_number(name) if kind == "step" else None,
        )
        self.add_row("slices", values)

    def _add_comm(self, device: str, **values: Any) -> None:
        self.add_row("comm", dict(values, slice_id=self.seq, rank=self.file_index, device=device))

    # -- where records go: (device, pid, tid) as trace_view.json has them --------------------------
    def _framework_thread(self, gtid: Any) -> tuple[str, str | None, str | None]:
        return ("host", str(gtid >> 32), str(gtid & 0xFFFFFFFF)) if gtid is not None else ("host", None, None)

    def _cann_thread(self, gtid: Any) -> tuple[str, str, str | None]:
        pid = _lane_pid(gtid >> 32 if gtid is not None else self.os_pid, "CANN", self.device)
        return "host", pid, str(gtid & 0xFFFFFFFF) if gtid is not None else None

    def _task_stream(self, dev: Any, gpid: Any, stream: Any) -> tuple[str, str, str | None]:
        dev = self.device if dev is None else int(dev)
        pid = _lane_pid(gpid if gpid is not None else self.os_pid, "Ascend Hardware", dev)
        return f"npu{dev}", pid, None if stream is None else str(stream)

    def _hccl_group(self) -> tuple[str, str, str | None]:
        return f"npu{self.device}", _lane_pid(self.os_pid, "HCCL", self.device), "0"

    def _flow_end(self, source: str, row: tuple) -> tuple[str, str | None, str | None]:
        """(device, pid, tid) of a record of `source` from its row's thread or stream columns."""
        ends: dict[str, Callable[..., tuple[str, str | None, str | None]]] = {
            "PYTORCH_API": self._framework_thread,
            "CANN_API": self._cann_thread,
            "TASK": self._task_stream,
            "COMMUNICATION_OP": self._hccl_group,
        }
        return ends[source](*row)

    def _lane(self, pid: str, tid: str | None, process: str, labels: str, thread: str | None) -> None:
        if (pid, "") not in self.lanes:
            self.lanes[(pid, "")] = {"pid": pid, "tid": None, "process": process, "labels": labels}
        if tid is not None and (pid, tid) not in self.lanes:
            self.lanes[(pid, tid)] = {"pid": pid, "tid": tid, "thread": thread}

    # -- host: PYTORCH_API, CANN_API ----------------------------------------------------------
    def _pytorch_api(self) -> None:
        db = self.db
        if not db.has("PYTORCH_API", "startNs", "endNs", "name"):
            return
        c = lambda *n: db.col("p", "PYTORCH_API", *n)  # noqa: E731
        stacks = self._call_stacks()
        sql = (
            f"SELECT CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER), {c('globalTid')}, n.value, {c('type')}, "
            f"{c('sequenceNumber')}, {c('fwdThreadId')}, d.value, s.value, {c('callchainId')}, {c('connectionId')} "
            "FROM PYTORCH_API p LEFT JOIN STRING_IDS n ON n.id = p.name "
            f"LEFT JOIN STRING_IDS d ON d.id = {c('inputDtypes')} LEFT JOIN STRING_IDS s ON s.id = {c('inputShapes')}"
        )
        for start, end, gtid, name, typ, seq, fwd, dtypes, shapes, chain, conn in db.rows(sql):
            if start is None or end is None:
                continue
            name = name or ""
            level = self.api_types.get(typ, "op") if typ is not None else "op"
            category = PYTORCH_CATEGORY.get(level) or (name.split("@")[0].lower() if level == "queue" else level)
            shapes, dtypes = _dims_and_types(dtypes, shapes)
            _, pid, tid = self._framework_thread(gtid)
            args = self._op_args(level, seq, fwd, shapes, dtypes, stacks.get(chain), conn)
            self._add_slice(
                "PYTORCH_API",
                classify.kind_of(category, name, False),
                name,
                start,
                end,
                device="host",
                category=category,
                pid=pid,
                tid=tid,
                input_shapes=shapes,
                input_types=dtypes,
                args=args,
            )
            if pid is not None:
                self._lane(pid, tid, "Python", "CPU", f"Thread {tid}")

    @staticmethod
    def _op_args(level: str, seq: Any, fwd: Any, shapes: Any, dtypes: Any, stack: Any, conn: Any) -> str | None:
        if level == "queue":
            return _JSON.encode({"correlation_id": conn}).decode() if conn is not None else None
        if level != "op":
            return None
        args = {
            "Sequence number": seq,
            "Fwd thread id": fwd,
            "Input Dims": shapes,
            "Input type": dtypes,
            "Call stack": stack,
        }
        return _JSON.encode({k: v for k, v in args.items() if v is not None}).decode()

    def _call_stacks(self) -> dict[int, str]:
        """PYTORCH_CALLCHAINS as trace_view.json's `Call stack` strings (frames joined by ';\\r\\n')."""
        if not self.db.has("PYTORCH_CALLCHAINS", "id", "stack"):
            return {}
        depth = self.db.col("c", "PYTORCH_CALLCHAINS", "stackDepth")
        stacks: dict[int, list[str]] = {}
        for chain, frame in self.db.rows(
            f"SELECT c.id, s.value FROM PYTORCH_CALLCHAINS c JOIN STRING_IDS s ON s.id = c.stack ORDER BY c.id, {depth}"
        ):
            stacks.setdefault(chain, []).append(frame)
        return {k: ";\r\n".join(v) for k, v in stacks.items()}

    def _cann_api(self) -> None:
        db = self.db
        if not db.has("CANN_API", "startNs", "endNs", "name"):
            return
        c = lambda *n: db.col("a", "CANN_API", *n)  # noqa: E731
        sql = (
            f"SELECT a.startNs, a.endNs, {c('type', 'level')}, {c('globalTid')}, {c('connectionId')}, n.value "
            "FROM CANN_API a LEFT JOIN STRING_IDS n ON n.id = a.name"
        )
        for start, end, typ, gtid, conn, api in db.rows(sql):
            if start is None or end is None:
                continue
            level = self.api_types.get(typ, str(typ)) if typ is not None else None
            _, pid, tid = self._cann_thread(gtid)
            args = {"Thread Id": int(tid) if tid else None, "level": level, "id": api, "connection_id": conn}
            self._add_slice(
                "CANN_API",
                "api",
                f"{LEVEL_PREFIX.get(level or '', 'Api')}@{api or ''}",
                start,
                end,
                device="host",
                pid=pid,
                tid=tid,
                correlation=conn,
                args=_JSON.encode(args).decode(),
            )
            self._lane(pid, tid, "CANN", "CPU", f"Thread {tid}")

    # -- device: TASK, COMMUNICATION_OP, COMMUNICATION_TASK_INFO -------------------------------
    def _tasks(self) -> None:
        db = self.db
        if not db.has("TASK", "startNs", "endNs", "globalTaskId"):
            return
        t = lambda *n: db.col("t", "TASK", *n)  # noqa: E731
        compute = db.has("COMPUTE_TASK_INFO", "globalTaskId")
        if not compute and db.scalar("SELECT 1 FROM TASK LIMIT 1") is not None:
            # the compute-op list tells kernels from HCCL's own tasks: without it every
            # communication task would be read as compute (Computing 8,900 -> 99,002 µs)
            raise InputError(
                f"{db.path}: table COMPUTE_TASK_INFO is missing, and TASK holds device tasks: without it "
                "compute tasks cannot be told from communication and others (a damaged database?)"
            )
        kernels = self._kernel_list()
        k = lambda *n: db.col("k", "COMPUTE_TASK_INFO", *n) if compute else "NULL"  # noqa: E731
        join = (
            "LEFT JOIN COMPUTE_TASK_INFO k ON k.globalTaskId = t.globalTaskId "
            if compute
            else "LEFT JOIN (SELECT NULL AS globalTaskId) k ON 0 "
        )
        strings = "".join(
            f"LEFT JOIN STRING_IDS {a} ON {a}.id = {e} "
            for a, e in (
                ("tt", t("taskType")),
                ("kn", k("name")),
                ("kt", k("taskType")),
                ("ko", k("opType")),
                ("ks", k("inputShapes")),
                ("kd", k("inputDataTypes", "inputDtypes")),
                ("kf", k("inputFormats")),
                ("kos", k("outputShapes")),
                ("kod", k("outputDataTypes", "outputDtypes")),
                ("kof", k("outputFormats")),
            )
        )
        pmu = db.has("TASK_PMU_INFO", "globalTaskId", "name", "value")
        pmu_join = (
            "LEFT JOIN (SELECT p.globalTaskId, json_group_object(s.value, p.value) AS metrics FROM TASK_PMU_INFO p "
            "JOIN STRING_IDS s ON s.id = p.name GROUP BY p.globalTaskId) pm ON pm.globalTaskId = t.globalTaskId "
            if pmu
            else ""
        )
        sql = (
            f"SELECT t.startNs, t.endNs, {t('deviceId')}, {t('connectionId')}, {t('globalPid')}, tt.value, "
            f"{t('streamId')}, {t('taskId')}, {t('contextId')}, {t('modelId')}, k.globalTaskId IS NOT NULL, "
            f"{k('blockDim')}, {k('mixBlockDim')}, kf.value, kos.value, kod.value, kof.value, "
            f"{'pm.metrics' if pmu else 'NULL'}, "
            f"kn.value, kt.value, ko.value, ks.value, kd.value FROM TASK t {join}{strings}{pmu_join}"
        )
        listed = 0
        for start, end, dev, conn, gpid, ttype, stream, task, ctx, model, info, *more in db.rows(sql):
            if start is None or end is None:
                continue
            listed += bool(info)
            details, kernel = _kernel_details(*more[:7]), more[7:]
            self._task(
                start,
                end,
                self.device if dev is None else int(dev),
                conn,
                gpid,
                ttype or "",
                (stream, task, ctx, model),
                kernel if info else None,
                kernels,
                details,
            )
        if compute:  # globalTaskId is COMPUTE_TASK_INFO's key: each row describes one task at most
            self.unmatched_compute = (db.scalar("SELECT count(*) FROM COMPUTE_TASK_INFO") or 0) - listed

    def _kernel_list(self) -> bool:
        """Whether the database lists compute tasks (COMPUTE_TASK_INFO): then a task it leaves out
        is not a kernel (`task_kind`)."""
        return (
            self.db.has("COMPUTE_TASK_INFO", "globalTaskId")
            and self.db.scalar("SELECT 1 FROM COMPUTE_TASK_INFO LIMIT 1") is not None
        )

    def _task(
        self,
        start: int,
        end: int,
        dev: int,
        conn: Any,
        gpid: Any,
        ttype: str,
        ids: tuple,
        kernel: list | None,
        kernels: bool,
        details: dict[str, Any] | None = None,
    ) -> None:
        stream, task, ctx, model = ids
        name, core, op_type, shapes, dtypes = map(_unquoted, kernel) if kernel else (None, None, None, None, None)
        kind = task_kind(ttype, bool(kernel), kernels)
        # A compute-typed task the database's compute list leaves out is a container: of an FFTS+ or
        # mix kernel, or of an HCCL op (it encloses the listed kernel or the op's tasks, of its own
        # connection id). No report counts it, as no msprof report does: known, not unclassified.
        category = CONTAINER_TASK if kind == "other" and ttype and kernels else None
        _, pid, tid = self._task_stream(dev, gpid, stream)
        args = {
            "Model Id": model,
            "Task Type": ttype,
            "Physic Stream Id": stream,
            "Task Id": task,
            "Subtask Id": ctx,
            "connection_id": conn,
            **(details or {}),
        }
        self._add_slice(
            "TASK",
            kind,
            name or ttype,
            start,
            end,
            device=f"npu{dev}",
            category=category,
            pid=pid,
            tid=tid,
            stream=stream,
            correlation=conn,
            op_type=op_type,
            task_type=core or ttype or None,
            input_shapes=shapes,
            input_types=dtypes,
            args=_JSON.encode(args).decode(),
        )
        self._lane(pid, tid, "Ascend Hardware", f"NPU {dev}", f"Stream {tid}")

    def _comm_ops(self) -> None:
        db = self.db
        if not db.has("COMMUNICATION_OP", "startNs", "endNs", "opName"):
            return
        o = lambda *n: db.col("o", "COMMUNICATION_OP", *n)  # noqa: E731
        dtypes = db.enum("ENUM_HCCL_DATA_TYPE")
        sql = (
            f"SELECT o.startNs, o.endNs, {o('connectionId')}, n.value, g.value, {o('dataType')}, a.value, "
            f"CAST({o('count')} AS INTEGER), t.value, {o('relay')}, {o('retry')} FROM COMMUNICATION_OP o "
            f"LEFT JOIN STRING_IDS n ON n.id = o.opName LEFT JOIN STRING_IDS g ON g.id = {o('groupName')} "
            f"LEFT JOIN STRING_IDS a ON a.id = {o('algType')} LEFT JOIN STRING_IDS t ON t.id = {o('opType')}"
        )
        device, pid, _ = self._hccl_group()
        for start, end, conn, name, group, dtype, alg, count, op_type, relay, retry in db.rows(sql):
            if start is None or end is None:
                continue
            dtype_name = dtypes.get(dtype, None if dtype is None else str(dtype))
            args = {
                "connection_id": conn,
                "data_type": dtype_name,
                "alg_type": alg,
                "count": count,
                "relay": relay,
                "retry": retry,
                "group_name": group,
            }
            self._add_slice(
                "COMMUNICATION_OP",
                "comm",
                name or "",
                start,
                end,
                device=device,
                pid=pid,
                tid="0",
                correlation=conn,
                op_type=op_type,
                task_type="HCCL",
                args=_JSON.encode(args).decode(),
            )
            self._add_comm(device, collective=op_type, group_name=group, dtype=dtype_name, in_nelems=count)
        self._lane(pid, "0", "HCCL", f"NPU {self.device}", "Group 0 Communication")

    def _comm_tasks(self) -> None:
        db = self.db
        if not (db.has("COMMUNICATION_TASK_INFO", "globalTaskId", "name") and db.has("TASK", "globalTaskId")):
            return
        m = lambda *n: db.col("m", "COMMUNICATION_TASK_INFO", *n)  # noqa: E731
        enums = {e: db.enum(f"ENUM_HCCL_{e}_TYPE") for e in ("DATA", "TRANSPORT", "LINK")}
        sql = (
            f"SELECT t.startNs, t.endNs, {db.col('t', 'TASK', 'deviceId')}, n.value, tt.value, {m('planeId')}, "
            f"g.value, {m('notifyId')}, {m('srcRank')}, {m('dstRank')}, {m('transportType')}, {m('size')}, "
            f"{m('dataType')}, {m('linkType')}, {db.col('t', 'TASK', 'streamId')}, {db.col('t', 'TASK', 'taskId')}, "
            f"{db.col('t', 'TASK', 'contextId')} FROM COMMUNICATION_TASK_INFO m "
            "JOIN TASK t ON t.globalTaskId = m.globalTaskId LEFT JOIN STRING_IDS n ON n.id = m.name "
            f"LEFT JOIN STRING_IDS tt ON tt.id = {m('taskType')} LEFT JOIN STRING_IDS g ON g.id = {m('groupName')}"
        )
        for row in db.rows(sql):
            if row[0] is not None and row[1] is not None:
                self._comm_task(row, enums)

    def _comm_task(self, row: tuple, enums: dict[str, dict[int, str]]) -> None:
        start, end, dev, name, ttype, plane, group, notify, src, dst, transport, size, dtype, link, *ids = row
        dev = self.device if dev is None else int(dev)
        device, pid = f"npu{dev}", _lane_pid(self.os_pid, "HCCL", dev)
        tid = None if plane is None else str(int(plane) + 1)
        transport_name = enums["TRANSPORT"].get(transport, None if transport is None else str(transport))
        dtype_name = enums["DATA"].get(dtype, None if dtype is None else str(dtype))
        args = {
            "op name": name,
            "notify_id": None if notify is None else str(notify),
            "stream id": ids[0],
            "task id": ids[1],
            "context id": ids[2],
            "task type": ttype,
            "src rank": src,
            "dst rank": dst,
            "transport type": transport_name,
            "size(Byte)": size,
            "data type": dtype_name,
            "link type": enums["LINK"].get(link, None if link is None else str(link)),
        }
        self._add_slice(
            "COMMUNICATION_TASK_INFO",
            "comm_task",
            ttype or "",
            start,
            end,
            device=device,
            pid=pid,
            tid=tid,
            args=_JSON.encode(args).decode(),
        )
        self._add_comm(
            device,
            group_name=group,
            dtype=dtype_name,
            bytes=size,
            src_rank=_rank_or_none(src),
            dst_rank=_rank_or_none(dst),
            transport=transport_name,
        )
        self._lane(pid, tid, "HCCL", f"NPU {dev}", f"Plane {plane}")


def convert_db(path: Path, file_index: int, sink: Sink, progress: Callable[[int], None] | None = None) -> DbConverter:
    """Stream one profiler database into `sink`; return the converter (tables, counts, lanes)."""
    try:
        db = _Db(path)
    except sqlite3.Error as e:
        raise InputError(f"{path}: cannot open as an SQLite profiler database ({e})") from None
    try:
        db.load_schema()
        conv = DbConverter(file_index, sink, db)
        conv.convert(progress)
    except sqlite3.Error as e:
        raise InputError(f"{path}: cannot read as an SQLite profiler database ({e})") from None
    except (TypeError, ValueError, OverflowError) as e:  # SQLite keeps any value in any column: a BLOB time
        raise InputError(
            f"{path}: a value of the wrong type in a profiler table ({e}): "
            f"a corrupt database, or a schema version prof-engine does not know"
        ) from None
    finally:
        db.close()
    return conv
