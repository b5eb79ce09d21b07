"""The notebooks run top to bottom on the user's own run: the Quick start's (found where the README
makes it, with no setting), a one-step run, and the real 2-rank NCCL fixture; without a run, their
first cell says in one line how to make one.

Expected values come from the raw traces (their ProfilerStep#N ranges, read with `json`), never from
prof_engine output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, fixture_path, load_events

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
QUICK_START = "python examples/record_trace.py -o trace.json && prof-engine import trace.json -o run --force"


@pytest.fixture(autouse=True)
def kernel_env(monkeypatch):
    """The kernel is a new process: it imports this checkout's prof_engine, not an installed one, and
    reads no run setting but the test's."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.delenv("PROF_ENGINE_RUN", raising=False)
    monkeypatch.delenv("PROF_ENGINE_BASELINE", raising=False)


def record(tmp: Path, steps: int) -> Path:
    """A trace recorded as the Quick start records it (examples/record_trace.py; all but 2 steps recorded)."""
    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "record_trace.py"), "-o", "trace.json", "--steps", str(steps)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return tmp / "trace.json"


@pytest.fixture(scope="module")
def one_step_trace(tmp_path_factory) -> Path:
    return record(tmp_path_factory.mktemp("one_step"), 3)


def profiler_steps(*paths: Path) -> dict[int, list[int]]:
    """rank (each file's distributedInfo.rank, else 0) -> its sorted ProfilerStep#N numbers, from the raw JSON."""
    out = {}
    for path in paths:
        top, events = load_events(path)
        rank = int(top.get("distributedInfo", {}).get("rank", 0))
        out[rank] = sorted(
            int(e["name"].split("#")[1])
            for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        )
    return out


def notebook_client(notebook: str, cwd: Path):
    """(notebook, client) for a copy of `notebook` run in `cwd`."""
    nb = nbformat.read(REPO / "notebooks" / notebook, as_version=4)
    return nb, nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )


def execute(notebook: str, cwd: Path) -> tuple[str, list]:
    """Run a copy of `notebook` in `cwd`; (all its printed text, its error outputs)."""
    nb, client = notebook_client(notebook, cwd)
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    return text, [o for o in outputs if o.output_type == "error"]


def check_steps(text: str, expected: dict[int, list[int]]) -> None:
    """The first cell's per-rank lines show each rank's step count and first..last step as in the trace."""
    shown = {
        int(r): (int(n), int(a), int(b))
        for r, n, a, b in re.findall(r"^  rank (\d+) \S+: (\d+) step\(s\) (-?\d+)\.\.(-?\d+), step time", text, re.M)
    }
    assert shown == {r: (len(s), s[0], s[-1]) for r, s in expected.items()}, text
    numbers = sorted({n for s in expected.values() for n in s})
    assert f": {len(numbers)} step(s), rank(s) {sorted(expected)}" in text


def check_compare(text: str, expected: dict[int, list[int]]) -> None:
    """analysis.ipynb compares the run's second half of steps with its first, or says it cannot."""
    numbers = sorted({n for s in expected.values() for n in s})
    if len(numbers) < 2:
        assert f"{len(numbers)} step(s): nothing to compare within this run" in text
        return
    first, second = numbers[: len(numbers) // 2], numbers[len(numbers) // 2 :]
    assert (
        f"steps {second[0]}..{second[-1]} ({len(second)}) compared with steps {first[0]}..{first[-1]} "
        f"({len(first)}) of the same run"
    ) in text
    assert "Hodges–Lehmann" in text and statuses(text)  # the comparison ran, printed its method and verdicts


def statuses(text: str) -> dict[str, int]:
    """The compare cell's `items by status: N status, ...` line, as {status: N}."""
    line = re.search(r"^items by status: (.*)$", text, re.M)
    assert line, text
    return {status: int(n) for n, status in re.findall(r"(\d+) ([^,]+)", line[1])}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_quick_start_run_by_default(notebook, quick_start_trace, tmp_path):
    """The Quick start's `run` at the repository root is found with no setting, from notebooks/."""
    import prof_engine

    prof_engine.import_trace([quick_start_trace], tmp_path / "run")
    (tmp_path / "notebooks").mkdir()
    text, errors = execute(notebook, tmp_path / "notebooks")
    assert not errors
    expected = profiler_steps(quick_start_trace)
    assert len(expected[0]) == 4
    check_steps(text, expected)
    if notebook == "analysis.ipynb":
        check_compare(text, expected)


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_one_step_trace(notebook, one_step_trace, tmp_path, monkeypatch):
    """A one-step run, given as its trace file (imported by the notebook): no crash, the compare says why not."""
    monkeypatch.setenv("PROF_ENGINE_RUN", str(one_step_trace))
    text, errors = execute(notebook, tmp_path)
    assert not errors
    expected = profiler_steps(one_step_trace)
    assert len(expected[0]) == 1
    check_steps(text, expected)
    if notebook == "analysis.ipynb":
        check_compare(text, expected)


@pytest.fixture(scope="module")
def nccl_run(nccl_2rank_run) -> tuple[Path, Path]:
    """(source, run) of the 2-rank NCCL fixture (imported once for the session)."""
    return fixture_path("kineto", "hta_sampled_2rank_nccl"), nccl_2rank_run


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_two_rank_fixture(notebook, nccl_run, tmp_path, monkeypatch):
    """Two ranks; analysis.ipynb compares the run with BASELINE, here the same traces (imported by the
    notebook): nothing reads slower or faster."""
    src, run = nccl_run
    monkeypatch.setenv("PROF_ENGINE_RUN", str(run))
    monkeypatch.setenv("PROF_ENGINE_BASELINE", str(src))
    text, errors = execute(notebook, tmp_path)
    assert not errors
    expected = profiler_steps(*sorted(src.glob("*.json*")))
    assert sorted(expected) == [0, 1]
    check_steps(text, expected)
    if notebook == "analysis.ipynb":
        assert f"{run} compared with the baseline " in text
        assert set(statuses(text)) <= {"no change", "inconclusive"}  # the same data never reads slower or faster


@pytest.mark.parametrize(("notebook", "setting"), list(zip(NOTEBOOKS, ["default", "PROF_ENGINE_RUN"])))
def test_no_run_is_one_line(notebook, setting, tmp_path, monkeypatch):
    """No run where the notebook looks: the first cell stops with one line giving the Quick start command."""
    if setting == "PROF_ENGINE_RUN":
        monkeypatch.setenv("PROF_ENGINE_RUN", str(tmp_path / "absent"))
    nb, client = notebook_client(notebook, tmp_path)
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = next(i for i, c in enumerate(code) if "parameters" not in c.metadata.get("tags", []))
    errors = [o for o in code[first].outputs if o.output_type == "error"]
    assert len(errors) == 1 and all(c.execution_count is None for c in code[first + 1 :])  # it stopped there
    lines = errors[0]["traceback"]
    assert len(lines) == 1 and lines[0].startswith("RunError: ") and QUICK_START in lines[0], lines
