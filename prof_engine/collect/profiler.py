"""`prof_engine.Profiler`: record a running program into a run store, step by step.

    with prof_engine.Profiler("run", schedule=prof_engine.schedule(wait=1, warmup=1, active=3)) as prof:
        for batch in data:
            train_step(batch)
            prof.step()
    prof_engine.open("run").view("op_statistic")

The shape is MindSpore's / torch.profiler's (start/stop/step, schedule, on_trace_ready, levels,
activities, context manager). Underneath, three sources feed one writer process (`writer`):
torch.profiler cycles (`torch_source`), the markers of `mstx`, and system samples (`sampling`).
The run directory exists from `start()` on and grows by one batch of partitions per finished
step; `stop()` waits for the writer and marks the run complete.

The writer is a process of its own (`handoff`, `writer`): converting records is Python work that,
in a thread, would hold the GIL the training loop needs. What a kill -9 of the program loses: the
step in flight (its markers and samples, and its torch events with `flush="step"`, the default
without CUDA; with `flush="cycle"` the torch events of the whole cycle in flight), and hand-offs
still queued in the program (normally none). The writer outlives the program: it publishes every
step it was handed and marks the run `interrupted`. Were the writer killed too, what it had
published stays readable: the run opens with `prof_engine.open`, its manifest recomputed from the
files.

Wrong calls (stop before start, step without a schedule, start twice) log a message on the
`prof_engine` logger and do nothing, as MindSpore's Profiler does; a Profiler still running when
the program exits is stopped, with a warning, so its run is complete.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prof_engine.collect import mstx
from prof_engine.collect.config import (
    ProfilerActivity,
    ProfilerLevel,
    Settings,
    activities_of,
    from_env,
    level_of,
    load,
)
from prof_engine.collect.convert import StepWindow
from prof_engine.collect.handoff import Handoff
from prof_engine.collect.schedule import ProfilerAction, StepSchedule, as_action
from prof_engine.collect.writer import OpRecord, StepDone, TorchCycle
from prof_engine.store.builder import SourceFile
from prof_engine.store.files import make_dirs
from prof_engine.store.live import COMPLETE, PENDING, LiveRun, set_aside

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger("prof_engine")

METADATA_LIMIT = 1 << 20  # bytes of add_metadata / add_metadata_json values per run
SOURCE_FORMAT = "collector"
_running: Profiler | None = None  # torch's profiler and the markers are per process: one Profiler at a time
_outputs_used: dict[tuple[Path, int | None], int] = {}  # (output, rank) -> Profilers that recorded it


class Profiler:
    """Records the program into the run directory `output_path` (see the module docstring).

    activities: ProfilerActivity.CPU / CUDA (default: CPU, and CUDA when a GPU is present).
    schedule: `prof_engine.schedule(...)`; None records from start() to stop() as one cycle.
    on_trace_ready: called with the run's path once stop() has written it (see `export_summaries`).
    profiler_level: ProfilerLevel (default Level1); profile_memory / with_stack / record_shapes
    override what the level turns on. sampling_interval_ms: system sampling period (default 100).
    on_op: called (in a thread of the collector) with each batch of ops (`OpRecord`s) once written.
    flush: "step" (torch events written per step) or "cycle" (per schedule cycle; default with CUDA).
    keep_traces: also keep each torch cycle's Kineto JSON, as `<run>/traces/*.json` (for TensorBoard,
    Perfetto or `prof-engine import`).
    Settings not given here come from the file PROF_ENGINE_CONFIG names, if any (`config`).
    An existing run at `output_path` (the script's last run) is replaced once this one is complete
    (`force` changes nothing: kept for older callers); anything else there is refused (RunError).
    """

    def __init__(
        self,
        output_path: str | os.PathLike | None = None,
        *,
        activities: Sequence[Any] | None = None,
        schedule: StepSchedule | None = None,
        on_trace_ready: Callable[[Path], Any] | None = None,
        start_profile: bool = True,
        profiler_level: Any = None,
        profile_memory: bool | None = None,
        with_stack: bool | None = None,
        record_shapes: bool | None = None,
        sampling_interval_ms: float | None = None,
        on_op: Callable[[list[OpRecord]], Any] | None = None,
        flush: str | None = None,
        keep_traces: bool | None = None,
        force: bool = False,
        config: str | os.PathLike | None = None,
    ) -> None:
        code = Settings(
            output=os.fspath(output_path) if output_path is not None else None,
            activities=activities_of(activities, "Profiler") if activities is not None else None,
            level=level_of(profiler_level, "Profiler") if profiler_level is not None else None,
            schedule=schedule,
            profile_memory=profile_memory,
            with_stack=with_stack,
            record_shapes=record_shapes,
            sampling_interval_ms=sampling_interval_ms,
            flush=flush,
            keep_traces=keep_traces,
        )
        self.settings = code.merged_over(load(config) if config is not None else from_env())
        self.on_trace_ready = on_trace_ready
        self.force = force
        self.run_path: Path | None = None
        self.analysis: subprocess.Popen[bytes] | None = None  # the process of an `analyse(mode="async")`
        self.step_num = 0
        self._subscribers: list[Callable[[list[OpRecord]], Any]] = [on_op] if on_op else []
        self._metadata: dict[str, Any] = {}
        self._state = "idle"
        self._writer: Handoff | None = None
        self._previous: tuple[Path, str] | None = None  # the run this one replaces, set aside until it is complete
        self._torch = None
        self._sampler = None
        self._action = ProfilerAction.RECORD
        self._step_start = 0
        self._warned_step = False
        self._warned_off = False
        if start_profile:
            self.start()

    @property
    def recording(self) -> bool:
        """True between a start() that began a run and its stop()."""
        return self._state == "running"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start recording (creates the run directory)."""
        global _running
        if not self.settings.switch:
            if not self._warned_off:
                self._warned_off = True
                log.info("prof_engine: profiling is switched off (PROF_ENGINE_CONFIG); Profiler.start() does nothing")
            return
        if self._state == "running":
            log.error("prof_engine: Profiler.start() called twice; it is already recording into %s", self.run_path)
            return
        if self._state == "stopped":
            log.error(
                "prof_engine: Profiler.start() after stop(): this Profiler finished its run %s; "
                "create a new Profiler to record again",
                self.run_path,
            )
            return
        if _running is not None:
            log.error("prof_engine: another Profiler is already recording (into %s); stop it first", _running.run_path)
            return
        self._open_run()
        _running = self
        self._state = "running"
        self._action = self._scheduled(0)
        mstx.take()  # events from before this run are not ours
        mstx.enable(True)
        if self._sampler is not None:
            self._sampler.start()
        self._step_start = time.time_ns()
        if self._torch is not None:
            self._torch.start()

    def _open_run(self) -> None:
        from prof_engine.collect.sources import open_sources

        rank, world = _rank_and_world()
        output = Path(self.settings.output or f"prof_run_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}")
        output = _next_output(output.absolute(), rank if world > 1 else None)
        self.run_path = output / f"rank{rank}" if world > 1 else output
        # A re-run of the script records into the same path: the last run there is set aside (a
        # rename), not deleted, until this one is complete (`_drop_previous`); anything else there
        # is refused, untouched.
        self._previous = set_aside(self.run_path)
        try:
            live = LiveRun(
                self.run_path, sources=[], source_format=SOURCE_FORMAT, force=self.force, metadata=self._metadata
            )
        except BaseException:
            if self._previous is not None and not self.run_path.exists():
                os.rename(self._previous[0], self.run_path)  # put back: nothing was recorded
                self._previous = None
            raise
        traces = live.out / PENDING / "traces"
        make_dirs(traces)
        self._torch, self._sampler, activities, flush = open_sources(self.settings, self._torch_cycle, traces)
        source = SourceFile(
            path=_program(),
            format=SOURCE_FORMAT,
            rank=rank,
            index=0,
            host=socket.gethostname(),
            info={
                "pid": os.getpid(),
                "argv": list(sys.argv),
                "world_size": world,
                "settings": {**self.settings.as_json(), "activities": [a.value for a in activities], "flush": flush},
            },
        )
        live.set_sources([asdict(source)])
        live.flush_manifest()
        self._writer = Handoff(
            live,
            source,
            own_steps=self._torch is None,
            subscribers=self._subscribers,
            keep_traces=bool(self.settings.keep_traces),
        )

    def step(self) -> None:
        """End the current step and begin the next (the schedule decides what the next records).

        Call it outside torch `record_function` ranges (as torch.profiler's own `step()`): torch's
        profiler restarts at a step boundary, and a range open across the restart crashes torch."""
        if self._state != "running":
            if self.settings.switch:
                log.error(
                    "prof_engine: Profiler.step() called %s",
                    "before start()" if self._state == "idle" else "after stop()",
                )
            return
        if self.settings.schedule is None:
            if not self._warned_step:
                self._warned_step = True
                log.warning(
                    "prof_engine: Profiler.step() has no effect without a schedule "
                    "(pass schedule=prof_engine.schedule(...) to record step by step)"
                )
            return
        self._hand_off()
        if self._torch is not None:
            self._torch.step()
        self.step_num += 1
        self._action = self._scheduled(self.step_num)

    @property
    def _started(self) -> Handoff:
        """The writer, which start() made (every caller runs after it)."""
        assert self._writer is not None
        return self._writer

    def _hand_off(self) -> None:
        """Give the writer the step just ended: its markers and samples (taken before the clock is
        read, so each lies inside the step's window)."""
        events = mstx.take()
        samples: list[tuple[int, dict[str, float]]] = (
            self._sampler.take(at_least_one=self._action.records) if self._sampler is not None else []
        )
        now = time.time_ns()
        step = self.step_num if self.settings.schedule is not None else None
        if events or self._action.records:  # an idle step without markers has nothing to write
            self._started.put(StepDone(StepWindow(step, self._step_start, now, self._action.records), events, samples))
        self._step_start = now

    def _torch_cycle(self, path: Path) -> None:
        self._started.put(TorchCycle(path))

    def _scheduled(self, step: int) -> ProfilerAction:
        return as_action(self.settings.schedule(step)) if self.settings.schedule is not None else ProfilerAction.RECORD

    def stop(self) -> None:
        """Stop recording; returns once the run is completely written."""
        global _running
        if self._state != "running":
            if self.settings.switch:
                log.error(
                    "prof_engine: Profiler.stop() called %s", "before start()" if self._state == "idle" else "twice"
                )
            return
        self._state = "stopped"
        try:
            self._hand_off()
            if self._torch is not None:
                self._torch.stop()
        finally:
            mstx.enable(False)
            if self._sampler is not None:
                self._sampler.stop()
            self._started.close(self._metadata)
            _running = None
            self._drop_previous()
        if self.on_trace_ready is not None:
            assert self.run_path is not None  # set by start()
            self.on_trace_ready(self.run_path)

    def _drop_previous(self) -> None:
        """Delete the run this one replaced, once this one is complete, and say so in one line;
        keep it (and say where) when this run did not complete."""
        if self._previous is None:
            return
        aside, created = self._previous
        self._previous = None
        assert self.run_path is not None  # set by start(), with _previous
        try:
            state = json.loads((self.run_path / "manifest.json").read_text(encoding="utf-8")).get("state")
        except (OSError, ValueError):
            state = None
        if state == COMPLETE:
            shutil.rmtree(aside, ignore_errors=True)
            log.warning("prof_engine: replaced run %s (recorded %s)", self.run_path, created)
        else:
            log.error(
                "prof_engine: the new run %s is %s, not complete: the run it would replace (recorded %s) is kept at %s",
                self.run_path,
                state or "unreadable",
                created,
                aside,
            )

    def __enter__(self) -> Profiler:
        if self._state == "idle":
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._state == "running":
            self.stop()

    # -- metadata, subscription ---------------------------------------------------------------------
    def add_metadata(self, key: str, value: str) -> None:
        """Store `key: value` (strings) in the run's manifest `metadata`."""
        self._add_metadata(str(key), str(value))

    def add_metadata_json(self, key: str, value: str) -> None:
        """Store `key` with a JSON value (given as JSON text) in the run's manifest `metadata`."""
        try:
            decoded = json.loads(value)
        except (TypeError, ValueError) as e:
            log.error("prof_engine: add_metadata_json(%r): not JSON text (%s); left out", key, e)
            return
        self._add_metadata(str(key), decoded)

    def _add_metadata(self, key: str, value: Any) -> None:
        size = sum(len(k) + len(json.dumps(v)) for k, v in {**self._metadata, key: value}.items())
        if size > METADATA_LIMIT:
            log.error(
                "prof_engine: metadata %r left out: the run's metadata would exceed %d bytes", key, METADATA_LIMIT
            )
            return
        self._metadata[key] = value
        if self._state == "running":
            self._started.put({key: value})  # in the manifest from the writer's next write on

    def subscribe(self, fn: Callable[[list[OpRecord]], Any]) -> None:
        """Call `fn(ops)` (in a thread of the collector) with each batch of ops written; before start()."""
        if self._state != "idle":
            log.error("prof_engine: Profiler.subscribe() after start(): subscribe before recording begins")
            return
        self._subscribers.append(fn)

    # -- analysis -----------------------------------------------------------------------------------
    def analyse(
        self,
        export_dir: str | os.PathLike | None = None,
        fmt: str = "csv",
        top: int = 10,
        mode: str = "sync",
        show: bool = True,
    ) -> dict:
        """Stop if still recording; print the summaries `prof-engine show` prints (unless
        `show=False`) and return them (title → Result); export them as msprof-named files into
        `export_dir` when given.

        `mode="async"` (MindSpore's): the export runs in a process of its own (`prof-engine export`,
        into `export_dir`, default `<run>/summaries`) while the program goes on; this returns {} at
        once, and `analysis` holds that process (`.wait()` for it; its exit status is 0 once the
        files are written)."""
        from prof_engine.engine import open_run

        if mode not in ("sync", "async"):
            raise ValueError(f"Profiler.analyse: mode must be 'sync' or 'async', not {mode!r}")
        if self._state == "running":
            self.stop()
        if self.run_path is None:
            log.error("prof_engine: Profiler.analyse() before anything was recorded")
            return {}
        if mode == "async":
            import subprocess

            out = Path(export_dir) if export_dir is not None else Path(self.run_path) / "summaries"
            self.analysis = subprocess.Popen(
                [sys.executable, "-m", "prof_engine", "export", str(self.run_path), "-o", str(out), "--format", fmt],
                stdout=subprocess.DEVNULL,
            )
            return {}
        with open_run(self.run_path) as run:
            written = run.export((), export_dir, fmt) if export_dir is not None else []
            tables = run.summary(top)
        if show:  # the faces' printer: analyse() is a face of its own, as `prof-engine show` is
            from prof_engine import render

            render.note(f"prof_engine: recorded {self.run_path}")
            for title, result in tables.items():
                render.table(result, title=title)
            for path in written:
                render.note(f"wrote {path}")
        return tables

    @staticmethod
    def offline_analyse(
        path: str | os.PathLike,
        output: str | os.PathLike | None = None,
        *,
        jobs: int | None = None,
        force: bool = False,
    ) -> Path:
        """Make one run of the rank runs (or traces, or profiler directories) under `path`, in
        parallel; see `prof_engine.collect.offline`. Returns the run's path."""
        from prof_engine.collect.offline import offline_analyse

        return offline_analyse(path, output, jobs=jobs, force=force)


def export_summaries(out_dir: str | os.PathLike | None = None, fmt: str = "csv") -> Callable[[Path], list[Path]]:
    """A ready-made `on_trace_ready`: export the finished run's summaries (msprof file names) into
    `out_dir` (default: `<run>/summaries`)."""

    def handler(run_path: Path) -> list[Path]:
        from prof_engine.engine import open_run

        with open_run(run_path) as run:
            return run.export((), out_dir if out_dir is not None else Path(run_path) / "summaries", fmt)

    return handler


def _next_output(output: Path, rank: int | None) -> Path:
    """`output` for the first Profiler of this process that records `rank` (None: a job of one)
    into it, `<output>_2`, `_3`, ... for the next ones (a Profiler per phase or per loop iteration
    of one script), so a second recording neither fails on the first one's run nor replaces it.
    Numbered by use, not by what exists, so every rank of a job picks the same name."""
    n = _outputs_used[output, rank] = _outputs_used.get((output, rank), 0) + 1
    if n == 1:
        return output
    numbered = output.with_name(f"{output.name}_{n}")
    log.warning("prof_engine: this program already recorded into %s; this Profiler records into %s", output, numbered)
    return numbered


def _program() -> str:
    """What runs: the script's absolute path, a module's name, or `<python>` (interactive)."""
    name = sys.argv[0] if sys.argv and sys.argv[0] else ""
    return os.path.abspath(name) if os.path.isfile(name) else name or "<python>"


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and the job's size: torch.distributed when initialised, else torchrun's env."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    try:
        return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    except ValueError:
        return 0, 1


@atexit.register
def _stop_at_exit() -> None:
    if _running is not None:
        log.warning(
            "prof_engine: a Profiler was still running at exit; stopping it to complete its run %s "
            "(call stop() or use `with Profiler(...)` to end recording yourself)",
            _running.run_path,
        )
        _running.stop()


__all__ = ["Profiler", "ProfilerActivity", "ProfilerLevel", "export_summaries"]
