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
    assert steps >= 2 and parsed.tags.count("svg") == 1 and parsed.tags.count("text") == steps
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
    assert parsed.balanced and not parsed.open and parsed.tags.count("svg") == 2  # histogram, percentiles
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
