"""CUDA path: a torch.profiler trace with CUDA activity, recorded on a real GPU (skipped without one)."""

from __future__ import annotations

import pytest

import prof_engine

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")


AVERAGES: dict = {}  # torch's own key_averages() of the recorded trace, by key


# CUPTI's own host work (`Activity Buffer Request`, category `overhead`): torch's table has it as a
# row and, in its in-memory tree, as a child of the op it interrupted on that op's thread, whose self
# time it leaves out (not always: it depends on the thread torch gives it). The exported trace puts
# it on pid -1, tid 0, with no thread, so an import cannot tell which op it interrupted: it is a
# record of its own (kind `other`), and the op's self time holds it.
PROFILER_OVERHEAD = {"Activity Buffer Request"}


def key_averages_as_torchs(run, averages: dict) -> dict:
    """key_averages' rows by name, each checked equal to torch's (`averages`, by key): calls, self
    and total CPU time, self and total device time. Where CUPTI's overhead ran inside a call (it
    does now and then, when CUPTI asks for a buffer), that op's self CPU time is checked to be
    torch's or torch's plus the overhead in its calls, and the overhead is not a row of ours."""
    ours = {
        r[0]: r[1:]
        for r in run.sql(
            'SELECT "Name", "Calls", "Self Host(us)", "Host Total(us)", '
            '"Self Device(us)", "Device Total(us)" FROM key_averages'
        ).rows()
    }
    overhead = dict(
        run.sql(
            """SELECT o.name, sum(v.dur) / 1000 FROM slices v JOIN slices o ON o.rank = v.rank AND o.device = 'host'
           AND o.kind IN ('host_op', 'user_range') AND o.ts <= v.ts AND v.ts + v.dur <= o.ts + o.dur
           WHERE v.category = 'overhead' GROUP BY 1"""
        ).rows()
    )
    for name, (calls, self_host, host, self_device, device) in ours.items():
        t = averages[name]
        tol = 0.002 * calls
        assert calls == t.count, name
        assert host == pytest.approx(t.cpu_time_total, abs=tol), name
        if name in overhead:
            assert self_host in (
                pytest.approx(t.self_cpu_time_total, abs=tol),
                pytest.approx(t.self_cpu_time_total + overhead[name], abs=tol),
            ), name
        else:
            assert self_host == pytest.approx(t.self_cpu_time_total, abs=tol), name
        assert (self_device, device) == pytest.approx((t.self_device_time_total, t.device_time_total), abs=tol), name
    return ours


def cpu_rows(prof) -> dict:
    """torch's key_averages() rows of host events by key (a kernel, or a range's device-side twin,
    can share an op's or range's name: those rows are the device's)."""
    return {e.key: e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from torch.profiler import ProfilerActivity, profile, schedule

    d = tmp_path_factory.mktemp("cuda")
    path = d / "trace.json"
    a = torch.randn(1024, 1024, device="cuda")
    conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1).cuda()  # cuDNN's kernels, and a bias add, nested in it
    image = torch.randn(8, 3, 64, 64, device="cuda")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        record_shapes=True,
        with_flops=True,
    ) as prof:
        for _ in range(4):
            b = (a @ a).relu()
            conv(image).sum().item()
            b.sum().item()
            prof.step()
    AVERAGES.update(cpu_rows(prof))
    with prof_engine.open(prof_engine.import_trace([path], d / "run")) as r:
        yield r


def test_kernels_on_the_gpu_with_their_launching_op(run):
    rows = run.sql("""SELECT "OP Type", count(*) FROM op_summary WHERE "Task Type" = 'KERNEL' GROUP BY 1""").rows()
    op_types = dict(rows)
    assert any("mm" in op for op in op_types), op_types
    ((devices,),) = run.sql("SELECT list(DISTINCT device) FROM slices WHERE kind = 'kernel'").rows()
    assert devices == ["gpu0"]


def test_every_kernel_takes_the_step_of_its_launch(run):
    ((mismatch, total),) = run.sql(
        """SELECT count(*) FILTER (WHERE k.step IS DISTINCT FROM a.step), count(*)
           FROM slices k JOIN slices a ON a.rank = k.rank AND a.kind = 'api' AND a.correlation = k.correlation
           WHERE k.kind IN ('kernel', 'memcpy', 'memset')"""
    ).rows()
    assert total > 0 and mismatch == 0


