"""Modern CANN msprof PROF_* directories (`mindstudio_profiler_output/`), sliced files joined.

SYNTHETIC DATA: no real modern mindstudio_profiler_output set exists in a public repository
(ascend_formats.md §5), so each test builds one in tmp_path from the real torch_npu fixture
`torch_npu_2rank_level1_text/rank0_ascend_pt`, reversing torch_npu's rename of msprof's files
(§2.1): trace_view.json → `msprof_slice_{0,1}_<ts>.json` (the event array split in the middle; the
metadata events at the head of both slices, as msprof's slicer `MsprofDataStorage.slice_data_list`
writes them), kernel_details.csv → `op_summary_slice_{0,1}_<ts>.csv` (Name→Op Name, Type→OP Type,
Accelerator Core→Task Type, Start Time(us)→Task Start Time(us), Duration(us)→Task Duration(us),
Wait Time(us)→Task Wait Time(us), Step Id dropped, Device_id 0 prepended, LF and no quoting as
msprof's C++ CsvWriter, rows split across the slices). One extra row with Device_id `host` (a
copy of a kernel row under a made-up op type) checks that host rows are not taken as device
tasks. op_statistic.csv → `op_statistic_<ts>.csv` (Device_id 0 prepended, and a `host` row), the
summary import compares with the rebuilt op_statistic. The PROF directory name, info.json.0 and
the timestamps are made up too.

The synthetic export holds the same events and kernels as the torch_npu directory, so its
summaries must equal those of importing that directory directly, exactly.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path
from prof_engine.errors import InputError

SOURCE = ("ascend", "torch_npu_2rank_level1_text", "rank0_ascend_pt")
PROF_NAME = "PROF_000001_20250101000000000_SYNTHETICSYNTHETIC"
STAMP = "20250101000000"
RENAME = {
    "Name": "Op Name",
    "Type": "OP Type",
    "Accelerator Core": "Task Type",
    "Start Time(us)": "Task Start Time(us)",
    "Duration(us)": "Task Duration(us)",
    "Wait Time(us)": "Task Wait Time(us)",
}
VIEWS = ("op_statistic", "step_trace", "api_statistic")


def raw_events(path: Path) -> list[tuple[dict, str]]:
    """(event, its exact source text) of a Chrome trace array: the text is kept so that times
    written as strings or numbers go to the slices byte for byte."""
    text = path.read_text(encoding="utf-8")
    decoder, i, out = json.JSONDecoder(), text.index("[") + 1, []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        event, end = decoder.raw_decode(text, i)
        out.append((event, text[i:end]))
        i = end


def write_timeline_slices(out: Path, trace: Path, meta_in_every_slice: bool = True) -> None:
    """trace_view.json → msprof_slice_0/1_<ts>.json: metadata at the head of each (msprof's way; or
    of slice 0 only), the other events split in the middle."""
    events = raw_events(trace)
    meta = [t for e, t in events if e.get("ph") == "M"]
    rest = [t for e, t in events if e.get("ph") != "M"]
    half = len(rest) // 2
    for i, part in enumerate((rest[:half], rest[half:])):
        head = meta if i == 0 or meta_in_every_slice else []
        (out / f"msprof_slice_{i}_{STAMP}.json").write_text("[" + ",\n".join(head + part) + "]", encoding="utf-8")


def write_op_summary_slices(out: Path, kernel_details: Path) -> None:
    """kernel_details.csv → op_summary_slice_0/1_<ts>.csv with msprof's names (module docstring)."""
    with open(kernel_details, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    keep = [i for i, h in enumerate(header) if h != "Step Id"]
    names = ["Device_id"] + [RENAME.get(header[i], header[i]) for i in keep]
    lines = []
    for row in rows:
        values = [row[i].rstrip("\t") for i in keep]  # the C++ writer adds no Excel tab
        assert all("," not in v or (v[0] == v[-1] == '"') for v in values)  # msprof quoted these itself
        lines.append(",".join(["0", *values]))
    host = lines[0].split(",")
    host[0], host[names.index("OP Type")] = "host", "SYNTHETIC_HOST_ROW"
    half = len(lines) // 2
    for i, part in enumerate((lines[:half], lines[half:] + [",".join(host)])):
        with open(out / f"op_summary_slice_{i}_{STAMP}.csv", "w", newline="", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in [",".join(names), *part]))


