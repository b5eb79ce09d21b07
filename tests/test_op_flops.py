"""op_flops: matrix-multiply FLOPs from recorded shapes, as torch.profiler's with_flops counts them."""

from __future__ import annotations

import pytest

import prof_engine
from conftest import fixture_path, write_trace, x

GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
COUNTED = (*GEMMS, "aten::conv2d")


def test_flops_are_torch_profilers_own(tmp_path):
    """A CPU run under torch.profiler(with_flops=True): per op, the view's FLOPs equal torch's
    (which the trace file does not carry); linear and matmul count through the addmm and mm they call."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    a, b, bias = torch.randn(64, 32), torch.randn(32, 16), torch.randn(16)
    x3, y3 = torch.randn(4, 8, 16), torch.randn(4, 16, 8)
    linear = torch.nn.Linear(32, 16)
    convs = [
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1),
        torch.nn.Conv2d(8, 8, (3, 5), stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=4),
    ]
    image = torch.randn(2, 3, 17, 19)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        torch.mm(a, b)
        torch.addmm(bias, a, b)
        torch.bmm(x3, y3)
        torch.baddbmm(torch.randn(4, 8, 8), x3, y3)
        linear(a)
        torch.matmul(a, b)
        convs[1](convs[0](image))
    want: dict[str, float] = {}
    for e in prof.events():
        if e.name in COUNTED:
            want[e.name] = want.get(e.name, 0) + e.flops
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    with prof_engine.open(prof_engine.import_trace([tmp_path / "t.json"], tmp_path / "run")) as run:
        rows = run.sql('SELECT "OP Name", sum("GFLOPs") * 1e9, sum("Count") FROM op_flops GROUP BY 1').rows()
    got = {name: flops for name, flops, _ in rows}
    assert set(want) == set(COUNTED) and want["aten::conv2d"] > 0 and got == pytest.approx(want, rel=1e-6)
    assert {name: n for name, _, n in rows} == {
        "aten::mm": 2,
        "aten::addmm": 2,
        "aten::bmm": 1,
        "aten::baddbmm": 1,
        "aten::conv2d": 2,
    }


def test_rate_is_over_the_kernels_each_call_launched(tmp_path):
    """On a rank with device records, a call's time is that of its kernels (found by External id),
    not its own host time; shapes that do not multiply are left out."""
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        x("aten::mm", 10, 100, **{"External id": 1, "Input Dims": [[1000, 2000], [2000, 500]]}),
        x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=1, **{"External id": 1}),
        x("gemm", 200, 40, cat="kernel", pid=0, tid=7, correlation=1, device=0, stream=7, **{"External id": 1}),
        x("aten::mm", 300, 10, **{"External id": 2, "Input Dims": [[3, 4], [5, 6]]}),  # not a product
    ]
    with prof_engine.open(
        prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    ) as run:
        assert run.sql('SELECT "OP Name", "Count", "GFLOPs", "Time(us)", "TFLOPS" FROM op_flops').rows() == [
            ("aten::mm", 1, 2.0, 40.0, 50.0)
        ]  # 2·1000·2000·500 = 2 GFLOP in 40 µs


def test_real_trace_rates_are_plausible(tmp_path):
    """HTA's A100 sample: every counted call has a rate, none above an A100's dense peak (312 TFLOPS)."""
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        (n, peak, missing) = run.sql(
            'SELECT count(*), max("TFLOPS"), count(*) FILTER (WHERE "TFLOPS" IS NULL) FROM op_flops'
        ).rows()[0]
    assert n > 50 and missing == 0 and 10 < peak < 312


def test_a_convolution_is_timed_by_the_kernels_its_nested_ops_launched(tmp_path):
    """aten::conv2d launches nothing itself: cuDNN's kernel comes from the op nested three levels
    down, the bias add's from one beside it. Its time is theirs (torch's device time of the call);
    a convolution with padding='same' (no padding recorded) is left out."""

    def op(name, ts, dur, ext, **args):
        return x(name, ts, dur, **{"External id": ext, **args})

    concrete = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]
    events = [
        x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op(
            "aten::conv2d",
            10,
            100,
            1,
            **{"Input Dims": [[8, 64, 56, 56], [64, 64, 3, 3], [64], [], [], [], []], "Concrete Inputs": concrete},
        ),
        op("aten::convolution", 11, 98, 2),
        op("aten::_convolution", 12, 96, 3),
        op("aten::cudnn_convolution", 13, 80, 4),
        x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=7, **{"External id": 4}),
        x(
            "cudnn_conv_kernel",
            200,
            100,
            cat="kernel",
            pid=0,
            tid=7,
            correlation=7,
            device=0,
            stream=7,
            **{"External id": 4},
        ),
        op("aten::add_", 95, 10, 5),
        x("cudaLaunchKernel", 96, 3, cat="cuda_runtime", correlation=8, **{"External id": 5}),
        x(
            "bias_add_kernel",
            310,
            20,
            cat="kernel",
            pid=0,
            tid=7,
            correlation=8,
            device=0,
            stream=7,
            **{"External id": 5},
        ),
        op("aten::add_", 130, 10, 6),
        x("cudaLaunchKernel", 131, 3, cat="cuda_runtime", correlation=9, **{"External id": 6}),
        x(
            "other_add_kernel",
            340,
            20,
            cat="kernel",
            pid=0,
            tid=7,
            correlation=9,
            device=0,
            stream=7,
            **{"External id": 6},
        ),
        op(
            "aten::conv2d",
            400,
            20,
            9,
            **{
                "Input Dims": [[8, 64, 56, 56], [64, 64, 3, 3], [64], [], [], [], []],
                "Concrete Inputs": ["", "", "", "[1, 1]", "", "[1, 1]", "1"],
            },
        ),  # 'same'
    ]
    with prof_engine.open(
        prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    ) as run:
        rows = run.sql('SELECT "OP Name", "Count", "GFLOPs", "Time(us)", "TFLOPS" FROM op_flops').rows()
    flops = 2 * 8 * 56 * 56 * 64 * 64 * 3 * 3  # padding 1, stride 1: 56 x 56 out
    assert rows == [("aten::conv2d", 1, flops / 1e9, 120.0, pytest.approx(flops / 120e-6 / 1e12, rel=1e-6))]
