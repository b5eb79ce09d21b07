"""The README's Quick start works as written (less the pip install, which CI itself just ran)."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest

from conftest import QUICK_START_RECORD, REPO


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


@pytest.fixture(scope="module")
def clone(quick_start_trace, tmp_path_factory):
    """A reader's clone after the Quick start as written, then the worked example's commands in the
    same clone (a reader runs them in that order: the example must not need, or clobber, what the
    Quick start made). Its recording is the session's (conftest.quick_start_trace, the same
    command as a process); `prof-engine` runs in-process, as a reader's shell would run it but
    without a Python start per command."""
    from typer.testing import CliRunner

    from prof_engine.cli import app

    main_job = _quick_start_commands()[0]
    base = tmp_path_factory.mktemp("readme")
    work = base / "clone"
    work.mkdir()
    shared = REPO.parent / "shared"
    commands = [c.strip() for c in main_job.split("&&")[1:]]
    assert commands[0] == QUICK_START_RECORD, "conftest.quick_start_trace records what the README says"
    shutil.copy(quick_start_trace, work / "trace.json")
    commands = commands[1:]
    if (shared / "fixtures").is_dir():
        (base / "shared").symlink_to(shared)
        commands += _worked_example_commands()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        for command in commands:
            argv = shlex.split(command)
            assert argv[0] == "prof-engine", f"no runner for `{command}`"
            done = CliRunner().invoke(app, argv[1:], env={"COLUMNS": "120"})
            assert done.exit_code == 0, f"{command}: {done.output[-2000:]}{done.exception!r}"
    return work


def test_quick_start_main_job_runs_then_the_worked_example(clone):
    assert sorted(p.name.split("_2")[0] for p in (clone / "reports").iterdir()) == [
        "api_statistic",
        "op_statistic",
        "op_summary",
        "step_trace",
        "task_time",
    ]
    assert "<svg" in (clone / "run.html").read_text(encoding="utf-8")  # the report, with its step chart


def test_worked_example_numbers_are_what_the_views_compute(clone):
    """The step breakdown and the advice printed in the README's worked example are the current output
    (of the worked example's own import, in the clone)."""
    import prof_engine

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
    run = clone / "nccl_run"
    if not run.is_dir():
        pytest.skip("../shared/fixtures is absent (a user's clone): the worked example reads the fixtures")
    with prof_engine.open(run) as r:
        got = r.summary(10)["Step breakdown (µs)"].rows()  # Rank ... Preparing, up to 100 rows
        got_advice = r.sql('SELECT "Ranks", "Severity", "Finding" FROM advice').rows()
    assert [[str(v) if not isinstance(v, float) else f"{v:.0f}" for v in row] for row in got] == rows
    assert [list(row) for row in got_advice] == advice
