"""MindSpore host CPU ops (the CPU profiler's `cpu_op_*` files) → `host_op` slices with their op type.

Where they are: MindSpore ≥ 2.5 writes them to `<run>_ascend_ms/FRAMEWORK/` beside
`ASCEND_PROFILER_OUTPUT/trace_view.json` (a CPU-only run has no other data; a heterogeneous
Ascend run has them beside its device lanes); MindSpore ≤ 2.4 wrote them flat into its output
folder (`profiler/`). Per rank (the file name's number):

* `cpu_op_execute_timestamp_<rank>.txt`: one line per op, `<full name>;<label>;<start>,<dur>[,<tid>] …`
  with one `start,dur[,tid]` per execution: start in ns, duration in ms printed with 6
  significant digits (so ops of 1 ms and more carry µs, not ns), tid the executing thread (older
  files: two fields, label `host_cpu_ops`). 2.7 writes starts on the Unix clock; the older CPU
  profiler read the host's monotonic clock, which no file anchors: starts before 2000 are
  imported as they are, with the finding `unanchored_clock`.
* `cpu_op_type_info_<rank>.csv` / `cpu_op_detail_info_<rank>.csv`: the vendor's sums per op type
  and per op (count and total ms, 6 significant digits): not imported, they are what
  op_statistic and key_averages reproduce (tests/test_mindspore_cpu.py).
* `cpu_framework_<rank>.txt`: input shapes keyed by the short op name (`MatMul-op0`), which
  several ops share: not imported (no unambiguous join).

An op's type is MindSpore's own rule (cpu_data_saver.cc): its name's last `/` segment up to the
last `-` (`…/Grad_MatMul/MatMul-op1` → `MatMul`).

trace_view.json's `CPU OP` lane (`cat` empty, `args.type` the label) holds the same executions,
but MindSpore converts its ts through the binary float 0.001 (≈ +37 ns at 2026's epoch): where
the timestamp file is there, the ops come from it, exactly, and the lane is left out. The `Scope
Layer` lane is derived by the vendor from the op names (spans of each scope level) and is left
out like Overlap Analysis: the full names stay on every op.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

from prof_engine.errors import InputError
from prof_engine.importers.chrome import ChromeConverter
from prof_engine.importers.formats import Format
from prof_engine.store.builder import SourceFile
from prof_engine.store.quality import add_finding

TIMESTAMP = re.compile(r"cpu_op_execute_timestamp_(\d+)\.txt")
FRAMEWORK_DIR = "FRAMEWORK"
CPU_LANE = "CPU OP"  # trace_view.json process names (MindSpore ≥ 2.5)
SCOPE_LANE = "Scope Layer"
CATEGORY = "HostCpuOps"  # the slices' category: the vendor's label for these records
_MS = Decimal(1_000_000)  # ns per ms
_YEAR_2000_NS = 946_684_800 * 10**9  # earlier starts are on a monotonic clock, not the Unix one


class CpuOp(NamedTuple):
    name: str
    ts: int  # ns
    dur: int  # ns
    tid: str


def op_type(full_name: str) -> str:
    """MindSpore's op type of an op's full name: its last path segment up to the last `-`."""
    seg = full_name[full_name.rfind("/") + 1 :]
    cut = seg.rfind("-")
    return seg[:cut] if cut > 0 else seg


def timestamp_file(rank_dir: Path) -> Path | None:
    """The `FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt` of a `*_ascend_ms` rank directory, if any."""
    found = sorted(
        p
        for p in (rank_dir / FRAMEWORK_DIR).glob("cpu_op_execute_timestamp_*.txt")
        if TIMESTAMP.fullmatch(p.name) and p.is_file()
    )
    return found[0] if found else None


def rank_of(path: Path) -> int | None:
    """Rank in a `cpu_op_*_<rank>` file name."""
    m = TIMESTAMP.fullmatch(path.name)
    return int(m.group(1)) if m else None


def units(path: Path) -> list[Path]:
    """The timestamp files at or under `path`, one per rank: a MindSpore ≤ 2.4 CPU profiler folder
    (flat `cpu_op_*` files), or `*_ascend_ms` directories without ASCEND_PROFILER_OUTPUT."""
    return sorted(
        p
        for p in path.rglob("cpu_op_execute_timestamp_*.txt")
        if p.is_file()
        and TIMESTAMP.fullmatch(p.name)
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def read_ops(path: Path) -> Iterator[CpuOp]:
    """Each execution in a timestamp file; a line or time that does not parse names the file and line."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split(";")
            if len(parts) < 3 or not parts[0]:
                raise InputError(
                    f"{path}:{n}: not a MindSpore cpu_op_execute_timestamp line "
                    "(<op name>;<label>;<start>,<duration ms>[,<tid>] ...)"
                )
            for item in parts[-1].split():
                fields = item.split(",")
                try:
                    if len(fields) not in (2, 3):
                        raise ValueError
                    start, dur = int(fields[0]), Decimal(fields[1])
                    tid = str(int(fields[2])) if len(fields) == 3 else "0"
                    dur_ns = int((dur * _MS).to_integral_value(ROUND_HALF_EVEN))
                except (ValueError, InvalidOperation):
                    raise InputError(
                        f"{path}:{n}: {item!r} is not <start ns>,<duration ms>[,<tid>] "
                        "(corrupt or not a profiler's output?)"
                    ) from None
                if not 0 <= start < 2**62 or not 0 <= dur_ns < 86_400 * 10**9:
                    raise InputError(
                        f"{path}:{n}: {item!r}: start or duration out of range (corrupt or not a profiler's output?)"
                    )
                yield CpuOp(parts[0], start, dur_ns, tid)


