"""Issue 38 item 1: device work outside a device's own step windows is no step's time.

Kineto records each ProfilerStep#N on the GPU too (a `gpu_user_annotation`). Work the GPU runs
before that window with no launch record (the previous step's queued work) was given the host step
holding its start, and made the step longer than the GPU's own record of it (an H100 trace: 49,340
µs against 34,892). Oracles: Python over the trace's JSON.
"""

from __future__ import annotations

import prof_engine
from conftest import write_trace, x

BASE = 1_700_000_000_000_000  # µs since the epoch
WINDOW = (BASE + 15_000, BASE + 45_000)  # the GPU's ProfilerStep#6


def _events(device_step: bool = True, stray: bool = False) -> list[dict]:
    events = [x("ProfilerStep#6", BASE, 50_000, cat="user_annotation")]
    if device_step:
        events.append(x("ProfilerStep#6", WINDOW[0], WINDOW[1] - WINDOW[0], cat="gpu_user_annotation", pid=0, tid=7))
    # 25 kernels of the previous step, launched before the trace began: no launch record
    for i in range(25):
        events.append(x("prev_step_gemm", BASE + 100 + 500 * i, 300, cat="kernel", pid=0, tid=7, correlation=9000 + i))
    # 10 kernels the step launches, inside the GPU's window, the last ending at its end
    for i in range(10):
        corr, start = 100 + i, WINDOW[0] + 3000 * i
        events.append(x("aten::mm", BASE + 20 + 100 * i, 50, **{"External id": corr}))
        events.append(x("cudaLaunchKernel", BASE + 30 + 100 * i, 5, cat="cuda_runtime", correlation=corr))
        events.append(x("sm90_gemm", start, 3000 if i == 9 else 1500, cat="kernel", pid=0, tid=7, correlation=corr))
    if stray:  # launched in the step, run after its GPU window (ROCm's copy holds only some kernels)
        events.append(x("aten::add", BASE + 2000, 20, **{"External id": 500}))
        events.append(x("cudaLaunchKernel", BASE + 2005, 5, cat="cuda_runtime", correlation=500))
        events.append(x("late_add", WINDOW[1] + 1000, 400, cat="kernel", pid=0, tid=7, correlation=500))
    return events


def _oracle(events: list[dict]) -> dict:
    """From the JSON: the GPU's window, its kernels (merged time) and the kernels outside it."""
    (win,) = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] == "gpu_user_annotation"]
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] == "kernel"]
    inside = sorted(k for k in kernels if win[0] <= k[0] < win[1])
    merged: list[list[float]] = []
    for s, e in inside:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    outside = [k for k in kernels if not win[0] <= k[0] < win[1]]
    return {
        "step_time": win[1] - win[0],
        "computing": sum(e - s for s, e in merged),
        "outside": len(outside),
        "outside_us": sum(e - s for s, e in outside),
        "outside_span": (min(s for s, _ in outside), max(e for _, e in outside)),
    }


def test_queued_work_before_the_gpu_step_is_no_steps_time(tmp_path):
    events = _events()
    want = _oracle(events)
    assert want["outside"] == 25 and want["step_time"] == 30_000
    src = write_trace(tmp_path / "trace.json", events)
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql(
            """SELECT "Step", "Computing", "Free", round("End Time(us)" - "Start Time(us)", 3)::DOUBLE
               FROM step_trace WHERE "Device" = 'gpu0' ORDER BY "Step" NULLS LAST"""
        ).rows()
        lo, hi = want["outside_span"]
        assert rows == [
            # `show`'s Step Time is this span (End − Start Time)
            (6, want["computing"], want["step_time"] - want["computing"], want["step_time"]),
            (None, want["outside_us"], hi - lo - want["outside_us"], hi - lo),
        ]
        rule = run.sql(
            """SELECT "Device", "Count", "Detail", "Level" FROM data_quality
               WHERE "Rule" = 'device_work_outside_steps'"""
        ).rows()
        assert rule == [
            (
                "gpu0",
                want["outside"],
                f"{want['outside_us']:.1f} µs of device time (summed) in no step window, e.g. prev_step_gemm",
                "warning",
            )
        ]
        assert "device_work_outside_steps" in " ".join(run.quality_warnings())
        # advice: before the window the device idles only where the queued work does not run
        host_start = BASE
        idle_before = WINDOW[0] - host_start - want["outside_us"]  # the queued kernels do not overlap
        ((share,),) = run.sql("""SELECT "Share(%)" FROM advice WHERE "Rule" = 'slow_step_start'""").rows()
        assert share == round(100 * idle_before / (WINDOW[1] - host_start), 1)


def test_kernels_launched_in_the_step_stay_in_it_outside_the_gpu_copy(tmp_path):
    """ROCm's GPU ProfilerStep#N holds only the kernels ProfilerStep itself launched: a kernel the
    host step launched keeps that step wherever it runs (the window is the hull of both)."""
    events = _events(stray=True)
    src = write_trace(tmp_path / "trace.json", events)
    launched = {e["args"]["correlation"] for e in events if e["cat"] == "cuda_runtime"}
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        got = run.sql("SELECT correlation, step FROM slices WHERE kind = 'kernel'").rows()
        assert {c for c, s in got if s == 6} == launched
        assert {c for c, s in got if s is None} == {
            e["args"]["correlation"] for e in events if e["cat"] == "kernel"
        } - launched
        ((end,),) = run.sql("""SELECT "End Time(us)" FROM step_trace WHERE "Step" = 6""").rows()
        assert float(end) == WINDOW[1] + 1400


def test_without_gpu_steps_the_host_step_holds_device_work_as_before(tmp_path):
    """No device step records: device work without a launcher takes the host step holding its start."""
    src = write_trace(tmp_path / "trace.json", _events(device_step=False))
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        assert run.sql("SELECT count(*) FROM slices WHERE kind = 'kernel' AND step IS DISTINCT FROM 6").rows() == [(0,)]
        assert not run.sql("SELECT * FROM data_quality WHERE \"Rule\" = 'device_work_outside_steps'").rows()
