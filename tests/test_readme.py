"""The README's Quick start works as written (less the pip install, which CI itself just ran)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO


def _quick_start_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert len(blocks) == 2, "the Quick start has exactly two commands"
    return blocks


def test_quick_start_has_two_commands_and_ci_runs_the_second():
    main_job, tests = _quick_start_commands()
    assert main_job.startswith("pip install") and tests.startswith("pip install")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.split("&&")[1].strip().replace("python ", "python3 ") in ci


def _worked_example_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## A worked example", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("$ ")]


def test_quick_start_main_job_runs_then_the_worked_example(tmp_path):
    """The Quick start as written, then the worked example's commands in the same clone (a reader
    runs them in that order: the example must not need, or clobber, what the Quick start made)."""
    pytest.importorskip("torch")
    main_job = _quick_start_commands()[0]
    work = tmp_path / "clone"
    work.mkdir()
    shared = REPO.parent / "shared"
    commands = main_job.split("&&")[1:]
    if (shared / "fixtures").is_dir():
        (tmp_path / "shared").symlink_to(shared)
        commands += _worked_example_commands()
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "prof-engine":
            argv = [sys.executable, "-m", "prof_engine", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, str(REPO / argv[1]), *argv[2:]]
        done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    assert sorted(p.name.split("_2")[0] for p in (work / "reports").iterdir()) == [
        "api_statistic",
        "op_statistic",
        "op_summary",
        "step_trace",
        "task_time",
    ]
    assert "<svg" in (work / "run.html").read_text(encoding="utf-8")  # the report, with its step chart


def test_worked_example_numbers_are_what_the_views_compute(tmp_path):
    """The step breakdown and the advice printed in the README's worked example are the current output."""
    import prof_engine
    from conftest import fixture_path

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## A worked example", 1)[1].split("\n## ", 1)[0]
    cells = [
        [c.strip() for c in line.strip("│").split("│")]
        for line in section.splitlines()
        if re.match(r"│\s+\d+ │ gpu", line)
    ]
    rows = [[c.replace(",", "") for c in row] for row in cells]
    advice = [  # one row per finding: its ranks, severity, finding
        [c.strip() for c in line.strip("│").split("│")][:3]
        for line in section.splitlines()
        if re.match(r"│ [\d,-]+\s+│ (high|medium) ", line)
    ]
    assert len(rows) == 4 and len(advice) == 2
    run = prof_engine.import_trace([fixture_path("kineto", "hta_sampled_2rank_nccl")], tmp_path / "run")
    with prof_engine.open(run) as r:
        got = r.summary(10)["Step breakdown (µs)"].rows()  # Rank ... Preparing, up to 100 rows
        got_advice = r.sql('SELECT "Ranks", "Severity", "Finding" FROM advice').rows()
    assert [[str(v) if not isinstance(v, float) else f"{v:.0f}" for v in row] for row in got] == rows
    assert [list(row) for row in got_advice] == advice
