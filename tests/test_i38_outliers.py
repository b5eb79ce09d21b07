"""Issue 38 item 3: a slice far from the dense body of its file is dropped and said, whatever the
file's span (before, only beyond 7 days from the median of a file spanning over 14 days: one kernel
moved an hour later gave a step's Free 3.6e9 µs with exit 0). A real long trace, or one with an
idle gap between busy phases, keeps every slice. Oracles: Python over the trace's JSON."""

from __future__ import annotations

import json

import prof_engine
from conftest import write_trace, x

BASE = 1_700_000_000_000_000  # µs since the epoch
HOUR = 3_600_000_000  # µs
DAY = 24 * HOUR


def _steps(n: int = 20, at: int = BASE) -> list[dict]:
    """`n` steps of 100 ms (2 s in all): in each, 4 ops launching a kernel each."""
    events = []
    for k in range(n):
        t0 = at + 100_000 * k
        events.append(x(f"ProfilerStep#{k + 1}", t0, 100_000, cat="user_annotation"))
        for i in range(4):
            corr = 10 * k + i + 1
            events.append(x("aten::mm", t0 + 1000 + 20_000 * i, 100, **{"External id": corr}))
            events.append(x("cudaLaunchKernel", t0 + 1010 + 20_000 * i, 10, cat="cuda_runtime", correlation=corr))
            events.append(x("gemm", t0 + 5000 + 20_000 * i, 8000, cat="kernel", pid=0, tid=7, correlation=corr))
    return events


def _free(events: list[dict], step: int) -> float:
    """The step's Free on the GPU from the JSON: its kernels' span less their merged time."""
    (s0, s1) = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == f"ProfilerStep#{step}"][0]
    launched = {e["args"]["correlation"] for e in events if e["cat"] == "cuda_runtime" and s0 <= e["ts"] < s1}
    kernels = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] == "kernel" and e["args"]["correlation"] in launched
    )
    busy, reach = 0, None
    for s, e in kernels:
        busy += max(0, e - max(s, reach or s))
        reach = max(reach or e, e)
    return kernels[-1][1] - kernels[0][0] - busy


def _finding(run) -> dict | None:
    found = [f for f in run.manifest["sources"][0]["info"].get("findings", []) if f["rule"] == "values_out_of_range"]
    return found[0] if found else None


def test_one_kernel_an_hour_later_is_dropped_and_said(tmp_path):
    events = _steps()
    moved = next(e for e in events if e["cat"] == "kernel" and e["args"]["correlation"] == 32)  # step 4's
    moved["ts"] += HOUR
    src = write_trace(tmp_path / "trace.json", events)
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        found = _finding(run)
        assert found and found["count"] == 1
        assert found["detail"].startswith(
            f"first: 'gemm' at {int(moved['ts'] * 1000)} ns, 60.0 minutes from the dense body"
        )
        assert any("values_out_of_range" in w for w in run.quality_warnings())  # what import prints
        assert run.manifest["tables"]["slices"] == len(events) - 1
        free = dict(run.sql('SELECT "Step", "Free" FROM step_trace').rows())
        kept = [e for e in events if e is not moved]
        assert free == {k: _free(kept, k) for k in range(1, 21)}
        assert max(free.values()) < 100_000  # sane: within a 100 ms step


def test_slices_13_days_away_in_a_chrome_trace_are_dropped_and_said(tmp_path):
    """45 slices 13 days from a chrome trace's 1,000 (4.5 %: a share that would keep a busy phase
    nearer than 7 days)."""
    events = [
        {"ph": "X", "name": f"work{i % 7}", "pid": 1, "tid": 1 + i % 3, "ts": BASE + 1000 * i, "dur": 500}
        for i in range(1000)
    ]
    far = [{**events[i], "name": "stray", "ts": BASE + 13 * DAY + 1000 * i} for i in range(45)]
    (tmp_path / "trace.json").write_text(json.dumps(events + far), encoding="utf-8")
    with prof_engine.open(prof_engine.import_trace([tmp_path / "trace.json"], tmp_path / "run")) as run:
        found = _finding(run)
        assert found and found["count"] == 45 and found["detail"].startswith("first: 'stray'")
        assert "13 days from the dense body" in found["detail"]
        assert run.sql("SELECT count(*), count(*) FILTER (WHERE name = 'stray') FROM slices").rows() == [(1000, 0)]


def test_busy_phases_20_minutes_apart_are_kept_whole(tmp_path):
    """A long idle between two dense phases is the run's (each holds half the slices)."""
    events = _steps(10) + _steps(10, at=BASE + 1_000_000 + 20 * 60_000_000)
    for k, e in enumerate(e for e in events if e["name"].startswith("ProfilerStep#")):
        e["name"] = f"ProfilerStep#{k + 1}"
    for i, e in enumerate(e for e in events if "correlation" in e["args"]):  # unique per launch
        e["args"]["correlation"] = 1000 + i // 2
    src = write_trace(tmp_path / "trace.json", events)
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        assert _finding(run) is None
        assert run.manifest["tables"]["slices"] == len(events)
        assert run.sql('SELECT count(*) FROM step_trace WHERE "Step" IS NOT NULL').rows() == [(20,)]


def test_a_two_hour_trace_of_sparse_steps_is_kept_whole(tmp_path):
    """Steps spread over 2 hours: a burst every 15 minutes (gaps over the 10-minute floor, each a
    ninth of the slices), and a marker every minute in between on another thread."""
    events = []
    for k in range(9):
        events += _steps(1, at=BASE + k * 15 * 60_000_000)
    for i, e in enumerate(e for e in events if e["name"].startswith("ProfilerStep#")):
        e["name"] = f"ProfilerStep#{i + 1}"
    for i, e in enumerate(e for e in events if "correlation" in e["args"]):
        e["args"]["correlation"] = 1000 + i // 2
    src = write_trace(tmp_path / "bursts.json", events)
    ticks = [x("tick", BASE + i * 60_000_000, 10, tid=9) for i in range(121)]
    even = write_trace(tmp_path / "even.json", ticks)
    for path, n in ((src, len(events)), (even, len(ticks))):
        with prof_engine.open(prof_engine.import_trace([path], tmp_path / path.stem)) as run:
            assert _finding(run) is None and run.manifest["tables"]["slices"] == n
