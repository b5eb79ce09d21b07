"""The report as a reader sees it: rendered by a real browser (Debian's headless chromium, offline) at
1,400 px, on the NCCL fixture, the torch_npu fixture and a 400-step run. No table overflows the page,
a cut name is whole on hover, the page fetches nothing, and 400 steps leave the tables near the top.

A copy of each report gets a small script that measures the laid-out page and writes the numbers into
the DOM, which `--dump-dom` prints; `--screenshot` keeps a PNG of each page in the test's temporary
directory (the CI artefacts). The reports themselves hold no script.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape, unescape
from pathlib import Path

import pytest

import prof_engine
from test_report import many_steps

WIDTH = 1400
# Debian's flags for a headless chromium without a sandbox (as root in CI) that phones nobody.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=3000",
]
MEASURE = """<script>
window.addEventListener("load", function () {
  var root = document.documentElement, out = {viewport: root.clientWidth, width: root.scrollWidth,
    height: root.scrollHeight, tables: [], headings: [], cut: 0, untitled: [], titles: [],
    fetched: performance.getEntriesByType("resource").map(function (e) { return e.name; })};
  document.querySelectorAll("table").forEach(function (t) {
    var r = t.getBoundingClientRect();
    out.tables.push({right: r.right, top: r.top + window.scrollY, width: t.offsetWidth, room: t.parentElement.clientWidth});
  });
  document.querySelectorAll("h2, h3").forEach(function (h) {
    out.headings.push({tag: h.tagName, text: h.textContent, top: h.getBoundingClientRect().top + window.scrollY});
  });
  document.querySelectorAll("td").forEach(function (td) {
    if (td.scrollWidth > td.clientWidth + 1) {  // cut: the ellipsis shows
      out.cut += 1;
      if (td.title !== td.textContent) out.untitled.push(td.textContent);
      out.titles.push(td.title);
    }
  });
  var pre = document.createElement("pre");
  pre.id = "measured"; pre.style.display = "none"; pre.textContent = JSON.stringify(out);
  (window.parent === window ? document : window.parent.document).body.appendChild(pre);  // (a frame's)
});
</script>"""


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=90, check=False
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """chromium, where it is installed and runs; else the tests skip, saying why."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (.ci/run installs Debian's where it can)")
    tmp = tmp_path_factory.mktemp("chromium")
    (tmp / "probe.html").write_text("<!DOCTYPE html><p id=probe>ok</p>", encoding="utf-8")
    try:
        probe = _chromium(found, tmp / "profile", "--dump-dom", (tmp / "probe.html").as_uri())
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"chromium cannot run here: {e}")
    if 'id="probe"' not in probe.stdout:
        pytest.skip(f"chromium cannot run here: {(probe.stderr.strip().splitlines() or ['no output'])[-1]}")
    return found


# Chromium's window is no narrower than 500 px: a narrower window is a frame of that width (a
# `srcdoc` frame: its own viewport, media queries and all, and the page's origin for the result).
MIN_WINDOW = 500


def measure(browser: str, report: Path, out: Path, width: int = WIDTH) -> dict:
    """Lay out `report` at `width` px; return what MEASURE found, and keep a screenshot beside it."""
    page = out / f"{report.stem}.measured.html"
    measured = report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>")
    if width < MIN_WINDOW:
        measured = (
            '<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;width:'
            f'{width}px;height:2400px" srcdoc="{escape(measured)}"></iframe></body></html>'
        )
    page.write_text(measured, encoding="utf-8")
    proc = _chromium(
        browser,
        out / f"profile-{report.stem}-{width}",
        f"--window-size={max(width, MIN_WINDOW)},2400",
        f"--screenshot={out / f'{report.stem}-{width}.png'}",
        "--dump-dom",
        page.as_uri(),
    )
    found = re.search(r'<pre id="measured"[^>]*>(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, f"the page did not finish: {proc.stderr[-2000:]}"
    return json.loads(unescape(found.group(1)))


def check_layout(m: dict) -> None:
    """No table wider than the page or its box, the page no wider than the window, nothing fetched,
    and every cut cell whole in its title."""
    assert m["fetched"] == []
    assert m["width"] <= m["viewport"] <= WIDTH
    for t in m["tables"]:
        assert t["right"] <= m["viewport"] and t["width"] <= t["room"], t
    assert m["untitled"] == []


@pytest.fixture(scope="module")
def nccl_run(nccl_2rank_run):
    return nccl_2rank_run


def test_nccl_run_reads_at_1400_px_with_kernel_names_whole_on_hover(browser, nccl_run, tmp_path):
    with prof_engine.open(nccl_run) as r:
        report = r.report(tmp_path / "nccl.html")
        names = [row[0] for row in r.sql('SELECT "Op Name" FROM summary_top_ops(20)').rows()]  # (the report's macro)
    m = measure(browser, report, tmp_path)
    check_layout(m)
    assert sections(m)[0] == "Summary" and sections(m)[-1] == "Run (manifest)"
    longest = max(names, key=len)
    assert len(longest) > 500 and m["cut"] >= 10 and longest in m["titles"]  # ~1,300 characters, one line
    assert (tmp_path / "nccl-1400.png").stat().st_size > 10_000


def test_torch_npu_run_reads_at_1400_px(browser, torch_npu_text_run, tmp_path):
    _, run = torch_npu_text_run
    m = measure(browser, run.report(tmp_path / "torch_npu.html"), tmp_path)
    check_layout(m)
    assert any(h["text"].endswith("(advice: what to look at first)") for h in m["headings"])  # its prose wraps
    assert (tmp_path / "torch_npu-1400.png").stat().st_size > 10_000


def test_400_steps_leave_the_tables_near_the_top(browser, tmp_path):
    path, _ = many_steps(tmp_path)
    with prof_engine.open(path) as r:
        report = r.report(tmp_path / "steps400.html")
    m = measure(browser, report, tmp_path)
    check_layout(m)
    top_ops = next(h["top"] for h in m["headings"] if h["text"].endswith("ops by total duration"))
    assert top_ops < 1500 and m["height"] < 4000  # a bar per step: ~9,700 px and ~11,600 px
    assert (tmp_path / "steps400-1400.png").stat().st_size > 10_000


def sections(m: dict) -> list[str]:
    return [h["text"] for h in m["headings"] if h["tag"] == "H2"]


def test_the_page_opens_with_its_summary_and_reads_at_390_px(browser, nccl_run, tmp_path):
    """A phone-sized window: the page was 868 px wide at 390 (fixed-width charts, no viewport).
    Now nothing but a table's own box scrolls sideways; the page opens with the summary (step
    time, its shares, the first findings), then what the import guessed and the advice; the
    manifest last (it opened the page, and advice came 5th)."""
    with prof_engine.open(nccl_run) as r:
        report = r.report(tmp_path / "nccl.html")
    m = measure(browser, report, tmp_path, 390)
    assert m["fetched"] == [] and m["untitled"] == []
    assert m["width"] <= m["viewport"] <= 390, m["width"]
    assert sections(m)[:3] == [
        "Summary",
        "Data quality (data_quality: what the import had to guess)",
        "Advice (advice: what to look at first)",
    ]
    assert sections(m)[-1] == "Run (manifest)"
    assert (tmp_path / "nccl-390.png").stat().st_size > 10_000
