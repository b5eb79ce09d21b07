"""Bad input through the CLI: exit code 1, one `Error:` line on stderr, no traceback, nothing left behind."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import cli_in_process, x


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`prof-engine ARGS` in `cwd`, through the console script's `main` in this process (the
    process-level cases below run a process); stdout and stderr captured apart."""
    return cli_in_process(cwd, *args)


def assert_user_error(proc: subprocess.CompletedProcess, *mentions: str) -> str:
    """Exit 1, stderr exactly one `Error:` line (naming `mentions`), no traceback; return that line."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("Error:") and proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    for m in mentions:
        assert m in proc.stderr
    return proc.stderr


def leftovers(parent: Path, name: str) -> list[str]:
    """A run called `name`, or a temporary `.name.*` (.importing / .replaced / .tmp), in `parent`."""
    return sorted(p.name for p in parent.iterdir() if p.name == name or p.name.startswith(f".{name}."))


def trace_text(n_ops: int = 10) -> str:
    """A valid small Kineto-shaped trace, as text."""
    events = [x("ProfilerStep#1", 0, 10 * n_ops + 10, cat="user_annotation")]
    events += [x(f"aten::op{i}", 5 + 10 * i, 3) for i in range(n_ops)]
    return json.dumps({"schemaVersion": 1, "traceEvents": events})


def cut_gzip(text: str) -> bytes:
    data = gzip.compress(text.encode())
    return data[: len(data) // 2]


def corrupt_gzip(text: str) -> bytes:
    data = bytearray(gzip.compress(text.encode()))
    for i in range(20, 40):
        data[i] ^= 0xFF
    return bytes(data)


BAD_SOURCES: dict[str, tuple[str, Callable[[], str | bytes | None]]] = {
    "truncated_json": ("trace.json", lambda: (t := trace_text())[: len(t) // 2]),
    "empty_file": ("trace.json", lambda: ""),
    "json_not_a_trace": ("trace.json", lambda: '{"a": 1}'),
    "json_array_of_numbers": ("trace.json", lambda: "[1, 2, 3]"),
    "unknown_file_type": ("table.csv", lambda: "name,dur\nmatmul,3\n"),
    "missing_path": ("missing.json", lambda: None),
    "truncated_gzip_small": ("trace.json.gz", lambda: cut_gzip(trace_text())),
    "truncated_gzip_large": ("trace.json.gz", lambda: cut_gzip(trace_text(5000))),
    "corrupt_gzip_small": ("trace.json.gz", lambda: corrupt_gzip(trace_text())),
    "ts_not_a_number": ("trace.json", lambda: trace_text().replace('"ts": 25', '"ts": "2x5"', 1)),
    "dur_not_a_number": ("trace.json", lambda: trace_text(5000).replace('"dur": 3', '"dur": "three"', 1)),
    "ts_out_of_range": ("trace.json", lambda: trace_text().replace('"ts": 25', '"ts": 1e30', 1)),
    # (a time int64 ns holds but no run has, 2^62 ns or more from 0: dropped and said, see
    # test_values_out_of_range_are_dropped_or_no_step_and_said)
    "not_utf8": ("trace.json", lambda: trace_text(5000).replace("aten::op4000", "aten::op\xe9").encode("latin-1")),
    "number_out_of_range": (
        "trace.json",
        lambda: trace_text().replace('"args": {}', '"args": {"Input Dims": [[1e400]]}', 1),
    ),
    "rank_out_of_range": (
        "trace.json",
        lambda: trace_text().replace(
            '{"schemaVersion": 1', '{"schemaVersion": 1, "distributedInfo": {"rank": 9223372036854775808}'
        ),
    ),
    "no_events": ("trace.json", lambda: '{"traceEvents": []}'),  # said an internal staging path was missing
    "base_time_negative": (
        "trace.json",
        lambda: trace_text().replace('{"schemaVersion": 1', '{"schemaVersion": 1, "baseTimeNanoseconds": -1e20'),
    ),
}


@pytest.mark.parametrize("case", list(BAD_SOURCES))
def test_import_bad_source(tmp_path, case):
    """Importing an unreadable source fails cleanly, names the file, and leaves no run or temp dir."""
    name, content = BAD_SOURCES[case]
    data = content()
    if isinstance(data, bytes):
        (tmp_path / name).write_bytes(data)
    elif data is not None:
        (tmp_path / name).write_text(data, encoding="utf-8")
    proc = cli(tmp_path, "import", name, "-o", "run")
    assert_user_error(proc, name)
    assert leftovers(tmp_path, "run") == []


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_import_of_something_not_a_file_or_directory(tmp_path, kind):
    """/dev/null or a named pipe as the source said "Not a directory" (it was searched as one)."""
    import os

    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")
    source = "/dev/null" if kind == "device" else "pipe"
    assert_user_error(cli(tmp_path, "import", source, "-o", "run"), source, "not a trace file or a directory")
    assert leftovers(tmp_path, "run") == []


def test_an_unreadable_rank_is_left_out_not_the_import(tmp_path, monkeypatch):
    """One rank file that cannot be read (permissions, an I/O error) failed the whole directory
    import with an OSError; it is left out and listed, as any failing rank is."""
    import prof_engine
    from prof_engine import importers

    for rank in (0, 1):
        (tmp_path / f"r{rank}.json").write_text(trace_text(2 + rank), encoding="utf-8")
    convert = importers._convert_unit

    def unreadable(unit, *args):
        if unit.path.name == "r1.json":
            raise PermissionError(13, "Permission denied", str(unit.path))
        return convert(unit, *args)

    monkeypatch.setattr(importers, "_convert_unit", unreadable)
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run", jobs=1)) as run:
        assert run.manifest["ranks"] == [0]
        assert run.manifest["skipped"] == [{"error": f"{tmp_path / 'r1.json'}: cannot read: Permission denied"}]


@pytest.mark.parametrize(
    "damage, says",
    [
        ("rank_2_31", "rank 2147483648 is out of range"),  # was ArrowInvalid from the int32 rank column
        ("deep_metadata", "nested too deeply"),  # was a RecursionError from json
    ],
)
def test_ascend_side_files_out_of_range_or_too_deep(tmp_path, damage, says):
    """A rank from `profiler_info_2147483648.json`, or a side file nested past the recursion limit,
    is one line naming the file: the rank is left out and the other imports."""
    import shutil

    from conftest import fixture_path

    src = tmp_path / "npu"
    shutil.copytree(fixture_path("ascend", "torch_npu_2rank_level1_text"), src)
    if damage == "rank_2_31":
        (src / "rank1_ascend_pt" / "profiler_info_1.json").rename(
            src / "rank1_ascend_pt" / "profiler_info_2147483648.json"
        )
        bad = src / "rank1_ascend_pt" / "profiler_info_2147483648.json"
    else:
        bad = src / "rank1_ascend_pt" / "profiler_metadata.json"
        bad.write_text("[" * 100_000 + "]" * 100_000)
    proc = cli(tmp_path, "import", "npu", "-o", "run")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"Warning: left out: npu/rank1_ascend_pt/{bad.name}: " in proc.stderr and says in proc.stderr
    assert json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))["ranks"] == [0]


def test_a_device_label_no_file_system_holds_is_refused_in_one_line():
    """An Ascend process label `NPU <300 characters>` became a 300-character device, whose
    partition directory failed with "File name too long": a label that is no number names the
    file's own device, and a label too long for a directory is refused as an input error."""
    from prof_engine.errors import InputError
    from prof_engine.store.partitions import partition_dir

    with pytest.raises(InputError, match="too long to be a device"):
        partition_dir(0, "npu" + "x" * 300)
    assert partition_dir(0, "npu12") == "rank=0/device=npu12"


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A directory holding good.json and a run imported from it."""
    work = tmp_path_factory.mktemp("good")
    (work / "good.json").write_text(trace_text(), encoding="utf-8")
    proc = cli(work, "import", "good.json", "-o", "run")
    assert proc.returncode == 0, proc.stderr
    return work


def test_existing_run_needs_force(tmp_path):
    """Importing onto an existing run fails without --force (run untouched); --force replaces it."""
    (tmp_path / "good.json").write_text(trace_text(), encoding="utf-8")
    assert cli(tmp_path, "import", "good.json", "-o", "run").returncode == 0
    before = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert_user_error(cli(tmp_path, "import", "good.json", "-o", "run"), "--force")
    assert json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8")) == before
    assert leftovers(tmp_path, "run") == ["run"]
    proc = cli(tmp_path, "import", "good.json", "-o", "run", "--force")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    after = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert after["id"] != before["id"]
    assert leftovers(tmp_path, "run") == ["run"]


def test_force_refuses_non_run_directory(tmp_path):
    """--force onto a directory that is not a run refuses and keeps its files."""
    (tmp_path / "good.json").write_text(trace_text(), encoding="utf-8")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me", encoding="utf-8")
    assert_user_error(cli(tmp_path, "import", "good.json", "-o", "mine", "--force"), "not a prof-engine run")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    assert (tmp_path / "mine" / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert leftovers(tmp_path, "mine") == ["mine"]


def test_query_missing_run(tmp_path):
    """`query` on a run that does not exist fails cleanly and creates nothing."""
    assert_user_error(cli(tmp_path, "query", "nope", "select 1"), "nope")
    assert leftovers(tmp_path, "nope") == []


@pytest.mark.parametrize(
    "sql", ["selec broken from", "select no_such_column from step_trace", "select * from no_such_table"]
)
def test_query_bad_sql(good, sql):
    """Bad SQL (parser, binder or catalog error) gives one `Error:` line, and under it DuckDB's
    hints (a caret, candidate columns, a view name it is close to), at most four lines of them."""
    proc = cli(good, "query", "run", sql)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("Error: SQL error") and 2 <= proc.stderr.count("\n") <= 5, proc.stderr


@pytest.mark.parametrize("command", ["show", "export", "query"])
def test_a_step_the_run_lacks_is_an_error(good, command):
    """--step N of a step the run does not have: every view would be empty, so it is an error
    that lists the run's steps (and no export directory is created)."""
    args = {"show": [], "export": ["step_trace", "-o", "out_nostep"], "query": ["select 1"]}[command]
    proc = cli(good, command, "run", "--step", "2", "--step", "9", *args)
    assert_user_error(proc, "no steps 2, 9", "its steps: 1")
    assert not (good / "out_nostep").exists()


