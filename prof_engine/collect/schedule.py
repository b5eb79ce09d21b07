"""Which steps the collector records: `schedule(wait, warmup, active, repeat, skip_first)`.

The semantics are torch.profiler's, step for step (a test compares the two): after `skip_first`
steps, cycles of `wait` idle steps, `warmup` steps (the profiler runs, its records are dropped) and
`active` recorded steps; the last active step of a cycle ends it (RECORD_AND_SAVE); `repeat`
cycles, or forever when 0.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from prof_engine.errors import CollectError


class ProfilerAction(enum.Enum):
    """What the collector does during a step (the names of torch.profiler.ProfilerAction)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3

    @property
    def records(self) -> bool:
        return self in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


@dataclass(frozen=True)
class Schedule:
    """A step → ProfilerAction function made by `schedule()`; its fields go to the manifest."""

    wait: int
    warmup: int
    active: int
    repeat: int = 0
    skip_first: int = 0

    def __call__(self, step: int) -> ProfilerAction:
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < self.wait:
            return ProfilerAction.NONE
        if pos < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def last_step(self) -> int | None:
        """The last step this schedule records, or None when it repeats forever."""
        if self.repeat == 0:
            return None
        return self.skip_first + self.repeat * (self.wait + self.warmup + self.active) - 1


def schedule(wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """Record `active` steps after `wait` idle and `warmup` steps, `repeat` times (0: forever), after
    skipping `skip_first` steps: `prof_engine.schedule(wait=1, warmup=1, active=3, repeat=1)`."""
    values = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat, "skip_first": skip_first}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CollectError(f"schedule: {name} must be a whole number >= 0, not {value!r}")
    if active < 1:
        raise CollectError("schedule: active must be at least 1 (the steps to record)")
    return Schedule(wait, warmup, active, repeat, skip_first)


def as_action(value: object) -> ProfilerAction:
    """A schedule's answer as a ProfilerAction (a user's schedule may return torch's enum)."""
    if isinstance(value, ProfilerAction):
        return value
    name = getattr(value, "name", None)
    if isinstance(name, str) and name in ProfilerAction.__members__:
        return ProfilerAction[name]
    raise CollectError(f"schedule returned {value!r}, not a ProfilerAction")


StepSchedule = Callable[[int], object]
