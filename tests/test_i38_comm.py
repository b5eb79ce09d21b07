"""Issue 38, items 2 and 6: communication kernels known by their names whatever launched them
(DeepEP's all-to-alls inside user ranges), and the small ones of communication_matrix,
unknown_categories and the Ascend `.db` import's data_quality."""

from __future__ import annotations

import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine.importers import classify

# -- item 2: communication kernels by name ---------------------------------------------------------

COMM_NAMES = [
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "rcclGenericKernel<1, false>",
    "hcom_allReduce__586_0_1",
    "void deep_ep::internode::dispatch<true, 8, 7168>(int4*, float*, long*, float*, void*)",
    "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*, int)",
    "void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*, int*)",
    "void deep_ep::internode::notify_dispatch<true, 8>(int const*, int*, int)",
    "_ZN7deep_ep9internode8dispatchILb1ELi8ELi7168EEEvP4int4",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    "void vllm::cross_device_reduce_2stage<c10::Half, 4>(vllm::RankData*, int)",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(float**, unsigned long, float*)",
    "two_shot_allreduce_kernel",
    "void tensorrt_llm::kernels::oneShotAllReduceKernel<half, 8>(AllReduceParams)",
    "void c10d::nvshmem_extension::allToAllV(void*, long*, void*, long*, int, int)",
    "nvshmemi_transfer_rma_nbi_kernel",
    "all_gather_kernel",
    "reduce_scatter_kernel<float>",
    "mscclpp::allreduce7<float>",
]
COMPUTE_NAMES = [
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
    "reduce_kernel",
    "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*)",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>(cublasLt::cublasSplitKParams<float>)",
    "void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float, int>::Policy600, float*, float*, int>(float*, float*, int)",
    "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*, int*>>(long*)",
    "void at::native::_scatter_gather_elementwise_kernel<128, 4, at::native::_cuda_scatter_gather_internal_kernel<true, float>>()",
    "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)",
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
    "_combined_routing_compute",
    "_finalize_matmul_scatter_bf16",
    "small_reduce_kernel",
    "SmallReduceKernel",
    "triton_poi_fused_all_gather_into_tensor_0",
    "paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128>",
]


@pytest.mark.parametrize("name", COMM_NAMES)
def test_comm_kernel_names(name):
    """Collective libraries' kernels and kernels that name a collective are communication."""
    assert classify.kind_of("kernel", name, False) == "comm"


@pytest.mark.parametrize("name", COMPUTE_NAMES)
def test_compute_kernel_names(name):
    """Compute kernels whose names merely hold "reduce", "gather", "scatter" or "dispatch" stay
    compute; so do DeepEP's layout kernel and Inductor's kernels named after a collective's copy."""
    assert classify.kind_of("kernel", name, False) == "kernel"


# A step on one host thread (µs), as DeepEP runs in a MoE layer: its kernels are launched inside the
# model's own user ranges `dispatch` and `combine`, under no collective op; a compute op between them.
#   dispatch [100, 300) ⊃ cudaLaunchKernel @110 (corr 1: notify_dispatch), @120 (corr 2: dispatch)
#   aten::mean [400, 500) ⊃ cudaLaunchKernel @410 (corr 3: reduce_kernel), @420 (corr 4: layout)
#   combine [600, 800) ⊃ cudaLaunchKernel @610 (corr 5: combine)
DEEP_EP = "void deep_ep::internode::{}<true, 8, 7168>(int4*, float*, long*, float*, void*, int, int)"
KERNELS = [  # name, ts, dur, correlation (one stream, no two overlap)
    (DEEP_EP.format("notify_dispatch"), 150, 20, 1),
    (DEEP_EP.format("dispatch"), 200, 130, 2),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>()", 450, 60, 3),
    ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*)", 520, 10, 4),
    (DEEP_EP.format("combine"), 700, 250, 5),
]


def _deep_ep_trace(path):
    events = [
        x("ProfilerStep#1", 0, 2000, cat="user_annotation"),
        x("dispatch", 100, 200, cat="user_annotation"),
        x("cudaLaunchKernel", 110, 5, cat="cuda_runtime", correlation=1),
        x("cudaLaunchKernel", 120, 5, cat="cuda_runtime", correlation=2),
        x("aten::mean", 400, 100, **{"External id": 3}),
        x("cudaLaunchKernel", 410, 5, cat="cuda_runtime", correlation=3),
        x("cudaLaunchKernel", 420, 5, cat="cuda_runtime", correlation=4),
        x("combine", 600, 200, cat="user_annotation"),
        x("cudaLaunchKernel", 610, 5, cat="cuda_runtime", correlation=5),
    ]
    for name, ts, dur, corr in KERNELS:
        events.append(x(name, ts, dur, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=corr))
    return write_trace(path, events)


