"""The program's side of the writer: start the writer process, hand it each finished step.

What the training thread does per step is one `put` on a bounded queue. A feeder thread pickles
the hand-offs into the writer's stdin; when the program subscribed to ops, a listener thread reads
their batches from the writer's stdout and calls the subscribers (in that thread). Only if the
writer falls `QUEUE_ITEMS` hand-offs behind (here, and as many again in the writer) does a `put`
wait, so memory stays bounded; a warning says so once.

The writer is a child process (`python -m prof_engine.collect.writer_process`), not a thread: converting
a step's records is Python work that, in a thread, holds the GIL the training loop needs (about
doubling a small CPU loop's step time; see benchmarks/README.md).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import prof_engine
from prof_engine.collect.writer import QUEUE_ITEMS, READY, Close, OpRecord, Start, StepDone, TorchCycle
from prof_engine.errors import CollectError
from prof_engine.store.builder import SourceFile
from prof_engine.store.files import write_text
from prof_engine.store.live import PENDING, RECORDING, LiveRun
from prof_engine.store.manifest import MANIFEST

log = logging.getLogger("prof_engine")

_STOP = object()
# Descriptors the next writer process inherits: `prof-engine collect` gives the program (run.py) a
# pipe that only the writer must hold, so that its end-of-file tells the CLI the run is written.
inherited_fds: tuple[int, ...] = ()


class Handoff:
    """A running writer process for one run; `put` hand-offs, `close` to finish the run."""

    def __init__(
        self,
        live: LiveRun,
        source: SourceFile,
        *,
        own_steps: bool,
        subscribers: list[Callable[[list[OpRecord]], Any]],
        keep_traces: bool = False,
    ) -> None:
        self.subscribers = subscribers
        self.run = live.out
        self.writer_died: str | None = None  # how, once `close` found the writer dead (see `_writer_died`)
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_ITEMS)
        self._warned_full = False
        self._broken = False
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(Path(prof_engine.__file__).resolve().parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "prof_engine.collect.writer_process"],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=inherited_fds,
            )
        except OSError as e:
            raise CollectError(f"cannot start the collector's writer process ({e.strerror or e})") from None
        self._queue.put(Start(live, source, own_steps, bool(subscribers), keep_traces))
        self._feeder = threading.Thread(target=self._feed, name="prof_engine-handoff", daemon=True)
        self._feeder.start()
        self._wait_ready()
        self._listener = None
        if subscribers:
            self._listener = threading.Thread(target=self._listen, name="prof_engine-ops", daemon=True)
            self._listener.start()

    def _wait_ready(self) -> None:
        """Block until the writer has imported what it needs (~0.5 s), so it does not do that while
        the program's first recorded steps run."""
        try:
            ready = pickle.load(self._out)
        except (EOFError, OSError, pickle.UnpicklingError):
            ready = None
        if ready != READY:
            self._queue.put(_STOP)
            self._proc.wait()
            raise CollectError(
                f"the collector's writer process failed to start (status {self._proc.returncode}); its error is above"
            )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def put(self, item: StepDone | TorchCycle | dict) -> None:
        """Hand over an item; waits only when the writer is far behind."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            if not self._warned_full:
                self._warned_full = True
                log.warning(
                    "prof_engine: the collector's writer is %d hand-offs behind; the program waits for it "
                    "(record fewer steps, or a lower level, to avoid this)",
                    QUEUE_ITEMS,
                )
            self._queue.put(item)

    @property
    def _out(self) -> IO[bytes]:
        assert self._proc.stdout is not None  # started with stdout=PIPE
        return self._proc.stdout

    def _feed(self) -> None:
        pipe = self._proc.stdin
        assert pipe is not None  # started with stdin=PIPE
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            if self._broken:
                continue
            try:
                pickle.dump(item, pipe, protocol=pickle.HIGHEST_PROTOCOL)
                pipe.flush()
            except (BrokenPipeError, OSError) as e:
                self._broken = True
                log.error("prof_engine: the collector's writer process ended early (%s); this run stops growing", e)
        try:
            pipe.close()
        except OSError:
            pass

    def _listen(self) -> None:
        while True:
            try:
                rows = pickle.load(self._out)
            except (EOFError, OSError, pickle.UnpicklingError):
                return
            ops = [OpRecord._make(r) for r in rows]
            for fn in self.subscribers:
                try:
                    fn(ops)
                except Exception as e:
                    log.error("prof_engine: subscriber %r failed on a batch of %d ops: %s", fn, len(ops), e)

    def close(self, metadata: dict[str, Any]) -> None:
        """Hand over the end of the run and wait until the writer has written all of it."""
        self._queue.put(Close(metadata))
        self._queue.put(_STOP)
        self._feeder.join()
        self._proc.wait()
        if self._listener is not None:
            self._listener.join()
        self._out.close()
        if self._proc.returncode:
            self._writer_died(self._proc.returncode)

    def _writer_died(self, code: int) -> None:
        """The writer ended without closing the run (killed, or crashed): mark the run `interrupted`
        (it opens with every step published; its manifest is recomputed from the files), remove the
        batch it was writing (`.pending/`, which readers ignore), and say so in one line."""
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        self.writer_died = how
        path = self.run / MANIFEST
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            if manifest.get("state") == RECORDING:
                manifest["state"] = "interrupted"
                write_text(path, json.dumps(manifest, indent=1, default=str))
            state = manifest.get("state")
        except (OSError, ValueError) as e:
            state = f"unreadable ({e})"
        shutil.rmtree(self.run / PENDING, ignore_errors=True)
        log.error(
            "prof_engine: the collector's writer process %s before the run was complete: %s keeps the steps it had "
            "published (state %s); the batch it was writing is lost",
            how,
            self.run,
            state,
        )


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
