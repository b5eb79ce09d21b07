"""The `prof-engine` command line, run as a user would on a real trace: each command through the console
script's `main`, in-process (conftest.cli_in_process; a process per command cost ~1.5 s), but under
a umask, a process."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import cli_in_process, fixture_path, write_trace, x

SUMMARIES = ("op_summary", "op_statistic", "task_time", "api_statistic", "step_trace")
# msprof column runs each summary's header must contain, in this order.
MSPROF_COLUMNS = {
    "op_summary": [
        "Task ID",
        "Stream ID",
        "Op Name",
        "OP Type",
        "Task Type",
        "Task Start Time(us)",
        "Task Duration(us)",
        "Task Wait Time(us)",
    ],
    "op_statistic": [
        "OP Type",
        "Core Type",
        "Count",
        "Total Time(us)",
        "Min Time(us)",
        "Avg Time(us)",
        "Max Time(us)",
        "Ratio(%)",
    ],
    "task_time": [
        "kernel_name",
        "kernel_type",
        "stream_id",
        "task_id",
        "task_time(us)",
        "task_start(us)",
        "task_stop(us)",
    ],
    "api_statistic": ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"],
    "step_trace": [
        "Computing",
        "Communication(Not Overlapped)",
        "Overlapped",
        "Communication",
        "Free",
        "Stage",
        "Bubble",
    ],
}


def cli(cwd: Path, *args: str, umask0: bool = False, umask: int | None = None) -> subprocess.CompletedProcess:
    """`prof-engine ARGS` in `cwd`; stdout and stderr captured apart. Under `umask` (`umask0`: 0) a
    process of its own, the store reads the umask once at its import; otherwise the console
    script's `main` in this process (conftest.cli_in_process: a process per call cost ~1.5 s)."""
    mask = 0 if umask0 else umask
    if mask is None:
        return cli_in_process(cwd, *args)
    # without COLUMNS, which the CLI honours (piped output is otherwise 240 wide): readline, or a
    # test before in the same worker, may have set it, and tables would lose columns
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "prof_engine", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.umask(mask),
        env=env,
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def exported(out: Path, view: str, fmt: str) -> Path:
    (path,) = out.glob(f"{view}_*.{fmt}")
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def run_proc(work):
    """The real two-rank NCCL trace imported once; under umask 0, so modes can be checked too."""
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    return cli(work, "import", src, "-o", "run", umask0=True)


@pytest.fixture(scope="module")
def run(work, run_proc) -> Path:
    ok(run_proc)
    return work / "run"


@pytest.fixture(scope="module")
def csv_out(work, run) -> Path:
    ok(cli(work, "export", run, "--format", "csv", "-o", "out", umask0=True))
    return work / "out"


def test_import_writes_hive_partitioned_run(run, run_proc):
    """`import DIR -o run` makes manifest.json and slices/rank=*/device=*/part-*.parquet."""
    assert run_proc.stdout == ""
    assert (run / "manifest.json").is_file()
    parts = list(run.glob("slices/rank=*/device=*/part-*.parquet"))
    assert parts
    assert {p.parent.relative_to(run / "slices").as_posix() for p in parts} >= {
        "rank=0/device=gpu0",
        "rank=1/device=gpu1",
    }


def test_run_readable_by_plain_duckdb(run):
    """Plain duckdb reads the slices as a hive dataset with device and step columns and 2 ranks."""
    src = f"read_parquet('{run}/slices/**/*.parquet', hive_partitioning=true)"
    con = duckdb.connect()
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
    assert {"device", "step", "rank"} <= set(cols)
    assert con.execute(f"SELECT count(DISTINCT rank) FROM {src}").fetchone()[0] == 2
    steps = {r[0] for r in con.execute(f"SELECT DISTINCT step FROM {src}").fetchall()}
    assert {551, 552} <= {int(s) for s in steps if s is not None}


