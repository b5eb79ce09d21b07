"""`prof-engine report`: one self-contained HTML page of a run, every name escaped."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from conftest import write_trace, x

import prof_engine

HOSTILE = ['<script>alert("op")</script>', "a & b", "vector<float>", "=HYPERLINK(\"x\")"]


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
            events.append(x("cudaLaunchKernel", base + 20 + 100 * i, 5, cat="cuda_runtime",
                            correlation=step * 10 + i, **{"External id": step * 10 + i}))
            events.append(x(f"{name}_kernel", base + 40 + 100 * i, 30, cat="kernel", pid=0, tid=7,
                            correlation=step * 10 + i, device=0, stream=7))
    return prof_engine.import_trace([write_trace(tmp / "t.json", events)], tmp / "run")


def test_report_is_a_self_contained_page_with_every_name_escaped(run, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "prof_engine", "report", str(run), "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<script" not in page and "&lt;script&gt;" in page  # the op name, as text
    assert "vector&lt;float&gt;" in page and "a &amp; b" in page
    assert not any(f"{a}=\"http" in page or f"{a}='http" in page for a in ("src", "href"))  # loads nothing
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
        written = r.report(tmp_path, top=5)
    assert written == tmp_path / "report.html" and "Top 5 ops by duration" in written.read_text(encoding="utf-8")
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
    assert "idle gaps per stream, by cause (idle_time)" in page and "<td>host wait</td>" in plain
