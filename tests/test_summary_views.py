"""The per-name summaries of nsys stats and msprof: kernel_statistic (cuda_gpu_kern_sum),
memcpy_statistic (cuda_gpu_mem_time_sum + cuda_gpu_mem_size_sum), range_statistic (nvtx_sum,
msprof_tx) and communication_statistic (msprof communication_statistic), on a small synthetic
trace whose expected numbers are computed here."""

from __future__ import annotations

import statistics

import pytest

import prof_engine
from conftest import write_trace, x


def _device(name: str, ts: float, dur: float, cat: str = "kernel", **args) -> dict:
    return x(name, ts, dur, cat=cat, pid=0, tid=7, device=0, stream=7, **args)


KERNELS = {"gemm": [1.0, 2.0, 6.0], "relu": [10.0]}
COPIES = [
    ("Memcpy HtoD (Pageable -> Device)", 4.0, 1_000_000),
    ("Memcpy HtoD (Pageable -> Device)", 6.0, 3_000_000),
    ("Memcpy DtoH (Device -> Pageable)", 2.0, 500_000),
]
RANGES = {"forward": [20.0, 30.0], "optimizer": [5.0]}
ALLREDUCE = [5.0, 7.0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("summaries")
    events, t = [x("ProfilerStep#1", 0, 1000, cat="user_annotation")], 10.0
    for name, durs in KERNELS.items():
        for d in durs:
            events.append(_device(name, t, d))
            t += 20
    for name, d, nbytes in COPIES:
        events.append(_device(name, t, d, cat="gpu_memcpy", bytes=nbytes))
        t += 20
    events.append(_device("Memset (Device)", t, 1.0, cat="gpu_memset"))  # no bytes recorded
    t += 20
    for name, durs in RANGES.items():
        for d in durs:
            events.append(x(name, t, d, cat="user_annotation"))
            t += 40
    for d in ALLREDUCE:
        events.append(_device("ncclKernel_AllReduce_RING_LL_Sum_float", t, d))
        t += 20
    path = write_trace(tmp / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([path], tmp / "run")) as r:
        yield r


def _stats(durs: list[float]) -> tuple:
    return (
        sum(durs),
        len(durs),
        statistics.mean(durs),
        statistics.median(durs),
        min(durs),
        max(durs),
        statistics.stdev(durs) if len(durs) > 1 else 0.0,
    )


def test_kernel_statistic_is_cuda_gpu_kern_sum(run):
    """Every kernel the device ran, communication kernels too, as nsys `cuda_gpu_kern_sum` lists them."""
    rows = run.sql('SELECT * EXCLUDE ("Rank", "Device") FROM kernel_statistic').rows()
    kernels = {**KERNELS, "ncclKernel_AllReduce_RING_LL_Sum_float": ALLREDUCE}
    total = sum(sum(d) for d in kernels.values())
    want = sorted(
        ((round(100 * sum(d) / total, 3), *_stats(d), name) for name, d in kernels.items()), key=lambda r: -r[1]
    )
    assert [r[-1] for r in rows] == [w[-1] for w in want]  # by total time, longest first
    for got, exp in zip(rows, want):
        assert got == pytest.approx(exp, abs=1e-3)


def test_memcpy_statistic_sums_time_and_bytes(run):
    rows = {
        r[0]: r[1:]
        for r in run.sql(
            'SELECT "Operation", "Kind", "Count", "Total Time(us)", "Total Size(MB)", "Bandwidth(GB/s)" FROM memcpy_statistic'
        ).rows()
    }
    htod = [(d, b) for n, d, b in COPIES if "HtoD" in n]
    t, b = sum(d for d, _ in htod), sum(b for _, b in htod)
    assert rows["Memcpy HtoD (Pageable -> Device)"] == ("memcpy", 2, t, b / 1e6, pytest.approx(b / (t * 1e3), abs=1e-3))
    assert rows["Memcpy DtoH (Device -> Pageable)"] == ("memcpy", 1, 2.0, 0.5, 250.0)  # B per ns = GB/s
    assert rows["Memset (Device)"] == ("memset", 1, 1.0, None, None)  # no bytes: no size, no bandwidth


def test_range_statistic_is_nvtx_sum(run):
    rows = run.sql('SELECT * EXCLUDE ("Rank", "Device") FROM range_statistic').rows()
    total = sum(sum(d) for d in RANGES.values())
    want = [(round(100 * sum(d) / total, 3), *_stats(d), name) for name, d in RANGES.items()]
    assert len(rows) == len(want)
    for got, exp in zip(rows, want):
        assert got[-1] == exp[-1] and got[:-1] == pytest.approx(exp[:-1], abs=1e-3)


def test_communication_statistic_by_op_type(run):
    assert run.sql(
        'SELECT "OP Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", '
        '"Ratio(%)" FROM communication_statistic'
    ).rows() == [("allreduce", 2, sum(ALLREDUCE), min(ALLREDUCE), statistics.mean(ALLREDUCE), max(ALLREDUCE), 100.0)]


def test_counter_statistic_weights_each_value_by_how_long_it_held(tmp_path):
    def sample(ts: float, **values) -> dict:
        return {"ph": "C", "name": "cpu", "pid": 1, "tid": 1, "ts": ts, "args": values}

    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("op", 1, 1),
        sample(0, used=10),
        sample(10, used=20),
        sample(40, used=50),
        sample(5, idle=3),
    ]
    with prof_engine.open(prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")) as r:
        rows = r.sql('SELECT "Counter", "Series", "Samples", "Min", "Avg", "Max", "Last" FROM counter_statistic').rows()
    # used: 10 for 10 µs, 20 for 30 µs, then 50 (the last sample holds for no known time)
    assert rows == [("cpu", "idle", 1, 3.0, 3.0, 3.0, 3.0), ("cpu", "used", 3, 10.0, 17.5, 50.0, 50.0)]


def test_kernel_details_gives_a_cuda_kernels_launch_configuration(tmp_path):
    import json

    launch = {
        "grid": [4, 2, 1],
        "block": [128, 1, 1],
        "registers per thread": 32,
        "shared memory": 1024,
        "est. achieved occupancy %": 50,
    }
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("aten::mm", 1, 20, **{"External id": 1}),
        x("cudaLaunchKernel", 2, 5, cat="cuda_runtime", correlation=9, **{"External id": 1}),
        _device("gemm", 30, 10, correlation=9, **{"External id": 1}, **launch),
        _device("old_style_kernel", 50, 5, correlation=10),
    ]  # no launch details: not listed
    with prof_engine.open(prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")) as r:
        rows = r.sql(
            'SELECT "Name", "Type", "Task ID", "Accelerator Core", "Block Dim", "Metrics" FROM kernel_details'
        ).rows()
    assert [row[:5] for row in rows] == [("gemm", "aten::mm", 9, "KERNEL", 8)]
    assert json.loads(rows[0][5]) == launch


def test_shows_device_op_types_where_a_rank_has_them(tmp_path):
    """`show`'s op types: a rank's device op types where it has device tasks (its CPU ops' self time
    would crowd them out), its CPU op types where it has none."""
    gpu = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        x("aten::copy_", 10, 500, **{"External id": 1}),  # long on the host, short on the device
        x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=1, **{"External id": 1}),
        _device("copy_kernel", 30, 2, correlation=1, **{"External id": 1}),
    ]
    cpu = [x("ProfilerStep#1", 0, 1000, cat="user_annotation"), x("aten::relu", 10, 50)]
    for rank, events in enumerate((gpu, cpu)):
        write_trace(tmp_path / f"r{rank}.json", events, distributedInfo={"rank": rank, "world_size": 2})
    with prof_engine.open(
        prof_engine.import_trace([tmp_path / "r0.json", tmp_path / "r1.json"], tmp_path / "run")
    ) as r:
        table = r.summary()["Top 10 op types (op_statistic)"]
        assert r.sql('SELECT count(*) FROM op_statistic WHERE "Rank" = 0 AND "Device" = \'host\'').rows() == [(1,)]
    assert [row[:4] for row in table.rows()] == [(1, "host", "aten::relu", "CPU"), (0, "gpu0", "aten::copy_", "KERNEL")]