def test_export_csv_names_the_summaries_msprof_style(csv_out):
    """`export run --format csv` writes exactly the 5 summaries as <view>_<14 digits>.csv."""
    names = sorted(p.name for p in csv_out.iterdir())
    assert len(names) == 5, names
    assert all(re.fullmatch(r"[a-z_]+_\d{14}\.csv", n) for n in names), names
    assert sorted(n[: -len("_20240101000000.csv")] for n in names) == sorted(SUMMARIES)


@pytest.mark.parametrize("view", SUMMARIES)
def test_export_csv_headers_have_msprof_columns(csv_out, view):
    """Each summary's CSV header holds its msprof columns in msprof order, and it has rows."""
    with open(exported(csv_out, view, "csv"), newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    want = MSPROF_COLUMNS[view]
    start = header.index(want[0])
    assert header[start : start + len(want)] == want, header
    assert rows


def test_export_json_matches_query_csv(work, run):
    """step_trace exported as JSON has the Computing values that `query --format csv` prints."""
    ok(cli(work, "export", run, "step_trace", "--format", "json", "-o", "out2"))
    rows = json.loads(exported(work / "out2", "step_trace", "json").read_text(encoding="utf-8"))
    assert isinstance(rows, list) and len(rows) == 4
    proc = ok(cli(work, "query", run, "select Computing from step_trace", "--format", "csv"))
    header, *values = proc.stdout.splitlines()
    assert header.strip('"') == "Computing"
    assert [float(r["Computing"]) for r in rows] == [float(v) for v in values]


def test_export_one_step(work, run):
    """`export --step 551 step_trace` writes only step 551 (one row per rank)."""
    ok(cli(work, "export", run, "--step", "551", "step_trace", "-o", "out3"))
    rows = read_csv(exported(work / "out3", "step_trace", "csv"))
    assert [r["Step"] for r in rows] == ["551", "551"]
    assert sorted(r["Rank"] for r in rows) == ["0", "1"]


def test_export_timeline(work, run):
    """`export --timeline` writes a Chrome trace with Overlap Analysis processes and overlap X events."""
    ok(cli(work, "export", run, "--timeline", "-o", "tl.json"))
    events = json.loads((work / "tl.json").read_text(encoding="utf-8"))["traceEvents"]
    names = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert any("Overlap Analysis" in n for n in names), names
    assert any(e.get("ph") == "X" and e.get("cat") == "overlap" for e in events)


def test_export_timeline_draws_flows_between_their_slices(tmp_path):
    """A flow names its ends by the source's pid and tid (Kineto: the launch on the host thread, the
    kernel on the GPU's pid and stream): in the timeline each end is on the process and thread of
    the slice it binds to, so Perfetto draws the arrow from the launch to the kernel."""
    from conftest import write_trace, x

    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("cudaLaunchKernel", 10, 5, cat="cuda_runtime", correlation=3),
        x("gemm", 20, 30, cat="kernel", pid=0, tid=7, correlation=3, device=0, stream=7),
        {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    write_trace(tmp_path / "t.json", events)
    ok(cli(tmp_path, "import", "t.json", "-o", "run"))
    ok(cli(tmp_path, "export", "run", "--timeline", "-o", "tl.json"))
    out = json.loads((tmp_path / "tl.json").read_text(encoding="utf-8"))["traceEvents"]
    where = {e["name"]: (e["pid"], e["tid"]) for e in out if e["ph"] == "X"}
    flows = {e["ph"]: (e["pid"], e["tid"]) for e in out if e.get("cat") == "ac2g"}
    assert flows == {"s": where["cudaLaunchKernel"], "f": where["gemm"]} and where["gemm"] != where["cudaLaunchKernel"]


def test_export_timeline_flow_ids_are_unique_per_run(tmp_path):
    """Each rank's trace numbers its flows from its own counter (both ranks here use id 3); in the
    timeline each flow gets an id of its own, so Perfetto never draws an arrow from one rank to the other."""
    from conftest import write_trace, x

    for rank in (0, 1):
        events = [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"),
            x("cudaLaunchKernel", 10, 5, cat="cuda_runtime", correlation=3),
            x("gemm", 20, 30, cat="kernel", pid=0, tid=7, correlation=3, device=0, stream=7),
            {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
            {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        ]
        write_trace(tmp_path / f"r{rank}.json", events, distributedInfo={"rank": rank, "world_size": 2})
    ok(cli(tmp_path, "import", "r0.json", "r1.json", "-o", "run"))
    ok(cli(tmp_path, "export", "run", "--timeline", "-o", "tl.json"))
    out = json.loads((tmp_path / "tl.json").read_text(encoding="utf-8"))["traceEvents"]
    ends: dict[int, set] = {}
    for e in out:
        if e.get("cat") == "ac2g":
            ends.setdefault(e["id"], set()).add((e["ph"], e["pid"] // 1000))  # pid: rank * 1000 + lane
    assert sorted(ends.values(), key=sorted) == [{("s", 0), ("f", 0)}, {("s", 1), ("f", 1)}], ends


def test_export_timeline_into_a_directory(work, run):
    """`export --timeline` with a directory (the default -o is .) writes timeline_<time>.json in
    it, where it failed with a temporary file's name."""
    (work / "tl_dir").mkdir()
    proc = ok(cli(work, "export", run, "--timeline", "-o", "tl_dir"))
    (written,) = (work / "tl_dir").iterdir()
    assert (
        written.name.startswith("timeline_") and written.suffix == ".json" and written.name in proc.stdout + proc.stderr
    )
    assert json.loads(written.read_text(encoding="utf-8"))["traceEvents"]


def test_query_json_stdout_is_data_only(work, run):
    """`query --format json` prints JSON lines on stdout and nothing else."""
    proc = ok(cli(work, "query", run, "select count(*) as n from overlap", "--format", "json"))
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["n"] > 0


def test_query_prints_values_that_are_not_finite(work, run):
    """A division by zero in a user's SQL prints as inf/nan in a table, and as null in JSON (which
    has no Infinity or NaN), where the table printer failed with an OverflowError."""
    sql = "select 1/0 as a, -1/0 as b, 0/0 as c, [1.5, 1/0] as d"
    table = ok(cli(work, "query", run, sql)).stdout
    assert "inf" in table and "-inf" in table and "nan" in table
    line = ok(cli(work, "query", run, sql, "--format", "json")).stdout
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"not JSON: {c}")) == {
        "a": None,
        "b": None,
        "c": None,
        "d": [1.5, None],
    }


def test_table_prints_brackets_as_they_are(work, run):
    """Names in square brackets (Kineto's `[memory]`, a user's alias) are data, not terminal markup:
    the table printer dropped them."""
    table = ok(cli(work, "query", run, """select '[memory]' as "[b]name", '[bold]x[/bold]' as v""")).stdout
    assert "[memory]" in table and "[b]name" in table and "[bold]x[/bold]" in table


def test_show(work, run):
    """`show run` prints the step breakdown, op_statistic and api_statistic tables."""
    out = ok(cli(work, "show", run)).stdout
    for title in ("Step breakdown", "op_statistic", "api_statistic"):
        assert title in out


def test_views(work):
    """`views` lists every public view."""
    out = ok(cli(work, "views")).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip() and not line.startswith(" ")}
    assert {"op_summary", "op_statistic", "task_time", "api_statistic", "overlap", "step_trace"} <= listed


def test_info(work, run):
    """`info run` names the kineto source format and ranks 0, 1."""
    out = ok(cli(work, "info", run)).stdout
    assert "kineto" in out
    (ranks,) = [line for line in out.splitlines() if re.match(r"\W*ranks\s", line)]  # the item, not a rule's text
    assert "0, 1" in ranks


def test_csv_export_neutralises_formulas(tmp_path):
    """Op names a spreadsheet would evaluate get a leading quote in CSV; JSON keeps them raw."""
    evil = {'=HYPERLINK("http://x")', "-2+3"}
    write_trace(
        tmp_path / "evil.json",
        [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"),
            *(x(name, 10 + 30 * i, 20) for i, name in enumerate(sorted(evil))),
        ],
    )
    ok(cli(tmp_path, "import", "evil.json", "-o", "run"))
    ok(cli(tmp_path, "export", "run", "op_statistic", "-o", "csv"))
    ok(cli(tmp_path, "export", "run", "op_statistic", "--format", "json", "-o", "json"))
    csv_types = {r["OP Type"] for r in read_csv(exported(tmp_path / "csv", "op_statistic", "csv"))}
    assert csv_types == {"'" + name for name in evil}
    rows = json.loads(exported(tmp_path / "json", "op_statistic", "json").read_text(encoding="utf-8"))
    assert {r["OP Type"] for r in rows} == evil


def _writable_by_others(root: Path, include_root: bool) -> list[str]:
    paths = [root] if include_root else []
    paths += root.rglob("*")
    return [f"{oct(p.stat().st_mode & 0o777)} {p}" for p in paths if p.stat().st_mode & 0o022]


def test_created_files_not_group_or_world_writable(run, csv_out):
    """Under umask 0, everything in the run and the exported files are not group/world-writable."""
    assert _writable_by_others(run, include_root=True) == []
    assert _writable_by_others(csv_out, include_root=False) == []


def test_export_directory_not_group_or_world_writable(csv_out):
    """The export directory that `export -o out` creates is not group/world-writable under umask 0."""
    assert _writable_by_others(csv_out, include_root=True) == []


def test_a_stricter_umask_is_respected(tmp_path):
    """Under umask 077 (a private workspace) every file and directory the import, the export and the
    report create is private to its owner, where they were made 0644 / 0755 whatever the umask."""
    write_trace(tmp_path / "t.json", [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 50)])
    for args in (("import", "t.json", "-o", "run"), ("export", "run", "-o", "out"), ("report", "run", "-o", "r/")):
        ok(cli(tmp_path, *args, umask=0o077))
    made = [p for name in ("run", "out", "r") for p in [tmp_path / name, *(tmp_path / name).rglob("*")]]
    assert len(made) > 10
    assert [f"{oct(p.stat().st_mode & 0o777)} {p}" for p in made if p.stat().st_mode & 0o077] == []


def test_import_progress_says_when_it_finalises(monkeypatch):
    """A long import's bar (on a terminal, after a second) says 'finalising' once every byte is read:
    the finalize of a large trace takes a third of it, and a bar at 100 % looks stuck."""
    from prof_engine.cli import _Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    progress = _Progress()
    progress(10, 100)
    assert progress.bar is None  # not in the first second
    progress.start -= 2
    try:
        progress(50, 100)
        assert progress.bar.tasks[0].description == "importing"
        progress(100, 100)
        assert progress.bar.tasks[0].description.startswith("finalising")
    finally:
        progress.close()


def test_one_file_outputs_into_a_new_directory_written_with_a_slash(work, run):
    """`-o new_dir/` (a directory that does not exist yet, said with the trailing slash) gets the
    report and the timeline inside it, where both were written as a file named `new_dir`."""
    ok(cli(work, "report", run, "-o", "new_report_dir/"))
    ok(cli(work, "export", run, "--timeline", "-o", "new_tl_dir/"))
    assert (work / "new_report_dir" / "report.html").is_file()
    (timeline,) = (work / "new_tl_dir").iterdir()
    assert timeline.name.startswith("timeline_") and json.loads(timeline.read_text(encoding="utf-8"))["traceEvents"]


def test_version(work):
    """`prof-engine --version` prints the installed distribution's version and exits 0."""
    from importlib.metadata import version

    assert ok(cli(work, "--version")).stdout.strip() == f"prof-engine {version('prof-engine')}"
