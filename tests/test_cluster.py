"""Cluster views over several ranks: cluster_step_trace (per rank and stage) and slow_rank (the rule)."""

from __future__ import annotations

import json

import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine.store.manifest import run_ranks

BASE = 1_700_000_000_000_000  # µs


def _rank_trace(d, rank: int, compute_us: float):
    """One step [0, 1000) µs; on gpu0 a kernel of `compute_us` then an allreduce of 100 µs."""
    kernel = x("gemm", BASE + 10, compute_us, cat="kernel", pid=0, tid=7, device=0, stream=7)
    comm = x("ncclKernel_AllReduce", BASE + 20 + compute_us, 100, cat="kernel", pid=0, tid=8, device=0, stream=8)
    step = x("ProfilerStep#3", BASE, 1000, cat="user_annotation")
    return write_trace(d / f"rank{rank}.json", [step, kernel, comm], distributedInfo={"rank": rank, "world_size": 5})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    for rank, compute in enumerate([200, 202, 198, 201, 400]):  # rank 4 computes twice as long
        _rank_trace(d, rank, compute)
    with prof_engine.open(prof_engine.import_trace([d], d / "run", jobs=1)) as r:
        yield r


def test_cluster_step_trace_rank_and_stage_rows(cluster):
    rows = cluster.sql('SELECT "Type", "Index", "Computing", "Free" FROM cluster_step_trace WHERE "Step" = 3').rows()
    assert [(t, i) for t, i, _, _ in rows] == [("rank", str(r)) for r in range(5)] + [("stage", "(0, 1, 2, 3, 4)")]
    by_index = {i: (c, f) for _, i, c, f in rows}
    assert by_index["4"] == (400.0, 10.0)
    assert by_index["(0, 1, 2, 3, 4)"] == (400.0, 10.0)  # stage rows: the per-column maximum


def test_slow_rank_flags_the_outlier_only(cluster):
    rows = cluster.sql('SELECT "Rank", "Component", "Value(us)", "Median(us)", "Ranks" FROM slow_rank').rows()
    assert rows == [(4, "Computing", 400.0, 201.0, 5)]


def test_slow_rank_needs_three_ranks(tmp_path):
    for rank, compute in enumerate([100, 500]):
        _rank_trace(tmp_path, rank, compute)
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run", jobs=1)) as r:
        assert len(r.view("slow_rank")) == 0


def test_pipeline_stage_from_parallel_group_info():
    groups = {
        "g1": {"group_name": "pp", "group_rank": 1, "global_ranks": [4, 0]},
        "g2": {"group_name": "tp", "group_rank": 0, "global_ranks": [4, 5]},
        "g3": {"group_name": "dp", "group_rank": 0, "global_ranks": [4, 6]},
    }
    manifest = {
        "sources": [
            {"rank": 4, "path": "r4", "format": "torch_npu", "info": {"parallel_group_info": groups}},
            {"rank": 9, "path": "r9", "format": "torch_npu", "info": {}},
        ]
    }
    rows = run_ranks(json.loads(json.dumps(manifest)))
    # rank, host, source, format, pp_stage, dp_index, tp_index
    assert rows[0] == (4, None, "r4", "torch_npu", 1, 0, 0)
    assert rows[1][4] is None