def test_export_unknown_view(good):
    """`export` of an unknown view fails, names it, and writes no output directory."""
    assert_user_error(cli(good, "export", "run", "no_such_view", "-o", "exported"), "no_such_view")
    assert leftovers(good, "exported") == []


def test_bad_option_is_a_usage_error(good):
    """An invalid option value is a typer usage error: exit 2, no traceback."""
    proc = cli(good, "query", "run", "select 1", "--format", "xml")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_out_of_memory_is_one_line_saying_how_to_allow_more(good, monkeypatch):
    """A query session out of its memory limit, on opening the run or in a query, is one Error line
    naming PROF_ENGINE_MEMORY_LIMIT; an export leaves no file behind."""
    import prof_engine

    out = good / "oom-export"
    monkeypatch.setenv("PROF_ENGINE_MEMORY_LIMIT", "1MB")
    assert_user_error(cli(good, "export", "run", "op_summary", "-o", out), "out of memory", "PROF_ENGINE_MEMORY_LIMIT")
    assert not out.exists() or not any(out.iterdir())
    monkeypatch.delenv("PROF_ENGINE_MEMORY_LIMIT")
    with (
        prof_engine.open(good / "run", memory_limit="20MB") as run,
        pytest.raises(prof_engine.QueryError, match="ran out of memory.*PROF_ENGINE_MEMORY_LIMIT"),
    ):
        run.sql("SELECT list(a) FROM range(10000000) t(a)")  # a list aggregate cannot spill


