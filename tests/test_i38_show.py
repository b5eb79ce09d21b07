"""Issue 38 item 9: `show` on a real GPU trace within two screens at 120 columns. C++ names are
shortened the way Nsight Systems' base names and Perfetto read (templates and argument lists
elided), whole with --wide; the top ops are one row per name (count, total, mean, max), not the
instances of one kernel. Each fixture is imported once for the module and shown in-process."""

from __future__ import annotations

import collections
import gzip
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine import render
from prof_engine.cli import app
from prof_engine.engine.tables import cell_text
from prof_engine.render import SHORT_MAX, short_name

WIDTH, MAX_LINES = 120, 100

# (fixture folder, file in it to import): the fixtures imported as single traces, not as a
# folder (a serving folder holds two captures of rank 0: one run each). Every fixture folder of
# kineto/, chrome/ and ascend/ is shown at the same width by test_data_quality's
# test_every_fixture_folder_imports_or_says_why_and_is_checked, which imports them all anyway.
SHOWN = [
    ("inference/tracelens_sglang_decode", "sglang_Qwen3-8B_decode.json.gz"),
    ("inference/tracelens_sglang_decode", "capture_traces/bs_32_rank0.json.gz"),
    ("inference/tracelens_vllm_prefilldecode_piecewise", "graph_execution.json.gz"),
    ("ascend/msprof_analyze_test_resources", "test/ut/advisor/timeline_advice/trace_view.json"),
]

ATEN = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)
LAMBDA = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<float>)"
)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (ATEN, "at::native::vectorized_elementwise_kernel<…>"),
        (LAMBDA, "at::native::elementwise_kernel<…>"),  # templates nested 4 deep, lambdas inside
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
            "at::native::(anon)::cunn_SoftMaxForward<…>",
        ),
        # a lambda's own scope: the function's arguments and its cv-qualifier elided, the lambda kept
        (
            "at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const"
            "::{lambda(float, float)#2}::operator()(float, float) const",
            "at::native::mse_kernel_cuda(…)::{lambda()#1}::operator()()::{lambda(…)#2}::operator()",
        ),
        ("bool c10::operator<(c10::Half const&, c10::Half const&)", "c10::operator<"),
        ("bool operator<<=<int>(std::vector<int, std::allocator<int> >&, int)", "operator<<=<int>"),
        ("void std::less<void>::operator()<float&, float&>(float&, float&) const", "std::less<void>::operator()<…>"),
        # one plain template argument names the instantiation: kept
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>"
            "(cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)",
            "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        ),
        (
            "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0EEEvPT0_PT_Pfdiii",
            "aiter::add_rmsnorm_quant_kernel<…>",
        ),
        # not C++: unchanged (Ascend op names, framework ops, memcpy, steps, torch's own scopes)
        ("aclnnMatmul_MatMulV3_MatMulV3", "aclnnMatmul_MatMulV3_MatMulV3"),
        ("hcom_allReduce__123_0_1", "hcom_allReduce__123_0_1"),
        ("StatelessDropOutGenMask/DSASTATELESSGENBITMASK", "StatelessDropOutGenMask/DSASTATELESSGENBITMASK"),
        (
            "Default/network-WithLossCell/_backbone-ResNet/conv1-Conv2d/Conv2D-op1",
            "Default/network-WithLossCell/_backbone-ResNet/conv1-Conv2d/Conv2D-op1",
        ),
        ("aten::add_", "aten::add_"),
        ("autograd::engine::evaluate_function: AddmmBackward0", "autograd::engine::evaluate_function: AddmmBackward0"),
        ("Memcpy HtoD (Host -> Device)", "Memcpy HtoD (Host -> Device)"),
        ("ProfilerStep#3", "ProfilerStep#3"),
        (
            "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>",
            "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>",
        ),
    ],
)
def test_short_name(name, short):
    assert short_name(name) == short


def test_a_name_too_long_even_shortened_is_cut_in_its_middle():
    """rocBLAS/Tensile kernels: 500 characters without a template; head and tail stay."""
    tensile = (
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x48x64_MI16x16x1_"
        + "_".join(["SN_LDSB1_AFC1"] * 30)
        + "_WG64_4_1"
    )
    short = short_name(tensile)
    assert len(short) == SHORT_MAX and short.startswith(tensile[:60]) and short.endswith("_WG64_4_1") and "…" in short


def show(run: Path, *args: str, width: int = WIDTH) -> str:
    """`prof-engine show RUN ARGS` in-process at `width` columns (as COLUMNS=`width` sets it)."""
    buffer = io.StringIO()
    saved = render.out
    render.out = Console(file=buffer, width=width, soft_wrap=False)
    try:
        result = CliRunner().invoke(app, ["show", str(run), *args])
    finally:
        render.out = saved
    assert result.exit_code == 0, (result.output, result.exception)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """run path of a fixture folder or of one file in it, imported once for the module."""
    runs: dict[tuple[str, str | None], Path] = {}

    def get(folder: str, file: str | None) -> Path:
        if (folder, file) not in runs:
            src = fixture_path(*folder.split("/"))
            dest = tmp_path_factory.mktemp("show") / "run"
            runs[folder, file] = prof_engine.import_trace([src / file if file else src], dest, jobs=1)
        return runs[folder, file]

    return get


