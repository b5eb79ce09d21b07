"""queue_length: tasks launched but not yet started on each device stream, summed up as HTA's
get_queue_length_summary does, on a synthetic trace and on HTA's own sample."""

from __future__ import annotations

import statistics

import pytest

import prof_engine
from conftest import fixture_path, write_trace, x

COLUMNS = 'SELECT "Stream", "Step", "Count", "Mean", "Std", "Min", "P25", "Median", "P75", "Max" FROM queue_length'


def _launch(ts: float, corr: int) -> dict:
    return x("cudaLaunchKernel", ts, 1, cat="cuda_runtime", correlation=corr)


def _task(name: str, ts: float, corr: int, stream: int = 7) -> dict:
    return x(name, ts, 5, cat="kernel", pid=0, tid=stream, device=0, stream=stream, correlation=corr)


def test_the_queue_grows_at_each_launch_and_shrinks_at_each_start(tmp_path):
    """Three launches at 10, 11, 12 before their tasks start at 20, 30, 40; a fourth launched at
    30 (with the second task's start: the launch counts first) starts at 50. A task with no launch
    call in the trace is left out."""
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        _launch(10, 1),
        _launch(11, 2),
        _launch(12, 3),
        _launch(30, 4),
        _task("a", 20, 1),
        _task("b", 30, 2),
        _task("c", 40, 3),
        _task("d", 50, 4),
        _task("orphan", 60, 99),
    ]
    series = [1, 2, 3, 2, 3, 2, 1, 0]  # 10 +, 11 +, 12 +, 20 -, 30 + (launch first), 30 -, 40 -, 50 -
    q = statistics.quantiles(series, n=4, method="inclusive")  # pandas' describe interpolates so
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        assert r.sql(COLUMNS).rows() == [
            (
                7,
                1,
                8,
                statistics.mean(series),
                pytest.approx(statistics.stdev(series), abs=1e-6),
                0,
                q[0],
                q[1],
                q[2],
                3,
            )
        ]


# HTA 0.5.0's get_queue_length_summary(ranks=[r]) on this fixture, per rank and stream: count,
# mean, std, min, 25 %, 50 %, 75 %, max. HTA drops a trace's last ProfilerStep (551 is the first
# of the two): its series holds the first step's tasks.
HTA_FIRST_STEP = {
    (0, 7): (1052, 23.619772, 19.977006, 0, 3.0, 22.0, 38.0, 76),
    (0, 23): (126, 0.595238, 0.683269, 0, 0.0, 1.0, 1.0, 4),
    (0, 25): (16, 4.0, 2.422120, 0, 2.0, 4.0, 6.0, 8),
    (0, 84): (8, 0.5, 0.534522, 0, 0.0, 0.5, 1.0, 1),
    (0, 203): (2, 0.5, 0.707107, 0, 0.25, 0.5, 0.75, 1),
    (1, 7): (1002, 24.665669, 21.571825, 0, 3.0, 22.5, 42.0, 75),
    (1, 23): (126, 0.547619, 0.545632, 0, 0.0, 1.0, 1.0, 2),
    (1, 25): (16, 4.0, 2.422120, 0, 2.0, 4.0, 6.0, 8),
    (1, 84): (8, 0.5, 0.534522, 0, 0.0, 0.5, 1.0, 1),
    (1, 203): (2, 0.5, 0.707107, 0, 0.25, 0.5, 0.75, 1),
}


def test_queue_length_is_htas_summary(tmp_path):
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Rank", "Stream", "Count", "Mean", "Std", "Min", "P25", "Median", "P75", "Max" '
            'FROM queue_length WHERE "Step" = 551'
        ).rows()
    ours = {(r, s): tuple(v) for r, s, *v in rows}
    assert ours.keys() == HTA_FIRST_STEP.keys()
    for key, want in HTA_FIRST_STEP.items():
        assert ours[key] == pytest.approx(want, abs=1e-6), key