@pytest.mark.parametrize(
    ("file", "column", "bad"),
    [
        ("npu_module_mem.csv", "Total Reserved(MB)", "x"),
        ("memory_record.csv", "Timestamp(us)", "inf"),
        ("operator_memory.csv", "Size(KB)", "nan"),
        ("operator_memory.csv", "Size(KB)", "1e20"),
        ("kernel_details.csv", "Start Time(us)", "12x34"),
        ("kernel_details.csv", "Duration(us)", "-"),
    ],
)
def test_a_memory_cell_that_is_not_a_number(tmp_path, file, column, bad):
    """A torch_npu memory or kernel file whose number cell is text (or not finite): one line naming
    the file, the column and the value, not a traceback or a NaN in the run."""
    import csv
    import shutil

    from conftest import fixture_path

    src = tmp_path / "src"
    shutil.copytree(fixture_path("ascend", "torch_npu_2rank_level1_text"), src)
    path = next((src / "rank0_ascend_pt").rglob(file))
    rows = list(csv.reader(path.open(encoding="utf-8-sig", newline="")))
    col = rows[0].index(column)
    rows[1][col] = bad
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    proc = cli(tmp_path, "import", path.parent.parent, "-o", "run")  # the rank's directory
    said = f"not a time in µs: '{bad}'" if column.endswith("(us)") else f"'{bad}' is not a number of bytes"
    assert_user_error(proc, f"{file}: {column}", said)
    assert leftovers(tmp_path, "run") == []


