"""CUDA path: a torch.profiler trace with CUDA activity, recorded on a real GPU (skipped without one)."""

from __future__ import annotations

import pytest

import prof_engine

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from torch.profiler import ProfilerActivity, profile, schedule

    d = tmp_path_factory.mktemp("cuda")
    path = d / "trace.json"
    a = torch.randn(1024, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            b = (a @ a).relu()
            b.sum().item()
            prof.step()
    with prof_engine.open(prof_engine.import_trace([path], d / "run")) as r:
        yield r


def test_kernels_on_the_gpu_with_their_launching_op(run):
    rows = run.sql("""SELECT "OP Type", count(*) FROM op_summary WHERE "Task Type" = 'KERNEL' GROUP BY 1""").rows()
    op_types = dict(rows)
    assert any("mm" in op for op in op_types), op_types
    (devices,), = run.sql("SELECT list(DISTINCT device) FROM slices WHERE kind = 'kernel'").rows()
    assert devices == ["gpu0"]


def test_every_kernel_takes_the_step_of_its_launch(run):
    (mismatch, total), = run.sql(
        """SELECT count(*) FILTER (WHERE k.step IS DISTINCT FROM a.step), count(*)
           FROM slices k JOIN slices a ON a.rank = k.rank AND a.kind = 'api' AND a.correlation = k.correlation
           WHERE k.kind IN ('kernel', 'memcpy', 'memset')""").rows()
    assert total > 0 and mismatch == 0


def test_step_trace_has_device_rows(run):
    rows = run.sql("""SELECT "Device", "Step", "Computing" FROM step_trace WHERE "Step" IS NOT NULL""").rows()
    assert {d for d, _, _ in rows} == {"gpu0"} and all(c > 0 for _, _, c in rows)
