"""Which activity sources a Profiler's settings turn on, on this machine.

Asking for what the machine cannot record (CUDA without a GPU, torch ops without torch, system
sampling without psutil) is said once, on the `prof_engine` logger, and the rest is recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prof_engine.collect.config import ProfilerActivity, Settings
from prof_engine.collect.torch_source import TorchSource, cuda_available, torch_available

log = logging.getLogger("prof_engine")

DEFAULT_SAMPLING_MS = 100.0


def _activities(settings: Settings) -> tuple[ProfilerActivity, ...]:
    """The torch activities to record: those asked for that this machine has."""
    if not settings.resolved("torch"):
        return ()
    if not torch_available():
        if settings.activities or settings.level is not None:
            log.warning("prof_engine: torch is not installed: recording steps, markers and system samples only")
        return ()
    gpu = cuda_available()
    if settings.activities is None:
        return (ProfilerActivity.CPU, ProfilerActivity.CUDA) if gpu else (ProfilerActivity.CPU,)
    if ProfilerActivity.CUDA in settings.activities and not gpu:
        log.warning(
            "prof_engine: CUDA activity asked for, but no GPU is available (torch.cuda.is_available() "
            "is False): recording the other activities only"
        )
        return tuple(a for a in settings.activities if a is not ProfilerActivity.CUDA)
    return settings.activities


def _sampler(settings: Settings) -> Any:
    if not settings.resolved("sampling") and settings.sampling_interval_ms is None:
        return None
    try:
        from prof_engine.collect.sampling import Sampler

        return Sampler(settings.sampling_interval_ms or DEFAULT_SAMPLING_MS)
    except ImportError:
        log.warning("prof_engine: psutil is not installed: no system sampling (pip install psutil)")
        return None


def open_sources(
    settings: Settings, on_cycle: Callable[[Path], None], trace_dir: Path
) -> tuple[Any, Any, tuple[ProfilerActivity, ...], str]:
    """(torch source or None, sampler or None, activities recorded, flush mode); torch cycles are
    saved into `trace_dir` and handed to `on_cycle`."""
    activities = _activities(settings)
    flush = settings.flush or ("cycle" if ProfilerActivity.CUDA in activities else "step")
    torch_source = None
    if activities:
        torch_source = TorchSource(
            activities,
            settings.schedule,
            flush,
            on_cycle,
            trace_dir,
            record_shapes=settings.resolved("record_shapes"),
            profile_memory=settings.resolved("profile_memory"),
            with_stack=settings.resolved("with_stack"),
        )
    return torch_source, _sampler(settings), activities, flush
