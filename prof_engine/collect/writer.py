"""The collector's writer: hand-offs in, partition files and subscription batches out.

It runs in a process of its own (`python -m prof_engine.collect.writer_process`, started by
`handoff`),
so converting and writing never compete with the program for the GIL. It reads the hand-offs
(pickled, on stdin): a finished step's markers and samples (`StepDone`), a finished torch cycle
(`TorchCycle`, a Kineto JSON file), metadata, and at the end `Close`. Whatever has arrived is one
batch: converted (torch cycles by the Kineto importer `prof-engine import` uses, markers and
samples by `convert`), published into the live run, its ops sent back on stdout when the program
subscribed. When it falls behind, batches grow; its queue is bounded, so a program far ahead waits.

If the program dies (kill -9) the writer reads end-of-file: it publishes every whole step it was
handed (a recorded step's markers wait for its torch cycle: see `BatchWriter.write`), marks the
run `interrupted` and exits. Nothing it does may end the program: a failed batch is
logged (stderr, shared with the program) and dropped.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from prof_engine.collect.convert import MARKER_FILE, Assembler, StepWindow
from prof_engine.store.builder import SourceFile, StagingSink
from prof_engine.store.files import make_dirs
from prof_engine.store.live import LiveRun

log = logging.getLogger("prof_engine")

QUEUE_ITEMS = 64
BATCH_ITEMS = 64
PUBLISH_INTERVAL_S = 0.5  # at most two batches a second; more items wait for the next
INTERRUPTED = "interrupted"
READY = ["ready"]


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
class Start:
    """The first hand-off: the run (created by the program, so its errors surface there) and who writes."""

    live: LiveRun
    source: SourceFile
    own_steps: bool
    subscribed: bool
    keep_traces: bool = False


@dataclass
class StepDone:
    window: StepWindow
    events: list[tuple]
    samples: list[tuple[int, dict[str, float]]]


@dataclass
class TorchCycle:
    path: Path  # the cycle as Kineto JSON, removed once converted


@dataclass
class Close:
    metadata: dict[str, Any] = field(default_factory=dict)


class BatchWriter:
    """Converts and publishes batches of hand-offs into the live run."""

    def __init__(self, start: Start) -> None:
        self.live = start.live
        self.source = start.source
        self.subscribed = start.subscribed
        self.keep_traces = start.keep_traces
        self.assembler = Assembler(start.own_steps)
        self._next_file = MARKER_FILE + 1
        self._held: list[StepDone | TorchCycle] = []

    def write(self, items: list[StepDone | TorchCycle], final: bool = False) -> list[tuple] | None:
        """Publish one batch; return its ops (as OpRecord tuples) when the program subscribed.

        Where torch cycles bring the steps' records (not `own_steps`), a recorded step's markers
        wait, with whatever comes after them, for the cycle that follows (`held`): published
        together, a step goes out whole, and the step in flight when the program dies (its cycle
        never handed over) is left out rather than published as markers without their step.
        `final`: no cycle is coming (the program stopped in order): publish what waits too."""
        items, self._held = [*self._held, *items], []
        if not self.assembler.own_steps and not final:
            after = max((i + 1 for i, it in enumerate(items) if isinstance(it, TorchCycle)), default=0)
            wait = next(
                (
                    i
                    for i in range(after, len(items))
                    if isinstance(waiting := items[i], StepDone) and waiting.window.recorded
                ),
                len(items),
            )
            items, self._held = items[:wait], items[wait:]
        if not items:
            return None
        return self._publish(items)

    def held_steps(self) -> int:
        """Recorded steps waiting for their torch cycle."""
        return sum(1 for it in self._held if isinstance(it, StepDone) and it.window.recorded)

    def _publish(self, items: list[StepDone | TorchCycle]) -> list[tuple] | None:
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
                return None
            ops = self.live.publish(staging, files, _OPS_QUERY if self.subscribed else None)
        except BaseException:
            sink.discard()
            self.assembler.tables.clear()
            shutil.rmtree(staging.parent, ignore_errors=True)
            raise
        return list(zip(*(c.to_pylist() for c in ops.columns))) if ops is not None and ops.num_rows else None

    def _convert_cycle(self, item: TorchCycle, sink: StagingSink) -> tuple[int, int, int]:
        from prof_engine.importers import kineto

        index, self._next_file = self._next_file, self._next_file + 1
        try:
            info = kineto.convert(item.path, index, sink, lambda n: None)  # as an import converts a trace
        finally:
            if self.keep_traces and item.path.exists():
                make_dirs(self.live.out / "traces")
                os.replace(item.path, self.live.out / "traces" / item.path.name)
            else:
                item.path.unlink(missing_ok=True)
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
        if "distributedInfo" in info.info:
            src.info["distributedInfo"] = info.info["distributedInfo"]
        self.live.set_sources([asdict(src)])

    def metadata(self, metadata: dict[str, Any]) -> None:
        self.live.manifest["metadata"].update(metadata)

    def close(self, metadata: dict[str, Any] | None, interrupted: bool = False) -> None:
        if interrupted and self.held_steps():
            log.info(
                "prof_engine: the program died before handing over the torch records of %d step(s): they are left out",
                self.held_steps(),
            )
        left = self.assembler.open_ranges()
        if left and not interrupted:
            log.info("prof_engine: %d marker range(s) still open at stop were left out", left)
        self.live.set_sources([asdict(self.source)])
        if interrupted:
            self.live.manifest["state"] = INTERRUPTED
            self.live.flush_manifest()
        else:
            self.live.close(metadata)


def _reader(stream: BinaryIO, items: queue.Queue) -> None:
    """Unpickle hand-offs into `items` (bounded: a writer far behind holds the program back)."""
    while True:
        try:
            items.put(pickle.load(stream))
        except EOFError:
            items.put(None)  # the program is gone (or closed the pipe after Close)
            return
        except Exception as e:  # a torn hand-off from a dying program
            log.error("prof_engine: the collector's writer cannot read a hand-off: %s", e)
            items.put(None)
            return


def serve(stream: BinaryIO, ops_out: BinaryIO) -> None:
    """The writer process's loop: batches of hand-offs until Close (or the program's end)."""
    items: queue.Queue = queue.Queue(maxsize=QUEUE_ITEMS)
    threading.Thread(target=_reader, args=(stream, items), daemon=True).start()
    start = items.get()
    if not isinstance(start, Start):
        return
    writer = BatchWriter(start)
    _send(ops_out, READY)  # the program's start() waits for this: its first steps run beside a writer that is up
    published = 0.0
    while True:
        batch = [items.get()]
        deadline = published + PUBLISH_INTERVAL_S  # a batch costs ~0.1 s of SQL whatever its size
        while len(batch) < BATCH_ITEMS and isinstance(batch[-1], (StepDone, TorchCycle)):
            try:
                batch.append(items.get(timeout=max(deadline - time.monotonic(), 0)))
            except queue.Empty:
                break
        published = time.monotonic()
        work = [i for i in batch if isinstance(i, (StepDone, TorchCycle))]
        for meta in (i for i in batch if isinstance(i, dict)):
            writer.metadata(meta)
        if work or isinstance(batch[-1], Close):
            _guarded(lambda: _send(ops_out, writer.write(work, final=isinstance(batch[-1], Close))))  # noqa: B023 - called at once
        if batch[-1] is None or isinstance(batch[-1], Close):
            end = batch[-1]
            _guarded(lambda: writer.close(end.metadata if end else None, interrupted=end is None))  # noqa: B023 - called at once
            return


def _send(ops_out: BinaryIO, ops: list[tuple] | list[str] | None) -> None:
    if ops:
        pickle.dump(ops, ops_out, protocol=pickle.HIGHEST_PROTOCOL)
        ops_out.flush()


def _guarded(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except BrokenPipeError:
        pass  # the program stopped listening for ops; the run is still written
    except Exception as e:  # a failed batch is dropped, the run goes on
        log.error("prof_engine: the collector's writer lost a batch: %s: %s", type(e).__name__, e)


def main() -> None:
    """Entry of the writer process (`python -m prof_engine.collect.writer_process`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the program, which stops us in order
    try:
        os.nice(5)  # the program being profiled comes first
    except OSError:
        pass
    logging.basicConfig(format="%(message)s", level=logging.WARNING, stream=sys.stderr)
    serve(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the stdin reader thread may still block on a read: no interpreter shutdown around it
