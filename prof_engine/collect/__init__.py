"""The collector: record a running program into a run store, step by step.

`Profiler` (profiler.py) drives three activity sources — torch.profiler (torch_source.py), the
markers of `mstx` (mstx.py) and system sampling (sampling.py, sources.py picks them) — into one
writer process (handoff.py on the program's side, writer.py and writer_process.py on the other)
that converts each finished step (convert.py, and the Kineto importer) and publishes it into a
live run (`prof_engine.store.live`). `schedule` (schedule.py)
says which steps to record; config.py reads the settings, also from `PROF_ENGINE_CONFIG`;
acl.py is the pyACL-shaped procedural face; run.py and launch.py run a program under the collector
without code changes (`prof-engine collect`); offline.py merges rank runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (see prof_engine/__init__.py): `mstx` alone imports nothing heavy.
_LAZY: dict[str, str] = {
    "OpRecord": "prof_engine.collect.writer",
    "Profiler": "prof_engine.collect.profiler",
    "export_summaries": "prof_engine.collect.profiler",
    "ProfilerAction": "prof_engine.collect.schedule",
    "Schedule": "prof_engine.collect.schedule",
    "schedule": "prof_engine.collect.schedule",
    "ProfilerActivity": "prof_engine.collect.config",
    "ProfilerLevel": "prof_engine.collect.config",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'prof_engine.collect' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from prof_engine.collect.config import ProfilerActivity, ProfilerLevel
    from prof_engine.collect.profiler import Profiler, export_summaries
    from prof_engine.collect.schedule import ProfilerAction, Schedule, schedule
    from prof_engine.collect.writer import OpRecord

__all__ = [
    "OpRecord",
    "Profiler",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "Schedule",
    "export_summaries",
    "mstx",
    "schedule",
]