def add_ops(conv: ChromeConverter, path: Path, info: dict) -> int:
    """Append the ops of timestamp file `path` to converter `conv` as host_op slices, on the pid of
    the trace's `CPU OP` lane where it has one; return how many. Starts before 2000 are on a
    monotonic clock: recorded in `info` as a finding."""
    process = getattr(conv, "process", {})  # an AscendConverter's lane names by pid
    pid = next((p for p, lane in process.items() if lane == CPU_LANE), CPU_LANE)
    n = early = 0
    for op in read_ops(path):
        conv.seq += 1
        n += 1
        early += op.ts < _YEAR_2000_NS
        conv.add_row(
            "slices",
            {
                "id": conv.seq,
                "rank": conv.file_index,
                "device": "host",
                "step": None,
                "kind": "host_op",
                "name": op.name,
                "category": CATEGORY,
                "op_type": op_type(op.name),
                "ts": op.ts,
                "dur": op.dur,
                "pid": pid,
                "tid": op.tid,
            },
        )
        if (pid, op.tid) not in conv.lanes:
            conv.lanes.setdefault((pid, ""), {"pid": pid, "tid": None, "process": CPU_LANE})
            conv.lanes[(pid, op.tid)] = {"pid": pid, "tid": op.tid, "thread": f"Thread {op.tid}"}
    add_finding(
        info,
        "unanchored_clock",
        early,
        f"{path.name}: op starts on the host's monotonic clock "
        "(MindSpore <= 2.4); no file anchors it to the Unix clock",
        device="host",
    )
    return n


def convert(path: Path, index: int, sink, progress: Callable[[int], None]) -> SourceFile:
    """One rank of a CPU profiler folder without trace_view.json: its timestamp file `path`."""
    conv = ChromeConverter(index, sink)
    info: dict = {}
    n = add_ops(conv, path, info)
    conv.finish()
    if not n:
        raise InputError(f"{path}: no CPU op executions in this MindSpore timestamp file")
    progress(path.stat().st_size)
    rank = rank_of(path)
    return SourceFile(
        path=str(path),
        format="mindspore_cpu",
        rank=rank if rank is not None else index,
        index=index,
        bytes=path.stat().st_size,
        events=n,
        lanes=list(conv.lanes.values()),
        info={"rank_from": "file name" if rank is not None else "file order", **info},
    )


# -- the importer protocol ---------------------------------------------------------------------
# a timestamp file given by name is this format's whatever it holds (its errors are the reader's)
FORMAT = Format("mindspore_cpu", "ascend", convert, units=units, files=TIMESTAMP)
