"""The collector's writer thread: hand-offs in, partition files and subscription batches out.

The training thread only puts items on a bounded queue: a finished step's markers and samples
(`StepDone`), a finished torch cycle (`TorchCycle`). The writer takes whatever is queued as one
batch, converts it (torch cycles through the Kineto importer `prof-engine import` uses, markers
and samples through `convert`), publishes it into the live run and hands the batch's ops to the
subscribers. When it falls behind, batches grow instead of the queue; when the queue is full the
training thread waits (memory stays bounded) and a warning says so once.

Nothing the writer does may end the program: an error is logged and that batch is dropped.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from prof_engine.collect.convert import MARKER_FILE, Assembler, StepWindow
from prof_engine.store import LiveRun, SourceFile, StagingSink

log = logging.getLogger("prof_engine")

QUEUE_ITEMS = 64
BATCH_ITEMS = 32


class OpRecord(NamedTuple):
    """One op as the subscription delivers it. Times in ns since the epoch, durations in ns."""

    name: str
    type: str | None  # the source's op type, else its category (cpu_op, kernel, ...)
    start_ns: int
    end_ns: int
    dur_ns: int
    device: str
    step: int | None
    rank: int
    kind: str  # host_op, kernel, comm, memcpy, memset


_OPS_QUERY = """SELECT name, coalesce(op_type, category), ts, ts + dur, dur, device, step, rank, kind
FROM final_slices WHERE kind IN ('host_op', 'kernel', 'comm', 'memcpy', 'memset') ORDER BY ts, id"""


@dataclass
class StepDone:
    window: StepWindow
    events: list[tuple]
    samples: list[tuple[int, dict[str, float]]]


@dataclass
class TorchCycle:
    path: Path  # the cycle as Kineto JSON, removed once converted


@dataclass
class _Close:
    metadata: dict[str, Any] = field(default_factory=dict)


class Writer:
    """Owns the live run and the thread that fills it."""

    def __init__(self, live: LiveRun, source: SourceFile, *, own_steps: bool,
                 subscribers: list[Callable[[list[OpRecord]], None]]) -> None:
        self.live = live
        self.source = source
        self.subscribers = subscribers
        self.assembler = Assembler(own_steps)
        self.batches = 0
        self.errors = 0
        self._next_file = MARKER_FILE + 1
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_ITEMS)
        live.set_sources([asdict(source)])
        live.flush_manifest()
        self._warned_full = False
        self._thread = threading.Thread(target=self._run, name="prof_engine-writer", daemon=True)
        self._thread.start()

    def put(self, item: StepDone | TorchCycle) -> None:
        """Queue an item; waits only when the writer is QUEUE_ITEMS items behind."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            if not self._warned_full:
                self._warned_full = True
                log.warning("prof_engine: the writer is %d hand-offs behind; training waits for it "
                            "(record fewer steps or a lower level to avoid this)", QUEUE_ITEMS)
            self._queue.put(item)

    def close(self, metadata: dict[str, Any], timeout: float | None = None) -> None:
        """Write everything queued, mark the run complete, end the thread."""
        self._queue.put(_Close(metadata))
        self._thread.join(timeout)

    def _run(self) -> None:
        done = False
        while not done:
            items = [self._queue.get()]
            while len(items) < BATCH_ITEMS and not isinstance(items[-1], _Close):
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            close = items[-1] if isinstance(items[-1], _Close) else None
            work = [i for i in items if not isinstance(i, _Close)]
            if work:
                self._guarded(self._write, work)
            if close is not None:
                self._guarded(self._close, close)
                done = True

    def _guarded(self, fn: Callable[[Any], None], arg: Any) -> None:
        try:
            fn(arg)
        except Exception as e:  # the program being profiled must never die of its profiler
            self.errors += 1
            log.error("prof_engine: the collector's writer lost a batch: %s: %s", type(e).__name__, e)

    def _write(self, items: list[StepDone | TorchCycle]) -> None:
        staging = self.live.staging_dir()
        sink = StagingSink(staging)
        files = [(MARKER_FILE, self.source.rank, 0)]
        try:
            for item in items:
                if isinstance(item, StepDone):
                    self.assembler.step_done(item.window, item.events, item.samples)
                else:
                    files.append(self._convert_cycle(item, sink))
            rows = self.assembler.tables.flush(sink)
            sink.close()
            if not rows and len(files) == 1:  # idle steps: markers only fed the range stacks
                shutil.rmtree(staging.parent, ignore_errors=True)
                return
            ops = self.live.publish(staging, files, _OPS_QUERY if self.subscribers else None)
        except BaseException:
            sink.discard()
            self.assembler.tables.clear()
            shutil.rmtree(staging.parent, ignore_errors=True)
            raise
        self.batches += 1
        if ops is not None and ops.num_rows:
            self._deliver([OpRecord._make(r) for r in zip(*(c.to_pylist() for c in ops.columns))])

    def _convert_cycle(self, item: TorchCycle, sink: StagingSink) -> tuple[int, int, int]:
        from prof_engine.importers import _source_info
        from prof_engine.importers.chrome import convert_file

        index, self._next_file = self._next_file, self._next_file + 1
        path = item.path
        try:
            reader, conv = convert_file(path, index, sink)
            info = _source_info(path, index, reader.header, conv, path.stat().st_size)
        finally:
            path.unlink(missing_ok=True)
        self._learn(info)
        return index, self.source.rank, info.offset_ns

    def _learn(self, info: SourceFile) -> None:
        """Fold what a torch cycle says about the machine into the run's one source entry."""
        src = self.source
        src.events += info.events
        src.bytes += info.bytes
        if info.version and not src.version:
            src.version = f"kineto {info.version}"
        src.devices = src.devices or info.devices
        lanes = {(lane.get("pid"), lane.get("tid")): lane for lane in src.lanes}
        lanes.update({(lane.get("pid"), lane.get("tid")): lane for lane in info.lanes})
        src.lanes = list(lanes.values())
        for key in ("distributedInfo",):
            if key in info.info:
                src.info[key] = info.info[key]
        self.live.set_sources([asdict(src)])

    def _deliver(self, ops: list[OpRecord]) -> None:
        for fn in self.subscribers:
            try:
                fn(ops)
            except Exception as e:
                log.error("prof_engine: subscriber %r failed on a batch of %d ops: %s", fn, len(ops), e)

    def _close(self, close: _Close) -> None:
        left = self.assembler.open_ranges()
        if left:
            log.info("prof_engine: %d marker range(s) still open at stop were left out", left)
        self.live.set_sources([asdict(self.source)])
        self.live.close(close.metadata)