def test_deep_ep_kernels_in_user_ranges_are_communication(tmp_path):
    """DeepEP's kernels launched inside `dispatch`/`combine` user ranges are communication in the step
    breakdown and the communication view (all-to-alls); the reduce and layout kernels stay computing.
    Oracle: the kernels' durations in the trace's JSON, by the names the test planted."""
    trace = _deep_ep_trace(tmp_path / "t.json")
    comm = [(n, ts, d) for n, ts, d, _ in KERNELS if "deep_ep::internode::" in n]
    compute = [(n, ts, d) for n, ts, d, _ in KERNELS if "deep_ep::internode::" not in n]
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        ((computing, communication, not_overlapped),) = run.sql(
            'SELECT "Computing", "Communication", "Communication(Not Overlapped)" FROM step_trace'
        ).rows()
        view = run.sql('SELECT "Op Name", "Op Type", "Elapse Time(ms)", "Step" FROM communication').rows()
        kinds = dict(run.sql("SELECT name, kind FROM slices WHERE device = 'gpu0'").rows())
    assert not_overlapped == communication == sum(d for _, _, d in comm)
    assert computing == sum(d for _, _, d in compute)
    assert view == [(n, "alltoall", pytest.approx(d / 1000), 1) for n, _, d in sorted(comm, key=lambda c: c[1])]
    assert {n: k for n, k in kinds.items() if k == "kernel"} == {n: "kernel" for n, _, _ in compute}


# -- item 6 --------------------------------------------------------------------------------------------


def test_matrix_keeps_a_task_ending_under_a_ns_after_its_op(tmp_path):
    """An op's last transfer whose end trace_view.json puts 0.69 ns after the op's end is the op's, as
    msprof counts it: rounded to whole ns it ends 1 ns late. Oracle: the tasks' sizes and durations
    in the JSON."""
    import json

    from test_communication import HCCL, _meta, _op, _task

    tasks = [  # plane, start µs, dur µs, bytes: both HCCS 0 → 1 in op [0, 100)
        (1, 20.0, 10.0, 1_000_000),
        (1, 60.0, 40.00069, 2_000_000),  # ends at 100.00069 µs
    ]
    trace = [
        _meta("process_name", HCCL, name="HCCL"),
        _meta("process_labels", HCCL, labels="NPU"),
        _meta("thread_name", HCCL, 0, name="Group 0 Communication"),
        _meta("thread_name", HCCL, 2, name="Plane 1"),
        _op("hcom_allGather__001_0_1", 0, 100),
        *[_task("Memcpy", p, s, d, "SDMA", 0, 1, n, "HCCS") for p, s, d, n in tasks],
    ]
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(json.dumps(trace), encoding="utf-8")
    with prof_engine.open(prof_engine.import_trace([tmp_path / "rank0_ascend_pt"], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Src Rank", "Dst Rank", "Transit Size(MB)", "Transit Time(ms)" FROM communication_matrix'
        ).rows()
    size = sum(n for *_, n in tasks) / 1e6
    ms = sum(d for _, _, d, _ in tasks) / 1000
    assert rows == [(0, 1, size, pytest.approx(ms, abs=1e-6))]


def test_unknown_categories_share_is_of_records(tmp_path):
    """Every slice of an unknown category: 100 % of the records, not of the events (a B/E pair is
    two events of one record). Oracle: the slices written."""
    events = []
    for i in range(4):
        events += [
            {"ph": "B", "cat": "mystery", "name": f"s{i}", "pid": 1, "tid": 1, "ts": i * 10},
            {"ph": "E", "cat": "mystery", "name": f"s{i}", "pid": 1, "tid": 1, "ts": i * 10 + 5},
        ]
    events.append(x("known", 100, 10, cat="mystery"))
    trace = write_trace(tmp_path / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Count", "Total", "Share(%)" FROM data_quality WHERE "Rule" = \'unknown_categories\''
        ).rows()
    assert rows == [(5, 5, 100.0)]


def test_ascend_db_container_tasks_are_known_and_check_strict_passes(torch_npu_db_run):
    """The `.db` fixture's compute-typed tasks that COMPUTE_TASK_INFO leaves out each enclose a task of
    their own connection id (a container: FFTS+/mix kernel, HCCL op): category container_task, not an
    `other_records` guess, so `check --strict` passes on data whose reports equal the vendor's.
    Oracle: the databases, read with sqlite3."""
    import sqlite3

    from typer.testing import CliRunner

    from prof_engine.cli import app

    src, run = torch_npu_db_run
    want = {}
    for rank in (0, 1):
        db = src / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute(
            "SELECT t.startNs, t.connectionId, (SELECT count(*) FROM TASK u WHERE u.connectionId = t.connectionId "
            "AND u.globalTaskId <> t.globalTaskId AND u.startNs >= t.startNs AND u.endNs <= t.endNs) "
            "FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType "
            "WHERE s.value IN ('AI_CORE', 'KERNEL_AICORE', 'KERNEL_AIVEC', 'MIX_AIC', 'MIX_AIV') "
            "AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)"
        ).fetchall()
        con.close()
        assert rows and all(inside > 0 for _, _, inside in rows)  # each contains a task of its launch
        want[rank] = sorted((ts, conn) for ts, conn, _ in rows)
    got = {
        rank: sorted(
            (ts, corr)
            for r, ts, corr in run.sql(
                "SELECT rank, ts, correlation FROM slices WHERE category = 'container_task' ORDER BY ALL"
            ).rows()
            if r == rank
        )
        for rank in (0, 1)
    }
    assert got == want
    assert run.sql("SELECT count(*) FROM slices WHERE kind = 'other' AND coalesce(category, '') = ''").rows() == [(0,)]
    result = CliRunner().invoke(app, ["check", str(run.path), "--strict"])
    assert result.exit_code == 0, result.output
