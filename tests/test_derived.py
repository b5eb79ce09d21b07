"""What finalisation derives across a rank's records is stored at import, and views read it: the
step breakdown's lanes (`lane_totals`, read by `step_trace`), the Overlap Analysis lanes (`lanes`,
read by `overlap` and the timeline), each device task's stream wait (`slices.wait`, read by
`op_summary`) and its launching API call (`slices.launch_api*`, read by kernel_launch, idle_time,
queue_length and advice). Runs without them (older schema, live collector runs)
compute the same from slices, with the same macros (queries/_lanes.sql, `stream_wait`): here the
two paths are compared on real and synthetic runs, GPU and NPU, receive ops, records outside every
step and CPU-only ranks."""

from __future__ import annotations

import pytest

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine.engine.session import use_stored


def _kernel(name: str, ts: float, dur: float, stream: int = 7, **args) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, **args)


def _synthetic_gpu(path):
    """Two steps of kernels and NCCL kernels (a receive among them: the bubble), overlapping, and
    device work outside every step."""
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("ProfilerStep#2", 100, 100, cat="user_annotation")]
    for _step, t0 in ((1, 0), (2, 100)):
        events += [_kernel("gemm", t0 + 10, 30), _kernel("gemm", t0 + 35, 20), _kernel("relu", t0 + 70, 5),
                   _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 30, 40, stream=40),
                   _kernel("ncclDevKernel_Recv", t0 + 80, 10, stream=41)]
    events += [_kernel("late_kernel", 300, 7)]  # after the last step: step NULL
    return write_trace(path, events)


def _synthetic_cpu(path):
    """A CPU-only trace: host ops are the activity, a gloo range its communication."""
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"),
              x("aten::mm", 5, 40), x("aten::add", 10, 5), x("gloo:all_reduce", 30, 30, cat="user_annotation"),
              x("aten::relu", 70, 10), x("aten::mm", 150, 10)]
    return write_trace(path, events)


RUNS = {
    "kineto_nccl_2rank": lambda tmp: [fixture_path("kineto", "hta_sampled_2rank_nccl")],
    "kineto_rocm": lambda tmp: [fixture_path("kineto", "hta_amd_mi250_rocm")],
    "torch_npu_text": lambda tmp: [fixture_path("ascend", "torch_npu_2rank_level1_text")],
    "torch_npu_db": lambda tmp: [fixture_path("ascend", "torch_npu_2rank_level1_db")],
    "msprof_legacy": lambda tmp: [fixture_path("ascend", "msprof_cann7_2device_timeline_legacy")],
    "synthetic_gpu": lambda tmp: [_synthetic_gpu(tmp / "gpu.json")],
    "synthetic_cpu": lambda tmp: [_synthetic_cpu(tmp / "cpu.json")],
}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    with prof_engine.open(prof_engine.import_trace(RUNS[request.param](tmp), tmp / "run")) as r:
        yield r


def test_step_trace_from_stored_lanes_equals_the_computed_one(run):
    assert run.manifest["derived"] == ["lane_totals", "lanes", "slices.wait", "slices.launch_api", "slices.launch_api_ts",
                                       "slices.launch_api_dur", "lanes.sorted"]
    stored = run.view("step_trace").rows()
    assert stored and run.sql("SELECT count(*) FROM lane_totals").rows()[0][0] == len(stored)
    use_stored(run.con, run_lanes_stored=False, run_overlap_stored=False)  # as for a run without either
    try:
        assert run.sql("EXPLAIN SELECT * FROM step_trace").rows()[0][1].count("READ_PARQUET") > 1
        assert run.view("step_trace").rows() == stored
    finally:
        use_stored(run.con, run_lanes_stored=True, run_overlap_stored=True)


