"""idle_time: the gaps on each device stream, split by cause as HTA's get_idle_time_breakdown
splits them (host wait, kernel wait, other), on a synthetic trace and on HTA's own sample."""

from __future__ import annotations

import prof_engine
from conftest import fixture_path, write_trace, x

COLUMNS = 'SELECT "Stream", "Step", "Category", "Count", "Idle Time(us)", "Ratio(%)", "Max(us)" FROM idle_time'


def _launch(name: str, ts: float, corr: int) -> dict:
    return x(name, ts, 2, cat="cuda_runtime", correlation=corr)


def _task(name: str, ts: float, dur: float, corr: int | None, stream: int = 7, cat: str = "kernel") -> dict:
    args = {"device": 0, "stream": stream, **({"correlation": corr} if corr is not None else {})}
    return x(name, ts, dur, cat=cat, pid=0, tid=stream, **args)


def test_each_gap_takes_its_cause(tmp_path):
    """Stream 7: `a` opens the stream (no gap); `b`'s call starts after `a` ended (host wait, 40
    µs); `c` was queued in time and follows 10 µs later (kernel wait); `d` was queued in time but
    starts 100 µs late (other: it waited on something else); `e` has no call in the trace (other, 40 µs);
    `f` starts before `e` has ended (no gap). Stream 9's one memcpy opens its stream."""
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _launch("cudaLaunchKernel", 10, 1),
        _task("a", 20, 10, 1),  # ends at 30
        _launch("cudaLaunchKernel", 60, 2),
        _task("b", 70, 10, 2),  # call after 30: host wait 40
        _launch("cudaLaunchKernel", 62, 3),
        _task("c", 90, 10, 3),  # call at 62 < 80: gap 10 < 30
        _launch("cudaLaunchKernel", 64, 4),
        _task("d", 200, 10, 4),  # call at 64 < 100: gap 100
        _task("e", 250, 20, None),  # no call: gap 40, other
        _launch("cudaLaunchKernel", 66, 5),
        _task("f", 260, 5, 5),  # starts inside e: no gap
        _launch("cudaMemcpyAsync", 68, 6),
        _task("copy", 300, 5, 6, stream=9, cat="gpu_memcpy"),
    ]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        assert r.sql(COLUMNS).rows() == [
            (7, 1, "host wait", 1, 40.0, 21.05, 40.0),  # of 190 µs idle
            (7, 1, "kernel wait", 1, 10.0, 5.26, 10.0),
            (7, 1, "other", 2, 140.0, 73.68, 100.0),
        ]


# HTA 0.5.0's get_idle_time_breakdown(ranks=[r], show_idle_interval_stats=True) on this fixture,
# per rank and stream: {category: (count, idle_time µs)}. HTA drops a trace's last ProfilerStep
# (551 is the first of the two), so its numbers are this run's first step. HTA also lists each
# stream's first kernel as an `other` interval of no length, and no category without intervals.
HTA_FIRST_STEP = {
    0: {
        7: {"host wait": (82, 213825), "kernel wait": (196, 1985), "other": (247, 261740)},
        23: {"host wait": (52, 596037), "kernel wait": (9, 70), "other": (1, 34)},
        25: {"kernel wait": (1, 9), "other": (6, 47865)},
        84: {"host wait": (2, 148934), "kernel wait": (1, 6)},
    },
    1: {
        7: {"host wait": (87, 156827), "kernel wait": (185, 1816), "other": (228, 281064)},
        23: {"host wait": (52, 596313), "kernel wait": (10, 100)},
        25: {"kernel wait": (1, 9), "other": (6, 53028)},
        84: {"host wait": (2, 251860), "other": (1, 23247)},
    },
}


def test_idle_time_is_htas_breakdown(tmp_path):
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Rank", "Stream", "Category", "Count", "Idle Time(us)" FROM idle_time WHERE "Step" = 551'
        ).rows()
        ratios = run.sql('SELECT "Rank", "Stream", "Category", "Ratio(%)" FROM idle_time WHERE "Step" = 551').rows()
    ours: dict = {}
    for rank, stream, category, count, idle in rows:
        ours.setdefault(rank, {}).setdefault(stream, {})[category] = (count, idle)
    assert ours == HTA_FIRST_STEP
    # HTA's idle_time_ratio, to its 2 decimals: stream 7 of rank 0 is 0.45 host wait, 0.55 other
    assert {(c, round(p / 100, 2)) for r, s, c, p in ratios if (r, s) == (0, 7)} == {
        ("host wait", 0.45),
        ("kernel wait", 0.0),
        ("other", 0.55),
    }
