"""`prof-engine report`: one self-contained HTML page of a run, every name escaped."""

from __future__ import annotations

import os
import random
import re
import stat
import subprocess
import sys
from html import escape
from html.parser import HTMLParser

import pytest

import prof_engine
from conftest import write_trace, x
from prof_engine.engine.tables import cell_text

# A C++ kernel name as long as real ones (ncclDevKernel_..., at::native templates), with `<` and `"`
LONG = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    'at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int, "x")'
)
HOSTILE = ['<script>alert("op")</script>', "a & b", "vector<float>", '=HYPERLINK("x")', LONG]


def many_steps(tmp, steps: int = 400):
    """A one-GPU run of `steps` steps of two kernels each, step times spread at random; and each
    step's time on the device as the raw events give it (first kernel start to last kernel end, µs)."""
    rnd, events, spans = random.Random(7), [], {}
    for step in range(1, steps + 1):
        t = step * 3000
        events.append(x(f"ProfilerStep#{step}", t, 2000, cat="user_annotation"))
        for i, name in enumerate(("aten::mm", LONG)):
            c, start, dur = step * 10 + i, t + 40 + 600 * i, round(rnd.lognormvariate(5.5, 0.3), 3)
            events += [
                x(name, t + 10 + 600 * i, 100, **{"External id": c}),
                x("cudaLaunchKernel", t + 20 + 600 * i, 5, cat="cuda_runtime", correlation=c, **{"External id": c}),
                x(f"{name}_kernel", start, dur, cat="kernel", pid=0, tid=7, correlation=c, device=0, stream=7),
            ]
        spans[step] = start + dur - (t + 40)
    return prof_engine.import_trace([write_trace(tmp / "t.json", events)], tmp / "run"), spans


