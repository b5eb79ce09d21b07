"""torch.profiler as an activity source of the collector.

torch.profiler hands its events over per *cycle* (the steps between a cycle's start and its
RECORD_AND_SAVE step), never per step. The collector drives it with a schedule derived from the
user's, and with `flush="step"` it turns every recorded step into a cycle of its own
(RECORD → RECORD_AND_SAVE): Kineto stops and restarts at each recorded step boundary, so each
step's torch events reach the writer as soon as the step ends and a kill -9 loses at most the step
in flight. With `flush="cycle"` the user's cycles are kept (a kill loses the cycle in flight);
that is the default with CUDA, where stopping Kineto synchronises the device at every step.

At a cycle's end, on the training thread, Kineto's result is saved as Kineto JSON (C++; the
result may not be touched once the next cycle records) and the file is handed over; the writer
process converts it with the importer `prof-engine import` uses.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prof_engine.collect.config import ProfilerActivity
from prof_engine.collect.schedule import ProfilerAction, StepSchedule, as_action

log = logging.getLogger("prof_engine")


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class TorchSource:
    """One torch.profiler.profile driven step by step; finished cycles go to `on_cycle`."""

    def __init__(
        self,
        activities: tuple[ProfilerActivity, ...],
        schedule: StepSchedule | None,
        flush: str,
        on_cycle: Callable[[Path], None],
        trace_dir: Path,
        *,
        record_shapes: bool,
        profile_memory: bool,
        with_stack: bool,
    ) -> None:
        import torch.profiler as tp

        self._trace_dir = trace_dir
        self._cycles = 0
        self._schedule = schedule
        self._flush = flush
        self._on_cycle = on_cycle
        # Kineto prints two lines per start/stop at its highest log level, which a cycle per step
        # turns into a flood on stderr; it reads KINETO_LOG_LEVEL once, when it is first prepared.
        self._quiet_kineto = flush == "step"
        self._kineto_asked = False  # torch was asked for a recording action: Kineto is prepared
        kinds = {ProfilerActivity.CPU: tp.ProfilerActivity.CPU, ProfilerActivity.CUDA: tp.ProfilerActivity.CUDA}
        self._actions = {a: getattr(tp.ProfilerAction, a.name) for a in ProfilerAction}
        self.profile = tp.profile(
            activities=[kinds[a] for a in activities],
            on_trace_ready=self._ready,
            schedule=self._torch_action if schedule is not None else None,  # None: one cycle, start to stop
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
        )

    def _torch_action(self, step: int) -> Any:
        assert self._schedule is not None  # torch calls this only when given a schedule
        action = as_action(self._schedule(step))
        self._kineto_asked |= action is not ProfilerAction.NONE
        if self._flush == "step" and action is ProfilerAction.RECORD:
            action = ProfilerAction.RECORD_AND_SAVE
        return self._actions[action]

    def _ready(self, prof: Any) -> None:
        """A cycle ended: write it as Kineto JSON here, on the training thread. Kineto's result may
        not be saved while its next session records (saving from another thread crashes the
        process), and serialising in C++ is the cheap part; reading and converting it is not."""
        self._cycles += 1
        path = self._trace_dir / f"cycle-{os.getpid()}-{self._cycles}.json"
        prof.profiler.kineto_results.save(str(path))
        prof.profiler = None  # its memory goes now; torch makes a new one for the next cycle
        self._on_cycle(path)

    @contextmanager
    def _kineto_prepared_quietly(self) -> Iterator[None]:
        """KINETO_LOG_LEVEL=6 in this process's environment only while a call may prepare Kineto
        for the first time, then as it was: the user's environment is theirs (a setting of their
        own wins), and once Kineto has read it the variable has no use."""
        if not self._quiet_kineto or "KINETO_LOG_LEVEL" in os.environ:
            yield
            return
        os.environ["KINETO_LOG_LEVEL"] = "6"
        try:
            yield
        finally:
            del os.environ["KINETO_LOG_LEVEL"]
            self._quiet_kineto = not self._kineto_asked

    def start(self) -> None:
        self._kineto_asked |= self._schedule is None  # one cycle, start to stop: prepared now
        with self._kineto_prepared_quietly():
            self.profile.start()

    def step(self) -> None:
        with self._kineto_prepared_quietly():
            self.profile.step()

    def stop(self) -> None:
        self.profile.stop()
