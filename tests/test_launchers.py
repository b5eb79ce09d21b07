"""Device records hold their launcher's name, input shapes and types (schema 1.2): finalize copies
them from the record at `launch_id`, so that the views of kernels by op read no host op. Runs
written before (no `launch_name` column) are upgraded to the same records (`prof-engine upgrade`)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import prof_engine
from conftest import write_trace, x


def _kernel(name: str, ts: float, dur: float, correlation: int, **args) -> dict:
    return x(name, ts, dur, cat="kernel", pid=0, tid=7, correlation=correlation, device=0, stream=7, **args)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launchers")
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        # a framework op that launches a kernel: found through its External id
        x("aten::mm", 10, 20, **{"External id": 7, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}),
        x("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=11, **{"External id": 7}),
        # a runtime call outside every op: it is the launcher itself
        x("cudaMemsetAsync", 40, 3, cat="cuda_runtime", correlation=12),
        _kernel("gemm_kernel", 20, 8, 11, **{"External id": 7}),
        _kernel("memset_kernel", 45, 2, 12),
        # a kernel whose launch the trace lacks
        _kernel("orphan_kernel", 60, 4, 99),
        # a kernel with shapes of its own (as Ascend tasks have) keeps them
        x("aten::add", 70, 10, **{"External id": 8, "Input Dims": [[5]], "Input type": ["int"]}),
        x("cudaLaunchKernel", 71, 2, cat="cuda_runtime", correlation=13, **{"External id": 8}),
        _kernel("add_kernel", 75, 3, 13, **{"External id": 8, "Input Dims": [[6]], "Input type": ["half"]}),
    ]
    trace = write_trace(tmp / "t.json", events)
    return prof_engine.import_trace([trace], tmp / "run")


KERNELS = "SELECT name, launch_name, input_shapes, input_types FROM slices WHERE device <> 'host' ORDER BY ts"


def test_device_records_take_their_launchers_name_and_shapes(run_dir):
    with prof_engine.open(run_dir) as run:
        assert tuple(map(int, run.manifest["schema_version"].split("."))) >= (1, 2)  # launch_name stored
        assert run.sql(KERNELS).rows() == [
            ("gemm_kernel", "aten::mm", "2,3;3,4", "float;float"),
            ("memset_kernel", "cudaMemsetAsync", None, None),
            ("orphan_kernel", None, None, None),
            ("add_kernel", "aten::add", "6", "half"),
        ]
        # host records have none
        assert run.sql("SELECT count(launch_name) FROM slices WHERE device = 'host'").rows() == [(0,)]


def _as_older_run(src, dst):
    """A copy of run `src` as schema 1.1 wrote it: no `launch_name`, device records without the
    launcher's shapes and types."""
    import shutil

    shutil.copytree(src, dst)
    for path in (dst / "slices").rglob("*.parquet"):
        t = pq.read_table(path)
        host = pa.compute.equal(t["kind"], "host_op")
        keep = pa.compute.or_(host, pa.compute.equal(t["kind"], "api"))
        for col in ("input_shapes", "input_types"):
            from_launcher = pa.compute.and_(
                pa.compute.invert(keep),
                pa.compute.is_in(t["name"], pa.array(["gemm_kernel", "memset_kernel", "orphan_kernel"])),
            )
            t = t.set_column(
                t.schema.get_field_index(col),
                col,
                pa.compute.if_else(from_launcher, pa.nulls(len(t), pa.string()), t[col]),
            )
        pq.write_table(t.drop_columns(["launch_name"]), path)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["schema_version"] = "1.1"
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_a_1_1_run_is_refused_and_upgraded_to_the_same_records(run_dir, tmp_path):
    old = _as_older_run(run_dir, tmp_path / "old")
    with pytest.raises(prof_engine.RunError, match=r"schema 1\.1; run `prof-engine upgrade .*old` \(or re-import"):
        prof_engine.open(old)
    with prof_engine.open(prof_engine.upgrade(old)) as run:
        upgraded = run.sql(KERNELS).rows()
        views = {v: sorted(run.view(v).rows(), key=repr) for v in ("op_summary", "op_statistic", "task_time")}
    with prof_engine.open(run_dir) as run:
        assert run.sql(KERNELS).rows() == upgraded
        assert {v: sorted(run.view(v).rows(), key=repr) for v in views} == views


def test_a_kernels_op_is_read_without_the_host_ops(run_dir):
    """The launcher's name is stored with each device record: one scan of slices."""
    with prof_engine.open(run_dir) as run:
        assert run.sql("EXPLAIN SELECT * FROM _task_ops").rows()[0][1].count("READ_PARQUET") == 1


LAUNCHES = (
    'SELECT "Task Name", "OP Type", "Launch API", "Correlation", "Launch Duration(us)", "Task Duration(us)", '
    '"Launch Delay(us)" FROM kernel_launch ORDER BY "Task Start(us)"'
)


