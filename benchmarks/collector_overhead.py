"""What recording costs a training loop: step time unprofiled, under bare torch.profiler and under
prof-engine at each level, in one process; and the cost of one mstx marker, off and on.

    python benchmarks/collector_overhead.py [--steps 40] [--rounds 3] [--batch 128] [--hidden 512] [--device cuda]

A small real training loop (an MLP with LayerNorm and AdamW, markers around its phases; on the CPU,
or with `--device cuda` on the GPU, each step ending in a synchronize so that its time is the
device's too) runs
`--steps` measured steps per configuration, the configurations interleaved over `--rounds` rounds
so drifting machine load hits them alike. A step's time is the time from one step boundary to the
next, the boundary call included (for prof-engine: the hand-off to the writer and, at the default
`flush="step"`, Kineto's stop and restart). The writer process converts and writes meanwhile, on
another core if there is one; what it has left when the loop ends is the `stop()` time, shown apart. Medians and p90
over all measured steps; ratios to the unprofiled loop and to bare torch.profiler; the median
`start()` (for prof-engine: until its writer process is up) and `stop()` times.

| configuration | records |
|---|---|
| unprofiled | nothing (markers are off: one flag test each) |
| torch.profiler | `profile(activities=[CPU])` (and CUDA on the GPU), one cycle over the measured steps, nothing exported |
| torch.profiler, Level2's options | the same with `record_shapes`, `profile_memory`, `with_stack`: torch's own cost of Level2 |
| prof-engine Level_none | steps and markers |
| prof-engine Level0 | + torch CPU ops (and CUDA kernels on the GPU), one Kineto cycle per step, converted and written per step (on the GPU the collector's default is one cycle: as the last row) |
| prof-engine Level1 | + input shapes, psutil sampling every 100 ms |
| prof-engine Level2 | + allocator events and Python stacks |
| prof-engine Level0, flush="cycle" | Level0 with one Kineto cycle for all measured steps (no restart per step) |
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # Kineto's two lines per start/stop, for every configuration

import torch  # noqa: E402

import prof_engine  # noqa: E402
from prof_engine import mstx  # noqa: E402

WARMUP_STEPS = 5
DEVICE = ["cpu"]  # where the loop runs (--device)


def make_step(batch: int, hidden: int, device: str = "cpu") -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden),
        torch.nn.LayerNorm(hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, 10),
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, hidden, device=device), torch.randint(0, 10, (batch,), device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step() -> None:
        with mstx.range("train_step"):
            with mstx.range("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with mstx.range("backward"):
                loss.backward()
            with mstx.range("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        sync()

    return step


def timed_steps(step: Callable[[], None], boundary: Callable[[], None], n: int) -> list[float]:
    """Seconds per step for `n` steps, each step's boundary call included."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        boundary()
        times.append(time.perf_counter() - t)
    return times


Timing = tuple[list[float], tuple[float, float]]  # seconds per step; start() and stop() seconds


def unprofiled(step, n: int, tmp: Path) -> Timing:
    timed_steps(step, lambda: None, WARMUP_STEPS)
    return timed_steps(step, lambda: None, n), (0.0, 0.0)


def bare_torch(step, n: int, tmp: Path, **options: bool) -> Timing:
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if DEVICE[0] != "cpu" else [])]
    prof = profile(activities=activities, schedule=schedule(wait=0, warmup=WARMUP_STEPS, active=n, repeat=1), **options)
    t = time.perf_counter()
    prof.start()
    started = time.perf_counter() - t
    timed_steps(step, prof.step, WARMUP_STEPS)
    times = timed_steps(step, prof.step, n)
    t = time.perf_counter()
    prof.stop()
    return times, (started, time.perf_counter() - t)