def percentile(values, q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    v = sorted(values)
    i = q * (len(v) - 1)
    lo = int(i)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (i - lo)


class _Page(HTMLParser):
    """Tags in order, and whether every opened element is closed in order (void ones aside)."""

    VOID = frozenset({"meta", "br", "img", "input", "hr", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.open: list[str] = []
        self.balanced = True

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open.pop() != tag:
            self.balanced = False


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    events = []
    for step in (1, 2):
        base = step * 1000
        events.append(x(f"ProfilerStep#{step}", base, 900, cat="user_annotation"))
        for i, name in enumerate(HOSTILE):
            events.append(x(name, base + 10 + 100 * i, 50, **{"External id": step * 10 + i}))
            events.append(
                x(
                    "cudaLaunchKernel",
                    base + 20 + 100 * i,
                    5,
                    cat="cuda_runtime",
                    correlation=step * 10 + i,
                    **{"External id": step * 10 + i},
                )
            )
            events.append(
                x(
                    f"{name}_kernel",
                    base + 40 + 100 * i,
                    30,
                    cat="kernel",
                    pid=0,
                    tid=7,
                    correlation=step * 10 + i,
                    device=0,
                    stream=7,
                )
            )
    return prof_engine.import_trace([write_trace(tmp / "t.json", events)], tmp / "run")


def test_report_is_a_self_contained_page_with_every_name_escaped(run, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "prof_engine", "report", str(run), "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<script" not in page and "&lt;script&gt;" in page  # the op name, as text
    assert "vector&lt;float&gt;" in page and "a &amp; b" in page
    assert not any(f'{a}="http' in page or f"{a}='http" in page for a in ("src", "href"))  # loads nothing
    parsed = _Page()
    parsed.feed(page)
    assert parsed.balanced and not parsed.open
    # the step chart: one labelled bar per row of the step breakdown (rank, device, step)
    with prof_engine.open(run) as r:
        steps = len(r.summary(20)["Step breakdown (µs)"])
    # (and the summary's bar of where the step time goes, which has no text)
    assert steps >= 2 and parsed.tags.count("svg") == 2 and parsed.tags.count("text") == steps
    assert "Top 20 op types (op_statistic)" in page and "Top 20 API calls (api_statistic)" in page
    assert not os.stat(tmp_path / "r.html").st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def test_report_into_a_directory_and_from_python(run, tmp_path):
    with prof_engine.open(run) as r:
        written = r.report(tmp_path, top=3)
        ops = r.sql('SELECT count(DISTINCT "Op Name") FROM op_summary').rows()[0][0]  # one row per name
    page = written.read_text(encoding="utf-8")
    assert written == tmp_path / "report.html" and "Top 3 ops by total duration" in page and ops == 5
    # a table of the first rows says how many it leaves out
    assert f"… {ops - 3:,} more rows: the first 3 of {ops:,} shown" in page.split("Top 3 ops by total duration")[1]
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # nothing else left behind


def test_report_adds_communication_and_memory_where_the_run_has_them(run, torch_npu_text_run, tmp_path):
    _, npu = torch_npu_text_run
    page = npu.report(tmp_path / "npu.html").read_text(encoding="utf-8")
    assert "communication op types (communication)" in page and "memory peaks (memory)" in page
    assert "ops by memory allocated (op_memory)" in page and "framework ops by device time (key_averages)" in page
    assert "hcom_allReduce" in page and "PTA" in page and "Allocated(MB)" in page  # their rows
    with prof_engine.open(run) as r:  # a trace with neither: no empty sections
        plain = r.report(tmp_path / "plain.html").read_text(encoding="utf-8")
    assert "(communication)" not in plain and "(memory)" not in plain and "(op_memory)" not in plain
    # the streams' idle gaps by cause, where the run has device tasks (both do)
    assert "idle gaps per stream, by cause (idle_time)" in page and '<td class="t">host wait</td>' in plain


def test_a_long_name_is_cut_in_its_cell_with_the_whole_name_on_hover(run, tmp_path):
    with prof_engine.open(run) as r:
        page = r.report(tmp_path / "r.html").read_text(encoding="utf-8")
    whole = escape(LONG + "_kernel")
    assert f'<td class="t" title="{whole}">{whole}</td>' in page  # cut by the style, whole on hover
    assert "td.t { max-width:" in page and "text-overflow: ellipsis" in page
    assert re.search(r'<td class="n">[0-9,.]+</td>', page) and "td.n {" in page  # numbers: never cut
    assert "white-space: nowrap; }" in page.split("td.n {")[1].split("\n")[0]


@pytest.fixture(scope="module")
def steps400(tmp_path_factory):
    return many_steps(tmp_path_factory.mktemp("steps400"))


def test_many_steps_are_drawn_as_their_distribution_and_the_slowest(steps400, tmp_path):
    """400 steps: not a bar each (4,000 px), but how many, step time's histogram and percentiles of
    each part, and the slowest steps; the numbers checked against the raw events."""
    path, spans = steps400
    with prof_engine.open(path) as r:
        page = r.report(tmp_path / "r.html").read_text(encoding="utf-8")
        hist = r.sql("SELECT * FROM _report_step_histogram").rows()
    assert "400 step rows (400 steps on 1 device): too many for a bar each" in page
    assert "step_trace</code>" in page  # where every row is
    assert not re.search(r"<text[^>]*>rank 0 gpu0 step", page)  # no bar per step
    parsed = _Page()
    parsed.feed(page)
    assert parsed.balanced and not parsed.open and parsed.tags.count("svg") == 3  # summary, histogram, percentiles
    times = list(spans.values())
    p50, p90, p99 = (cell_text(round(percentile(times, q), 3)) for q in (0.5, 0.9, 0.99))
    assert re.search(
        rf'<td class="t">Step Time\(us\)</td><td class="n">400</td><td class="n">{cell_text(round(min(times), 3))}</td>'
        rf'<td class="n">{p50}</td><td class="n">{p90}</td><td class="n">{p99}</td>'
        rf'<td class="n">{cell_text(round(max(times), 3))}</td>',
        page,
    )
    # the histogram: 40 bins of equal width, every step in one, as binned from the raw spans
    lo, hi = min(times), max(times)
    expected = [0] * 40
    for t in times:
        expected[min(int((t - lo) / (hi - lo) * 40), 39)] += 1
    assert [n for *_, n in hist] == expected and page.count("step rows</title></rect>") == 40
    # the 10 slowest, longest first
    slowest = sorted(spans, key=lambda s: -spans[s])[:10]
    listed = re.findall(
        r'<tr><td class="n">0</td><td class="t">gpu0</td><td class="n">([0-9]+)</td>',
        page.split("The 10 slowest step rows")[1].split("</table>")[0],
    )
    assert [int(s) for s in listed] == slowest


def _memory(at: float, nbytes: int, addr: int) -> dict:
    """A CPU allocation of `nbytes` at `at` µs, as torch.profiler's profile_memory writes it."""
    args = {"Device Type": 0, "Device Id": -1, "Addr": addr, "Bytes": nbytes, "Total Allocated": 0, "Total Reserved": 0}
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": at, "args": args}


CPU_OPS = (("aten::mm", 10, 300), ("aten::add", 400, 100))  # (name, start in the step, µs)


@pytest.fixture(scope="module")
def cpu_page(tmp_path_factory):
    """A CPU-only run of 3 steps (two ops each, 4 KB allocated in aten::mm, 1 MB in the step
    outside every op), its report page and its raw events."""
    tmp = tmp_path_factory.mktemp("cpu_report")
    events = []
    for step in (1, 2, 3):
        t = step * 1000
        events.append(x(f"ProfilerStep#{step}", t, 900, cat="user_annotation"))
        events += [x(name, t + start, dur) for name, start, dur in CPU_OPS]
        events += [_memory(t + 20, 4096, step * 100), _memory(t + 350, 1 << 20, step * 100 + 1)]
    with prof_engine.open(prof_engine.import_trace([write_trace(tmp / "t.json", events)], tmp / "run", jobs=1)) as r:
        page = r.report(tmp / "r.html").read_text(encoding="utf-8")
        op_memory = [row[2] for row in r.sql("SELECT * FROM op_memory").rows()]
    return page, events, op_memory


@pytest.fixture(scope="module")
def gpu_page(run, tmp_path_factory):
    """The report page of `run` (GPU kernels), and the first finding of its advice (severity, text)."""
    with prof_engine.open(run) as r:
        page = r.report(tmp_path_factory.mktemp("gpu_report") / "r.html").read_text(encoding="utf-8")
        ((severity, finding),) = r.sql('SELECT "Severity", "Finding" FROM summary_advice(1)').rows()
    return page, (severity, finding)


def _sections(page: str) -> list[str]:
    return re.findall(r"<section><h2>(.*?)</h2>", page)


def test_the_page_opens_with_a_summary_and_ends_with_the_manifest(cpu_page, gpu_page):
    """The manifest opened the page and advice came 5th: now the summary (step time, where it
    goes, the first findings), the advice, the tables; the manifest last. Step time and its shares
    as the raw events give them: each step from its first op's start to its last op's end."""
    page, events, _ = cpu_page
    sections = _sections(page)
    assert sections[0] == "Summary" and sections[1].startswith("Advice") and sections[-1] == "Run (manifest)"
    assert sections.index("Step breakdown (µs)") < sections.index("Top 20 ops by total duration")
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    spans, busy = [], 0.0
    for s in steps:
        ops = [e for e in events if e.get("cat") == "cpu_op" and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        spans.append(max(e["ts"] + e["dur"] for e in ops) - min(e["ts"] for e in ops))
        busy += sum(e["dur"] for e in ops)  # (they do not overlap)
    summary = page.split("<h2>Summary</h2>")[1].split("</section>")[0]
    assert f"{len(steps)} step(s) on 1 device: step time {cell_text(sum(spans) / len(spans))} µs on average." in summary
    computing = round(100 * busy / sum(spans), 1)
    assert (
        f"Computing {cell_text(computing)} %" in summary and f"Free {cell_text(round(100 - computing, 1))} %" in summary
    )
    assert "<ol><li>advice: no findings;" in summary  # what advice checked, where it found nothing
    gpu, (severity, finding) = gpu_page  # a GPU run: its findings, most severe first
    assert _sections(gpu)[0] == "Summary" and _sections(gpu)[-1] == "Run (manifest)"
    first = gpu.split("<h2>Summary</h2>")[1].split("</li>")[0]
    assert severity == "high" and "<b>high</b>" in first and escape(finding) in first


def test_a_cpu_only_page_hides_device_columns_that_are_all_zero(cpu_page, gpu_page):
    """No device task in the raw events: the step breakdown's communication columns and
    key_averages' device columns are all 0, and the page leaves them out, saying which."""
    page, events, _ = cpu_page
    assert not [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = page.split("<h2>Step breakdown (µs)</h2>")[1].split("</section>")[0]
    assert "<th>Computing</th>" in steps and "<th>Free</th>" in steps
    assert "<th>Overlapped</th>" not in steps and "<th>Communication(Not Overlapped)</th>" not in steps
    assert "Not shown, all 0 on this CPU-only run: Communication(Not Overlapped), Overlapped" in steps
    framework = page.split("framework ops by device time (key_averages)</h2>")[1].split("</section>")[0]
    assert "<th>Self Host(us)</th>" in framework and "Device Total(us)" in framework.split("Not shown")[1]
    assert "<th>Device Total(us)</th>" not in framework and "<th>Self Device(us)</th>" not in framework
    gpu, _ = gpu_page  # a GPU run keeps its columns, zero or not
    assert "<th>Overlapped</th>" in gpu and "CPU-only" not in gpu


def test_op_memory_in_the_report_leaves_the_steps_out(cpu_page):
    """1 MB allocated in each step outside every op: op_memory (and its export) names the step,
    as torch does; the report's table of ops lists ops only (it listed ProfilerStep#1, #2, #3 first)."""
    page, _, op_memory = cpu_page
    assert {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "aten::mm"} <= set(op_memory)
    table = page.split("ops by memory allocated (op_memory)</h2>")[1].split("</section>")[0]
    assert "aten::mm" in table and "ProfilerStep#" not in table
