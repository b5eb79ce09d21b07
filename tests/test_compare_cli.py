"""`prof-engine compare` as a CI step runs it: formats, a column per run, and the documented exit codes
(0 pass, 3 regression with one `regression:` line, 2 bad threshold syntax, 1 a run that is not one)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from compare_traces import compare_runs  # noqa: F401 - the session fixture
from test_cli import cli


@pytest.fixture(scope="module")
def runs(compare_runs, tmp_path_factory):  # noqa: F811 - the imported fixture
    """The runs in one directory, as a sweep would leave them: runs/base, runs/changed, runs/noise."""
    d = tmp_path_factory.mktemp("sweep")
    for name, path in compare_runs.items():
        shutil.copytree(path, d / "runs" / name)
    return d


def test_regression_exits_3_with_one_line_reason(runs):
    proc = cli(runs, "compare", "runs/base", "runs/changed", "--fail-if", "step_time > +5%", "--format", "csv")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].startswith("regression: step_time > +5%: Step Time +") and "in changed" in lines[-1]
    assert "Traceback" not in proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    by_item = {(r["Level"], r["Item"], r["Detail"]): r for r in rows}
    assert by_item[("op_type", "aten::relu", "KERNEL")]["Status"] == "slower"
    assert by_item[("op", "fused_dropout_kernel_vec", "64,512;")]["Status"] == "removed"


def test_noise_passes_the_gate_with_exit_0(runs):
    proc = cli(
        runs,
        "compare",
        "runs/base",
        "runs/noise",
        "--fail-if",
        "step_time > +5%",
        "--fail-if",
        "op_type > +20%",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "noise vs base: no significant change"
    assert "Hodges–Lehmann" in doc["method"] and {r["Status"] for r in doc["rows"]} == {"no change"}


@pytest.mark.parametrize("threshold", ["step_time >> 5%", "memory > 5us"])
def test_bad_threshold_syntax_is_a_usage_error_exit_2(runs, threshold):
    proc = cli(runs, "compare", "runs/base", "runs/changed", "--fail-if", threshold)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--fail-if" in proc.stderr and "threshold" in proc.stderr


def test_baseline_and_a_directory_of_runs_give_a_column_per_run(runs):
    every = sorted(str(p.relative_to(runs)) for p in (runs / "runs").iterdir())  # what runs/* expands to
    proc = cli(runs, "compare", "--baseline", "runs/base", *every, "--level", "step")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "Item" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == ["Item", "Where", "Base", "changed", "noise"]
    step_time = next(line for line in proc.stdout.splitlines() if "Step Time" in line)
    assert "% slower)" in step_time  # the changed run; the noise run's cell carries no verdict
    assert "changed vs base: step time +" in proc.stdout and "noise vs base: no significant change" in proc.stdout


def test_a_missing_run_is_one_error_line(runs):
    proc = cli(runs, "compare", "runs/base", "runs/absent")
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and len(proc.stderr.splitlines()) == 1


def test_runs_with_nothing_in_common_are_one_error_line_not_no_change(tmp_path):
    """A run whose records are all unclassified (no step, op or API) beside another such run, and two
    runs of unrelated ops compared at the op level: nothing is on both sides, so there is nothing to
    judge — exit 1 and one line saying why, never "no significant change"."""
    import prof_engine
    from conftest import write_trace, x

    base = 1.7e15
    traces = {
        "mm": [x("aten::mm", base + i * 100, 10) for i in range(5)],
        "add": [x("aten::add", base + i * 100, 10) for i in range(5)],
        "odd1": [x("mystery", base + i * 100, 10, cat="made_up") for i in range(5)],
        "odd2": [x("mystery", base + i * 100, 12, cat="made_up") for i in range(5)],
    }
    for name, events in traces.items():
        prof_engine.import_trace([write_trace(tmp_path / f"{name}.json", events)], tmp_path / name, jobs=1)
    for args, why in (
        (("odd1", "odd2"), "(neither has any)"),
        (("mm", "add", "--level", "op"), "(1 only in mm, 1 only in add)"),
    ):
        proc = cli(tmp_path, "compare", *args)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(
            f"Error: {args[1]} and {args[0]} have nothing in common"
        )
        assert why in proc.stderr and "no significant change" not in proc.stdout