def test_overlap_from_stored_lanes_equals_the_computed_one(run):
    stored = run.view("overlap").rows()
    assert stored and run.sql("SELECT count(*) FROM lanes").rows()[0][0] == len(stored)
    assert run.sql("SELECT run_lanes_in_order()").rows() == [(True,)]  # read in order: not sorted
    assert "─ Window ─" not in run.sql("EXPLAIN SELECT * FROM _overlap").rows()[0][1]  # nothing computed
    timeline = run.sql("SELECT event::VARCHAR AS e FROM _timeline ORDER BY e").rows()
    use_stored(run.con, run_overlap_stored=False)  # as for a run without them
    try:
        assert "─ Window ─" in run.sql("EXPLAIN SELECT * FROM _overlap").rows()[0][1]
        assert run.view("overlap").rows() == stored  # in the same order, sorted
        assert run.sql("SELECT event::VARCHAR AS e FROM _timeline ORDER BY e").rows() == timeline
    finally:
        use_stored(run.con, run_overlap_stored=True)


def test_op_summary_from_stored_waits_equals_the_computed_one(run):
    query = 'SELECT * FROM op_summary ORDER BY ALL'
    stored = run.sql(query).rows()
    assert stored
    assert "─ Window ─" not in run.sql("EXPLAIN SELECT * FROM _tasks").rows()[0][1]  # the window is folded away
    run.con.execute("CREATE OR REPLACE MACRO run_waits_stored() AS false")
    try:
        assert "─ Window ─" in run.sql("EXPLAIN SELECT * FROM _tasks").rows()[0][1]
        assert run.sql(query).rows() == stored
    finally:
        run.con.execute("CREATE OR REPLACE MACRO run_waits_stored() AS true")


@pytest.mark.parametrize("view", ["kernel_launch", "idle_time", "queue_length", "advice"])
def test_launch_views_from_stored_launch_calls_equal_the_joined_ones(run, view):
    """Each task's launching API call, stored at import, gives the views what the ASOF join of
    the tasks to every API call gives them (CANN runs: the innermost of the layers sharing an id)."""
    query = f"SELECT * FROM {view} ORDER BY ALL"
    stored = run.sql(query).rows()
    # (the join's `any_time`: DuckDB plans small ASOF joins as a nested loop and a window)
    assert "any_time" not in run.sql(f"EXPLAIN {query}").rows()[0][1]  # no join: folded away
    run.con.execute("CREATE OR REPLACE MACRO run_launch_apis_stored() AS false")
    try:
        assert "any_time" in run.sql(f"EXPLAIN {query}").rows()[0][1]
        assert run.sql(query).rows() == stored
    finally:
        run.con.execute("CREATE OR REPLACE MACRO run_launch_apis_stored() AS true")
    if view == "kernel_launch":  # not both empty for want of links: a task with a call of its id is listed
        linked = run.sql("SELECT count(DISTINCT t.id) FROM slices t JOIN slices c ON c.rank = t.rank "
                         "AND c.correlation = t.correlation AND c.kind = 'api' "
                         "WHERE t.device <> 'host' AND t.kind IN ('kernel', 'comm', 'memcpy', 'memset')").rows()[0][0]
        assert len(stored) == linked


def test_step_trace_reads_only_the_stored_lanes(run):
    plan = run.sql("EXPLAIN SELECT * FROM step_trace").rows()[0][1]
    assert plan.count("READ_PARQUET") == 1  # computed from slices: four scans (activity, devices, receives, steps)


def test_synthetic_lanes_by_hand(tmp_path):
    """Step 1 of the synthetic GPU trace, µs: computing [10, 55) ∪ [70, 75) = 50; communication
    [30, 70) ∪ [80, 90) = 50; of it not under computing [55, 70) ∪ [80, 90) = 25; span [10, 90), free
    80 − |all| (= [10, 75) ∪ [80, 90): 75) = 5; the receive's 10 is the bubble."""
    with prof_engine.open(prof_engine.import_trace([_synthetic_gpu(tmp_path / "t.json")], tmp_path / "run")) as r:
        rows = r.sql("SELECT step, computing, communication, not_overlapped, free, bubble, first_active - step_start, "
                     "span_end - span_start FROM lane_totals ORDER BY step NULLS LAST").rows()
    us = 1000
    assert rows == [(1, 50 * us, 50 * us, 25 * us, 5 * us, 10 * us, 10 * us, 80 * us),
                    (2, 50 * us, 50 * us, 25 * us, 5 * us, 10 * us, 10 * us, 80 * us),
                    (None, 7 * us, 0, 0, 0, 0, None, 7 * us)]


