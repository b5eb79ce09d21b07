"""What finalisation derives across a rank's records is stored at import, and views read it alone:
the step breakdown's lanes (`lane_totals`, read by `step_trace`), the Overlap Analysis lanes
(`lanes`, read by `overlap` and the timeline), each device task's stream wait (`slices.wait`,
read by `op_summary`) and its launching API call (`slices.launch_api*`, read by kernel_launch,
idle_time, queue_length and advice). A run of schema 1.x without them is refused and upgraded
(`prof-engine upgrade`): here an upgraded 1.6 run equals a fresh import, row for row, for every
public view and stored table, on real and synthetic runs, GPU and NPU, receive ops, records outside
every step and CPU-only ranks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine import schema
from prof_engine.engine.views import public_views


def _kernel(name: str, ts: float, dur: float, stream: int = 7, **args) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, **args)


def _synthetic_gpu(path):
    """Two steps of kernels and NCCL kernels (a receive among them: the bubble), overlapping, and
    device work outside every step."""
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("ProfilerStep#2", 100, 100, cat="user_annotation")]
    for _step, t0 in ((1, 0), (2, 100)):
        events += [
            _kernel("gemm", t0 + 10, 30),
            _kernel("gemm", t0 + 35, 20),
            _kernel("relu", t0 + 70, 5),
            _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 30, 40, stream=40),
            _kernel("ncclDevKernel_Recv", t0 + 80, 10, stream=41),
        ]
    events += [_kernel("late_kernel", 300, 7)]  # after the last step: step NULL
    return write_trace(path, events)


def _synthetic_cpu(path):
    """A CPU-only trace: host ops are the activity, a gloo range its communication."""
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("aten::mm", 5, 40),
        x("aten::add", 10, 5),
        x("gloo:all_reduce", 30, 30, cat="user_annotation"),
        x("aten::relu", 70, 10),
        x("aten::mm", 150, 10),
    ]
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


def as_schema_1_6(src: Path, dst: Path) -> Path:
    """A copy of run `src` at `dst` as schema 1.6 held a run finalised in batches (a collector's):
    manifest version 1.6, none of the derived tables, and slices without the derived columns."""
    shutil.copytree(src, dst)
    for table in schema.derived_tables():
        shutil.rmtree(dst / table, ignore_errors=True)
    derived_columns = [c.name for c in schema.tables()["slices"].columns if c.derived]
    for path in (dst / "slices").rglob("*.parquet"):
        pq.write_table(pq.read_table(path).drop_columns(derived_columns), path)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["schema_version"] = "1.6"
    manifest.pop("derived")
    manifest["tables"].update(dict.fromkeys(schema.derived_tables(), 0))
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


@pytest.fixture(scope="module", params=list(RUNS))
def runs(request, tmp_path_factory):
    """A fresh import, and a copy of it as schema 1.6 wrote it, upgraded."""
    tmp = tmp_path_factory.mktemp(request.param)
    fresh = prof_engine.import_trace(RUNS[request.param](tmp), tmp / "run", jobs=1)
    upgraded = prof_engine.upgrade(as_schema_1_6(fresh, tmp / "old"))
    with prof_engine.open(fresh) as r, prof_engine.open(upgraded) as u:
        yield r, u


@pytest.fixture(scope="module")
def run(runs):
    return runs[0]


def test_an_upgraded_1_6_run_equals_a_fresh_import(runs):
    fresh, upgraded = runs
    assert (
        fresh.manifest["derived"]
        == upgraded.manifest["derived"]
        == [
            "lane_totals",
            "lanes",
            "slices.wait",
            "slices.launch_api",
            "slices.launch_api_ts",
            "slices.launch_api_dur",
            "lanes.sorted",
        ]
    )
    for key in ("schema_version", "tables", "devices", "steps", "start_ns", "end_ns", "ranks", "sources", "findings"):
        assert upgraded.manifest[key] == fresh.manifest[key], key
    for view in public_views():
        query = f'SELECT * FROM "{view.name}"'
        assert upgraded.sql(query).rows() == fresh.sql(query).rows(), view.name
    for table in ("slices", "comm", "flows", "counters", "marks", "memory_events", "lanes", "lane_totals"):
        query = f"SELECT * FROM {table} ORDER BY ALL"
        assert upgraded.sql(query).rows() == fresh.sql(query).rows(), table


def test_views_read_the_stored_columns_alone(run):
    """Nothing the run stores is computed again: no window for the stream waits or lanes, no join
    of the tasks to their launching calls or launchers."""
    for view in ("_tasks", "_overlap", "_task_launches"):
        plan = run.sql(f"EXPLAIN SELECT * FROM {view}").rows()[0][1]
        assert "─ Window ─" not in plan and "JOIN" not in plan, view
    assert run.sql("SELECT run_lanes_in_order()").rows() == [(True,)]  # read in order: not sorted
    assert run.sql("SELECT count(*) FROM lanes").rows()[0][0] == len(run.view("overlap"))
    assert run.sql("SELECT count(*) FROM lane_totals").rows()[0][0] == len(run.view("step_trace"))


def test_step_trace_reads_only_the_stored_lanes(run):
    plan = run.sql("EXPLAIN SELECT * FROM step_trace").rows()[0][1]
    assert plan.count("READ_PARQUET") == 1  # computed from slices: four scans (activity, devices, receives, steps)


def test_synthetic_lanes_by_hand(tmp_path):
    """Step 1 of the synthetic GPU trace, µs: computing [10, 55) ∪ [70, 75) = 50; communication
    [30, 70) ∪ [80, 90) = 50; of it not under computing [55, 70) ∪ [80, 90) = 25; span [10, 90), free
    80 − |all| (= [10, 75) ∪ [80, 90): 75) = 5; the receive's 10 is the bubble."""
    with prof_engine.open(prof_engine.import_trace([_synthetic_gpu(tmp_path / "t.json")], tmp_path / "run")) as r:
        rows = r.sql(
            "SELECT step, computing, communication, not_overlapped, free, bubble, first_active - step_start, "
            "span_end - span_start FROM lane_totals ORDER BY step NULLS LAST"
        ).rows()
    us = 1000
    assert rows == [
        (1, 50 * us, 50 * us, 25 * us, 5 * us, 10 * us, 10 * us, 80 * us),
        (2, 50 * us, 50 * us, 25 * us, 5 * us, 10 * us, 10 * us, 80 * us),
        (None, 7 * us, 0, 0, 0, 0, None, 7 * us),
    ]


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
        run.con.execute(
            f"CREATE OR REPLACE MACRO run_host_only_ranks() AS {str(host_only_ranks_possible(run.manifest)).lower()}"
        )


def test_a_manifest_without_task_counts_may_have_host_only_ranks():
    from prof_engine.store.manifest import host_only_ranks_possible

    gpu = {"rank": 0, "device": "gpu0", "records": 5}
    assert host_only_ranks_possible({"ranks": [0], "devices": [gpu]})  # written before tasks were counted
    assert not host_only_ranks_possible({"ranks": [0], "devices": [{**gpu, "tasks": 5}]})
    assert host_only_ranks_possible({"ranks": [0, 1], "devices": [{**gpu, "tasks": 5}]})  # rank 1: none
    assert host_only_ranks_possible({"ranks": [0], "devices": [{**gpu, "tasks": 0}]})  # device ranges only


def test_overlap_sorts_the_lanes_unless_they_are_stored_in_order(tmp_path):
    """`overlap` reads stored lanes without sorting them only where their files are one per rank and
    device, as finalisation writes them; otherwise (a device's lanes in several files) it sorts
    them: the same rows in the same order."""
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
