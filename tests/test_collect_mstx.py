"""Markers: their cost off and on, and how they land in a run (nesting, threads, steps, marks).

A Profiler at Level_none records steps, markers and nothing from torch, so these runs are fast
and every expected value is written here by hand.
"""

from __future__ import annotations

import threading
import timeit

import pytest

import prof_engine
from prof_engine import mstx
from prof_engine.collect.convert import Assembler, StepWindow


def per_call_ns(fn, number: int = 100_000) -> float:
    """Best of 5 runs of `number` calls, in ns per call, less the cost of calling an empty lambda."""
    empty = min(timeit.repeat(lambda: None, number=number, repeat=5))
    return max(min(timeit.repeat(fn, number=number, repeat=5)) - empty, 0) / number * 1e9


def test_importing_prof_engine_for_markers_loads_no_engine():
    """A training script's `from prof_engine import mstx` (or a bare `import prof_engine`) imports
    neither pyarrow nor DuckDB: they load with the first call that needs them."""
    import subprocess
    import sys

    code = (
        "import sys, prof_engine\nfrom prof_engine import mstx\nmstx.mark('m')\n"
        "print(sorted(m for m in ('pyarrow', 'duckdb', 'polars', 'numpy') if m in sys.modules))\n"
        "prof_engine.open\nprint('duckdb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]


def test_markers_cost_well_under_a_microsecond_when_off():
    assert not mstx.enabled()
    r = mstx.range("x")

    def with_range():
        with r:
            pass

    for fn in (
        lambda: mstx.mark("m"),
        lambda: mstx.push("p"),
        mstx.pop,
        lambda: mstx.range_end(mstx.range_start("s")),
        with_range,
    ):
        assert per_call_ns(fn) < 1000
    assert mstx.take() == []  # nothing was recorded


def test_markers_are_cheap_when_on():
    """On, a marker appends one tuple: a few hundred ns on an idle core, < 5 µs on a loaded one."""
    mstx.enable(True)
    try:
        cost = per_call_ns(lambda: mstx.mark("m"), number=20_000)
    finally:
        mstx.enable(False)
        mstx.take()
    assert cost < 5000


def _slice_rows(run, where: str = "kind = 'user_range'"):
    return run.sql(
        f"select name, step, depth, parent_id, id, tid, ts, dur from slices where {where} order by ts, depth"
    ).rows()


@pytest.fixture(scope="module")
def marker_run(tmp_path_factory):
    """Five steps, steps 1-3 recorded: nested push/pop, a decorator, a range across two steps,
    a range started on one thread and ended on another, marks."""
    out = tmp_path_factory.mktemp("mstx") / "run"
    worker_ids = []

    @mstx.range("decorated")
    def work():
        mstx.mark("inside decorated")

    def other_thread(rid):
        mstx.range_end(rid)
        worker_ids.append(threading.get_native_id())

    with prof_engine.Profiler(
        out, profiler_level="Level_none", schedule=prof_engine.schedule(wait=1, warmup=0, active=3, repeat=1)
    ) as prof:
        for step in range(5):
            with mstx.range("outer"):
                with mstx.range("inner"):
                    work()
            if step == 1:
                mstx.push("spans two steps")
            if step == 2:
                mstx.pop()
                rid = mstx.range_start("cross thread")
                t = threading.Thread(target=other_thread, args=(rid,))
                t.start()
                t.join()
            mstx.mark(f"end of {step}")
            prof.step()
    run = prof_engine.open(out)
    yield run, worker_ids[0]
    run.close()


def test_only_recorded_steps_are_written(marker_run):
    run, _ = marker_run
    assert sorted(s["step"] for s in run.manifest["steps"]) == [1, 2, 3]
    assert run.sql("select distinct step from slices order by 1").rows() == [(1,), (2,), (3,)]
    assert run.sql("select name from marks order by ts").rows() == [
        ("inside decorated",),
        ("end of 1",),
        ("inside decorated",),
        ("end of 2",),
        ("inside decorated",),
        ("end of 3",),
    ]


def test_push_pop_nesting(marker_run):
    """outer > inner > decorated, per step: depth 0, 1, 2, each parent the range around it. In
    step 2 they lie inside the range pushed at the end of step 1 and popped in step 2: one deeper."""
    run, _ = marker_run
    ((spans_id,),) = run.sql("select id from slices where name = 'spans two steps'").rows()
    for step, base, top_parent in ((1, 0, None), (2, 1, spans_id), (3, 0, None)):
        rows = _slice_rows(run, f"kind = 'user_range' and step = {step} and name in ('outer', 'inner', 'decorated')")
        assert [(r[0], r[2]) for r in rows] == [("outer", base), ("inner", base + 1), ("decorated", base + 2)]
        assert rows[0][3] == top_parent and rows[1][3] == rows[0][4] and rows[2][3] == rows[1][4]
        for outer, inner in zip(rows, rows[1:]):
            assert outer[6] <= inner[6] and inner[6] + inner[7] <= outer[6] + outer[7]


def test_a_range_across_steps_keeps_its_start_step(marker_run):
    run, _ = marker_run
    ((name, step, depth, parent, _, _, ts, dur),) = _slice_rows(run, "name = 'spans two steps'")
    step2 = next(s for s in run.manifest["steps"] if s["step"] == 2)
    assert (step, depth, parent) == (1, 0, None)
    assert ts < step2["start_ns"] < ts + dur


def test_a_range_ended_on_another_thread(marker_run):
    run, worker_tid = marker_run
    ((step, tid, args),) = run.sql("select step, tid, args from slices where name = 'cross thread'").rows()
    assert step == 2 and tid == str(threading.get_native_id())
    assert f'"end_tid": {worker_tid}' in args


def test_own_step_records_without_torch(marker_run):
    """Without torch the collector writes the step records itself, named as torch names them."""
    run, _ = marker_run
    assert run.sql("select name from slices where kind = 'step' order by ts").rows() == [
        ("ProfilerStep#1",),
        ("ProfilerStep#2",),
        ("ProfilerStep#3",),
    ]
    assert run.manifest["state"] == "complete"
    assert run.manifest["sources"][0]["format"] == "collector"


def test_assembler_ignores_a_pop_without_push_and_unclosed_ranges():
    """A pop whose push came before the Profiler started closes nothing; unclosed ranges are left out."""
    a = Assembler(own_steps=False)
    events = [
        (mstx.POP, 5, 1, None, None, 0),
        (mstx.PUSH, 6, 1, "a", None, 0),
        (mstx.POP, 7, 1, None, None, 0),
        (mstx.PUSH, 8, 1, "never closed", None, 0),
        (mstx.START, 9, 1, "never ended", None, 42),
    ]
    a.step_done(StepWindow(0, 0, 10, True), events, [])
    assert a.tables.cols["slices"]["name"] == ["a"]
    assert a.open_ranges() == 2


def test_markers_outside_a_profiler_cost_nothing_and_leave_nothing(tmp_path):
    mstx.mark("before")
    with prof_engine.Profiler(tmp_path / "run", profiler_level="Level_none"):
        mstx.mark("during")
    mstx.mark("after")
    with prof_engine.open(tmp_path / "run") as run:
        assert run.sql("select name, step from marks").rows() == [("during", None)]  # no schedule: no steps
