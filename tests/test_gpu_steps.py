"""Steps of a GPU trace: Kineto also writes each ProfilerStep#N as a device range (a
`gpu_user_annotation` on the GPU), shorter than the host's and starting later. The host's span
defines the step; the device copy must not cut it short. Found on a real H100 trace, where the
backward pass (on the autograd thread) and the optimizer fell outside every step."""

from __future__ import annotations

import prof_engine
from conftest import write_trace, x

BASE = 1_700_000_000_000_000  # µs since the epoch


def _trace(tmp_path, host_steps: bool = True):
    events = []
    for n, t0 in ((1, 0), (2, 1000)):
        if host_steps:
            events.append(x(f"ProfilerStep#{n}", BASE + t0, 900, cat="user_annotation"))
        # the GPU's copy of the step: from the first kernel to the last, 100..300 µs into it
        events.append(x(f"ProfilerStep#{n}", BASE + t0 + 100, 200, cat="gpu_user_annotation", pid=0, tid=7))
        events.append(x("aten::mm", BASE + t0 + 10, 50, **{"External id": 10 * n}))
        events.append(
            x("cudaLaunchKernel", BASE + t0 + 20, 5, cat="cuda_runtime", correlation=10 * n, **{"External id": 10 * n})
        )
        events.append(
            x(
                "sm80_gemm",
                BASE + t0 + 150,
                100,
                cat="kernel",
                pid=0,
                tid=7,
                correlation=10 * n,
                **{"External id": 10 * n},
            )
        )
        # backward on the autograd thread, after the device step has ended
        events.append(x("autograd::engine::evaluate_function: MmBackward0", BASE + t0 + 500, 80, tid=2))
        events.append(x("aten::add_", BASE + t0 + 800, 20))
    return write_trace(tmp_path / "trace.json", events)


def test_host_records_take_the_host_step_not_the_shorter_device_copy(tmp_path):
    with prof_engine.open(prof_engine.import_trace([_trace(tmp_path)], tmp_path / "run")) as run:
        rows = run.sql("SELECT name, step FROM slices WHERE device = 'host' AND kind <> 'step' ORDER BY ts").rows()
        assert rows == [
            (name, n)
            for n in (1, 2)
            for name in (
                "aten::mm",
                "cudaLaunchKernel",
                "autograd::engine::evaluate_function: MmBackward0",
                "aten::add_",
            )
        ]
        assert run.sql("SELECT step FROM slices WHERE kind = 'kernel' ORDER BY ts").rows() == [(1,), (2,)]
        assert not list((run.path / "slices").glob("rank=*/device=host/step=__HIVE_DEFAULT_PARTITION__"))


def test_device_step_ranges_define_steps_when_the_host_has_none(tmp_path):
    with prof_engine.open(prof_engine.import_trace([_trace(tmp_path, host_steps=False)], tmp_path / "run")) as run:
        rows = run.sql("SELECT name, step FROM slices WHERE kind IN ('host_op', 'kernel') ORDER BY ts").rows()
        # only what starts inside the device's [first kernel, last kernel] span belongs to a step
        assert ("sm80_gemm", 1) in rows and ("sm80_gemm", 2) in rows
        assert ("aten::add_", None) in rows