@pytest.mark.parametrize("native", ["1", "0"])
def test_negative_durations_are_read_as_zero_and_said(tmp_path, monkeypatch, native):
    """An event that ends before it starts is read as 0 µs long, not dropped and not negative, and
    the import says how many there were (native scanner and pure-Python path alike)."""
    monkeypatch.setenv("PROF_ENGINE_NATIVE", native)
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("aten::mm", 10, -5),
        x("aten::add", 20, 3),
        x("k", 30, -2, cat="kernel", pid=0, tid=7, device=0, stream=7),
    ]
    (tmp_path / "t.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    proc = cli(tmp_path, "import", "t.json", "-o", "run")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "Warning: negative_durations: 2 of 4 (50.00 %) on r0: slices that end "
        "before they start, read as 0 µs long (t.json)"
    )
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sources"][0]["info"]["negative_durations"] == 2
    assert manifest["tables"]["slices"] == 4


def test_odd_fields_that_name_nothing_are_read_as_absent(tmp_path, monkeypatch):
    """Fields of the wrong shape that a reader can do without import as if absent, on both paths:
    args that are not an object, a metadata name that is not text, an id beyond int64, device
    properties and a host name of the wrong type."""
    for native in ("1", "0"):
        monkeypatch.setenv("PROF_ENGINE_NATIVE", native)
        events = [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"),
            {**x("aten::mm", 10, 5), "args": 1e20},
            {**x("aten::add", 20, 5), "args": [1, 2]},
            x("k", 30, 2, cat="kernel", pid=0, tid=7, device=2**63, stream=7, correlation=2**64),
            {"ph": "M", "name": [1, 2], "pid": 1, "tid": 1, "args": {"name": "x"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": 7},
        ]
        trace = {"schemaVersion": 1, "deviceProperties": 5, "host_name": {"a": 1}, "traceEvents": events}
        (tmp_path / "t.json").write_text(json.dumps(trace), encoding="utf-8")
        proc = cli(tmp_path, "import", "t.json", "-o", f"run{native}")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        manifest = json.loads((tmp_path / f"run{native}" / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["tables"]["slices"] == 4 and manifest["hosts"] == []
        done = cli(
            tmp_path, "query", f"run{native}", "SELECT name, args, correlation FROM slices ORDER BY ts", "-f", "csv"
        )
        assert done.stdout.splitlines()[1:] == [
            '"ProfilerStep#1","{}",',
            '"aten::mm",,',
            '"aten::add",,',
            '"k","{""device"": 9223372036854775808, ""stream"": 7, ""correlation"": 18446744073709551616}",',
        ], done.stdout


def _out_of_range_trace(paired: bool) -> list[dict]:
    """Three sane steps of 1 ms (a kernel each), and values no run has: a step number beyond int32,
    an op 12 days long, a kernel 2^62 ns from the clock's zero (and one 2^63 ns, whose end int64 ns
    does not hold). `paired`: a B/E pair, which sends
    the events one by one through the converter."""
    base = 1_700_000_000_000_000
    events = []
    for i in range(3):
        t = base + 1000 * i
        events += [
            x(f"ProfilerStep#{i + 1}", t, 1000, cat="user_annotation"),
            x("aten::mm", t + 10, 100),
            x("cudaLaunchKernel", t + 20, 5, cat="cuda_runtime", correlation=i + 1),
            x("gemm", t + 50, 200, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=i + 1),
        ]
    events += [
        x("ProfilerStep#99999999999999999999", base + 500, 100, cat="user_annotation"),
        x("aten::long_op", base + 1500, 12 * 86_400e6),
        x("far_kernel", 2**62 / 1000 + 5, 3, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=2),
        x("aten::end_beyond_int64", 9223372036854775, 10),
    ]
    if paired:
        events += [
            {"ph": "B", "name": "paired", "pid": 1, "tid": 1, "ts": base + 30},
            {"ph": "E", "pid": 1, "tid": 1, "ts": base + 40},
        ]
    return events


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("paired", [False, True], ids=["columnar", "event-by-event"])
def test_values_out_of_range_are_dropped_or_no_step_and_said(tmp_path, monkeypatch, native, paired):
    """No traceback and no absurd number (issue 28, item 11): a step number beyond int32 makes a user
    range, not a step; a slice longer than a week or 2^62 ns from the clock's zero is dropped; the
    import warns `values_out_of_range` with the count and the first one, and the steps stay sane."""
    monkeypatch.setenv("PROF_ENGINE_NATIVE", native)
    (tmp_path / "t.json").write_text(
        json.dumps({"schemaVersion": 1, "traceEvents": _out_of_range_trace(paired)}), encoding="utf-8"
    )
    proc = cli(tmp_path, "import", "t.json", "-o", "run")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "values_out_of_range" in proc.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    (found,) = [f for f in manifest["sources"][0]["info"]["findings"] if f["rule"] == "values_out_of_range"]
    assert found["count"] == 4
    assert found["detail"].startswith("first: 'aten::long_op' at 1700000000001500000 ns, 1036800000000000 ns long")
    done = cli(
        tmp_path,
        "query",
        "run",
        "SELECT kind, step FROM slices WHERE name LIKE 'ProfilerStep#9%' "
        "OR name IN ('aten::long_op', 'far_kernel', 'aten::end_beyond_int64')",
        "-f",
        "csv",
    )
    assert done.stdout.splitlines()[1:] == ['"user_range",1'], done.stdout  # a range within step 1
    steps = cli(
        tmp_path,
        "query",
        "run",
        'SELECT "Step", "Preparing", "End Time(us)" - "Start Time(us)" FROM step_trace',
        "-f",
        "csv",
    )
    assert steps.stdout.splitlines()[1:] == ["1,50,200.000", "2,50,200.000", "3,50,200.000"], steps.stdout


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("moved", ["kernel", "step"])
def test_a_slice_years_away_from_its_file_is_dropped_and_said(tmp_path, monkeypatch, native, moved):
    """One slice at ts 0 (1970) in a trace of 2023: a kernel there made step 2's device span 53
    years long and its Preparing -1.7e15 µs; a step there, a step of 53 years. It is dropped (more
    than 7 days from the file's median start), the import says so, and the other steps stay sane."""
    monkeypatch.setenv("PROF_ENGINE_NATIVE", native)
    events = _out_of_range_trace(False)[:12]  # the three sane steps
    at = next(
        i
        for i, e in enumerate(events)
        if (e["name"] == "ProfilerStep#2" if moved == "step" else e["name"] == "gemm" and e["args"]["correlation"] == 2)
    )
    events[at] = {**events[at], "ts": 0}
    (tmp_path / "t.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    proc = cli(tmp_path, "import", "t.json", "-o", "run")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    (found,) = [f for f in manifest["sources"][0]["info"]["findings"] if f["rule"] == "values_out_of_range"]
    name = "gemm" if moved == "kernel" else "ProfilerStep#2"
    assert found["count"] == 1 and found["detail"].startswith(f"first: {name!r} at 0 ns, 19,676 days from")
    assert manifest["tables"]["slices"] == 11
    steps = cli(
        tmp_path,
        "query",
        "run",
        'SELECT "Step", "Preparing", "End Time(us)" - "Start Time(us)" FROM step_trace',
        "-f",
        "csv",
    )
    # step 2 without its kernel has no device span; without its step record, its kernel none of a step
    want = ["1,50,200.000", "3,50,200.000"] + ([",,200.000"] if moved == "step" else [])
    assert steps.stdout.splitlines()[1:] == want, steps.stdout


def _under_address_space(mb: int):
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_AS, (mb << 20, resource.RLIM_INFINITY))


def test_which_errors_are_out_of_memory_and_the_line_that_says_so():
    """Which error a limit hits first depends on the libraries installed: CI got ENOMEM reading
    pydantic's files (typer loads it to parse arguments), here an ImportError from mapping them."""
    import errno

    from prof_engine._process import memory_cause, out_of_memory

    enomem = OSError(errno.ENOMEM, "Cannot allocate memory", "/site-packages/pydantic/_internal")
    numpy = ImportError(
        "\n\nIMPORTANT: PLEASE READ THIS\n\nOriginal error was: libopenblas.so: failed to map segment\n"
    )
    assert out_of_memory(enomem) and out_of_memory(numpy) and out_of_memory(MemoryError())
    assert memory_cause(numpy) == "Original error was: libopenblas.so: failed to map segment"
    assert memory_cause(MemoryError()) == "MemoryError"
    assert not out_of_memory(OSError(errno.ENOENT, "No such file", "x")) and not out_of_memory(ImportError("no module"))


@pytest.mark.parametrize("mb, imports", [(300, False), (600, True)])
def test_an_address_space_limit_gives_one_line_or_a_run_never_an_abort(tmp_path, mb, imports):
    """Under `ulimit -v` the import died of MemoryError / ArrowMemoryError tracebacks, or an abort
    (glibc: "cannot allocate memory for thread-local data") at 600 MB. Now a trace imports under
    600 MB, and under 300 MB the CLI says in one line which limit to raise."""
    from conftest import REPO

    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gen_kineto.py"), "--mb", "20", "-o", str(tmp_path / "t.json")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "prof_engine", "import", "t.json", "-o", "run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_under_address_space(mb),
    )
    if imports:
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert (tmp_path / "run" / "manifest.json").is_file()
    else:
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("<jemalloc>", "OpenBLAS"))]
        assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert lines[0].startswith("Error: out of memory") and "ulimit -v" in lines[0]
        assert leftovers(tmp_path, "run") == []


@pytest.mark.parametrize("module", ["typer", "prof_engine.render", "duckdb"])
def test_ctrl_c_while_the_cli_starts_is_no_traceback(tmp_path, module):
    """Ctrl-C while the CLI loads its modules printed a KeyboardInterrupt traceback. The interrupt
    is made to land exactly there: an import hook raises it when `module` is first imported."""
    driver = f"""
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
sys.argv = ["prof-engine", "query", "run", "select 1"]
from prof_engine._entry import main
main()
"""
    proc = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130 and proc.stderr in ("Interrupted\n", ""), (proc.returncode, proc.stderr[-2000:])


@pytest.mark.parametrize(
    "sql, refused",
    [
        ("select * from read_csv('/etc/passwd')", "Permission Error"),
        ("copy (select 1 as a) to 'run/leak.csv'", "not COPY"),
        ("attach 'other.db'", "not ATTACH"),
        ("install httpfs", "not LOAD"),
        ("set enable_external_access = true", "not SET"),
        ("select 1; copy (select 1 as a) to 'leak.csv'", "not COPY"),
    ],
)
def test_query_safe_refuses_files_writes_and_settings(good, sql, refused):
    """`query` is full DuckDB (documented); `query --safe` (`open(path, read_only_sql=True)`) is
    for serving SQL from others: only SELECT/EXPLAIN, no file outside the run, nothing written."""
    assert_user_error(cli(good, "query", "run", sql, "--safe"), refused)
    assert not (good / "run" / "leak.csv").exists() and not (good / "leak.csv").exists()


def test_query_safe_answers_a_select(good):
    proc = cli(good, "query", "run", "select count(*) from op_statistic", "--safe", "--format", "csv")
    assert proc.returncode == 0 and int(proc.stdout.split()[-1]) > 0, proc.stderr


def test_query_safe_still_spills_and_reads_the_run(tmp_path):
    """A sandboxed session reads every view and still spills to its temporary directory."""
    import prof_engine

    (tmp_path / "t.json").write_text(trace_text(), encoding="utf-8")
    run = prof_engine.import_trace([tmp_path / "t.json"], tmp_path / "run")
    with prof_engine.open(run, memory_limit="100MB", read_only_sql=True) as r:
        assert r.sql("select count(*) from op_statistic").rows()[0][0] > 0 and len(r.summary()) >= 4
        big = "select count(*), max(s) from (select i, md5(i::varchar) s from range(2000000) t(i) order by s)"
        assert r.sql(big).rows()[0][0] == 2_000_000
