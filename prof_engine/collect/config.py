"""The collector's settings, and the JSON config file that can set them without code changes.

`PROF_ENGINE_CONFIG=path/to/config.json` (the idea of acl.json's `profiler` block) is read when a
Profiler is made; a setting passed in code wins over the file, the file over the defaults. The
file holds one object, either at the top level or under `"profiler"`:

    {"profiler": {"switch": "on", "output": "runs/train", "activities": ["CPU"], "level": "Level1",
                  "schedule": {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}, "interval": 0,
                  "profile_memory": false, "with_stack": false, "record_shapes": true,
                  "sampling_interval_ms": 100, "flush": "step", "keep_traces": false}}

`switch` "off" turns every Profiler of the program into a no-op; `interval` N records every Nth
step (acl.json's "profile every Nth inference"), in place of `schedule`. The other keys of an
existing acl.json `profiler` block or TensorFlow `profiling_options` (`FOREIGN_KEYS`) are accepted
with a warning: what they switch on is Ascend hardware's, or always recorded here.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prof_engine.collect.schedule import Schedule, schedule
from prof_engine.errors import CollectError, InputError

ENV = "PROF_ENGINE_CONFIG"
log = logging.getLogger("prof_engine")


class ProfilerActivity(enum.Enum):
    """What to record from torch: CPU ops, CUDA kernels/memcpy/NCCL (needs a GPU)."""

    CPU = "CPU"
    CUDA = "CUDA"


class ProfilerLevel(enum.Enum):
    """How much to record (MindSpore's levels, mapped onto what torch and psutil can record).

    Level_none: steps and markers only (no torch).
    Level0: + torch ops of the activities (CPU ops, CUDA kernels), no shapes.
    Level1: + input shapes and system sampling (CPU and memory of machine and process).
    Level2: + allocator events (profile_memory) and Python stacks (with_stack).
    """

    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


# What each level turns on, unless a setting says otherwise.
_LEVEL_DEFAULTS = {
    ProfilerLevel.Level_none: {
        "torch": False,
        "record_shapes": False,
        "sampling": False,
        "profile_memory": False,
        "with_stack": False,
    },
    ProfilerLevel.Level0: {
        "torch": True,
        "record_shapes": False,
        "sampling": False,
        "profile_memory": False,
        "with_stack": False,
    },
    ProfilerLevel.Level1: {
        "torch": True,
        "record_shapes": True,
        "sampling": True,
        "profile_memory": False,
        "with_stack": False,
    },
    ProfilerLevel.Level2: {
        "torch": True,
        "record_shapes": True,
        "sampling": True,
        "profile_memory": True,
        "with_stack": True,
    },
}


@dataclass(frozen=True)
class Settings:
    """Everything a Profiler records with; None means "not set" (the level or a default decides)."""

    switch: bool = True
    output: str | None = None
    activities: tuple[ProfilerActivity, ...] | None = None
    level: ProfilerLevel | None = None
    schedule: Callable[[int], Any] | None = None  # usually a Schedule
    profile_memory: bool | None = None
    with_stack: bool | None = None
    record_shapes: bool | None = None
    sampling_interval_ms: float | None = None
    flush: str | None = None
    keep_traces: bool | None = None

    def merged_over(self, base: Settings) -> Settings:
        """These settings, with the ones left unset taken from `base`."""
        mine = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return dataclasses.replace(
            base,
            **{k: v for k, v in mine.items() if v is not None and k != "switch"},
            switch=self.switch and base.switch,
        )

    def resolved(self, name: str) -> Any:
        """A level-dependent setting (record_shapes, profile_memory, with_stack, sampling, torch)."""
        value = getattr(self, name, None)
        if value is not None:
            return value
        return _LEVEL_DEFAULTS[self.level or ProfilerLevel.Level1][name]

    def as_json(self) -> dict[str, Any]:
        """The settings as config-file keys (for the manifest and for child processes)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, enum.Enum):
                v = v.value
            elif isinstance(v, tuple):
                v = [a.value for a in v]
            elif isinstance(v, Schedule):
                v = dataclasses.asdict(v)
            elif callable(v):
                v = getattr(v, "__qualname__", repr(v))  # a user's own schedule function
            out[f.name] = (
                "on" if v is True and f.name == "switch" else "off" if v is False and f.name == "switch" else v
            )
        return out


def activities_of(values: Any, where: str) -> tuple[ProfilerActivity, ...]:
    """`["CPU", "CUDA"]` (names, torch's or our enum members) → ProfilerActivity tuple."""
    if not isinstance(values, (list, tuple, set)):
        values = [values]
    out = []
    for v in values:
        name = str(getattr(v, "name", v)).upper()
        if name not in ProfilerActivity.__members__:
            raise CollectError(f"{where}: unknown activity {v!r}; use {', '.join(ProfilerActivity.__members__)}")
        out.append(ProfilerActivity[name])
    return tuple(dict.fromkeys(out))