def test_kernel_launch_pairs_each_task_with_the_call_that_launched_it(run_dir):
    """HTA's launch statistics: the call's duration, the task's, and the delay from the call's end
    to the task's start; a task whose launch the trace lacks is left out."""
    with prof_engine.open(run_dir) as run:
        assert run.sql(LAUNCHES).rows() == [
            ("gemm_kernel", "aten::mm", "cudaLaunchKernel", 11, 5.0, 8.0, 3.0),  # call 12..17, task at 20
            ("memset_kernel", "cudaMemsetAsync", "cudaMemsetAsync", 12, 3.0, 2.0, 2.0),
            ("add_kernel", "aten::add", "cudaLaunchKernel", 13, 2.0, 3.0, 2.0),
        ]


def test_kernel_launch_takes_the_innermost_call_of_a_correlation(tmp_path):
    """CANN's layers could share a correlation id (AscendCL@... around Node@launch): the launch is
    the innermost, latest call, and each task appears once, even one that starts before its call."""
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("AscendCL@aclnnAdd", 10, 20, cat="cuda_runtime", correlation=5),
        x("Node@launch", 15, 4, cat="cuda_runtime", correlation=5),
        _kernel("Add", 22, 6, 5),
        _kernel("Add_tail", 29, 1, 5),
        # a task that starts before its call by the host's clock (as Ascend tasks may) still has it
        x("Node@launch", 50, 4, cat="cuda_runtime", correlation=6),
        _kernel("Early", 48, 1, 6),
    ]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r:
        assert [row[2:] for row in r.sql(LAUNCHES).rows()] == [
            ("Node@launch", 5, 4.0, 6.0, 3.0),  # 22 - (15 + 4)
            ("Node@launch", 5, 4.0, 1.0, 10.0),
            ("Node@launch", 6, 4.0, 1.0, -6.0),  # 48 - (50 + 4)
        ]


def _flow(phase: str, flow_id: int, ts: float, pid: int, tid: int) -> dict:
    return {
        "ph": phase,
        "cat": "async_npu",
        "name": "torch_to_npu",
        "id": flow_id,
        "ts": ts,
        "pid": pid,
        "tid": tid,
        **({"bp": "e"} if phase == "f" else {}),
    }


def test_a_flow_from_an_op_to_device_work_makes_the_op_its_launcher(tmp_path):
    """torch_npu queues an op's launch to another thread: its API call runs outside the op, and an
    `async_npu` arrow links the op (where it starts) to the first task of the launch (where that
    starts). The op launched every task of that correlation id, not the API call; operator_details
    and key_averages count their time for the op and the op it nests in."""
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("Model.forward", 5, 40, tid=1),
        x("aten::relu", 10, 20, tid=1),  # queues its launch ...
        x("aclnnRelu", 32, 4, cat="cuda_runtime", tid=2, correlation=21),  # ... run on the queue's thread
        _kernel("relu_kernel_a", 50, 6, 21),
        _kernel("relu_kernel_b", 60, 3, 21),
        _flow("s", 900, 10, 1, 1),
        _flow("f", 900, 50, 0, 7),
        # a flow between host ops (fwdbwd) and an API call's own arrow change nothing
        x("aten::add", 36, 5, tid=1),
        x("cudaLaunchKernel", 37, 2, cat="cuda_runtime", tid=1, correlation=22),
        _kernel("add_kernel", 70, 2, 22),
        {**_flow("s", 901, 36, 1, 1), "cat": "fwdbwd"},
        {**_flow("f", 901, 10, 1, 1), "cat": "fwdbwd"},
    ]
    run_dir = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run_dir) as run:
        assert run.sql(KERNELS).rows() == [
            ("relu_kernel_a", "aten::relu", None, None),
            ("relu_kernel_b", "aten::relu", None, None),
            ("add_kernel", "aten::add", None, None),
        ]
        assert run.sql(
            'SELECT "Name", "Host Self Duration(us)", "Host Total Duration(us)", '
            '"Device Self Duration(us)", "Device Total Duration(us)" FROM operator_details'
        ).rows() == [
            ("Model.forward", 15.0, 40.0, 0.0, 11.0),
            ("aten::relu", 20.0, 20.0, 9.0, 9.0),
            ("aten::add", 3.0, 5.0, 2.0, 2.0),
        ]  # its cudaLaunchKernel is not its self time (as torch counts)
        # the runtime API calls are rows of their own, with their host time, as in torch's table
        assert run.sql(
            'SELECT "Name", "Calls", "Self Host(us)", "Self Device(us)", "Self Device %", "Device Total(us)" '
            "FROM key_averages"
        ).rows() == [
            ("Model.forward", 1, 15.0, 0.0, 0.0, 11.0),
            ("aten::relu", 1, 20.0, 9.0, 81.82, 9.0),
            ("aten::add", 1, 3.0, 2.0, 18.18, 2.0),
            ("aclnnRelu", 1, 4.0, 0.0, 0.0, 0.0),
            ("cudaLaunchKernel", 1, 2.0, 0.0, 0.0, 0.0),
        ]
