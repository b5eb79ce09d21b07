"""System sampling: CPU and memory of the machine and of the profiled process, via psutil.

A daemon thread takes a sample every `interval_ms` and appends it to a list that the Profiler
takes at each step (the same lock-free take as the markers); a recorded step in which the thread
took none (shorter than the interval, or the thread starved of the CPU) gets one taken at its end,
so that each recorded step has its CPU and memory. A sample is
`(time_ns, {series: value})`; `prof_engine.collect.convert` makes `counters` rows of it:

| counter | series |
|---|---|
| `CPU Usage` | `machine(%)`, `process(%)` (100% = one core) |
| `Memory` | `machine used(bytes)`, `machine available(bytes)`, `process rss(bytes)` |
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("prof_engine")


class Sampler:
    """Samples the machine and this process every `interval_ms` while started."""

    def __init__(self, interval_ms: float) -> None:
        import psutil  # imported here: only a Profiler that samples needs it

        self.interval_s = max(interval_ms, 1.0) / 1000
        self.samples: list[tuple[int, dict[str, float]]] = []
        self._psutil = psutil
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prof_engine-sampler", daemon=True)

    def start(self) -> None:
        self._psutil.cpu_percent(interval=None)  # the first call only sets the reference point
        self._process.cpu_percent(interval=None)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def sample(self) -> tuple[int, dict[str, float]]:
        vm = self._psutil.virtual_memory()
        return time.time_ns(), {
            "CPU Usage/machine(%)": float(self._psutil.cpu_percent(interval=None)),
            "CPU Usage/process(%)": float(self._process.cpu_percent(interval=None)),
            "Memory/machine used(bytes)": float(vm.total - vm.available),
            "Memory/machine available(bytes)": float(vm.available),
            "Memory/process rss(bytes)": float(self._process.memory_info().rss),
        }

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(self.sample())
            except Exception as e:  # a vanished /proc entry must not end the program
                log.warning("prof_engine: system sampling stopped: %s", e)
                return

    def take(self, at_least_one: bool = False) -> list[tuple[int, dict[str, float]]]:
        """The samples since the last take; `at_least_one`: if the thread took none (a step shorter
        than the interval, or a thread starved of the CPU), one taken now."""
        n = len(self.samples)
        taken = self.samples[:n]
        del self.samples[:n]
        if not taken and at_least_one and not self._stop.is_set():
            try:
                taken.append(self.sample())
            except Exception as e:  # as in the thread: sampling must not end the program
                log.warning("prof_engine: system sampling failed: %s", e)
        return taken