def write_op_statistic(out: Path, op_statistic: Path) -> None:
    """op_statistic.csv → op_statistic_<ts>.csv as msprof writes it: `Device_id` first (0), and a
    `host` row (of no device: not compared)."""
    with open(op_statistic, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    lines = [",".join(["Device_id", *header]), *(",".join(["0", *row]) for row in rows)]
    lines.append(",".join(["host", "SYNTHETIC_HOST_ROW", *rows[0][1:]]))
    (out / f"op_statistic_{STAMP}.csv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def synthesize(root: Path, meta_in_every_slice: bool = True) -> Path:
    """The synthetic PROF_* directory (see the module docstring) under `root`."""
    src = fixture_path(*SOURCE) / "ASCEND_PROFILER_OUTPUT"
    prof = root / PROF_NAME
    (prof / "device_0").mkdir(parents=True)
    (prof / "device_0" / "info.json.0").write_text(
        json.dumps({"rank_id": 0, "hostname": "synthetic", "DeviceInfo": [{"id": 0, "ai_core_num": 24}]}),
        encoding="utf-8",
    )
    out = prof / "mindstudio_profiler_output"
    out.mkdir()
    write_timeline_slices(out, src / "trace_view.json", meta_in_every_slice)
    write_op_summary_slices(out, src / "kernel_details.csv")
    write_op_statistic(out, src / "op_statistic.csv")
    return prof


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("msprof_output")
    prof = synthesize(tmp / "src")
    with (
        prof_engine.open(prof_engine.import_trace([prof], tmp / "prof_run")) as prof_run,
        prof_engine.open(prof_engine.import_trace([fixture_path(*SOURCE)], tmp / "npu_run")) as npu_run,
    ):
        yield prof, prof_run, npu_run


def test_slices_exist_with_metadata_in_each(runs):
    """The synthetic export has what the tests rest on: two slices of each file, metadata in both."""
    prof, _, _ = runs
    out = prof / "mindstudio_profiler_output"
    assert sorted(p.name for p in out.iterdir()) == [
        f"msprof_slice_0_{STAMP}.json",
        f"msprof_slice_1_{STAMP}.json",
        f"op_statistic_{STAMP}.csv",
        f"op_summary_slice_0_{STAMP}.csv",
        f"op_summary_slice_1_{STAMP}.csv",
    ]
    metas = [sum(e.get("ph") == "M" for e, _ in raw_events(out / f"msprof_slice_{i}_{STAMP}.json")) for i in (0, 1)]
    assert metas[0] == metas[1] > 0
    assert b"\r" not in (out / f"op_summary_slice_0_{STAMP}.csv").read_bytes()


def test_manifest_says_msprof_rank_and_device(runs):
    prof, run, npu = runs
    assert run.manifest["source"]["format"] == "msprof"
    (src,) = run.manifest["sources"]
    assert (src["format"], src["rank"], src["path"]) == ("msprof", 0, str(prof))
    assert src["info"]["device_ids"] == [0] and src["host"] == "synthetic"
    assert src["events"] == npu.manifest["sources"][0]["events"]  # metadata repeated per slice counted once
    assert run.manifest["ranks"] == [0]


@pytest.mark.parametrize("view", VIEWS)
def test_views_equal_the_torch_npu_import(runs, view):
    _, run, npu = runs
    got = run.sql(f"SELECT * FROM {view} ORDER BY ALL").rows()
    want = npu.sql(f"SELECT * FROM {view} ORDER BY ALL").rows()
    assert got and got == want


def test_same_device_records(runs):
    """Every device task of both slices, kinds and op types from the joined op_summary slices."""
    _, run, npu = runs
    sql = "SELECT device, kind, op_type, task_type, count(*) FROM slices GROUP BY ALL ORDER BY ALL"
    assert run.sql(sql).rows() == npu.sql(sql).rows()
    assert run.sql("SELECT count(*) FROM slices WHERE op_type = 'SYNTHETIC_HOST_ROW'").rows() == [(0,)]


def test_the_output_directory_itself_imports(runs, tmp_path):
    prof, run, _ = runs
    with prof_engine.open(prof_engine.import_trace([prof / "mindstudio_profiler_output"], tmp_path / "r")) as r:
        assert [s["path"] for s in r.manifest["sources"]] == [str(prof)]
        sql = "SELECT * FROM op_statistic ORDER BY ALL"
        assert r.sql(sql).rows() == run.sql(sql).rows()


def test_metadata_in_the_first_slice_only(runs, tmp_path):
    """Lanes named only in slice 0 still map the events of slice 1."""
    _, run, _ = runs
    prof = synthesize(tmp_path / "src", meta_in_every_slice=False)
    with prof_engine.open(prof_engine.import_trace([prof], tmp_path / "r")) as r:
        for view in VIEWS:
            sql = f"SELECT * FROM {view} ORDER BY ALL"
            assert r.sql(sql).rows() == run.sql(sql).rows()


@pytest.mark.parametrize("stem, suffix", [("msprof", "json"), ("op_summary", "csv")])
def test_a_missing_slice_is_one_clear_line(tmp_path, stem, suffix):
    """slice_1 without slice_0: a one-line InputError naming the missing slice, from the API and the CLI."""
    prof = synthesize(tmp_path / "src")
    out = prof / "mindstudio_profiler_output"
    (out / f"{stem}_slice_0_{STAMP}.{suffix}").unlink()
    expected = (
        f"{out}: {stem} slice(s) 0 missing (found slice(s) 1): msprof splits a large {stem} into "
        f"{stem}_slice_<i>_<timestamp> files numbered from 0, and every slice is needed"
    )
    with pytest.raises(InputError) as err:
        prof_engine.import_trace([prof], tmp_path / "run")
    assert str(err.value) == expected
    (tmp_path / "cwd").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "prof_engine", "import", str(prof), "-o", "run"],
        cwd=tmp_path / "cwd",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (proc.returncode, proc.stderr) == (1, f"Error: {expected}\n")
    assert not any((tmp_path / "cwd").iterdir())


def test_op_statistic_beside_the_output_is_compared(runs, tmp_path):
    """msprof's op_statistic_<ts>.csv (here torch_npu's, with Device_id) equals the rebuilt
    op_statistic: no vendor_summary_mismatch; one op type's total changed in a copy: one, named
    with its device (issue 38, item 4)."""
    import shutil

    from prof_engine.vendor_check import check_run

    prof, prof_run, _ = runs
    rule = """SELECT "Count", "Detail" FROM data_quality WHERE "Rule" = 'vendor_summary_mismatch'"""
    assert prof_run.sql(rule).rows() == []
    copy_src = tmp_path / PROF_NAME / "mindstudio_profiler_output"
    copy_src.mkdir(parents=True)
    path = copy_src / f"op_statistic_{STAMP}.csv"
    with open(prof / "mindstudio_profiler_output" / path.name, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    total = header.index("Total Time(us)")
    rows[0][total] = f"{float(rows[0][total]) + 5:.3f}"  # 5 µs more than the records hold
    path.write_text("".join(",".join(r) + "\n" for r in [header, *rows]), encoding="utf-8")
    run = tmp_path / "run"
    shutil.copytree(prof_run.path, run)
    manifest = (run / "manifest.json").read_text(encoding="utf-8")
    (run / "manifest.json").write_text(manifest.replace(str(prof), str(tmp_path / PROF_NAME)), encoding="utf-8")
    assert check_run(run) == 1
    with prof_engine.open(run) as edited:
        ((count, detail),) = edited.sql(rule).rows()
    assert count == 1 and f"{rows[0][1]} ({rows[0][2]}, npu0) total" in detail and path.name in detail