@pytest.mark.parametrize("view", ["overlap", "op_summary", "communication"])
def test_views_skip_the_host_fallback_only_where_no_rank_needs_it(run, view):
    """Where the manifest says every rank has device tasks, the host-op branches are folded away;
    forcing them back on (as for a manifest that cannot say) changes no row."""
    from prof_engine.store.manifest import host_only_ranks_possible

    query = f"SELECT * FROM {view} ORDER BY ALL"
    rows = run.sql(query).rows()
    run.con.execute("CREATE OR REPLACE MACRO run_host_only_ranks() AS true")
    try:
        assert run.sql(query).rows() == rows
        # and the manifest's answer is the computed one
        assert host_only_ranks_possible(run.manifest) == bool(run.sql("SELECT * FROM _host_only_ranks").rows())
    finally:
        run.con.execute(f"CREATE OR REPLACE MACRO run_host_only_ranks() AS {str(host_only_ranks_possible(run.manifest)).lower()}")


def test_a_manifest_without_task_counts_may_have_host_only_ranks():
    from prof_engine.store.manifest import host_only_ranks_possible

    gpu = {"rank": 0, "device": "gpu0", "records": 5}
    assert host_only_ranks_possible({"ranks": [0], "devices": [gpu]})  # written before tasks were counted
    assert not host_only_ranks_possible({"ranks": [0], "devices": [{**gpu, "tasks": 5}]})
    assert host_only_ranks_possible({"ranks": [0, 1], "devices": [{**gpu, "tasks": 5}]})  # rank 1: none
    assert host_only_ranks_possible({"ranks": [0], "devices": [{**gpu, "tasks": 0}]})  # device ranges only


def test_overlap_sorts_the_lanes_unless_they_are_stored_in_order(tmp_path):
    """`overlap` reads stored lanes without sorting them only where the manifest says they were
    written in order (`lanes.sorted`, schema 1.4 on) and their files are one per rank and device;
    otherwise (lanes of schema 1.3, a device's lanes in several files) it sorts them: the same rows
    in the same order."""
    import json

    import pyarrow.parquet as pq

    path = prof_engine.import_trace([_synthetic_gpu(tmp_path / "t.json")], tmp_path / "run")
    with prof_engine.open(path) as r:
        expected = r.view("overlap").rows()
        assert r.sql("SELECT run_lanes_in_order()").rows() == [(True,)]
    (lanes,) = (path / "lanes").rglob("*.parquet")
    rows = pq.read_table(lanes)
    assert rows.num_rows == len(expected) > 4
    # a device's lanes in two files, the later rows in the one listed first
    pq.write_table(rows.slice(rows.num_rows // 2), lanes.with_name("part-0.parquet"))
    pq.write_table(rows.slice(0, rows.num_rows // 2), lanes.with_name("part-1.parquet"))
    lanes.unlink()
    with prof_engine.open(path) as r:
        assert r.sql("SELECT run_lanes_in_order()").rows() == [(False,)]
        assert r.view("overlap").rows() == expected
    # one file, in reverse order, as schema 1.3 did not promise any
    for f in (path / "lanes").rglob("*.parquet"):
        f.unlink()
    pq.write_table(rows.take(list(reversed(range(rows.num_rows)))), lanes)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["derived"].remove("lanes.sorted")
    (path / "manifest.json").write_text(json.dumps(manifest))
    with prof_engine.open(path) as r:
        assert r.sql("SELECT run_lanes_in_order()").rows() == [(False,)]
        assert r.view("overlap").rows() == expected
