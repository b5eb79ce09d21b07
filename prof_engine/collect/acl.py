"""A procedural face in the pyACL `acl.prof` shape, over the same collector as `Profiler`.

    from prof_engine.collect import acl
    acl.init("prof_out")
    config = acl.create_config([0], data_type_config=acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    acl.start(config)          # records into prof_out/run_000
    ...
    acl.stop(config)
    acl.destroy_config(config)
    acl.finalize()

Each start/stop pair records one run (`<path>/run_NNN`), so the calls can be repeated with other
configs. As in pyACL, calls return `ACL_SUCCESS` (0) or an error code, and say why on the
`prof_engine` logger. The data-type bits map onto what this machine records:

| bits | records |
|---|---|
| ACL_PROF_ACL_API, ACL_PROF_RUNTIME_API | torch ops on the host (the API layer) |
| ACL_PROF_TASK_TIME_L0 | torch ops, CUDA kernels with a GPU (Level0) |
| ACL_PROF_TASK_TIME, ACL_PROF_TASK_TIME_L2 | + input shapes and system sampling (Level1) |
| ACL_PROF_TASK_MEMORY | + allocator events |
| ACL_PROF_MSPROFTX, ACL_PROF_TRAINING_TRACE | markers and steps (always recorded) |
| ACL_PROF_AICORE_METRICS, ACL_PROF_AICPU, ACL_PROF_L2CACHE, ACL_PROF_HCCL_TRACE | need Ascend hardware: said once, ignored |
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from prof_engine.collect.config import ProfilerLevel
from prof_engine.collect.profiler import Profiler

log = logging.getLogger("prof_engine")

ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
ACL_PROF_AICORE_METRICS = 0x0004
ACL_PROF_AICPU = 0x0008
ACL_PROF_L2CACHE = 0x0010
ACL_PROF_HCCL_TRACE = 0x0020
ACL_PROF_TRAINING_TRACE = 0x0040
ACL_PROF_MSPROFTX = 0x0080
ACL_PROF_RUNTIME_API = 0x0100
ACL_PROF_TASK_TIME_L0 = 0x0800
ACL_PROF_TASK_MEMORY = 0x1000
ACL_PROF_TASK_TIME_L2 = 0x2000

_ASCEND_ONLY = ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU | ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE
_KNOWN = (
    ACL_PROF_ACL_API
    | ACL_PROF_TASK_TIME
    | _ASCEND_ONLY
    | ACL_PROF_TRAINING_TRACE
    | ACL_PROF_MSPROFTX
    | ACL_PROF_RUNTIME_API
    | ACL_PROF_TASK_TIME_L0
    | ACL_PROF_TASK_MEMORY
    | ACL_PROF_TASK_TIME_L2
)

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_PROF_NOT_RUN = 100010  # prof-engine's own codes from here on
ACL_ERROR_PROF_ALREADY_RUN = 100011


@dataclass
class AclConfig:
    """What `create_config` made: the devices and the data-type bitmask, as settings."""

    device_ids: tuple[int, ...]
    data_type_config: int
    level: ProfilerLevel
    profile_memory: bool
    destroyed: bool = False


class _State:
    path: Path | None = None
    runs = 0
    running: dict[int, Profiler] = {}  # id(config) → its Profiler


def init(profiler_path: str) -> int:
    """Set the directory the runs go to (once, until `finalize`)."""
    if _State.path is not None:
        log.error("prof_engine: acl init called twice (profiling path %s); call finalize first", _State.path)
        return ACL_ERROR_REPEAT_INITIALIZE
    if not profiler_path:
        log.error("prof_engine: acl init needs a profiling path")
        return ACL_ERROR_INVALID_PARAM
    _State.path = Path(profiler_path)
    return ACL_SUCCESS


def _level(bits: int) -> ProfilerLevel:
    if bits & (ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L2):
        return ProfilerLevel.Level1
    if bits & (ACL_PROF_TASK_TIME_L0 | ACL_PROF_ACL_API | ACL_PROF_RUNTIME_API | ACL_PROF_TASK_MEMORY):
        return ProfilerLevel.Level0
    return ProfilerLevel.Level_none


def create_config(
    device_id_list: list[int],
    aicore_metrics: int | None = None,
    aicore_events: object = None,
    data_type_config: int = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME,
) -> AclConfig | None:
    """A config for `start`/`stop` from a data-type bitmask (see the module docstring); None if invalid."""
    if not isinstance(data_type_config, int) or data_type_config & ~_KNOWN:
        log.error("prof_engine: acl create_config: unknown data type bits %#x", data_type_config)
        return None
    if data_type_config & _ASCEND_ONLY or aicore_metrics:
        log.warning(
            "prof_engine: acl create_config: AI Core metrics, AI CPU, L2 cache and HCCL traces need Ascend "
            "hardware; recording the rest"
        )
    return AclConfig(
        tuple(device_id_list), data_type_config, _level(data_type_config), bool(data_type_config & ACL_PROF_TASK_MEMORY)
    )


def _check(config: AclConfig | None, call: str) -> int:
    if _State.path is None:
        log.error("prof_engine: acl %s before init", call)
        return ACL_ERROR_UNINITIALIZE
    if not isinstance(config, AclConfig) or config.destroyed:
        log.error("prof_engine: acl %s: not a config from create_config", call)
        return ACL_ERROR_INVALID_PARAM
    return ACL_SUCCESS


def start(config: AclConfig) -> int:
    """Start recording with `config` into a new run under the init path."""
    if (ret := _check(config, "start")) != ACL_SUCCESS:
        return ret
    if id(config) in _State.running:
        log.error("prof_engine: acl start: this config is already recording")
        return ACL_ERROR_PROF_ALREADY_RUN
    assert _State.path is not None  # _check said the init came first
    run = _State.path / f"run_{_State.runs:03d}"
    _State.runs += 1
    prof = Profiler(run, profiler_level=config.level, profile_memory=config.profile_memory or None, start_profile=False)
    prof.add_metadata_json(
        "acl_config", json.dumps({"devices": list(config.device_ids), "data_type_config": config.data_type_config})
    )
    prof.start()
    if not prof.recording:
        return ACL_ERROR_PROF_ALREADY_RUN  # another Profiler records, or profiling is switched off (said)
    _State.running[id(config)] = prof
    return ACL_SUCCESS


def stop(config: AclConfig) -> int:
    """Stop the recording `start(config)` began; its run is complete when this returns."""
    if (ret := _check(config, "stop")) != ACL_SUCCESS:
        return ret
    prof = _State.running.pop(id(config), None)
    if prof is None:
        log.error("prof_engine: acl stop: this config is not recording (call start first)")
        return ACL_ERROR_PROF_NOT_RUN
    prof.stop()
    return ACL_SUCCESS


def destroy_config(config: AclConfig) -> int:
    if not isinstance(config, AclConfig) or config.destroyed:
        log.error("prof_engine: acl destroy_config: not a live config")
        return ACL_ERROR_INVALID_PARAM
    config.destroyed = True
    return ACL_SUCCESS


def finalize() -> int:
    """Stop what still records and forget the init path."""
    if _State.path is None:
        log.error("prof_engine: acl finalize before init")
        return ACL_ERROR_UNINITIALIZE
    for prof in list(_State.running.values()):
        prof.stop()
    _State.running.clear()
    _State.path = None
    _State.runs = 0
    return ACL_SUCCESS


def runs() -> list[Path]:
    """The runs recorded under the init path so far (for reading them back)."""
    return sorted(_State.path.glob("run_*")) if _State.path is not None else []
