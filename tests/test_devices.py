"""The devices of a run (Kineto's deviceProperties), their datasheet peaks, and the FLOPS
utilization that op_flops and flops_summary measure against them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import prof_engine
from conftest import fixture_path, write_trace, x


def props(i: int, name: str) -> dict:
    return {
        "id": i,
        "name": name,
        "totalGlobalMem": 85017493504,
        "computeMajor": 9,
        "computeMinor": 0,
        "numSms": 132,
        "maxThreadsPerBlock": 1024,
    }


def step(n: int, ts: float, dur: float) -> dict:
    return x(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def gemm(
    ts: float,
    ext: int,
    dims: list,
    types: list,
    kernel_ts: float,
    kernel_dur: float,
    name: str = "aten::mm",
    device: int = 0,
) -> list[dict]:
    """A host op with its shapes and types, its launch and the kernel it launched."""
    return [
        x(name, ts, 10, **{"External id": ext, "Input Dims": dims, "Input type": types}),
        x("cudaLaunchKernel", ts + 1, 2, cat="cuda_runtime", correlation=ext, **{"External id": ext}),
        x(
            f"kernel{ext}",
            kernel_ts,
            kernel_dur,
            cat="kernel",
            pid=device,
            tid=7,
            correlation=ext,
            device=device,
            stream=7,
            **{"External id": ext},
        ),
    ]


def run_of(tmp_path, events, devices):
    trace = write_trace(tmp_path / "t.json", events, deviceProperties=devices)
    return prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run"))


BF16 = ["c10::BFloat16", "c10::BFloat16"]
SQUARE = [[1024, 1024], [1024, 1024]]  # 2·1024³ = 2.147 GFLOP


@pytest.mark.parametrize(
    ("name", "model", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", "H100 NVL", None),  # listed without figures: not the SXM part's
        ("NVIDIA A100-SXM4-80GB", "A100", 312.0),
        ("NVIDIA L4", "L4", 121.0),
        ("NVIDIA L40S", None, None),  # not `L4`
        ("NVIDIA B200", "B200", 2250.0),
        ("NVIDIA GB200", "GB200", 2500.0),  # not the HGX part's
        ("AMD Radeon Graphics", None, None),
    ],
)
def test_devices_are_the_ones_with_records_with_their_peaks(tmp_path, name, model, bf16):
    """Kineto lists every visible device; the run's devices are those with records, named as the
    driver named them, with the datasheet peaks of the model the name matches."""
    events = [step(1, 0, 100), *gemm(1, 1, SQUARE, BF16, 20, 10)]
    with run_of(tmp_path, events, [props(0, name), props(1, name)]) as run:
        rows = run.sql(
            'SELECT "Rank", "Device", "Name", "Memory(GiB)", "Compute Capability", "Multiprocessors", '
            '"Tasks", "Model", "Peak BF16 TFLOPS" FROM devices'
        ).rows()
    assert rows == [(0, "gpu0", name, 79.18, "9.0", 132, 1, model, bf16)]


def test_utilization_is_the_rate_over_the_peak_of_the_calls_precision(tmp_path):
    """A bf16 product on an H100 is measured against its BF16 peak, an fp32 one against FP32 (TF32
    is off for matrix products by default), an fp32 convolution against TF32 (cuDNN's default)."""
    conv = [[8, 64, 56, 56], [64, 64, 3, 3], [64], [], [], [], []]
    events = [
        step(1, 0, 1000),
        *gemm(1, 1, SQUARE, BF16, 100, 10),  # 214.7 TFLOPS
        *gemm(20, 2, SQUARE, ["float", "float"], 200, 100),  # 21.47 TFLOPS
        *gemm(
            40,
            3,
            [[1024], [1024, 1024], [1024, 1024]],
            ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"],
            400,
            10,
            name="aten::addmm",
        ),  # the added input's type is not the product's, but alike here
        x(
            "aten::conv2d",
            60,
            30,
            **{
                "External id": 4,
                "Input Dims": conv,
                "Input type": ["float"] * 3,
                "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
            },
        ),
        x("cudaLaunchKernel", 61, 2, cat="cuda_runtime", correlation=4, **{"External id": 4}),
        x("conv_kernel", 500, 20, cat="kernel", pid=0, tid=7, correlation=4, device=0, stream=7, **{"External id": 4}),
    ]
    with run_of(tmp_path, events, [props(0, "NVIDIA H100 80GB HBM3")]) as run:
        rows = run.sql(
            'SELECT "OP Name", "TFLOPS", "Precision", "Peak TFLOPS", "FLOPS Utilization(%)" FROM op_flops '
            'ORDER BY "OP Name", "Precision"'
        ).rows()
    rate = 2 * 1024**3 / 10e-6 / 1e12
    conv_rate = 2 * 8 * 56 * 56 * 64 * 64 * 9 / 20e-6 / 1e12
    assert rows == [
        ("aten::addmm", pytest.approx(rate), "bf16", 989.4, round(100 * rate / 989.4, 2)),
        ("aten::conv2d", pytest.approx(conv_rate), "tf32", 494.7, round(100 * conv_rate / 494.7, 2)),
        ("aten::mm", pytest.approx(rate), "bf16", 989.4, round(100 * rate / 989.4, 2)),
        ("aten::mm", pytest.approx(rate / 10), "fp32", 66.9, round(100 * rate / 10 / 66.9, 2)),
    ]


def test_without_a_known_peak_utilization_is_null(tmp_path):
    """An unlisted device, or a precision without a peak (fp64), leaves utilization NULL: never a
    guess. Calls of one shape in two precisions are two rows."""
    events = [step(1, 0, 1000), *gemm(1, 1, SQUARE, BF16, 100, 10), *gemm(20, 2, SQUARE, ["double", "double"], 200, 10)]
    with run_of(tmp_path, events, [props(0, "AMD Radeon Graphics")]) as run:
        assert run.sql('SELECT "Precision", "Peak TFLOPS", "FLOPS Utilization(%)" FROM op_flops ORDER BY 1').rows() == [
            ("bf16", None, None),
            ("fp64", None, None),
        ]
    (tmp_path / "h100").mkdir()
    with run_of(tmp_path / "h100", events, [props(0, "NVIDIA H100 80GB HBM3")]) as run:
        assert run.sql('SELECT "Precision", "Peak TFLOPS" FROM op_flops ORDER BY 1').rows() == [
            ("bf16", 989.4),
            ("fp64", None),
        ]
        assert run.sql('SELECT "FLOPS Utilization(%)" FROM flops_summary').rows() == [(None,)]


def test_peaks_given_replace_the_datasheets(tmp_path, monkeypatch):
    """Peaks the user gives (`peak_tflops`, else PROF_ENGINE_PEAK_TFLOPS) hold for every device, per
    precision: an unlisted device gets them, a listed one keeps its datasheet's for the others."""
    events = [step(1, 0, 1000), *gemm(1, 1, SQUARE, BF16, 100, 10), *gemm(20, 2, SQUARE, ["float", "float"], 200, 100)]
    path = write_trace(tmp_path / "t.json", events, deviceProperties=[props(0, "NVIDIA RTX PRO 6000")])
    run = prof_engine.import_trace([path], tmp_path / "run")
    rate = 2 * 1024**3 / 10e-6 / 1e12
    query = 'SELECT "Precision", "Peak TFLOPS", "FLOPS Utilization(%)" FROM op_flops ORDER BY 1'
    with prof_engine.open(run, peak_tflops={"BF16": 500}) as r:
        assert r.sql(query).rows() == [("bf16", 500.0, round(100 * rate / 500, 2)), ("fp32", None, None)]
        assert r.sql('SELECT "Model", "Peak BF16 TFLOPS", "Peak FP32 TFLOPS" FROM devices').rows() == [
            (None, 500.0, None)
        ]
    monkeypatch.setenv("PROF_ENGINE_PEAK_TFLOPS", "bf16=500, fp32=50")
    with prof_engine.open(run) as r:
        assert r.sql(query).rows() == [
            ("bf16", 500.0, round(100 * rate / 500, 2)),
            ("fp32", 50.0, round(100 * rate / 10 / 50, 2)),
        ]
        assert r.sql('SELECT "FLOPS Utilization(%)" FROM flops_summary').rows() != [(None,)]
    monkeypatch.setenv("PROF_ENGINE_PEAK_TFLOPS", "bf16=100")
    h100 = write_trace(tmp_path / "h.json", events, deviceProperties=[props(0, "NVIDIA H100 80GB HBM3")])
    with prof_engine.open(prof_engine.import_trace([h100], tmp_path / "h100"), peak_tflops={"fp32": 60}) as r:
        assert r.sql('SELECT "Model", "Peak BF16 TFLOPS", "Peak FP32 TFLOPS" FROM devices').rows() == [
            ("H100 SXM", 989.4, 60.0)
        ]  # the argument wins over the environment


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("bf17=1", "'bf17' is not a precision (fp32, tf32, bf16, fp16, fp8)"),
        ("bf16", "'bf16' is not precision=TFLOPS (e.g. bf16=989.4)"),
        ("bf16=fast", "bf16='fast' is not a number of TFLOPS"),
        ("bf16=0", "bf16=0 is not a positive number of TFLOPS"),
        ("bf16=nan", "bf16=nan is not a positive number of TFLOPS"),
    ],
)
def test_peaks_given_wrongly_are_one_error(tmp_path, monkeypatch, given, message):
    events = [step(1, 0, 1000), *gemm(1, 1, SQUARE, BF16, 100, 10)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    monkeypatch.setenv("PROF_ENGINE_PEAK_TFLOPS", given)
    with pytest.raises(prof_engine.QueryError) as e:
        prof_engine.open(run)
    assert str(e.value) == f"PROF_ENGINE_PEAK_TFLOPS: {message}"


def test_the_cli_reads_the_peaks_from_the_environment(tmp_path):
    events = [step(1, 0, 1000), *gemm(1, 1, SQUARE, BF16, 100, 10)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    query = [
        sys.executable,
        "-m",
        "prof_engine",
        "query",
        str(run),
        'SELECT "Peak TFLOPS" FROM op_flops',
        "--format",
        "csv",
    ]
    env = {**os.environ, "PROF_ENGINE_PEAK_TFLOPS": "bf16=400"}
    good = subprocess.run(query, capture_output=True, text=True, env=env, timeout=300)
    assert good.returncode == 0 and good.stdout.splitlines() == ['"Peak TFLOPS"', "400"], good.stderr
    bad = subprocess.run(
        query, capture_output=True, text=True, env={**env, "PROF_ENGINE_PEAK_TFLOPS": "bf16"}, timeout=300
    )
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "Error: PROF_ENGINE_PEAK_TFLOPS: 'bf16' is not precision=TFLOPS (e.g. bf16=989.4)"
    ]


def test_flops_summary_is_each_steps_flops_over_its_span(tmp_path):
    """Per step: the counted FLOPs over the step's span on the device, and the share of that span
    the device would need at its peaks (each call at its precision's)."""
    events = [
        step(1, 0, 1000),
        *gemm(1, 1, SQUARE, BF16, 100, 10),
        *gemm(20, 2, SQUARE, ["float", "float"], 200, 100),
        step(2, 1000, 1000),
        *gemm(1001, 3, SQUARE, BF16, 1100, 10),
        x("aten::mm", 1500, 10, **{"Input Dims": SQUARE, "Input type": BF16}),  # on CPU tensors: not the device's
    ]
    with run_of(tmp_path, events, [props(0, "NVIDIA H100 80GB HBM3")]) as run:
        rows = run.sql(
            'SELECT "Step", "Calls", "GFLOPs", "Kernel Time(us)", "Step Time(us)", "TFLOPS", '
            '"FLOPS Utilization(%)" FROM flops_summary'
        ).rows()
        spans = dict(run.sql('SELECT "Step", ("End Time(us)" - "Start Time(us)")::DOUBLE FROM step_trace').rows())
    f = 2 * 1024**3
    at_peak = {1: f / 989.4e12 + f / 66.9e12, 2: f / 989.4e12}
    flops = {1: 2 * f, 2: f}
    calls, kernel_us = {1: 2, 2: 1}, {1: 110.0, 2: 10.0}
    assert rows == [
        (
            s,
            calls[s],
            pytest.approx(flops[s] / 1e9),
            kernel_us[s],
            spans[s],
            pytest.approx(flops[s] / spans[s] / 1e6, rel=1e-6),
            round(100 * at_peak[s] * 1e6 / spans[s], 2),
        )
        for s in (1, 2)
    ]


def test_a_real_a100_trace_names_its_device(tmp_path):
    """HTA's NCCL sample was recorded on an A100 (`NVIDIA A100-PG509-200`, 8 visible): its one
    device with records is named, with the A100's peaks."""
    src = fixture_path("kineto", "hta_nccl_parser_rank0_ws2")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Device", "Name", "Compute Capability", "Multiprocessors", "Model", '
            '"Peak BF16 TFLOPS", "Tasks" > 0 FROM devices'
        ).rows()
    assert rows == [("gpu0", "NVIDIA A100-PG509-200", "8.0", 108, "A100", 312.0, True)]


def test_the_report_shows_the_rates_where_calls_were_counted(tmp_path):
    events = [step(1, 0, 1000), *gemm(1, 1, SQUARE, BF16, 100, 10)]
    with run_of(tmp_path, events, [props(0, "NVIDIA H100 80GB HBM3")]) as run:
        page = run.report(tmp_path / "r.html").read_text(encoding="utf-8")
    assert "matrix multiplies and convolutions by device time (op_flops)" in page
    assert f'<td class="n">{round(100 * 2 * 1024**3 / 10e-6 / 1e12 / 989.4, 2)}</td></tr>' in page  # its utilization
    (tmp_path / "plain").mkdir()
    with run_of(tmp_path / "plain", [step(1, 0, 1000), x("aten::relu", 1, 10)], []) as run:
        assert "(op_flops)" not in run.report(tmp_path / "plain.html").read_text(encoding="utf-8")
