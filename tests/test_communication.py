"""The communication and communication_matrix views: a hand-built HCCL timeline with exact rows, and
fidelity against torch_npu's own communication.json / communication_matrix.json.

Fixture `ascend/torch_npu_2rank_level1_text` ships, per rank, the raw trace_view.json (whose HCCL lane
holds the ops and their plane tasks) next to the vendor's communication.json and
communication_matrix.json, computed by msprof from the same tasks.

Documented differences (the vendor's rounding, not ours):
* `Start Timestamp(us)` is a float64 of µs since the epoch, whose spacing near 1.7e15 is 0.25 µs
  (`1736408883732241.5` for the trace's `1736408883732241.564`).
* trace_view.json gives task durations with sub-ns digits (`0.60003125` µs); the run store holds
  ns, so every summed time can differ by up to 0.5 ns per task (≤ 10 tasks per op here: 5e-6 ms),
  and a bandwidth by that relative error: ≤ 0.01 GB/s even for the 8 µs on-chip copies at ~500 GB/s,
  the most sensitive entries.
Everything else matches: times to 0.001 ms, ratios to 0.001, sizes exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
FLOAT64_AT_EPOCH_US = 0.25
TIME_COLUMNS = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")
RATIO_COLUMNS = ("Wait Time Ratio", "Synchronization Time Ratio")


def _rows(run, sql: str, params: list | None = None) -> list[dict]:
    return run.sql(sql, params or []).arrow().to_pylist()


# -- a hand-built Ascend trace ----------------------------------------------------------------------

T0 = 1_700_000_000_000_000  # µs since the epoch
HCCL, HW, PY = 300, 200, 100  # lane pids


def _ts(us: float) -> str:
    return f"{T0 + us:.3f}"


def _task(
    name: str, plane: int, start: float, dur: float, transport: str, src: int, dst: int, size: int, link: str
) -> dict:
    """A plane task on thread `Plane {plane}` (tid plane + 1, the group's thread being tid 0)."""
    return {
        "ph": "X",
        "name": name,
        "pid": HCCL,
        "tid": plane + 1,
        "ts": _ts(start),
        "dur": dur,
        "args": {
            "notify_id": "0",
            "stream id": 4,
            "task id": 1,
            "context id": 0,
            "task type": name,
            "src rank": src,
            "dst rank": dst,
            "transport type": transport,
            "size(Byte)": size,
            "data type": "FP32",
            "link type": link,
            "model id": 4294967295,
        },
    }


def _op(name: str, start: float, dur: float) -> dict:
    return {
        "ph": "X",
        "name": name,
        "pid": HCCL,
        "tid": 0,
        "ts": _ts(start),
        "dur": dur,
        "args": {"connection_id": 1, "data_type": "FP32", "alg_type": "MESH", "count": 1000},
    }


def _meta(kind: str, pid: int, tid: int = 0, **args) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


# Timeline (µs after T0; rank 0 of 4). Op A, hcom_allReduce__001_0_1, [0, 100):
#   Plane 0  |Memcpy ON_CHIP 0→0 1 MB|                                                 on-chip: matrix only
#   Plane 1     [5 Notify_Wait 25)  [30 Reduce_Inline HCCS 0→1 4 MB 70)  [75 NW 85) [90 Rec 91)  master
#   Plane 2       [10 Memcpy PCIE 0→2 2 MB 60)  [60 Notify_Wait 90)                        not master
# → transit 40, wait 20 + 10, sync 20 (before the first transit), idle 100 − 70 = 30.
# Op B, hcom_allReduce__001_1_1, [200, 250): Plane 1 holds one RDMA transfer of 5 tasks
#   [200 RDMASend 8 MB][203 RDMASend][205 Notify_Wait 215][216 RDMASend][218 Notify_Wait 230]
#   then [235 Notify_Wait 240) → transit 30 (200..230, the inner Notify_Waits are part of it), wait 5.
# Op C, hcom_broadcast__001_2_1, [300, 310): no plane tasks → elapse only.
# Op D, hcom_allGather__001_3_1, [400, 440), Plane 1 (a one-drop partition, clipped to the window):
#   [395 Notify_Wait 405)  [410 Memcpy HCCS 0→1 1 MB 420)
#                                   [415 Notify_Wait 430)
#   → transit 10; wait 5 (400..405, before the window cut) + 10 (420..430, under transit it is
#   transit); sync 5; idle 40 − 25 = 15.
SYNTHETIC = [
    _meta("process_name", PY, name="Python"),
    _meta("process_labels", PY, labels="CPU"),
    _meta("process_name", HW, name="Ascend Hardware"),
    _meta("process_labels", HW, labels="NPU"),
    _meta("thread_name", HW, 2, name="Stream 2"),
    _meta("process_name", HCCL, name="HCCL"),
    _meta("process_labels", HCCL, labels="NPU"),
    _meta("thread_name", HCCL, 0, name="Group 0 Communication"),
    *[_meta("thread_name", HCCL, p + 1, name=f"Plane {p}") for p in range(3)],
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": PY, "tid": 1, "ts": _ts(-10), "dur": 500},
    {
        "ph": "X",
        "name": "MatMul",
        "pid": HW,
        "tid": 2,
        "ts": _ts(120),
        "dur": 10,
        "args": {"Task Type": "AI_CORE", "Physic Stream Id": 2, "Task Id": 9},
    },
    _op("hcom_allReduce__001_0_1", 0, 100),
    _task("Memcpy", 0, 0, 2, "SDMA", 0, 0, 1_000_000, "ON_CHIP"),
    _task("Notify_Wait", 1, 5, 20, "LOCAL", 0, 1, 0, "INVALID_TYPE"),
    _task("Reduce_Inline", 1, 30, 40, "SDMA", 0, 1, 4_000_000, "HCCS"),
    _task("Notify_Wait", 1, 75, 10, "LOCAL", 0, 1, 0, "INVALID_TYPE"),
    _task("Notify_Record", 1, 90, 1, "SDMA", 0, 1, 0, "INVALID_TYPE"),
    _task("Memcpy", 2, 10, 50, "SDMA", 0, 2, 2_000_000, "PCIE"),
    _task("Notify_Wait", 2, 60, 30, "LOCAL", 0, 2, 0, "INVALID_TYPE"),
    _op("hcom_allReduce__001_1_1", 200, 50),
    _task("RDMASend", 1, 200, 2, "RDMA", 0, 1, 8_000_000, "ROCE"),
    _task("RDMASend", 1, 203, 1, "RDMA", 0, 1, 4, "ROCE"),
    _task("Notify_Wait", 1, 205, 10, "RDMA", 0, 1, 0, "INVALID_TYPE"),
    _task("RDMASend", 1, 216, 1, "RDMA", 0, 1, 4, "ROCE"),
    _task("Notify_Wait", 1, 218, 12, "RDMA", 0, 1, 0, "INVALID_TYPE"),
    _task("Notify_Wait", 1, 235, 5, "LOCAL", 0, 1, 0, "INVALID_TYPE"),
    _op("hcom_broadcast__001_2_1", 300, 10),
    _op("hcom_allGather__001_3_1", 400, 40),
    _task("Notify_Wait", 1, 395, 10, "LOCAL", 0, 1, 0, "INVALID_TYPE"),
    _task("Memcpy", 1, 410, 10, "SDMA", 0, 1, 1_000_000, "HCCS"),
    _task("Notify_Wait", 1, 415, 15, "LOCAL", 0, 1, 0, "INVALID_TYPE"),
]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("hccl")
    out = d / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(json.dumps(SYNTHETIC), encoding="utf-8")
    with prof_engine.open(prof_engine.import_trace([d / "rank0_ascend_pt"], d / "run")) as run:
        yield run


def test_communication_time_and_bandwidth_on_a_hand_built_trace(synthetic):
    rows = synthetic.sql(
        'SELECT "Step", "Op Name", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", '
        '"Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio", '
        + ", ".join(f'"{t} Transit Size(MB)", "{t} Transit Time(ms)", "{t} Bandwidth(GB/s)"' for t in TRANSPORTS)
        + " FROM communication"
    ).rows()
    assert rows == [
        # step, op, elapse, transit, wait, sync, idle, ratios; RDMA, HCCS, PCIE, SDMA (= HCCS + PCIE), SIO
        (
            7,
            "hcom_allReduce__001_0_1",
            0.1,
            0.04,
            0.03,
            0.02,
            0.03,
            0.4286,
            0.3333,
            0.0,
            0.0,
            0.0,
            4.0,
            0.04,
            100.0,
            2.0,
            0.05,
            40.0,
            6.0,
            0.09,
            66.6667,
            0.0,
            0.0,
            0.0,
        ),
        (
            7,
            "hcom_allReduce__001_1_1",
            0.05,
            0.03,
            0.005,
            0.0,
            0.015,
            0.1429,
            0.0,
            8.0,
            0.03,
            266.6667,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ),
        (7, "hcom_broadcast__001_2_1", 0.01, None, None, None, None, None, None, *[None] * 15),
        (
            7,
            "hcom_allGather__001_3_1",
            0.04,
            0.01,
            0.015,
            0.005,
            0.015,
            0.6,
            0.3333,
            0.0,
            0.0,
            0.0,
            1.0,
            0.01,
            100.0,
            0.0,
            0.0,
            0.0,
            1.0,
            0.01,
            100.0,
            0.0,
            0.0,
            0.0,
        ),
    ]
    (start,) = synthetic.sql('SELECT "Start Time(us)" FROM communication LIMIT 1').rows()[0]
    assert str(start) == f"{T0}.000"


def test_communication_matrix_on_a_hand_built_trace(synthetic):
    rows = synthetic.sql(
        'SELECT "Op Name", "Src Rank", "Dst Rank", "Transport Type", "Transit Size(MB)", "Transit Time(ms)", '
        '"Bandwidth(GB/s)", "Bandwidth Rank", "Buckets" FROM communication_matrix'
    ).rows()
    assert rows == [
        ("hcom_allReduce__001_0_1", 0, 0, "LOCAL", 1.0, 0.002, 500.0, 1, "top1,middle,bottom1"),
        ("hcom_allReduce__001_0_1", 0, 1, "HCCS", 4.0, 0.04, 100.0, 2, "middle,bottom1"),
        ("hcom_allReduce__001_0_1", 0, 2, "PCIE", 2.0, 0.05, 40.0, 1, "top1,middle,bottom1"),
        # the RDMA transfer: 8 MB over 200..230 µs; the faster of the two allreduce ops on link 0-1
        ("hcom_allReduce__001_1_1", 0, 1, "RDMA", 8.0, 0.03, 266.6667, 1, "top1,bottom2"),
        # another kind (allgather): ranked on its own
        ("hcom_allGather__001_3_1", 0, 1, "HCCS", 1.0, 0.01, 100.0, 1, "top1,middle,bottom1"),
    ]


def test_nccl_kernels_have_elapse_only(tmp_path):
    src = fixture_path("kineto", "hta_nccl_parser_rank0_ws2")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = _rows(run, "SELECT * FROM communication")
        (kernels,) = run.sql("SELECT count(*) FROM slices WHERE kind = 'comm' AND device <> 'host'").rows()[0]
        assert len(rows) == kernels > 0
        for r in rows:
            assert r["Device"].startswith("gpu") and r["Op Type"] in ("allreduce", "broadcast") and r["Group"] == "0"
            assert r["Elapse Time(ms)"] > 0
            assert all(
                v is None
                for k, v in r.items()
                if k.endswith(("(ms)", "(MB)", "(GB/s)", "Ratio")) and k != "Elapse Time(ms)"
            )
        assert len(run.view("communication_matrix")) == 0


# -- fidelity against torch_npu's communication.json / communication_matrix.json ----------------------


@pytest.fixture(scope="module")
def npu(torch_npu_text_run):
    return torch_npu_text_run


def _vendor(src: Path, rank: int, name: str) -> dict:
    return json.loads((src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / name).read_text(encoding="utf-8"))


def _step(key: str) -> int | None:
    return int(key[4:]) if key[4:] else None


@pytest.mark.parametrize("rank", [0, 1])
def test_communication_matches_communication_json(npu, rank):
    src, run = npu
    vendor = _vendor(src, rank, "communication.json")
    checked = 0
    for step_key, kinds in vendor.items():
        ours = {
            r["Op Name"]: r
            for r in _rows(run, 'SELECT * FROM communication WHERE "Rank" = ? AND "Step" = ?', [rank, _step(step_key)])
        }
        vendor_ops = {k.split("@")[0]: v for kind in kinds.values() for k, v in kind.items() if k != "Total Op Info"}
        assert set(ours) == set(vendor_ops)
        for name, v in vendor_ops.items():
            mine, time_info = ours[name], v["Communication Time Info"]
            assert float(mine["Start Time(us)"]) == pytest.approx(
                time_info["Start Timestamp(us)"], abs=FLOAT64_AT_EPOCH_US
            )
            for col in TIME_COLUMNS:
                assert mine[col] == pytest.approx(time_info[col], abs=0.001), (name, col)
            for col in RATIO_COLUMNS:
                assert mine[col] == pytest.approx(time_info[col], abs=0.001), (name, col)
            for transport, bw in v["Communication Bandwidth Info"].items():
                for what in ("Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)"):
                    assert mine[f"{transport} {what}"] == pytest.approx(bw[what], abs=0.01), (name, transport, what)
            checked += 1
        for kind in kinds.values():  # "Total Op Info": the sum of the kind's rows, ratios recomputed
            if "Total Op Info" in kind:
                total = kind["Total Op Info"]["Communication Time Info"]
                rows = [ours[k.split("@")[0]] for k in kind if k != "Total Op Info"]
                sums = {c: sum(r[c] for r in rows) for c in TIME_COLUMNS}
                for col in TIME_COLUMNS:
                    assert sums[col] == pytest.approx(total[col], abs=0.001), col
                transit = sums["Transit Time(ms)"]
                assert round(sums["Wait Time(ms)"] / (sums["Wait Time(ms)"] + transit), 4) == pytest.approx(
                    total["Wait Time Ratio"], abs=0.001
                )
    assert checked == 4


@pytest.mark.parametrize("rank", [0, 1])
def test_communication_matrix_matches_communication_matrix_json(npu, rank):
    src, run = npu
    vendor = _vendor(src, rank, "communication_matrix.json")
    checked = 0
    for step_key, kinds in vendor.items():
        ours = _rows(run, 'SELECT * FROM communication_matrix WHERE "Rank" = ? AND "Step" = ?', [rank, _step(step_key)])
        by_op_link = {(r["Op Name"], r["Src Rank"], r["Dst Rank"]): r for r in ours}
        for bucket_key, links in (b for kind in kinds.values() for b in kind.items()):
            bucket = bucket_key.split("@")[0].rsplit("-", 1)[1]
            for link, v in links.items():
                s, d = map(int, link.split("-"))
                if bucket == "total":  # the sum over the link's ops, bandwidth recomputed
                    rows = [r for r in ours if (r["Src Rank"], r["Dst Rank"]) == (s, d)]
                    size, time = sum(r["Transit Size(MB)"] for r in rows), sum(r["Transit Time(ms)"] for r in rows)
                    got = {
                        "Transport Type": rows[0]["Transport Type"],
                        "Transit Size(MB)": size,
                        "Transit Time(ms)": time,
                        "Bandwidth(GB/s)": round(size / time, 4),
                    }
                else:
                    got = by_op_link[(v["Op Name"], s, d)]
                    assert bucket in got["Buckets"].split(","), (bucket_key, link)
                assert got["Transport Type"] == v["Transport Type"]
                for what in ("Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)"):
                    assert got[what] == pytest.approx(v[what], abs=0.01), (bucket_key, link, what)
                checked += 1
        # every (op, link) row the vendor could have listed is ours and vice versa: 4 ops × 8 links
        assert len(ours) == len(by_op_link) == 32
    assert checked == 6 * 8