def test_step_trace_has_device_rows(run):
    rows = run.sql("""SELECT "Device", "Step", "Computing" FROM step_trace WHERE "Step" IS NOT NULL""").rows()
    assert {d for d, _, _ in rows} == {"gpu0"} and all(c > 0 for _, _, c in rows)


def test_key_averages_is_torchs_on_the_gpu(run):
    """Every op and runtime API row of key_averages equals torch's own key_averages(): calls, self
    and total CPU time, self and total device time (ProfilerStep* and kernels are not its rows)."""
    ours = key_averages_as_torchs(run, AVERAGES)
    assert "aten::mm" in ours and "cudaLaunchKernel" in ours and "aten::conv2d" in ours


def test_op_flops_counts_and_times_as_torch_does(run):
    """op_flops' FLOPs per op are torch's with_flops counts; a convolution's time is torch's device
    time of the call (cuDNN's kernels and the bias add, launched by the ops nested in it)."""
    rows = run.sql('SELECT "OP Name", sum("Count"), sum("GFLOPs"), sum("Time(us)") FROM op_flops GROUP BY 1').rows()
    assert {r[0] for r in rows} == {"aten::mm", "aten::conv2d"}
    for name, count, gflops, us in rows:
        us = float(us)
        t = AVERAGES[name]
        assert count == t.count and gflops * 1e9 == pytest.approx(t.flops, rel=1e-9), name
        assert us == pytest.approx(t.device_time_total, abs=0.002 * int(count)) and us > 0, name


def test_the_device_is_named_as_cuda_names_it(run):
    """`devices` holds the GPU the kernels ran on, named, sized and numbered as CUDA reports it;
    where that GPU is listed, op_flops' utilization is the rate over its peak, under 100 %."""
    props = torch.cuda.get_device_properties(0)
    rows = run.sql('SELECT "Device", "Name", "Compute Capability", "Multiprocessors", "Model" FROM devices').rows()
    assert [r[:4] for r in rows] == [("gpu0", props.name, f"{props.major}.{props.minor}", props.multi_processor_count)]
    shares = run.sql('SELECT "TFLOPS" / "Peak TFLOPS" * 100, "FLOPS Utilization(%)" FROM op_flops').rows()
    if rows[0][4] is not None:  # a listed model: every counted call has a peak in its precision (fp32, tf32)
        assert shares and all(0 < u <= 100 and u == pytest.approx(s, abs=0.01) for s, u in shares)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A torch.compile'd MLP trained 3 profiled steps: Inductor's Triton kernels, launched from
    `triton_*` ops inside the `## Call CompiledFxGraph ##` ranges inside `CompiledFunction`."""
    from torch.profiler import ProfilerActivity, profile

    d = tmp_path_factory.mktemp("compiled")
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256), torch.nn.LayerNorm(256)
    ).cuda()
    x = torch.randn(64, 256, device="cuda")
    try:
        step = torch.compile(model)
        for _ in range(2):
            step(x).sum().backward()
    except Exception as e:  # no Triton or compiler on this machine: nothing of prof-engine's to test
        pytest.skip(f"torch.compile does not run here: {type(e).__name__}: {e}")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(x).sum().backward()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(d / "trace.json"))
    with prof_engine.open(prof_engine.import_trace([d / "trace.json"], d / "run")) as r:
        yield r, cpu_rows(prof)


def test_key_averages_is_torchs_for_a_compiled_model(compiled):
    """Every row equals torch's own: the graph-call ranges are rows with their own self time, which
    `CompiledFunction`'s self time does not hold, and device time reaches it through them."""
    run, averages = compiled
    ours = key_averages_as_torchs(run, averages)
    assert "CompiledFunction" in ours and any(n.startswith("## Call CompiledFxGraph") for n in ours), sorted(ours)
    assert any(n.startswith("triton_") for n in ours) and set(averages) - set(ours) <= {
        "ProfilerStep*",
        *PROFILER_OVERHEAD,
    }
    assert ours["CompiledFunction"][4] > 0