def prof_engine_at(level: str, flush: str | None = None) -> Callable[[Callable[[], None], int, Path], Timing]:
    def run(step, n: int, tmp: Path) -> Timing:
        out = tmp / f"run_{level}"
        shutil.rmtree(out, ignore_errors=True)
        prof = prof_engine.Profiler(
            out,
            profiler_level=level,
            start_profile=False,
            flush=flush,
            schedule=prof_engine.schedule(wait=0, warmup=WARMUP_STEPS, active=n, repeat=1),
        )
        t = time.perf_counter()
        prof.start()
        started = time.perf_counter() - t
        timed_steps(step, prof.step, WARMUP_STEPS)
        times = timed_steps(step, prof.step, n)
        t = time.perf_counter()
        prof.stop()
        drain = time.perf_counter() - t
        with prof_engine.open(out) as run:
            steps = len(run.manifest["steps"])
        if steps != n:
            raise SystemExit(f"{level}: recorded {steps} steps, expected {n}")
        return times, (started, drain)

    return run


CONFIGS = {
    "unprofiled": unprofiled,
    "torch.profiler": bare_torch,
    "torch.profiler, Level2's options": lambda step, n, tmp: bare_torch(
        step, n, tmp, record_shapes=True, profile_memory=True, with_stack=True
    ),
    **{f"prof-engine {lv}": prof_engine_at(lv) for lv in ("Level_none", "Level0", "Level1", "Level2")},
    'prof-engine Level0, flush="cycle"': prof_engine_at("Level0", "cycle"),
}


def marker_costs() -> list[tuple[str, float, float]]:
    """(call, ns off, ns on) per marker call, best of 5 runs, less an empty call."""
    r = mstx.range("x")

    def with_range() -> None:
        with r:
            pass

    calls = {
        "mstx.mark": lambda: mstx.mark("m"),
        "with mstx.range": with_range,
        "range_start + range_end": lambda: mstx.range_end(mstx.range_start("s")),
    }
    out = []
    for name, fn in calls.items():
        row = []
        for on in (False, True):
            mstx.enable(on)
            n = 100_000
            empty = min(timeit.repeat(lambda: None, number=n, repeat=5))
            row.append(max(min(timeit.repeat(fn, number=n, repeat=5)) - empty, 0) / n * 1e9)
            mstx.enable(False)
            mstx.take()
        out.append((name, *row))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="measured steps per configuration and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all configurations")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda: the loop on the GPU, recorded with CUDA activity"
    )
    args = parser.parse_args()
    if args.device != "cpu" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: torch sees no CUDA GPU here")
    DEVICE[0] = args.device
    torch.set_num_threads(1)  # one core for the loop, as a rank usually has; the writer gets the rest
    step = make_step(args.batch, args.hidden, args.device)
    times: dict[str, list[float]] = {c: [] for c in CONFIGS}
    drains: dict[str, list[tuple[float, float]]] = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="collector_overhead_") as tmp:
        for _ in range(args.rounds):
            for name, run in CONFIGS.items():
                t, d = run(step, args.steps, Path(tmp))
                times[name] += t
                drains[name].append(d)
    report(times, drains, args)


def report(
    times: dict[str, list[float]], drains: dict[str, list[tuple[float, float]]], args: argparse.Namespace
) -> None:
    gpu = f", {torch.cuda.get_device_name(0)}" if args.device != "cpu" else ""
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}{gpu}, torch threads 1, "
        f"batch {args.batch}, hidden {args.hidden}, {args.rounds} rounds x {args.steps} steps per configuration\n"
    )
    base = statistics.median(times["unprofiled"])
    bare = statistics.median(times["torch.profiler"])
    print(
        "| configuration | median step (ms) | p90 (ms) | x unprofiled | x torch.profiler | start() (ms) | stop() (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, t in times.items():
        med, p90 = statistics.median(t), statistics.quantiles(t, n=10)[-1]
        start, stop = (statistics.median(x) * 1e3 for x in zip(*drains[name]))
        print(
            f"| {name} | {med * 1e3:.2f} | {p90 * 1e3:.2f} | {med / base:.2f} | {med / bare:.2f} | {start:.0f} | {stop:.0f} |"
        )
    print("\n| marker call | off (ns) | on (ns) |")
    print("|---|---:|---:|")
    for name, off, on in marker_costs():
        print(f"| {name} | {off:.0f} | {on:.0f} |")


if __name__ == "__main__":
    main()
