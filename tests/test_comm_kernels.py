"""Communication kernels: kernel_statistic lists them with the compute kernels (as nsys
`cuda_gpu_kern_sum` does), and a kernel is communication by its launcher as well as by its name
(a kernel launched from within a collective op: RCCL's, DeepEP's, custom all-to-alls)."""

from __future__ import annotations

import collections

import pytest

import prof_engine
from conftest import fixture_path, load_events, write_trace, x


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """(raw traces, open run) of HTA's 2-rank NCCL sample."""
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    raw = [load_events(p) for p in sorted(src.glob("*.json.gz"))]
    with prof_engine.open(prof_engine.import_trace([src], tmp_path_factory.mktemp("sampled") / "run")) as run:
        yield raw, run


def test_kernel_statistic_counts_every_kernel(sampled):
    """Per rank, device and name: the instances and total time of every raw `kernel` event, NCCL
    ones included; Time(%) adds up to 100 per device."""
    raw, run = sampled
    want: dict = collections.defaultdict(lambda: [0, 0])
    for top, events in raw:
        rank = top["distributedInfo"]["rank"]
        for e in events:
            if e.get("ph") == "X" and e.get("cat") == "kernel":
                w = want[(rank, f"gpu{e['args'].get('device', e['pid'])}", e["name"])]
                w[0] += 1
                w[1] += e["dur"]  # µs, exact (Decimal)
    got = {
        (r, d, name): (n, t)
        for r, d, name, n, t in run.sql(
            'SELECT "Rank", "Device", "Name", "Instances", "Total Time(us)" FROM kernel_statistic'
        ).rows()
    }
    assert got.keys() == want.keys()
    for key, (n, total) in want.items():
        assert got[key] == (n, pytest.approx(float(total), abs=1e-3)), key
    rank0 = {name: t for (r, _, name), (_, t) in want.items() if r == 0}
    nccl = sum(t for name, t in rank0.items() if name.startswith("nccl"))
    assert nccl > sum(rank0.values()) / 2  # the share of rank 0's kernel time the view left out before
    for rank, device, share in run.sql(
        'SELECT "Rank", "Device", sum("Time(%)") FROM kernel_statistic GROUP BY ALL'
    ).rows():
        assert share == pytest.approx(100, abs=0.05), (rank, device)


# A step on one thread (µs):
#   c10d::allreduce_ [100, 200) ⊃ record_param_comms [110, 130) ⊃ hipExtLaunchKernel @120 (corr 1)
#                                  cudaLaunchKernel @150 (corr 2): after record_param_comms, in c10d
#   c10d::alltoall_base_ [220, 240): launches by External id 7 alone (no API call recorded)
#   aten::add [400, 450) ⊃ cudaLaunchKernel @410 (corr 3)
# The kernels: the same non-NCCL name in and out of collectives, on stream 7.
COMM = [("elementwise_kernel", 300, 40, 1), ("custom_all_to_all", 600, 30, None), ("elementwise_kernel", 700, 20, 2)]
COMPUTE = [("elementwise_kernel", 500, 50, 3)]


def _launch_trace(path):
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        x("c10d::allreduce_", 100, 100, **{"External id": 1}),
        x("record_param_comms", 110, 20, **{"External id": 2}),
        x("hipExtLaunchKernel", 120, 5, cat="cuda_runtime", correlation=1),
        x("cudaLaunchKernel", 150, 5, cat="cuda_runtime", correlation=2),
        x("c10d::alltoall_base_", 220, 20, **{"External id": 7}),
        x("aten::add", 400, 50, **{"External id": 3}),
        x("cudaLaunchKernel", 410, 5, cat="cuda_runtime", correlation=3),
    ]
    for name, ts, dur, corr in COMM + COMPUTE:
        args = {"correlation": corr} if corr is not None else {"External id": 7}
        events.append(x(name, ts, dur, cat="kernel", pid=0, tid=7, device=0, stream=7, **args))
    return write_trace(path, events)


def test_kernels_launched_by_collective_ops_are_communication(tmp_path):
    trace = _launch_trace(tmp_path / "t.json")
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        kinds = sorted(run.sql("SELECT name, ts, kind FROM slices WHERE device = 'gpu0'").rows())
        ((computing, communication, not_overlapped),) = run.sql(
            'SELECT "Computing", "Communication", "Communication(Not Overlapped)" FROM step_trace'
        ).rows()
        lanes = run.sql("""SELECT "Type", sum("Duration(us)") FROM overlap GROUP BY ALL""").rows()
        stats = dict(run.sql('SELECT "Name", "Instances" FROM kernel_statistic').rows())
        ops = dict(run.sql("""SELECT "OP Type", "Count" FROM op_statistic WHERE "Device" = 'gpu0'""").rows())
    assert kinds == sorted(
        [(n, ts * 1000, "comm") for n, ts, _, _ in COMM] + [(n, ts * 1000, "kernel") for n, ts, _, _ in COMPUTE]
    )
    comm_us, compute_us = sum(d for _, _, d, _ in COMM), sum(d for _, _, d, _ in COMPUTE)
    assert (computing, communication, not_overlapped) == (compute_us, comm_us, comm_us)
    assert dict(lanes)["Communication"] == comm_us and dict(lanes)["Computing"] == compute_us
    assert stats == {"elementwise_kernel": 3, "custom_all_to_all": 1}  # every kernel, whatever its kind
    assert ops == {"aten::add": 1}  # op_statistic's device rows: compute kernels by their launcher


@pytest.mark.parametrize(
    "name, collective",
    [
        ("record_param_comms", True),
        ("c10d::allreduce_", True),
        ("_c10d_functional::all_reduce", True),
        ("c10d_functional::all_gather_into_tensor", True),
        ("nccl:all_to_all", True),
        ("gloo:broadcast", True),
        ("aten::add", False),
        ("record_param_comms_x", False),
        ("ncclKernel_AllReduce", False),
        ("c10d", False),
    ],
)
def test_is_collective_op(name, collective):
    """The host ops whose kernels are communication (queries/_classify.sql), on inline names."""
    import duckdb

    from prof_engine._resources import data_dir

    con = duckdb.connect()
    con.execute((data_dir("queries") / "_classify.sql").read_text())
    assert con.execute("SELECT is_collective_op(?)", [name]).fetchone() == (collective,)