def level_of(value: Any, where: str) -> ProfilerLevel:
    name = str(getattr(value, "name", value))
    for level in ProfilerLevel:
        if name.lower() in (level.name.lower(), level.name.lower().replace("_", "")):
            return level
    raise CollectError(f"{where}: unknown level {value!r}; use {', '.join(ProfilerLevel.__members__)}")


def _switch(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("on", "off"):
        return str(value).lower() == "on"
    raise CollectError(f'{where}: switch must be "on" or "off", not {value!r}')


def _number(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise CollectError(f"{where}: {key} must be a number >= 0, not {value!r}")
    return value


def _flag(value: Any, where: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise CollectError(f"{where}: {key} must be true or false, not {value!r}")
    return value


def _schedule(raw: dict[str, Any], where: str) -> Schedule | None:
    sched, interval = raw.get("schedule"), raw.get("interval")
    if sched is not None and interval:
        raise CollectError(f"{where}: give schedule or interval, not both")
    if interval:
        every = int(_number(interval, where, "interval"))
        return schedule(wait=every - 1, warmup=0, active=1) if every > 1 else schedule(active=1)
    if sched is None:
        return None
    if not isinstance(sched, dict) or set(sched) - {"wait", "warmup", "active", "repeat", "skip_first"}:
        raise CollectError(f"{where}: schedule must be an object with wait, warmup, active, repeat, skip_first")
    try:
        return schedule(**sched)
    except CollectError as e:
        raise CollectError(f"{where}: {e}") from None


KEYS = (
    "switch",
    "output",
    "activities",
    "level",
    "schedule",
    "interval",
    "profile_memory",
    "with_stack",
    "record_shapes",
    "sampling_interval_ms",
    "flush",
    "keep_traces",
)
# Keys of acl.json's `profiler` block and TensorFlow's `profiling_options` that have no setting
# here, and why: a user's existing file is read, and told what does not apply.
FOREIGN_KEYS = {
    "aicpu": "AI CPU tasks are Ascend hardware's",
    "aic_metrics": "AI Core PMU metrics are Ascend hardware's",
    "acl_api": "runtime API calls are recorded with the ops (levels Level0 and up)",
    "training_trace": "steps are always recorded",
    "task_trace": "device tasks are recorded with the CUDA activity",
    "fp_point": "steps come from the program's steps, not from forward/backward ops",
    "bp_point": "steps come from the program's steps, not from forward/backward ops",
}


def parse(raw: Any, where: str) -> Settings:
    """Settings from a decoded config object (`where` names it in error messages)."""
    if isinstance(raw, dict) and isinstance(raw.get("profiler"), dict) and len(raw) == 1:
        raw = raw["profiler"]
    if not isinstance(raw, dict):
        raise CollectError(f"{where}: the config must be a JSON object")
    unknown = sorted(set(raw) - set(KEYS) - set(FOREIGN_KEYS))
    if unknown:
        raise CollectError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
    for key in sorted(set(raw) & set(FOREIGN_KEYS)):
        log.warning(
            "prof_engine: %s: %r (acl.json / profiling_options) has no effect: %s", where, key, FOREIGN_KEYS[key]
        )
    flush = raw.get("flush")
    if flush not in (None, "step", "cycle"):
        raise CollectError(f'{where}: flush must be "step" or "cycle", not {flush!r}')
    flags = {
        k: _flag(raw[k], where, k)
        for k in ("profile_memory", "with_stack", "record_shapes", "keep_traces")
        if raw.get(k) is not None
    }
    return Settings(
        switch=_switch(raw.get("switch", "on"), where),
        output=str(raw["output"]) if raw.get("output") is not None else None,
        activities=activities_of(raw["activities"], where) if raw.get("activities") is not None else None,
        level=level_of(raw["level"], where) if raw.get("level") is not None else None,
        schedule=_schedule(raw, where),
        sampling_interval_ms=_number(raw["sampling_interval_ms"], where, "sampling_interval_ms")
        if raw.get("sampling_interval_ms") is not None
        else None,
        flush=flush,
        **flags,
    )


def load(path: str | os.PathLike[str]) -> Settings:
    """Settings from a JSON config file."""
    from prof_engine.importers.jsonstream import read_json

    try:
        raw = read_json(Path(path), "JSON (the collector's config)", limit=1 << 20)
    except InputError as e:
        raise CollectError(str(e)) from None
    return parse(raw, str(path))


def from_env() -> Settings:
    """The settings of the file `PROF_ENGINE_CONFIG` names, or none set when it is unset."""
    path = os.environ.get(ENV)
    return load(path) if path else Settings()