@pytest.mark.parametrize(
    ("folder", "file"), SHOWN, ids=[f"{d.split('/')[1]}{'-' + f.split('/')[0] if f else ''}" for d, f in SHOWN]
)
def test_show_fits_two_screens_at_120_columns(imported, folder, file):
    """The sglang trace printed 174 lines, the MI300X one 198 (a kernel name of 13 wrapped lines)."""
    out = show(imported(folder, file))
    lines = out.splitlines()
    assert len(lines) <= MAX_LINES, out
    assert max(len(line) for line in lines) <= WIDTH, [line for line in lines if len(line) > WIDTH]


def _kernel_totals(folder: Path) -> tuple[collections.Counter, dict[str, int], dict[str, int]]:
    """Per name: count, total and longest duration (ns) of the device tasks in the raw Kineto JSON."""
    count: collections.Counter = collections.Counter()
    total: dict[str, int] = collections.defaultdict(int)
    longest: dict[str, int] = collections.defaultdict(int)
    for path in sorted(folder.glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
        for e in events:
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                ns = round(e["dur"] * 1000)
                count[e["name"]] += 1
                total[e["name"]] += ns
                longest[e["name"]] = max(longest[e["name"]], ns)
    return count, total, longest


def test_top_ops_are_one_row_per_name_as_the_raw_trace_counts(imported):
    """The NCCL fixture: 2,358 device tasks of 199 names; its top ops were ten tasks, each one of
    the same few kernels. Now each name once, with the raw events' count, total, mean and max."""
    folder = "kineto/hta_sampled_2rank_nccl"
    count, total, longest = _kernel_totals(fixture_path(*folder.split("/")))
    with prof_engine.open(imported(folder, None)) as r:
        rows = r.sql("SELECT * FROM summary_top_ops(NULL)")
    assert rows.columns == ["Op Name", "Task Type", "Count", "Total(us)", "Mean(us)", "Max(us)"]
    got = {name: (n, t, mean, m) for name, _, n, t, mean, m in rows.rows()}
    assert len(got) == len(rows) == len(count) == 199
    for name, n in count.items():
        got_n, got_total, got_mean, got_max = got[name]
        assert (got_n, got_total, got_max) == (n, round(total[name] / 1000, 3), longest[name] / 1000)
        assert abs(got_mean - total[name] / n / 1000) <= 0.0005 + 1e-9  # (rounded half away from 0)
    ranked = sorted(count, key=lambda n: (-total[n], n))[:10]
    assert [row[0] for row in rows.rows()[:10]] == ranked
    # as `show` prints them: shortened, each name once, its count and total whole
    out = show(imported(folder, None))
    table = out.split("Top 10 ops by total duration")[1].split("└")[0]
    for name in ranked:
        cells = f"│ {cell_text(count[name]):>5} │ {cell_text(round(total[name] / 1000, 3)):>9} │"
        assert table.count(cells) == 1, (name, cells)
        assert short_name(name).split("<")[0][:40] in table.replace("│\n│ ", "").replace(" │\n│ ", "")


def test_wide_prints_names_whole_and_show_says_it_shortened(tmp_path):
    """A CPU+GPU trace with two long kernels: shortened in `show`, a note says so; whole with --wide."""
    events = []
    for i, (name, dur) in enumerate([(ATEN, 30), (ATEN, 10), (LAMBDA, 50), (ATEN, 20)]):
        events.append(x("aten::op", 1000 + 100 * i, 60, **{"External id": i}))
        events.append(x("cudaLaunchKernel", 1010 + 100 * i, 5, cat="cuda_runtime", correlation=i, **{"External id": i}))
        events.append(x(name, 1020 + 100 * i, dur, cat="kernel", pid=0, tid=7, correlation=i, device=0, stream=7))
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run", jobs=1)
    out = show(run)
    top = out.split("Top 10 ops by total duration")[1].split("└")[0]
    assert "at::native::vectorized_elementwise_kernel<…>" in top and "at::native::elementwise_kernel<…>" in top
    assert "│ KERNEL    │     3 │        60 │       20 │      30 │" in top  # ATEN: 3 tasks, 60 µs
    assert out.rstrip().endswith(render.SHORTENED) and "FillFunctor" not in out
    wide = show(run, "--wide")
    assert "<…>" not in wide and render.SHORTENED not in wide
    top = wide.split("Top 10 ops by total duration")[1].split("└")[0]
    names = "".join(line.split("│")[1] for line in top.splitlines() if line.startswith("│"))
    assert "".join(ATEN.split()) in "".join(names.split()) and "".join(LAMBDA.split()) in "".join(names.split())
